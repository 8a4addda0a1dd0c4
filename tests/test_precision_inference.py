import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import vramlib as vl
from vramlib.catalog.precision import tensor_bits

REQUIRED = ["fp32", "tf32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4", "nf4", "nf4-dq",
            "gptq-4bit-g128", "awq-4bit-g128", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q3_k_m", "q2_k"]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_formats_exist_with_source(name):
    p = vl.get_precision(name)
    assert p.bits > 0 and p.source


def test_format_overheads():
    assert vl.get_precision("nf4").bits == Fraction(9, 2)                      # 4 + 32/64
    assert vl.get_precision("nf4-dq").bits - 4 == Fraction(8, 64) + Fraction(32, 64 * 256)  # QLoRA: 0.127 bit
    assert round(float(vl.get_precision("nf4-dq").bits - 4), 3) == 0.127
    assert vl.get_precision("gptq-4bit-g128").bits == 4 + Fraction(16 + 4, 128)
    assert vl.get_precision("gptq-4bit-g32").bits == 4 + Fraction(20, 32)    # any group size
    assert vl.get_precision("q8_0").bits == Fraction(17, 2)
    assert vl.get_precision("q4_0").bits == Fraction(9, 2)


def test_real_formats_keep_tensors_unquantized():
    d = vl.weights_detail("llama-2-7b", "nf4-dq")
    m = vl.get_model("llama-2-7b")
    g = m.param_groups()
    assert d["unquantized tensors"] == 2 * (g["embed"] + g["lm_head"] + g["norm"])
    assert d["quantization constants"] > 0
    assert vl.weights_detail("llama-2-7b", "int4") == {"weights": m.n_params // 2}


@pytest.mark.parametrize("model,fmt,file_gb", [
    # TheBloke's GGUF files for these models (file sizes as listed on the Hub, GB = 10^9)
    ("llama-2-7b", "q4_k_m", 4.08), ("llama-2-7b", "q4_0", 3.83), ("llama-2-7b", "q8_0", 7.16),
    ("llama-2-7b", "q5_k_m", 4.78), ("llama-2-7b", "q6_k", 5.53), ("llama-2-13b", "q4_k_m", 7.87),
    ("mistral-7b", "q4_k_m", 4.37), ("mixtral-8x7b", "q4_k_m", 26.44),
    # localmodels' GGML v3 files of LLaMA-13B (README "Provided files"; the legacy types' rules have not changed)
    ("llama-13b", "q4_0", 7.32), ("llama-13b", "q4_1", 8.14), ("llama-13b", "q5_0", 8.95), ("llama-13b", "q5_1", 9.76),
])
def test_gguf_sizes_match_published_files(model, fmt, file_gb):
    assert abs(vl.weights_bytes(model, fmt) / 1e9 - file_gb) / file_gb < 0.01


def test_gguf_mix_upgrades_some_layers():
    p = vl.get_precision("q4_k_m")
    assert tensor_bits(p, "attn_q", 32) == Fraction(9, 2)
    assert Fraction(9, 2) < tensor_bits(p, "attn_v", 32) < Fraction(105, 16)


def test_new_gguf_types_are_their_block_structs():
    # bytes per block / weights per block of ggml-common.h's block_q4_1, block_q5_0, block_q5_1, block_iq4_xs and
    # block_iq2_xxs: 20, 22, 24 bytes per 32; 136 and 66 bytes per 256
    bits = {n: vl.get_precision(n).bits for n in ("q4_1", "q5_0", "q5_1", "iq4_xs", "iq2_xxs")}
    assert bits == {"q4_1": 5, "q5_0": Fraction(11, 2), "q5_1": 6, "iq4_xs": Fraction(17, 4),
                    "iq2_xxs": Fraction(33, 16)}


def test_gguf_mix_rules_per_layer():
    """llama_tensor_get_type_impl's branches: Q4_K_S lifts the first 4 attn_v and the first eighth of ffn_down to
    Q5_K; Q3_K_L stores attn_v, attn_output and ffn_down as Q5_K; IQ4_XS lifts attn_v to Q5_K from 4 query heads per
    KV head; IQ2_XXS keeps attn_v Q2_K below that and Q4_K from it, and its LM head is Q5_K; the 8-expert rules apply
    to 8 experts only; the 70B rule lifts Q4_K attn_v to Q5_K."""
    from vramlib.catalog.precision import GGML_BITS as G
    tb = lambda name, kind, *a: tensor_bits(vl.get_precision(name), kind, *a)  # noqa: E731
    assert tb("q4_k_s", "attn_v", 32) == (4 * G["q5_k"] + 28 * G["q4_k"]) / 32
    assert tb("q4_k_s", "mlp_down", 32) == (4 * G["q5_k"] + 28 * G["q4_k"]) / 32
    assert tb("q4_k_s", "attn_q", 32) == G["q4_k"]
    assert [tb("q3_k_l", k, 32) for k in ("attn_v", "attn_o", "mlp_down", "attn_q")] == [G["q5_k"]] * 3 + [G["q3_k"]]
    assert tb("iq4_xs", "attn_v", 32, 4) == G["q5_k"] and tb("iq4_xs", "attn_v", 32, 2) == G["iq4_xs"]
    assert tb("iq2_xxs", "attn_v", 32, 2) == G["q2_k"] and tb("iq2_xxs", "attn_v", 32, 4) == G["q4_k"]
    assert tb("iq2_xxs", "lm_head") == G["q5_k"] and tb("iq2_xxs", "embed") == G["q2_k"]
    assert tb("q4_k_m", "attn_v", 48, 8, 128) < G["q8_0"] == tb("q4_k_m", "attn_v", 32, 4, 8)
    assert tb("q4_k_m", "attn_k", 32, 4, 8) == G["q8_0"] and tb("q4_k_m", "attn_k", 48, 8, 128) == G["q4_k"]
    lifted = tensor_bits(vl.get_precision("q4_k_s"), "attn_v", 80, 8, 0, True)
    assert lifted == G["q5_k"] > tensor_bits(vl.get_precision("q4_k_s"), "attn_v", 80, 8, 0, False)


def test_gguf_stores_tied_embeddings_as_the_head():
    """llama.cpp quantizes a tied token-embedding table with the output's type (Q6_K under Q4_K_M), not the mix's."""
    tied, untied = vl.get_model("qwen3-0.6b"), vl.get_model("qwen3-0.6b").with_(tied_embeddings=False)
    g = tied.param_groups()
    extra = vl.weights_bytes(untied, "q4_k_m") - vl.weights_bytes(tied, "q4_k_m")
    from vramlib.catalog.precision import GGML_BITS as G
    # untied, the head stays Q6_K and the table drops to the mix's Q4_K: one more Q4_K table in all
    assert abs(extra - g["embed"] * G["q4_k"] / 8) <= 1


@pytest.mark.parametrize("model,fmt,words", [
    ("qwen2.5-0.5b", "q4_k_m", "896 weights (hidden)"), ("gpt-oss-20b", "iq4_xs", "2880 weights (hidden)"),
    ("falcon-7b", "q8_0", "Falcon"), ("deepseek-v3", "q4_k_s", "attn_kv_a")])
def test_gguf_refuses_what_its_rules_do_not_model(model, fmt, words):
    with pytest.raises(vl.InvalidValueError, match="weights") as e:
        vl.weights_bytes(model, fmt)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_kv_cache_rejects_weight_only_formats():
    with pytest.raises(vl.InvalidValueError, match="kv_dtype"):
        vl.kv_cache_bytes("llama-2-7b", 10, dtype="gptq-4bit-g128")


def test_inference_breakdown_components():
    bd = vl.inference_memory("llama-2-13b", weights="fp16", kv_dtype="fp16", tokens=4096, batch=1, attention="sdpa")
    assert bd["weights"] == 2 * 13_015_864_320
    assert bd["kv cache"] == 4096 * 819_200
    assert bd.total == sum(bd.values())
    eager = vl.inference_memory("llama-2-13b", tokens=4096, attention="eager")
    assert eager["prefill workspace"] - bd["prefill workspace"] == 40 * 4096**2 * (4 + 2)
    assert "<table" in bd._repr_html_() and "GiB" in bd._repr_html_()
    assert bd.fits("A100-80GB") and not bd.fits("RTX-4090") and bd.fits(10**12, headroom=0.5)


@settings(max_examples=60, deadline=None)
@given(kv1=st.sampled_from([1, 2, 4, 5, 8, 10, 20, 40]), kv2=st.sampled_from([1, 2, 4, 5, 8, 10, 20, 40]),
       tokens=st.integers(1, 200_000), batch=st.integers(1, 64))
def test_more_kv_heads_never_lowers_kv_bytes(kv1, kv2, tokens, batch):
    m = vl.get_model("llama-2-13b")
    lo, hi = sorted([kv1, kv2])
    assert vl.kv_cache_bytes(m.with_(n_kv_heads=lo), tokens, batch) <= vl.kv_cache_bytes(m.with_(n_kv_heads=hi), tokens, batch)


# --- bitsandbytes LLM.int8 (tools/measure/bnb_int8.py) --------------------------------------------------------------
BNB_INT8 = json.loads((Path(vl.__file__).parent / "data" / "measured" / "bnb_int8.json").read_text())


@pytest.mark.parametrize("row", BNB_INT8["rows"], ids=lambda r: r["case"])
def test_llm_int8_equals_what_bitsandbytes_holds(row):
    """int8 weights + one fp32 scale per output row + 16-bit embeddings, head, norms and biases: the bytes the
    loaded model holds, exactly; the saved file adds one byte per quantized Linear (weight_format)."""
    m = vl.ModelSpec.from_hf_config(row["hf_config"], name=row["case"])
    got = vl.weights_detail(m, "llm-int8")
    assert sum(got.values()) == row["memory_bytes"]
    assert got["quantization constants"] == row["row_scale_bytes"]
    assert got["weights"] == row["parameter_bytes"]["torch.int8"]
    assert row["saved_bytes"] - row["memory_bytes"] == row["quantized_linears"]


def test_llm_int8_rows_follow_each_tensor():
    m = vl.get_model("llama-2-7b")
    rows_per_layer = 4 * 4096 + 2 * 11008 + 4096        # q, k, v, o; gate, up; down
    assert vl.weights_detail(m, "llm-int8")["quantization constants"] == 32 * rows_per_layer * 4
    assert vl.weights_bytes(m, "llm-int8") > vl.weights_bytes(m, "int8")   # the idealised int8 has no scales


def test_load_in_8bit_checkpoints_are_llm_int8():
    qc = {"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["lm_head"]}
    m = vl.ModelSpec.from_hf_config({**BNB_INT8["rows"][0]["hf_config"], "quantization_config": qc}, name="q8")
    assert m.checkpoint_format == "llm-int8" and m.default_weights == "llm-int8"


@pytest.mark.parametrize("model, words", [("mixtral-8x7b", "experts"), ("deepseek-v3", "latent"),
                                          ("bamba-9b", "Mamba"), ("source-13b", "nominal")])
def test_llm_int8_refuses_what_it_does_not_price(model, words):
    with pytest.raises(vl.InvalidValueError, match=words) as e:
        vl.weights_bytes(model, "llm-int8")
    assert "\n" not in str(e.value)
    with pytest.raises(vl.InvalidValueError, match="kv_dtype"):
        vl.kv_cache_bytes("llama-2-7b", 16, dtype="llm-int8")
