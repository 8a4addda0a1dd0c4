"""vramlib.serve.serving: vLLM's KV budget, the roofline, costs, fit maps and the serving panel."""
import math
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import vramlib as vl
from vramlib import serving as S
from vramlib.present.widgets import evaluate_panel
from vramlib.present.widgets.serving import serving_compute
from costs import assert_warm_updates_compile_nothing

GiB = 2**30


# --- the vLLM budget ----------------------------------------------------------------------------------------
def test_block_bytes_is_vllms_page_size_times_layers():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")
    # 2 x block_size x num_kv_heads x head_size x dtype_size x num_layers
    assert cap.block_bytes == 2 * 16 * 8 * 128 * 2 * 32 == 16 * vl.kv_bytes_per_token("llama-3.1-8b", "bf16")
    assert cap.kv_tokens == cap.num_blocks * 16
    assert cap.kv_cache_bytes == cap.num_blocks * cap.block_bytes <= cap.available_kv_bytes
    assert cap.available_kv_bytes - cap.kv_cache_bytes < cap.block_bytes           # floor: one more block does not fit


def test_the_driver_reservation_is_the_cards_where_published():
    """CUDA's total comes from the card's published logs; a card without one gets the assumed reservation, and the
    result says which; a given driver_reserved wins."""
    a100 = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")
    assert a100.cuda_total_bytes == vl.get_gpu("a100-80gb").cuda_total_bytes < vl.get_gpu("a100-80gb").memory_bytes
    assert "published logs" in a100.breakdown.notes[0] and "79.14" in a100.breakdown.notes[0]
    l4 = vl.serving_kv_capacity("llama-3.1-8b", "l4", max_model_len=8192)
    assert vl.get_gpu("l4").cuda_total_bytes is None and "no published CUDA total" in l4.breakdown.notes[0]
    assert l4.driver_reserved_bytes == vl.parse_memory(S.DRIVER_RESERVED)
    given = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", driver_reserved="1GiB")
    assert given.driver_reserved_bytes == 2**30 and given.kv_tokens < a100.kv_tokens
    published = [g for g in vl.list_gpus() if vl.get_gpu(g).cuda_total_bytes]
    assert len(published) >= 8 and all(0.2 * 2**30 < vl.get_gpu(g).memory_bytes - vl.get_gpu(g).cuda_total_bytes
                                       < 2**30 for g in published)


def test_budget_identity_and_breakdown_adds_up_to_the_card():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "h100-sxm-80gb")
    card = vl.get_gpu("h100-sxm-80gb")
    assert cap.cuda_total_bytes == card.cuda_total_bytes == vl.parse_memory("79.11GiB")   # the published total
    assert cap.requested_bytes == int(Fraction(9, 10) * cap.cuda_total_bytes)
    expected = (Fraction(9, 10) * cap.cuda_total_bytes - cap.weights_bytes - cap.activation_peak_bytes
                - cap.non_torch_bytes - cap.cuda_graph_bytes)
    assert cap.available_kv_bytes == int(expected)
    assert cap.breakdown.total == card.memory_bytes
    assert cap.process_bytes + cap.free_bytes + cap.driver_reserved_bytes == card.memory_bytes
    assert cap.starts and cap.fits_max_model_len


def test_max_concurrency_is_blocks_over_blocks_per_request():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", request_tokens=8000)
    assert cap.max_concurrency == pytest.approx(cap.num_blocks / math.ceil(8000 / 16))
    assert cap.max_concurrent_requests == cap.num_blocks // 500
    assert "concurrency" in cap.verdict


def test_4090_cannot_take_llama31_8b_default_max_model_len():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "rtx-4090")
    assert cap.starts and not cap.fits_max_model_len
    assert cap.max_model_len == 131072 > cap.kv_tokens > 20_000
    assert "--max-model-len" in cap.verdict
    assert vl.serving_kv_capacity("llama-3.1-8b", "rtx-4090", max_model_len=8192).fits_max_model_len


def test_too_big_does_not_start():
    cap = vl.serving_kv_capacity("llama-2-70b", "rtx-4090", weights="fp16")
    assert not cap.starts and cap.num_blocks == 0 and "do not fit" in cap.verdict
    low_head = vl.serving_kv_capacity("llama-3.1-8b", "rtx-4090", gpu_memory_utilization=0.99)
    assert not low_head.starts and "free memory at start-up" in low_head.verdict
    t4 = vl.serving_kv_capacity("llama-2-7b", "t4", weights="bf16")
    assert not t4.starts and "bf16" in t4.verdict


