"""Every number QUESTIONS.md lists for questions 1 and 7, reproduced through vramlib."""
import pytest

import vramlib as vl
from vramlib import audit

SRC13 = vl.get_model("source-13b")
SRC7 = vl.get_model("source-7b")


# --- question 1 -------------------------------------------------------------------------------------------
def test_q1_weights():
    assert vl.weights_bytes(SRC13, "fp16") == 26 * 10**9          # 13e9 x 2 = 26 GB
    assert vl.weights_bytes(SRC13, "fp16") > vl.parse_memory("24GB")
    assert vl.weights_bytes(SRC13, "int8") == 13 * 10**9
    assert vl.weights_bytes(SRC13, "int4") == 6_500_000_000


def test_q1_left_for_kv():
    free = vl.parse_memory("24GB") - vl.weights_bytes(SRC13, "int4") - vl.parse_memory("0.5GB")
    assert free == 17 * 10**9


def test_q1_kv_per_token():
    assert vl.kv_bytes_per_token(SRC13, "fp16") == 819_200
    assert audit.rounded_mib(819_200) == 0.78                        # "≈ 0.78 MB" is MiB


def test_q1_max_tokens_source_and_exact():
    # the source: 17,000 / 0.78 ≈ 21,800 (GB over MiB)
    assert round(audit.tokens_mixed_units(17 * 10**9, 819_200), -2) == 21_800
    # exact, same units: 17e9 / 819,200
    assert vl.max_tokens(SRC13, memory="24GB", weights="int4", kv_dtype="fp16", reserve="0.5GB") == 20_751
    # the card really holds 24 GiB
    assert vl.max_tokens(SRC13, memory="24GiB", weights="int4", reserve="0.5GB") == 22_912


def test_q1_prefill_peak_gives_practical_range():
    sdpa = vl.max_tokens(SRC13, memory="24GB", weights="int4", attention="sdpa")
    assert 16_000 <= sdpa <= 20_000                                  # "practical 16K-20K"
    eager = vl.max_tokens(SRC13, memory="24GB", weights="int4", attention="eager")
    assert eager < 8_000                                             # eager scores: n_h s^2 (4 + 2) bytes


def test_q1_gqa_4_kv_heads():
    gqa = SRC13.with_(n_kv_heads=4)
    assert vl.kv_bytes_per_token(gqa) == 81_920
    assert round(audit.tokens_mixed_units(17 * 10**9, 81_920, digits=3), -3) == 218_000  # 17,000 / 0.078 ≈ 217K
    assert vl.max_tokens(gqa, memory="24GB", weights="int4") == 207_519


def test_q1_24gb_card_is_24gib():
    for gpu in ("rtx-4090", "rtx-3090"):
        g = vl.get_gpu(gpu)
        assert 23.9 < vl.gib(g.memory_bytes) <= 24.0
        assert g.memory_bytes > 25 * 10**9


# --- question 7 -------------------------------------------------------------------------------------------
def test_q7_13b_mha_100k():
    kv = vl.kv_cache_bytes(SRC13, tokens=100_000)
    assert kv == 81_920_000_000                                      # 81.9 GB = 76.3 GiB
    assert round(vl.gib(kv), 1) == 76.3
    assert audit.total_mixed_units(819_200, 100_000) == pytest.approx(78.0)   # the source's "78 GB"


def test_q7_13b_gqa_and_4_groups_reading():
    kv = vl.kv_cache_bytes(SRC13.with_(n_kv_heads=4), tokens=100_000)
    assert kv == 8_192_000_000 and vl.kv_bytes_per_token(SRC13.with_(n_kv_heads=4)) == 81_920
    assert audit.total_mixed_units(81_920, 100_000, digits=3) == pytest.approx(7.8)
    # "4 groups" read as groups of 4 query heads: 10 KV heads
    assert vl.kv_cache_bytes(SRC13.with_(n_kv_heads=10), tokens=100_000) == 20_480_000_000


def test_q7_7b_mha_and_mqa():
    assert vl.kv_bytes_per_token(SRC7) == 524_288
    assert vl.kv_cache_bytes(SRC7, 100_000) == 52_428_800_000        # "50 GB" = 48.8 GiB
    assert round(audit.total_mixed_units(524_288, 100_000)) == 50
    mqa = SRC7.with_(n_kv_heads=1)
    assert vl.kv_bytes_per_token(mqa) == 16_384
    assert vl.kv_cache_bytes(mqa, 100_000) == 1_638_400_000          # "≈ 1.56 GB" is 1.53 GiB
    assert audit.total_mixed_units(16_384, 100_000, digits=4) == pytest.approx(1.56)


def test_q7_totals():
    mqa, gqa7 = SRC7.with_(n_kv_heads=1), SRC7.with_(n_kv_heads=4)
    w7 = vl.weights_bytes(SRC7, "fp16")
    assert w7 == 14 * 10**9
    t_mqa = vl.inference_memory(mqa, "fp16", "fp16", 100_000, reserve=0).total
    assert round(vl.gb(w7 + vl.kv_cache_bytes(mqa, 100_000)), 1) == 15.6             # source: ~15.5 GB
    # the source's "~22 GB with GQA" adds the 13B model's 7.8 GB; the 7B with 4 KV heads needs 6.6 GB
    assert vl.kv_cache_bytes(gqa7, 100_000) == 6_553_600_000
    assert round(vl.gb(w7 + vl.kv_cache_bytes(SRC13.with_(n_kv_heads=4), 100_000))) == 22
    int4_gqa13 = vl.weights_bytes(SRC13, "int4") + vl.kv_cache_bytes(SRC13.with_(n_kv_heads=4), 100_000)
    assert round(vl.gb(int4_gqa13), 1) == 14.7                                         # source: ~14.3 GB
    worst = vl.weights_bytes(SRC13, "fp16") + vl.kv_cache_bytes(SRC13, 100_000)
    assert round(vl.gb(worst)) == 108                                                  # source: 104 GB
    best = vl.weights_bytes(SRC7, "int4") + vl.kv_cache_bytes(mqa, 100_000)
    assert round(vl.gb(best), 1) == 5.1                                                # source: ~5 GB
    assert t_mqa > w7


def test_q7_eager_prefill_scores_at_100k():
    eager = vl.prefill_workspace_bytes(SRC13, 100_000, attention="eager")
    sdpa = vl.prefill_workspace_bytes(SRC13, 100_000, attention="sdpa")
    assert eager - sdpa == 40 * 100_000**2 * 6                                       # 2.4 TB of scores
