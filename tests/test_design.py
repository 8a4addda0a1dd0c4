"""Design levers (chapter 13): the solved layer count, the variants, and what each allows on a GPU."""
from fractions import Fraction

import matplotlib
import pytest
import sympy as sp

matplotlib.use("Agg")

import vramlib as vl  # noqa: E402
from vramlib import design as D, formulas as F, symbols as S  # noqa: E402
from vramlib.present.widgets import evaluate_panel  # noqa: E402
from vramlib.present.widgets.design import design_compute, design_spec  # noqa: E402
from costs import counting, warm_cost  # noqa: E402

BASE = D.exact("source-13b")
H100 = "h100-sxm-80gb"


def test_exact_drops_the_nominal_size():
    assert vl.get_model("source-13b").weight_params == 13 * 10**9
    assert BASE.nominal_params is None and BASE.weight_params == BASE.n_params == 13_015_864_320


def test_layers_expression_inverts_the_parameter_count():
    expr = D.LAYERS_AT_EQUAL_PARAMS
    assert S.L not in expr.free_symbols
    assert sp.simplify(F.N_PARAMS_UNIFORM.subs(S.L, expr) - S.N) == 0


@pytest.mark.parametrize("name", ["source-13b", "llama-2-7b", "qwen2.5-14b", "mixtral-8x7b", "gemma-2-9b"])
def test_layers_for_own_count_is_own_layers(name):
    m = vl.get_model(name)
    assert D.layers_for(m, m.n_params) == Fraction(m.n_layers)


@pytest.mark.parametrize("hidden", [3072, 4096, 6144, 8192])
def test_equal_params_shape_is_within_half_a_layer(hidden):
    s = D.equal_params_shape(BASE, hidden=hidden)
    one_layer = int(F.evaluate(F.LAYER_PARAMS, **s.symbols()))
    assert abs(s.n_params - BASE.n_params) <= one_layer / 2
    assert s.head_dim == BASE.head_dim and s.n_heads == hidden // 128 and s.gqa_group == BASE.gqa_group
    assert s.ffn % 256 == 0


def test_equal_params_keeps_kv_heads_when_asked():
    g = D.gqa_shape(BASE, 8)
    s = D.equal_params_shape(g, hidden=3072, n_kv_heads=8)
    assert (s.n_heads, s.n_kv_heads) == (24, 8)
    with pytest.raises(vl.InvalidValueError, match="GQA group"):
        D.equal_params_shape(g, hidden=3072)                     # 24 heads in groups of 5
    with pytest.raises(vl.InvalidValueError, match="n_kv_heads"):
        D.equal_params_shape(BASE, hidden=3072, n_kv_heads=7)
    with pytest.raises(vl.InvalidValueError, match="hidden"):
        D.equal_params_shape(BASE, hidden=5000)                  # not a multiple of the head dimension
    with pytest.raises(vl.InvalidValueError, match="hidden"):
        D.equal_params_shape(BASE, hidden=65536)                 # the embeddings alone exceed 13B


def test_ffn_ratio_shapes():
    s2, s4 = D.ffn_ratio_shapes(BASE, [2, 4])
    assert (s2.ffn, s4.ffn) == (10240, 20480)
    assert s4.n_layers < BASE.n_layers < s2.n_layers
    with pytest.raises(vl.InvalidValueError, match="ffn_ratio"):
        D.equal_params_shape(BASE, ffn_ratio=-1)