def test_more_utilization_more_blocks_and_fp8_doubles_them():
    a = vl.serving_kv_capacity("qwen2.5-7b", "a100-80gb", gpu_memory_utilization=0.8)
    b = vl.serving_kv_capacity("qwen2.5-7b", "a100-80gb", gpu_memory_utilization=0.95)
    assert b.num_blocks > a.num_blocks
    fp8 = vl.serving_kv_capacity("qwen2.5-7b", "a100-80gb", kv_dtype="fp8")
    base = vl.serving_kv_capacity("qwen2.5-7b", "a100-80gb")
    assert fp8.block_bytes * 2 == base.block_bytes
    assert fp8.num_blocks in (2 * base.num_blocks, 2 * base.num_blocks + 1)
    assert fp8.kv_dtype == "fp8-e4m3" and base.kv_dtype == "bf16"


def test_tensor_parallel_splits_weights_and_kv_heads():
    one = vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", weights="fp8-e4m3")
    four = vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", weights="fp8-e4m3", tp=4)
    w = vl.weights_bytes("llama-3.1-70b", "fp8-e4m3")
    assert four.weights_bytes == -(-w // 4) and one.weights_bytes == w
    assert four.kv_heads_per_gpu == 2 and not four.kv_heads_replicated
    assert four.nccl_bytes > 0 and one.nccl_bytes == 0
    sixteen = vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", tp=16)
    assert sixteen.kv_heads_per_gpu == 1 and sixteen.kv_heads_replicated
    assert any("replicated" in n for n in sixteen.breakdown.notes)


def test_graph_accounting_moves_the_graphs_between_budget_and_headroom():
    a = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", cuda_graph_accounting="budget")
    b = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", cuda_graph_accounting="headroom")
    assert b.available_kv_bytes - a.available_kv_bytes == vl.parse_memory(S.CUDA_GRAPH_MEMORY)
    assert a.free_bytes - b.free_bytes == pytest.approx(vl.parse_memory(S.CUDA_GRAPH_MEMORY), abs=2 * a.block_bytes)
    eager = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", cuda_graphs=False)
    assert eager.cuda_graph_bytes == 0 and eager.num_blocks > a.num_blocks


def test_measured_activation_overrides_the_estimate():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", activation_peak="1.26GiB")
    assert cap.activation_peak_bytes == int(Fraction("1.26") * GiB)


@pytest.mark.parametrize("field,kw", [
    ("tp", dict(tp=3)), ("tp", dict(tp=0)), ("gpu_memory_utilization", dict(gpu_memory_utilization=1.5)),
    ("block_size", dict(block_size=0)), ("kv_dtype", dict(kv_dtype="q4_k_m")), ("gpu", dict(gpu="a100")),
    ("cuda_graph_accounting", dict(cuda_graph_accounting="sometimes")), ("weights", dict(weights="int3")),
])
def test_bad_input_names_the_field(field, kw):
    args = dict(m="llama-3.1-8b", gpu="a100-80gb") | kw
    with pytest.raises(vl.VramlibError) as e:
        vl.serving_kv_capacity(**args)
    assert field in str(e.value) and "\n" not in str(e.value)


def test_activation_estimate_matches_published_logs():
    for row in S.published_profile_check():
        assert row["estimated GiB"] == pytest.approx(row["logged activation GiB"], rel=0.07), row
        # the card's total is the smallest published one: drivers differ (79.11-79.22 GiB in the H100 logs)
        assert row["estimated total GiB"] == pytest.approx(row["logged total GiB"], abs=0.12), row


def test_published_kv_budget_reproduced_with_the_logged_components():
    # llm-d's H100 log of Llama-3.1-8B: 79.18 x 0.9 - 14.99 - 4.76 - 0.13 = 51.38 GiB (graphs outside the budget)
    p = S.PUBLISHED_VLLM_PROFILES[1]
    kv = sp.Rational(str(p["total_gib"])) * sp.Rational(9, 10) - sum(
        sp.Rational(str(p[k])) for k in ("weights_gib", "activation_gib", "non_torch_gib"))
    assert float(kv) == pytest.approx(p["kv_gib"], abs=0.01)


def test_vllm_default_batch():
    assert vl.vllm_default_batch("h100-sxm-80gb") == (8192, 1024)
    assert vl.vllm_default_batch("a100-80gb") == (2048, 256)           # "a100" excluded on purpose (PR #17885)
    assert vl.vllm_default_batch("rtx-4090", "llm") == (8192, 256)
    assert vl.vllm_default_batch("h200", "llm") == (16384, 1024)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "qwen2.5-7b", "qwen2.5-14b", "llama-2-13b", "mixtral-8x7b"]),
       gpu=st.sampled_from(["a100-80gb", "h100-sxm-80gb", "l40s", "a100-40gb", "h200"]),
       util=st.sampled_from([0.5, 0.8, 0.9, 0.95]), block=st.sampled_from([8, 16, 32]),
       kv=st.sampled_from(["auto", "fp8"]))
