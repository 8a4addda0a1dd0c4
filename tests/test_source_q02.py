"""Every number QUESTIONS.md lists for question 2 (QLoRA on a 33B model, one 48 GB card), and the audits."""
import pytest

import vramlib as vl
from vramlib import audit
from vramlib import training_feasibility as TF

SRC33 = vl.get_model("source-33b")
REAL33 = vl.get_model("llama-33b")
SRC_KW = dict(lora_dtype="bf16", method="qlora", lora_rank=16, convention="source-12", reserve=0)


def test_shape_is_llama_1_33b():
    assert (SRC33.n_layers, SRC33.hidden, SRC33.n_heads, SRC33.head_dim, SRC33.n_kv_heads) == (60, 6656, 52, 128, 52)
    assert (REAL33.n_layers, REAL33.hidden, REAL33.n_heads, REAL33.ffn) == (60, 6656, 52, 17920)
    assert REAL33.max_context == 2048


def test_nf4_weights():
    assert vl.weights_bytes(SRC33, "int4") == 16_500_000_000                 # 33B x 0.5 B = 16.5 GB
    nf4 = vl.weights_bytes(SRC33, "nf4-dq")                                  # "about 17 GB with constants"
    assert nf4 == -(-33 * 10**9 * 2113 // (512 * 8)) and round(vl.gb(nf4)) == 17
    real = vl.weights_detail(REAL33, "nf4-dq")
    assert round(vl.gb(sum(real.values())), 2) == 17.41


def test_lora_params_source_and_exact():
    assert 33 * 10**9 // 1000 == 33_000_000                                   # "33B x 0.1% = 33M"
    assert TF.model_states_bytes(33_000_000, "source-12") == 396_000_000       # "33M x 12 B ≈ 0.4 GB"
    assert TF.bytes_per_param("source-12") == 2 + 2 + 4 + 4
    n = vl.lora_params(SRC33, 16, "all-linear")
    assert n == 121_896_960 == vl.lora_params(REAL33, 16)
    assert round(100 * TF.size_ratio(n, SRC33.weight_params), 2) == 0.37
    assert TF.model_states_bytes(n, "source-12") == 1_462_763_520
    assert TF.model_states_bytes(n, "mixed-fp32-master") == 1_950_351_360
    assert vl.lora_params(SRC33, 16, "qv") == 25_559_040                       # q and v only: ~0.08%


def test_source_kv_cache_per_token_and_512():
    kv = vl.kv_bytes_per_token(SRC33)
    assert kv == 2 * 60 * 52 * 128 * 2 == 1_597_440
    assert audit.rounded_mib(kv) == 1.52                                     # "≈ 1.52 MB" is MiB
    assert audit.total_mixed_units(kv, 512) == pytest.approx(0.77824)        # "≈ 778 MB"
    assert vl.kv_cache_bytes(SRC33, 512) == 817_889_280                      # exact: 817.9 MB
    assert round(audit.total_mixed_units(kv, 1024), 2) == 1.56               # "1.56 GB"
    assert round(audit.total_mixed_units(kv, 2048), 1) == 3.1                # "3.1 GB"


def source_total(seq):
    kv = audit.total_mixed_units(vl.kv_bytes_per_token(SRC33), seq)
    return vl.gb(vl.parse_memory("17GB") + vl.parse_memory(f"{kv}GB") + vl.parse_memory("3GB")
                 + vl.parse_memory("0.4GB"))


def test_source_totals():
    assert round(source_total(512), 1) == 21.2                               # 17 + 0.8 + 3 + 0.4
    assert round(source_total(1024)) == 22
    assert round(source_total(2048), 1) == 23.5


def test_no_kv_cache_in_training_what_is_saved_instead():
    # full checkpointing: each layer keeps its bf16 input, 2 h bytes per token: half the source's KV per token
    for seq in (512, 1024, 2048):
        full = vl.activation_bytes(SRC33, seq, recompute="full", style="hf", scope="model")
        assert full < vl.kv_cache_bytes(SRC33, seq)
        assert full > 60 * 2 * seq * 6656
    assert vl.activation_bytes(SRC33, 512, recompute="full", scope="model") == 564_510_720
    assert vl.activation_bytes(SRC33, 2048, recompute="full", scope="model") == 2_258_042_880
    # without checkpointing the activations are far beyond the source's "2-4 GB"
    assert vl.gb(vl.activation_bytes(SRC33, 512, recompute="none", scope="model")) > 9


def test_computed_totals_with_checkpointing():
    tot = {s: vl.training_memory(SRC33, seq=s, recompute="full", **SRC_KW).total for s in (512, 1024, 2048)}
    assert [round(vl.gb(t), 2) for t in tot.values()] == [19.05, 19.62, 20.74]
    real = vl.training_memory(REAL33, "qlora", seq=2048, recompute="full")
    assert round(vl.gb(real.total), 2) == 22.12


@pytest.mark.parametrize("gpu,none,full", [("rtx-a6000", 1722, 28717), ("l40s", 1547, 25795), ("48GB", 1530, 25518)])
def test_longest_sequence_real_model(gpu, none, full):
    assert TF.max_seq_for_training(REAL33, gpu, method="qlora", recompute="none") == none
    assert TF.max_seq_for_training(REAL33, gpu, method="qlora", recompute="full") == full
    assert full > REAL33.max_context > none                                   # checkpointing: the model is the limit


def test_longest_sequence_source_shape_on_48gb():
    assert TF.max_seq_for_training(SRC33, "48GB", recompute="none", **SRC_KW) == 1605
    assert TF.max_seq_for_training(SRC33, "48GB", recompute="full", **SRC_KW) == 26768
    # the headline "256-512" is far below either
    assert TF.max_seq_for_training(SRC33, "48GB", recompute="none", **SRC_KW) > 512