def test_gqa_shape_divides_the_kv_cache():
    for kv in (1, 2, 4, 8, 20, 40):
        g = D.gqa_shape(BASE, kv)
        assert vl.kv_bytes_per_token(BASE, "bf16") == (40 // kv) * vl.kv_bytes_per_token(g, "bf16")
    with pytest.raises(vl.InvalidValueError, match="n_kv_heads"):
        D.gqa_shape(BASE, 7)


def test_moe_shape_keeps_active_params_and_multiplies_memory():
    dense = D.moe_shape(BASE, 0)
    assert dense.n_params == BASE.n_params and not dense.n_experts
    m8 = D.moe_shape(BASE, 8, 2)
    assert m8.ffn == BASE.ffn // 2
    assert abs(m8.n_active_params - BASE.n_params) / BASE.n_params < 0.001   # router adds a little
    mlp = int(F.evaluate(F.MLP_PARAMS, h=BASE.hidden, f=m8.ffn, g=1))
    assert m8.n_params - m8.n_active_params == BASE.n_layers * 6 * mlp       # 8 - 2 experts per layer
    assert vl.kv_bytes_per_token(m8) == vl.kv_bytes_per_token(BASE)
    with pytest.raises(vl.InvalidValueError, match="experts_per_token"):
        D.moe_shape(BASE, 4, 8)


def test_evaluate_design_agrees_with_the_library():
    g = D.gqa_shape(BASE, 8)
    d = D.evaluate_design(g, H100, 131072)
    assert d.max_context == vl.max_tokens(g, H100, "bf16", "bf16", 1, "0.5GB", attention="sdpa", prefill_chunk=2048)
    assert d.max_sequences == vl.max_batch(g, H100, 131072, "bf16", "bf16", "0.5GB", attention=None)
    assert d.inference.total == vl.inference_memory(g, "bf16", "bf16", 131072, prefill_chunk=2048).total
    tr = vl.training_memory(g, seq=4096)
    assert d.model_states + d.activations + vl.parse_memory("0.5GB") == tr.total
    assert d.gpus_to_train == vl.min_gpus(d.model_states, H100, d.activations + vl.parse_memory("0.5GB"))
    cap = vl.get_gpu(H100).memory_bytes
    assert d.training_per_gpu <= cap
    # the micro-batch is the largest that fits on n_gpus
    b = d.max_micro_batch
    act = vl.activation_bytes(g, seq=4096, batch=b + 1, scope="model")
    assert vl.min_gpus(d.model_states, H100, act + vl.parse_memory("0.5GB")) not in range(1, 9)


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "rtx-4090", "t4"])
@pytest.mark.parametrize("weights", ["bf16", "q4_k_m", "gptq-4bit-g128"])
def test_closed_form_max_context_equals_bisection(gpu, weights):
    for spec in (BASE, D.gqa_shape(BASE, 8), D.moe_shape(BASE, 4), vl.get_model("llama-3.1-8b")):
        got = D._max_context(spec, vl.get_gpu(gpu).memory_bytes, weights, "bf16", 500_000_000, 2048)
        assert got == vl.max_tokens(spec, gpu, weights, "bf16", 1, 500_000_000, attention="sdpa", prefill_chunk=2048)


def test_design_levers_rows_and_plot():
    ds = D.design_levers(BASE, H100, 131072, kv_heads=(8, 40), hiddens=(4096, 8192), ffn_ratios=(4,), experts=(0, 8))
    assert [d.lever for d in ds] == ["base", "GQA", "GQA", "width", "width", "FFN ratio", "MoE", "MoE"]
    row = ds[0].row()
    assert row["fits"] == "no" and row["max context"] == ds[0].max_context
    fig = D.plot_levers(ds)
    assert len(fig.axes) == 4
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_helpers():
    assert D.ratio(819200, 163840) == 5.0
    assert D.fraction_saved(100, 25) == 0.75
    assert D.billions(13_015_864_320) == pytest.approx(13.016, abs=1e-3)
    with pytest.raises(vl.InvalidValueError):
        D.ratio(1, 0)


# --- the levers of 2025 models --------------------------------------------------------------------------------
QWEN3 = vl.get_model("qwen3-8b")
QMOE = vl.get_model("qwen3-30b-a3b")


def _full_layers(m):
    return sum(n for n, mixer, _, _ in m.layer_kinds() if mixer == "full")


@pytest.mark.parametrize("ratio, full", [(1, 18), (3, 9), (5, 6), (35, 1)])
def test_window_shape_pattern_and_growth(ratio, full):
    s = D.window_shape(QWEN3, 1024, ratio)
    assert _full_layers(s) == full and s.n_params == QWEN3.n_params
    assert s.layer_types[ratio] == "full" and s.layer_types[0] == "sliding"      # Gemma-3: global after r local
    # past the window only the full layers grow, each as one layer of the uniform model
    per_layer_token = vl.kv_bytes_per_token(QWEN3, "bf16") // QWEN3.n_layers
    grow = vl.kv_cache_bytes(s, 20000, dtype="bf16") - vl.kv_cache_bytes(s, 10000, dtype="bf16")
    assert grow == 10000 * full * per_layer_token
    assert vl.kv_cache_bytes(s, 512, dtype="bf16") == vl.kv_cache_bytes(QWEN3, 512, dtype="bf16")