def test_blocks_fill_the_budget(model, gpu, util, block, kv):
    cap = vl.serving_kv_capacity(model, gpu, gpu_memory_utilization=util, block_size=block, kv_dtype=kv)
    if cap.num_blocks:
        assert cap.num_blocks * cap.block_bytes <= cap.available_kv_bytes < (cap.num_blocks + 1) * cap.block_bytes


# --- roofline and cost ----------------------------------------------------------------------------------------
def test_decode_batch_one_is_bandwidth_over_weights():
    r = vl.roofline("llama-3.1-8b", "h100-sxm-80gb", batch=1, context=1, mbu=1.0)
    w = vl.weights_bytes("llama-3.1-8b", "bf16")
    kv = vl.kv_bytes_per_token("llama-3.1-8b", "bf16")
    assert r.decode_tokens_per_s == pytest.approx(3350e9 / (w + kv))
    assert r.bound == "memory"


def test_large_short_batches_become_compute_bound_at_the_crossover():
    kw = dict(weights="fp16", context=256, tp=2)
    b = S.crossover_batch("llama-2-70b", "a100-80gb", **kw)
    assert b and b > 1
    assert vl.roofline("llama-2-70b", "a100-80gb", batch=b, **kw).bound == "compute"
    assert vl.roofline("llama-2-70b", "a100-80gb", batch=b - 1, **kw).bound == "memory"
    top = vl.roofline("llama-2-70b", "a100-80gb", batch=4 * b, **kw)
    n = vl.get_model("llama-2-70b").n_active_params
    assert top.decode_tokens_per_s == pytest.approx(0.5 * 312e12 * top.tp_speedup / (2 * n))
    # the closed form from sympy.solve agrees with the search
    vals = dict(F_peak=312e12, W=vl.weights_bytes("llama-2-70b", "fp16"), eta_c=0.5, eta_m=0.7, BW=2039e9,
                N_active=n, T=256, k_kv=vl.kv_bytes_per_token("llama-2-70b", "fp16"))
    assert math.ceil(vl.formulas.evaluate(S.CROSSOVER_BATCH, **vals)) == b


def test_long_contexts_never_turn_compute_bound():
    assert S.crossover_batch("llama-3.1-8b", "h100-sxm-80gb", context=8192) is None


def test_tp_speedup_and_prefill():
    r = vl.roofline("llama-2-70b", "a100-80gb", weights="fp16", tp=2, prompt_tokens=1000)
    assert r.tp_speedup == pytest.approx(2 / 1.05)
    n = vl.get_model("llama-2-70b").n_active_params
    assert r.prefill_tokens_per_s == pytest.approx(0.5 * 312e12 * r.tp_speedup / (2 * n))


def test_fp8_weights_use_fp8_tflops_on_hopper_only():
    assert vl.roofline("llama-3.1-8b", "h100-sxm-80gb", weights="fp8-e4m3").peak_tflops == 1979.0
    assert vl.roofline("llama-3.1-8b", "a100-80gb", weights="fp8-e4m3").peak_tflops == 312.0
    assert vl.roofline("llama-2-7b", "t4", weights="fp16", kv_dtype="fp16").peak_tflops == 65.0


def test_moe_decode_reads_only_the_routed_experts_at_small_batch():
    one = vl.roofline("mixtral-8x7b", "h100-sxm-80gb", batch=1, context=1, mbu=1.0)
    dense_equiv = 3350e9 / vl.weights_bytes("mixtral-8x7b", "bf16")
    assert one.decode_tokens_per_s > 2.5 * dense_equiv
    many = vl.roofline("mixtral-8x7b", "h100-sxm-80gb", batch=64, context=1, mbu=1.0)
    assert many.decode_step_s > one.decode_step_s


