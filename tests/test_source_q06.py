"""Question 6 (choosing a cloud GPU): the source's tiers and 70B options as computed verdicts, throughput, cost."""
import vramlib as vl

SERVE = dict(request_tokens=2048, max_model_len=2048)


def starts(model, gpu, weights, tp=1, **kw):
    """vLLM starts with a 2,048-token max_model_len: a positive budget that holds one whole request."""
    c = vl.serving_kv_capacity(model, gpu, tp=tp, weights=weights, **SERVE, **kw)
    assert c.serves == (c.starts and c.fits_max_model_len)
    return c.serves


def test_tier_development_t4_7b_quantized():
    assert starts("llama-2-7b", "t4", "awq-4bit-g128")
    assert not starts("llama-2-7b", "t4", "fp16")                          # FP16 7B does not


def test_tier_small_production_24gb():
    for g in ("a10", "rtx-a5000"):
        assert starts("llama-2-13b", g, "awq-4bit-g128") and starts("llama-2-7b", g, "fp16")
        assert not starts("llama-2-13b", g, "fp16")


def test_tier_medium_a100_40_80():
    assert starts("llama-2-13b", "a100-40gb", "fp16")
    assert not starts("llama-2-70b", "a100-40gb", "awq-4bit-g128")           # 70B at 0.9 needs the 80 GB card ...
    assert starts("llama-2-70b", "a100-40gb", "awq-4bit-g128", gpu_memory_utilization=0.95)   # ... or 0.95
    assert vl.serving_kv_capacity("llama-2-70b", "a100-40gb", weights="awq-4bit-g128",
                                  **SERVE).max_num_batched_tokens == 2048      # vllm serve's default on an A100
    assert starts("llama-2-70b", "a100-80gb", "awq-4bit-g128")
    assert not starts("llama-2-70b", "a100-80gb", "fp16")


def test_tier_large_h100_70b_and_moe():
    assert starts("llama-2-70b", "h100-sxm-80gb", "fp8-e4m3")
    assert starts("llama-2-70b", "h100-sxm-80gb", "fp16", tp=2)
    assert starts("mixtral-8x7b", "h100-sxm-80gb", "fp16", tp=2)
    assert not starts("mixtral-8x7b", "h100-sxm-80gb", "fp16")


def test_70b_options_and_the_2xa100_fp16_audit():
    one = vl.serving_kv_capacity("llama-2-70b", "a100-80gb", weights="awq-4bit-g128", **SERVE)
    two = vl.serving_kv_capacity("llama-2-70b", "a100-80gb", tp=2, weights="fp16", **SERVE)
    four = vl.serving_kv_capacity("llama-2-70b", "a100-80gb", tp=4, weights="fp16", **SERVE)
    assert one.starts and two.starts and four.starts
    # 138 GB of FP16 weights over 2 x 80 GiB: little KV cache per GPU, fewer requests than 1 GPU at 4 bits
    assert round(vl.gb(vl.weights_bytes("llama-2-70b", "fp16"))) == 138
    assert vl.gib(two.kv_cache_bytes) < 7 < vl.gib(one.kv_cache_bytes)
    assert two.max_concurrency < one.max_concurrency < four.max_concurrency
    r1 = vl.roofline("llama-2-70b", "a100-80gb", weights="awq-4bit-g128", batch=one.max_concurrent_requests, context=2048)
    r2 = vl.roofline("llama-2-70b", "a100-80gb", weights="fp16", tp=2, batch=two.max_concurrent_requests, context=2048)
    assert r1.decode_tokens_per_s > r2.decode_tokens_per_s
    assert r1.cost_per_million_output_tokens_usd < r2.cost_per_million_output_tokens_usd


def test_1xa100_int4_35gb_plus_scales():
    w70 = vl.get_model("llama-2-70b")
    assert vl.weights_bytes(w70.with_(nominal_params=70 * 10**9), "int4") == 35 * 10**9
    assert vl.weights_bytes(w70, "int4") < 35 * 10**9 < vl.weights_bytes(w70, "awq-4bit-g128")


def test_cost_per_million_tokens_has_a_dated_price():
    r = vl.roofline("llama-3.1-8b", "a100-80gb", batch=64, context=2048)
    assert r.price_date and r.price_source and r.cost_per_million_output_tokens_usd > 0


def test_a100_vs_v100_price_and_cost_per_token():
    a100, v100 = vl.get_gpu("a100-80gb"), vl.get_gpu("v100-32gb")
    assert a100.price_per_hour_usd < v100.price_per_hour_usd                 # not "several times" in this catalogue
    costs = {}
    for g in (a100, v100):
        c = vl.serving_kv_capacity("llama-2-13b", g, weights="fp16", **SERVE)
        costs[g.key] = vl.roofline("llama-2-13b", g, weights="fp16", batch=max(1, c.max_concurrent_requests),
                                   context=2048).cost_per_million_output_tokens_usd
    assert costs["a100-80gb"] * 10 < costs["v100-32gb"]                      # "lower cost per inference" holds