def test_all_local_stops_growing_and_says_so():
    s = D.window_shape(QWEN3, 1024, D.ALL_LOCAL)
    assert _full_layers(s) == 0
    assert vl.kv_cache_bytes(s, 10**6, dtype="bf16") == vl.kv_cache_bytes(s, 4096, dtype="bf16")
    d = D.evaluate_design(s, H100, 131072)
    assert d.unbounded and d.row()["max context"] == "memory does not limit it"
    assert not D.evaluate_design(D.window_shape(QWEN3, 1024, 5), H100, 131072).unbounded


@pytest.mark.parametrize("call, field", [
    (lambda: D.window_shape(QWEN3, 1, 5), "window"),
    (lambda: D.window_shape(QWEN3, 1024, 36), "local_per_global"),
    (lambda: D.window_shape(QWEN3, 1024, "most"), "local_per_global"),
    (lambda: D.mla_shape(vl.get_model("deepseek-v3")), "base"),
    (lambda: D.granular_moe_shape(QMOE, 100), "n_experts"),
    (lambda: D.granular_moe_shape(QWEN3, 64), "base"),
    (lambda: D.shared_expert_shape(QMOE, 8), "n_shared"),
])
def test_lever_errors_name_the_field(call, field):
    with pytest.raises(vl.InvalidValueError, match=field):
        call()


def test_mla_shape_counts_its_projections():
    s = D.mla_shape(QWEN3, 512, 64)
    h, nh, d, c, r = QWEN3.hidden, QWEN3.n_heads, QWEN3.head_dim, 512, 64
    # DeepseekV3Attention without q_lora: q_proj h -> nh (d + r); kv_a_proj_with_mqa h -> c + r; kv_a_layernorm c;
    # kv_b_proj c -> nh (d + d_v); o_proj nh d_v -> h
    mla = h * nh * (d + r) + h * (c + r) + c + c * nh * (d + d) + nh * d * h
    gqa = h * nh * d + 2 * h * QWEN3.n_kv_heads * d + nh * d * h + 2 * d      # q, k, v, o and the q/k norms
    assert s.n_params - QWEN3.n_params == QWEN3.n_layers * (mla - gqa)
    assert vl.kv_bytes_per_token(s, "bf16") == QWEN3.n_layers * (c + r) * 2
    d_ = D.evaluate_design(s, H100, 131072)
    assert d_.activations is None and d_.gpus_to_train is None and d_.training_per_gpu is None
    assert "multi-head latent attention" in d_.training_note
    assert d_.row()["activations GB / seq"] == "not modelled"


@pytest.mark.parametrize("experts", [16, 32, 64, 256, 512])
def test_granularity_keeps_expert_parameters(experts):
    s = D.granular_moe_shape(QMOE, experts)
    assert s.n_experts * s.ffn == QMOE.n_experts * QMOE.ffn
    assert s.experts_per_token * s.ffn == QMOE.experts_per_token * QMOE.ffn
    router = QMOE.n_layers * QMOE.hidden          # one router row per expert and layer
    assert s.n_params - QMOE.n_params == (experts - QMOE.n_experts) * router
    assert s.n_active_params - QMOE.n_active_params == (experts - QMOE.n_experts) * router


def test_shared_experts_keep_the_active_count_and_sit_on_every_gpu():
    s = D.shared_expert_shape(QMOE, 2)
    assert (s.n_experts, s.experts_per_token, s.n_shared_experts) == (128, 6, 2)
    assert s.n_active_params == QMOE.n_active_params
    expert = 3 * QMOE.hidden * QMOE.ffn
    assert s.n_params - QMOE.n_params == QMOE.n_layers * 2 * expert
    base, two = (D.evaluate_design(m, H100, 32768, ep=8) for m in (QMOE, s))
    assert two.ep_rank_params - base.ep_rank_params == QMOE.n_layers * 2 * expert     # replicated, not split
    assert base.ep_rank_params == sum(vl.parallel.stage_params(QMOE, ep=8)[0])
    assert D.shared_expert_shape(QMOE, 0) == D.exact(QMOE)