def test_cost_per_million_tokens():
    g = vl.get_gpu("a100-80gb")
    assert vl.cost_per_million_tokens(1000, g, 2) == pytest.approx(g.price_per_hour_usd * 2 * 1e6 / 3.6e6)
    assert vl.cost_per_million_tokens(1000, "rtx-a5000") is None
    r = vl.roofline("llama-3.1-8b", "a100-80gb", batch=8)
    assert r.price_date == "2025-06" and r.price_source
    assert r.cost_per_million_output_tokens_usd == pytest.approx(g.price_per_hour_usd * 1e6 / 3600 / r.decode_tokens_per_s)
    with pytest.raises(vl.InvalidValueError):
        vl.cost_per_million_tokens(0, g)


def test_roofline_bad_input():
    with pytest.raises(vl.InvalidValueError, match="mfu"):
        vl.roofline("llama-3.1-8b", "a100-80gb", mfu=0)
    with pytest.raises(vl.InvalidValueError, match="tp"):
        vl.roofline("llama-3.1-8b", "a100-80gb", tp=5)


# --- effective bits, fit maps, plots ------------------------------------------------------------------------
def test_bits_per_weight():
    assert S.bits_per_weight("llama-2-13b", "int4") == 4
    assert 4.7 < S.bits_per_weight("yi-34b", "q4_k_m") < 4.9                      # "~4.8 bits/weight"
    assert S.bits_per_weight("source-13b", "fp16") == 16
    p = S.effective_precision("yi-34b", "q4_k_m")
    assert vl.max_params("24GB", p) < vl.max_params("24GB", "int4")


def test_fit_map_kv_only_agrees_with_max_tokens():
    rows = vl.fit_map(["llama-2-13b", "mixtral-8x7b"], ["rtx-4090", ("a100-80gb", 2)], ["fp16", "q4_k_m"])
    assert len(rows) == 8
    r = next(r for r in rows if r["gpu"] == "rtx-4090" and r["model"] == "mixtral-8x7b" and r["precision"] == "q4_k_m")
    assert not r["fits"] and r["max context"] == 0 and "does not fit" in r["verdict"]
    r = next(r for r in rows if r["gpu"] == "rtx-4090" and r["model"] == "llama-2-13b" and r["precision"] == "q4_k_m")
    assert r["max context"] == vl.max_tokens("llama-2-13b", "rtx-4090", "q4_k_m", reserve="0.5GB")
    assert r["usable context"] == 4096 == r["trained context"]
    two = next(r for r in rows if r["gpu"] == "2 x a100-80gb" and r["model"] == "mixtral-8x7b" and r["precision"] == "fp16")
    assert two["fits"] and two["n_gpus"] == 2


def test_fit_map_vllm_engine_uses_serving_capacity():
    rows = vl.fit_map(["llama-2-70b"], [("a100-80gb", 1), ("a100-80gb", 2)], ["fp16", "awq-4bit-g128"], engine="vllm")
    get = {(r["n_gpus"], r["precision"]): r for r in rows}
    assert not get[(1, "fp16")]["fits"]
    assert get[(2, "fp16")]["max context"] == vl.serving_kv_capacity("llama-2-70b", "a100-80gb", tp=2,
                                                                       weights="fp16").kv_tokens
    assert get[(1, "awq-4bit-g128")]["fits"]
    with pytest.raises(vl.UnknownNameError):
        vl.fit_map(["llama-2-7b"], ["t4"], ["fp16"], engine="tgi")


def test_plot_fit_map():
    import matplotlib
    matplotlib.use("Agg")
    rows = vl.fit_map(["llama-2-7b", "mixtral-8x7b"], ["rtx-4090"], ["fp16", "q4_k_m", "q3_k_m"])
    ax = vl.plot_fit_map(rows, x="model", y="precision", title="4090")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["fp16", "q4_k_m", "q3_k_m"]
    texts = {t.get_text() for t in ax.texts}
    assert "\u2717" in texts and any(t.endswith("K") for t in texts)


# --- the serving panel -----------------------------------------------------------------------------------------
PANEL = dict(n_heads=32, n_kv_heads=8, weights="bf16", kv_dtype="auto", gpu="a100-80gb", tp=1,
             gpu_memory_utilization=0.9, block_size=16, max_num_batched_tokens=8192, request_tokens=8192)


def test_serving_compute_returns_breakdown_capacity_verdict():
    bd, cap, verdict = serving_compute("llama-3.1-8b", **PANEL)
    assert isinstance(bd, vl.Breakdown) and cap == vl.get_gpu("a100-80gb").memory_bytes
    assert "blocks" in verdict and "requests" in verdict


