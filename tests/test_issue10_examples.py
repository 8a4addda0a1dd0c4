"""Issue 10's examples, each checked in: the right number or a one-line error, never a plausible wrong number.

The CLI, CSV and HTML examples live in tests/test_cli_hostile.py, the config files in tests/test_config_hostile.py,
the training/parallel ranges and monotonicity in tests/test_training_hostile.py, typed input in
tests/browser/test_input_parsing.py; this file holds the library examples and the solver properties.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vramlib as vl
from vramlib import report as R
from vramlib.core.errors import VramlibError

CONFIGS = Path(vl.__file__).parent / "data" / "hf_configs"


def one_line(call, *fragments):
    with pytest.raises(VramlibError) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg, msg
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


def config(name: str, **changes):
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    data.update(changes)
    return data


# --- tensor-parallel KV ------------------------------------------------------------------------------------------
def test_tp_over_more_gpus_than_kv_heads_keeps_whole_heads():
    m = vl.get_model("llama-3.1-70b")                               # 64 heads, 8 KV heads
    assert vl.max_tokens_tp(m, "24GB", 16) == 358_417                 # was 716,835: 1/16 of the cache per GPU
    assert R.inference_memory_tp(m, 16, tokens=1000, attention=None)["kv cache"] == \
        vl.kv_cache_bytes(m.with_(n_kv_heads=1), 1000)


@pytest.mark.parametrize("call", [
    lambda: vl.max_tokens_tp("llama-3.1-70b", "24GB", 3),
    lambda: vl.max_tokens_tp("llama-3.1-70b", "24GB", 12),
    lambda: vl.plan_memory("llama-3.1-70b", seq=2048, tp=3),
    lambda: vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", tp=6),
    lambda: R.inference_memory_tp("llama-3.1-70b", 5),
])
def test_tp_that_does_not_split_the_heads_is_refused(call):
    one_line(call, "allowed: 1, 2, 4, 8, 16, 32, 64")


# --- config reading ------------------------------------------------------------------------------------------------
def test_string_false_is_not_true():
    one_line(lambda: vl.ModelSpec.from_hf_config(config("llama-2-7b", tie_word_embeddings="false")),
             "tie_word_embeddings")


def test_a_4bit_checkpoint_is_not_priced_in_fp16_silently():
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    m = vl.ModelSpec.from_hf_config(config("llama-2-7b", quantization_config=q))
    assert m.checkpoint_format == m.default_weights == "gptq-4bit-g128"
    assert vl.weights_bytes(m, m.default_weights) < vl.weights_bytes(m, "fp16") / 3
    one_line(lambda: vl.ModelSpec.from_hf_config(config("llama-2-7b", quantization_config={"quant_method": "hqq"})),
             "quant_method")


def test_head_dim_null_and_gpt_shapes_check_the_heads():
    one_line(lambda: vl.ModelSpec.from_hf_config(config("llama-2-7b", head_dim=None, num_attention_heads=33)),
             "num_attention_heads")
    one_line(lambda: vl.ModelSpec.from_hf_config(config("gpt2", n_head=7)), "n_head")
    one_line(lambda: vl.ModelSpec.from_hf_config(config("gpt-neox-20b", num_attention_heads=63)),
             "num_attention_heads")


def test_moe_config_missing_a_key_is_not_a_dense_model():
    qwen_moe = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
                "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
                "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "vocab_size": 151936}
    one_line(lambda: vl.ModelSpec.from_hf_config(qwen_moe), "num_experts")
    # with its expert count it is Qwen1.5-MoE-A2.7B, shared expert and gate counted (transformers 5.24, meta device)
    assert vl.ModelSpec.from_hf_config({**qwen_moe, "num_experts": 60}).n_params == 14_315_784_192
    mixtral = config("mixtral-8x7b")
    del mixtral["num_local_experts"]
    one_line(lambda: vl.ModelSpec.from_hf_config(mixtral), "num_local_experts")


# --- units -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [lambda: vl.parse_memory("24"), lambda: vl.max_tokens("llama-2-7b", "24"),
                                  lambda: vl.kv_budget_bytes("llama-2-7b", "80", reserve="0.5")])
def test_a_size_without_a_unit_is_refused_with_both_readings(call):
    one_line(call, "GB", "GiB")


def test_zero_needs_no_unit():
    assert vl.parse_memory("0") == 0 == vl.parse_memory(0)


# --- ranges ------------------------------------------------------------------------------------------------------------
def test_lora_rank_above_the_layer_width_and_duplicate_targets():
    one_line(lambda: vl.lora_params("llama-3.2-1b", 513, ["k_proj"]), "lora_rank", "512")
    assert vl.lora_params("llama-2-7b", 16, ["q_proj", "q_proj"]) == vl.lora_params("llama-2-7b", 16, ["q_proj"])
    one_line(lambda: vl.lora_params("llama-2-7b", 16, ["q_prj"]), "q_proj")


@pytest.mark.parametrize("headroom", [-0.1, 1, 1.5, "0.1", float("nan")])
def test_headroom_outside_zero_one(headroom):
    bd = vl.inference_memory("llama-2-7b")
    one_line(lambda: bd.fits("a100-80gb", headroom=headroom), "headroom")
    one_line(lambda: vl.search_plans("llama-2-7b", "a100-80gb", 8, headroom=headroom), "headroom")


@pytest.mark.parametrize("call,field", [
    (lambda: vl.parse_hardware("-2x80GB"), "gpu"),
    (lambda: vl.min_gpus_for_training("llama-2-7b", "a100-80gb", gpus_per_node=-8), "gpus_per_node"),
    (lambda: vl.search_plans("llama-2-7b", "a100-80gb", -8), "n_gpus"),
    (lambda: vl.cost_per_million_tokens(100.0, "a100-80gb", n_gpus=-1), "n_gpus"),
])
def test_negative_gpu_counts(call, field):
    one_line(call, field)


# --- strings where numbers belong, NaN, unknown keywords, zero micro-batches, huge numbers --------------------------
@pytest.mark.parametrize("call,field", [
    (lambda: vl.min_gpus("10GB", "80GB"), "sharded_bytes"),
    (lambda: vl.inference_memory("llama-2-7b").fits("a100-80gb", headroom="0.1"), "headroom"),
    (lambda: vl.ParallelPlan(tp=2, tpp=3), "tpp"),
    (lambda: vl.plan_memory("llama-2-7b", conventon="deepspeed"), "conventon"),
    (lambda: vl.plan_memory("llama-2-7b", n_micro=0), "n_micro"),
    (lambda: vl.search_plans("llama-2-7b", "a100-80gb", 8, micro_batches=[0]), "micro_batches"),
    (lambda: vl.kv_cache_bytes("llama-2-7b", float("nan")), "tokens"),
    (lambda: vl.training_memory("llama-2-7b", seq=float("inf")), "seq"),
    (lambda: vl.max_tokens("llama-2-7b", batch="1"), "batch"),
    (lambda: vl.balance_pipeline("llama-2-7b", seq=1e300, gpu="a100-80gb", pp=4), "seq"),
    (lambda: vl.max_tokens("llama-2-7b", "24GB", weights=4), "weights"),
])
def test_bad_types_give_one_line(call, field):
    one_line(call, field)


# --- monotonicity: stated exceptions, named in the result -------------------------------------------------------------
def test_deepspeed_zero2_above_zero1_at_dp1_is_named():
    m = vl.get_model("llama-3.1-8b")
    z1 = vl.plan_memory(m, seq=16, dp=1, zero=1, convention="deepspeed")
    z2 = vl.plan_memory(m, seq=16, dp=1, zero=2, convention="deepspeed")
    assert z2.total > z1.total
    assert any("ZeRO" in n for n in z2.notes), z2.notes


def test_selective_above_none_is_named():
    kw = dict(method="full", seq=16, attention="eager")
    none = vl.training_memory("phi-3-mini", recompute="none", **kw)
    sel = vl.training_memory("phi-3-mini", recompute="selective", **kw)
    assert sel.total > none.total and any("none" in n for n in sel.notes), sel.notes


# --- the solver cap ------------------------------------------------------------------------------------------------------
def test_max_tokens_is_exact_beyond_two_to_the_forty():
    m = vl.get_model("llama-2-7b")
    cap = vl.parse_memory("1000000TB")
    t = vl.max_tokens(m, cap, attention="sdpa")
    assert t > 2**40                                                # was exactly 2^40, although 2^40 + 1 fits
    assert vl.inference_memory(m, tokens=t, attention="sdpa").total <= cap
    assert vl.inference_memory(m, tokens=t + 1, attention="sdpa").total > cap


def test_an_unbounded_question_is_an_error_not_a_capped_number():
    from vramlib.solve.feasibility import largest_fitting

    one_line(lambda: largest_fitting(lambda n: True), "tokens")


# --- properties -------------------------------------------------------------------------------------------------------------
MODELS = ["llama-2-7b", "llama-2-13b", "mistral-7b", "llama-3.1-70b", "qwen2.5-7b", "phi-3-mini", "gemma-2-9b"]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), gib=st.integers(8, 400), batch=st.integers(1, 8),
       attention=st.sampled_from([None, "sdpa", "eager"]))
def test_max_tokens_fits_and_one_more_does_not(model, gib, batch, attention):
    m, cap = vl.get_model(model), gib * 2**30
    t = vl.max_tokens(m, cap, "int4", batch=batch, attention=attention)
    total = lambda n: vl.inference_memory(m, "int4", tokens=n, batch=batch, attention=attention or "sdpa").total \
        if attention else vl.weights_bytes(m, "int4") + vl.kv_cache_bytes(m, n, batch) + vl.parse_memory("0.5GB")  # noqa: E731
    if t:
        assert total(t) <= cap
    if attention is None and t == m.max_context and total(2**40) <= cap:
        return  # every layer keeps a window: the cache stops growing and the model's context is the limit
    assert total(t + 1) > cap


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), tp=st.sampled_from([1, 2, 4, 8, 16, 32]), gb=st.integers(16, 200))
def test_max_tokens_tp_is_exact_per_gpu_and_keeps_whole_heads(model, tp, gb):
    m = vl.get_model(model)
    if tp not in vl.inference.allowed_tp(m.n_heads, m.n_kv_heads):
        one_line(lambda: vl.max_tokens_tp(m, f"{gb}GB", tp), "n_gpus", "allowed")
        return
    heads = vl.inference.kv_heads_per_gpu(m, tp)
    assert heads >= 1 and (heads * tp == m.n_kv_heads or heads == 1)
    t = vl.max_tokens_tp(m, f"{gb}GB", tp)
    per_gpu = lambda n: R.inference_memory_tp(m, tp, tokens=n, attention=None).total  # noqa: E731
    if t:
        assert per_gpu(t) <= gb * 10**9
    if t == m.max_context and per_gpu(2**40) <= gb * 10**9:
        return  # every layer keeps a window: the cache stops growing, the model's context is the limit
    assert per_gpu(t + 1) > gb * 10**9
    assert t == R.max_context(m, f"{tp}x{gb}GB", attention=None)


@settings(max_examples=60, deadline=None)
@given(number=st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False))
def test_a_number_without_a_unit_is_never_bytes(number):
    text = str(number)
    if float(number) == 0:
        assert vl.parse_memory(text) == 0
    else:
        one_line(lambda: vl.parse_memory(text), "GB", "GiB")
    assert vl.parse_memory(text + "GB") == int(number * 10**9)