def test_attention_and_expert_levers_rows_and_plot():
    a = D.attention_levers(QWEN3, H100, 131072, windows=[512], local_ratios=[1, "all"], mla_ranks=[512])
    assert [d.lever for d in a] == ["base", "window", "local:global", "local:global", "MLA"]
    assert all(d.kv_at_context < a[0].kv_at_context for d in a[1:])
    e = D.expert_levers(QMOE, H100, 32768, experts=[32], shared=[1], ep=8)
    assert [d.lever for d in e] == ["base", "granularity", "shared experts"]
    assert "params per GPU @ EP8 (B)" in e[0].row() and "params per GPU @ EP8 (B)" not in a[0].row()
    assert e[1].activations < e[0].activations and e[2].activations is None
    with pytest.raises(vl.InvalidValueError, match="base"):
        D.expert_levers(QWEN3, H100, 4096, experts=[8])
    fig = D.plot_architecture_levers(a, e)
    assert len(fig.axes) == 2
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_real_2025_models_evaluate_with_their_gaps_named():
    for name in ("gemma-3-27b", "gpt-oss-20b", "deepseek-v3"):
        d = D.evaluate_design(name, H100, 131072)
        assert d.training_note and d.model_states is None
        assert d.inference.total == vl.inference_memory(name, "bf16", "bf16", 131072, prefill_chunk=2048).total


# --- the panel ----------------------------------------------------------------------------------------------------
VALUES = dict(n_layers=40, hidden=5120, n_heads=40, n_kv_heads=8, ffn=13824, n_experts=0, experts_per_token=2,
              equal_params=False, weights="bf16", gpu=H100, context=131072, train_seq=4096, n_gpus=8)


def test_panel_compute():
    bd, cap, verdict = design_compute(BASE, **VALUES)
    assert cap == vl.get_gpu(H100).memory_bytes and bd.fits(cap)
    assert "379,227" in verdict and "160 KiB" in verdict and "2 at once" in verdict


def test_panel_equal_params_and_moe():
    s = design_spec(BASE, 40, 8192, 64, 64, 22016, equal_params=True)
    assert s.n_layers == D.equal_params_shape(BASE, hidden=8192).n_layers
    s = design_spec(BASE, 40, 5120, 40, 8, 6912, n_experts=8, experts_per_token=2)
    assert s.n_experts == 8 and s.experts_per_token == 2


@pytest.mark.parametrize("bad, field", [(dict(n_kv_heads=7), "n_kv_heads"), (dict(n_heads=33), "n_heads"),
                                        (dict(experts_per_token=9, n_experts=8), "experts_per_token"),
                                        (dict(weights="fp17"), "weights"), (dict(gpu="h900"), "gpu"),
                                        (dict(context=0), "context")])
def test_panel_errors_in_place(bad, field):
    html = evaluate_panel(lambda **v: design_compute(BASE, **v), {**VALUES, **bad})
    assert "vramlib-error" in html and field in html and "Traceback" not in html


def test_panel_update_compiles_nothing():
    # the update time (< 50 ms) is measured by tools/bench.py; here the work after one update is counted
    costs = {}
    for name, extra in (("base", {}), ("gguf", dict(weights="q4_k_m")), ("moe", dict(n_experts=8, ffn=6912)),
                        ("equal", dict(equal_params=True, hidden=8192, n_heads=64, n_kv_heads=8))):
        cost = costs[name] = warm_cost(evaluate_panel, lambda **v: design_compute(BASE, **v), {**VALUES, **extra})
        assert cost.compiles == 0 and cost.weights_misses == 0 and cost.evaluations > 0, (name, cost)
    # a GGUF mix resolves a type per tensor: cached, a warm update costs what a bf16 one does
    assert costs["gguf"].evaluations == costs["base"].evaluations, costs
    with counting() as moved:           # other numbers (the solved layer count is reused, not solved again)
        evaluate_panel(lambda **v: design_compute(BASE, **v), {**VALUES, "equal_params": True, "hidden": 6144,
                                                               "n_heads": 48, "n_kv_heads": 8, "context": 65536})
    assert moved.compiles == 0, moved