@pytest.mark.parametrize("change,msg", [(dict(n_kv_heads=5), "n_kv_heads"), (dict(tp=3), "tp"),
                                         (dict(n_heads=33), "n_heads"), (dict(gpu_memory_utilization=0), "utilization")])
def test_serving_panel_shows_errors_in_place(change, msg):
    html = evaluate_panel(lambda **v: serving_compute("llama-3.1-8b", **v), PANEL | change)
    assert "vramlib-error" in html and msg in html and "Traceback" not in html


def test_serving_panel_update_compiles_nothing():
    # the update time (< 50 ms) is measured by tools/bench.py; here the work after one update is counted
    f = lambda **changes: evaluate_panel(lambda **v: serving_compute("llama-3.1-8b", **v), PANEL | changes)  # noqa
    assert_warm_updates_compile_nothing(f, misses_allowed=10**6, gpu_memory_utilization=0.8, n_kv_heads=4)


def test_serving_panel_builds():
    pytest.importorskip("ipywidgets")
    from vramlib.present.widgets.serving import serving_panel
    box = serving_panel("llama-3.1-8b")
    assert "blocks" in box.children[-1].value


def test_serving_config_is_the_keywords():
    knobs = dict(gpu_memory_utilization=0.95, tp=2, block_size=32, kv_dtype="fp8", max_model_len=8192)
    by_keywords = vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", **knobs)
    config = vl.ServingConfig(**knobs)
    assert vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", config) == by_keywords
    # keywords on top of a config replace its fields
    assert vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", config.with_(tp=4)) == \
        vl.serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", config, tp=4)
    with pytest.raises(vl.UnknownNameError, match="did you mean 'block_size'"):
        vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", block_sise=32)
    with pytest.raises(vl.UnknownNameError, match="ServingConfig.*did you mean 'max_num_seqs'"):
        vl.ServingConfig(max_num_seq=8)
    with pytest.raises(vl.InvalidValueError, match="config"):
        vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", {"tp": 2})
    with pytest.raises(vl.VramlibError, match="block_size"):
        vl.ServingConfig(block_size=12)


def test_efficiency_is_the_keywords():
    speed = dict(mfu=0.4, mbu=0.8, tp_overhead=0.1)
    r = vl.roofline("llama-2-70b", "a100-80gb", batch=16, tp=4, **speed)
    assert vl.roofline("llama-2-70b", "a100-80gb", batch=16, tp=4, efficiency=vl.Efficiency(**speed)) == r
    assert S.crossover_batch("llama-2-70b", "a100-80gb", tp=4, efficiency=vl.Efficiency(**speed)) == r.crossover_batch
    with pytest.raises(vl.UnknownNameError, match="did you mean 'context'"):
        vl.roofline("llama-2-7b", "a100-80gb", contxt=512)
    with pytest.raises(vl.InvalidValueError, match="mbu"):
        vl.Efficiency(mbu=1.5)


def test_graph_headroom_problem_is_a_sentence_not_a_traceback():
    """vLLM 0.10-0.20 capture CUDA graphs in the 1 - utilization headroom; when they do not fit the verdict says so
    (the headroom is an exact fraction: printing it once raised TypeError in Python 3.11)."""
    import vramlib as vl
    from vramlib.core.units import fmt_bytes
    from fractions import Fraction

    c = vl.serving_kv_capacity("llama-3.1-8b", "t4", tp=8, weights="awq-4bit-g128", cuda_graph_accounting="headroom")
    assert not c.starts and "CUDA graph capture needs" in c.verdict
    assert fmt_bytes(Fraction(10**9, 3), 2) == "0.33 GB (0.31 GiB)"


@pytest.mark.parametrize("model", ["mistral-7b", "gemma-2-9b", "olmo-2-7b", "deepseek-v3", "bamba-9b"])
def test_layers_vllm_allocates_by_group_are_refused_in_one_line(model):
    """MLA, Mamba and layers beyond one uniform kind: refused by the serving budget; the roofline still reads one
    uniform full-attention layer, so it refuses the sliding-window models too (their budget: test_serving_hybrid)."""
    calls = [lambda: vl.roofline(model, "h200")]
    if model not in ("mistral-7b", "gemma-2-9b"):
        calls.append(lambda: vl.serving_kv_capacity(model, "h200"))
    for call in calls:
        with pytest.raises(vl.InvalidValueError) as e:
            call()
        assert "uniform full-attention layers" in str(e.value) and "\n" not in str(e.value)
