from hypothesis import assume, given, settings, strategies as st

import vramlib as vl

MODELS = ["llama-2-7b", "llama-2-13b", "mistral-7b", "falcon-7b", "qwen2.5-7b", "source-13b", "mixtral-8x7b"]
WEIGHTS = ["fp16", "int8", "int4", "nf4-dq", "q4_k_m", "gptq-4bit-g128"]


def priced(model, weights) -> bool:
    """Whether the format prices this model (llama.cpp's rules refuse Falcon's GGUF mixes in one line)."""
    try:
        vl.weights_bytes(model, weights)
    except vl.InvalidValueError as e:
        assert "\n" not in str(e)
        return False
    return True


def fits(m, mem, weights, kv, batch, reserve, attention, t):
    total = vl.inference_memory(m, weights, kv, t, batch, attention or "sdpa", reserve).total
    if attention is None:  # the closed form counts weights + KV + reserve only
        bd = vl.inference_memory(m, weights, kv, t, batch, "sdpa", reserve)
        total = bd.total - bd["prefill workspace"]
    return total <= vl.parse_memory(mem)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), weights=st.sampled_from(WEIGHTS), kv=st.sampled_from(["fp16", "fp8-e4m3", "int4"]),
       gib=st.integers(8, 200), batch=st.integers(1, 16), attention=st.sampled_from([None, "sdpa", "eager"]))
def test_solver_answer_fits_and_answer_plus_one_does_not(model, weights, kv, gib, batch, attention):
    assume(priced(model, weights))
    mem = f"{gib}GiB"
    t = vl.max_tokens(model, memory=mem, weights=weights, kv_dtype=kv, batch=batch, attention=attention)
    assume(t > 0)
    assert fits(model, mem, weights, kv, batch, "0.5GB", attention, t)
    if attention is None and t == vl.get_model(model).max_context and fits(model, mem, weights, kv, batch, "0.5GB",
                                                                            attention, 2**40):
        return  # every layer keeps a window (Mistral-7B v0.1): the cache stops growing, the model's context limits
    assert not fits(model, mem, weights, kv, batch, "0.5GB", attention, t + 1)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), weights=st.sampled_from(WEIGHTS), a=st.integers(1, 300), b=st.integers(1, 300),
       attention=st.sampled_from([None, "sdpa"]))
def test_more_memory_never_lowers_max_tokens(model, weights, a, b, attention):
    assume(priced(model, weights))
    lo, hi = sorted([a, b])
    assert (vl.max_tokens(model, f"{lo}GiB", weights, attention=attention)
            <= vl.max_tokens(model, f"{hi}GiB", weights, attention=attention))


def test_max_batch_fits_and_plus_one_does_not():
    n = vl.max_batch("llama-2-7b", "80GB", tokens=4096)
    assert n > 0
    assert vl.inference_memory("llama-2-7b", tokens=4096, batch=n).total <= 80e9
    assert vl.inference_memory("llama-2-7b", tokens=4096, batch=n + 1).total > 80e9


def test_max_params_source_q5():
    assert vl.max_params("24GB", "int4") == 48 * 10**9
    assert vl.max_params("24GB", "int4", reserve="4GB") == 40 * 10**9


def test_min_gpus():
    w = vl.weights_bytes("llama-2-70b", "fp16")
    n = vl.min_gpus(w, "A100-80GB", replicated_bytes="2GB")
    assert n == 2
    assert w / n + 2e9 <= vl.get_gpu("a100-80gb").memory_bytes < w / (n - 1) + 2e9


def test_max_tokens_accepts_gpu_name():
    assert vl.max_tokens("llama-2-7b", "RTX-4090", "fp16") == vl.max_tokens(
        "llama-2-7b", vl.get_gpu("rtx-4090").memory_bytes, "fp16")


def test_weights_alone_too_big_gives_zero():
    assert vl.max_tokens("llama-2-70b", "24GiB", "fp16") == 0
