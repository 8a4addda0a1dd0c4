"""Question 5 (RTX 4090 24 GB: largest quantized model for inference): every number the source gives, and the audit."""
import pytest

import vramlib as vl
from vramlib import serving as S

CARD = vl.get_gpu("rtx-4090")


def test_upper_bound_48b_and_40b_with_4gb_reserve():
    assert vl.max_params("24GB", "int4") == 48 * 10**9                   # 24 GB / 0.5 B
    assert vl.max_params("24GB", "int4", reserve="4GB") == 40 * 10**9    # 20 GB of weights
    assert vl.weights_bytes(vl.get_model("source-13b").with_(nominal_params=40 * 10**9), "int4") == 20 * 10**9


def test_34b_at_4bit_17gb():
    yi34 = vl.get_model("yi-34b").with_(nominal_params=34 * 10**9)
    assert vl.weights_bytes(yi34, "int4") == 17 * 10**9
    assert round(vl.gb(vl.weights_bytes("yi-34b", "int4")), 1) == 17.2      # the real 34.39B parameters


def test_fp16_14b_28gb_7b_14gb_with_10gb_left():
    q14 = vl.get_model("qwen2.5-14b").with_(nominal_params=14 * 10**9)
    assert vl.weights_bytes(q14, "fp16") == 28 * 10**9 > vl.parse_memory("24GB")
    assert vl.weights_bytes("source-7b", "fp16") == 14 * 10**9
    assert vl.kv_budget_bytes("source-7b", "24GB", "fp16", reserve=0) == 10 * 10**9


def test_8bit_13b_13gb_with_11gb_left():
    assert vl.weights_bytes("source-13b", "int8") == 13 * 10**9
    assert vl.kv_budget_bytes("source-13b", "24GB", "int8", reserve=0) == 11 * 10**9


def test_mixtral_46_7b_at_4bit_about_23gb():
    assert round(vl.get_model("mixtral-8x7b").n_params / 1e9, 1) == 46.7
    assert round(vl.gb(vl.weights_bytes("mixtral-8x7b", "int4"))) == 23


# --- audit ---------------------------------------------------------------------------------------------------
def test_real_4bit_formats_carry_scales():
    assert 4.7 < S.bits_per_weight("yi-34b", "q4_k_m") < 4.9              # Q4_K_M ~4.8 bits/weight
    assert 4.4 < S.bits_per_weight("yi-34b", "gptq-4bit-g128") < 4.5
    assert 4.1 < S.bits_per_weight("yi-34b", "nf4-dq") < 4.5


def test_mixtral_q4_k_m_does_not_fit_the_4090():
    w = vl.weights_bytes("mixtral-8x7b", "q4_k_m")
    assert round(vl.gb(w), 1) == 26.5 and vl.gib(w) > 24 > CARD.memory_gib
    assert vl.max_tokens("mixtral-8x7b", CARD.key, "q4_k_m", reserve="0.5GB") == 0
    # GPTQ squeezes in with a short context; Q3_K_M and Q2_K fit with room
    assert 0 < vl.max_tokens("mixtral-8x7b", CARD.key, "gptq-4bit-g128", reserve="0.5GB") < 8192
    assert vl.max_tokens("mixtral-8x7b", CARD.key, "q3_k_m", reserve="0.5GB") > 16_000
    assert vl.max_tokens("mixtral-8x7b", CARD.key, "q2_k", reserve="0.5GB") > 32_000


def test_real_34b_models_and_their_context():
    for m in ("yi-34b", "codellama-34b"):
        ctx = vl.max_tokens(m, CARD.key, "q4_k_m", reserve="0.5GB", attention="sdpa")
        assert ctx > vl.get_model("yi-34b").max_context                  # 2K-4K is the model's limit, not the card's
    assert vl.max_tokens("codellama-34b", CARD.key, "q4_k_m", reserve="0.5GB", attention="sdpa") < 16_384
    assert vl.max_tokens("codellama-34b", CARD.key, "q4_k_m", reserve="0.5GB", attention="sdpa",
                         prefill_chunk=512) > 16_384


def test_largest_model_at_real_bits_with_4gb_reserve():
    n = vl.max_params(CARD.key, S.effective_precision("yi-34b", "q4_k_m"), reserve="4GB")
    assert 34 * 10**9 < n < 40 * 10**9


def test_7b_fp16_32k_needs_gqa():
    assert vl.max_tokens("mistral-7b", CARD.key, "fp16", reserve="0.5GB", attention="sdpa") > 32_768
    assert vl.max_tokens("llama-2-7b", CARD.key, "fp16", reserve="0.5GB") < 32_768


def test_fit_map_of_the_4090():
    rows = vl.fit_map(["yi-34b", "mixtral-8x7b", "llama-2-70b"], ["rtx-4090"], ["q4_k_m", "q3_k_m", "q2_k"])
    fits = {(r["model"], r["precision"]): r["fits"] for r in rows}
    assert fits[("yi-34b", "q4_k_m")] and not fits[("mixtral-8x7b", "q4_k_m")] and fits[("mixtral-8x7b", "q3_k_m")]
    assert not fits[("llama-2-70b", "q3_k_m")]


def test_exercises():
    assert vl.exercises.answer("ch05-1") == vl.max_tokens("mixtral-8x7b", "rtx-4090", "gptq-4bit-g128", reserve="0.5GB")
    assert vl.exercises.check("ch05-2", float(S.bits_per_weight("codellama-34b", "q4_k_m"))).correct
    assert vl.exercises.answer("ch05-3") == pytest.approx(vl.gb(vl.max_params("rtx-4090", "int8", reserve="4GB")))
