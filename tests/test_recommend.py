"""The GPU recommender (question 9), the multi-GPU sequence solver (question 4), the source's activation
coefficient read back from the measured accountings (questions 3, 4, 9), and the panels of chapters 3, 4 and 9."""
import math
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

import vramlib as vl
from vramlib import recommend as R
from vramlib import rules_of_thumb as RT
from vramlib import training_feasibility as TF
from vramlib.core.errors import InvalidValueError, UnknownNameError, VramlibError
from costs import counting

GB = 10**9


# --- recommend_gpus -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qlora_7b():
    return R.recommend_gpus("llama-2-7b", "qlora", 2048, recompute="full")


@pytest.fixture(scope="module")
def full_13b():
    return R.recommend_gpus("llama-2-13b", "full", 2048, recompute="full")


def test_rows_fit_and_are_sorted_cheapest_first(qlora_7b, full_13b):
    for recs in (qlora_7b, full_13b):
        assert recs and all(r.fits for r in recs)
        costs = [r.cost_per_hour_usd for r in recs]
        priced = [c for c in costs if c is not None]
        assert priced == sorted(priced)
        # unpriced cards come after every priced one
        first_none = next((i for i, c in enumerate(costs) if c is None), len(costs))
        assert all(c is None for c in costs[first_none:])
        for r in recs:
            assert r.memory.total <= r.gpu.memory_bytes * 0.9
            assert r.share == pytest.approx(r.per_gpu_bytes / r.gpu.memory_bytes)


def test_cost_is_count_times_price(full_13b):
    for r in full_13b:
        if r.gpu.price_per_hour_usd is not None:
            assert r.cost_per_hour_usd == pytest.approx(r.count * r.gpu.price_per_hour_usd, rel=1e-12)
    expr = R.COST_PER_HOUR
    assert sp.simplify(expr - sp.Symbol("n", integer=True, positive=True) * sp.Symbol("p_h", nonnegative=True)) == 0


def test_one_gpu_row_is_training_memory(qlora_7b):
    one = next(r for r in qlora_7b if r.count == 1)
    tm = vl.training_memory("llama-2-7b", method="qlora", seq=2048, recompute="full")
    assert one.per_gpu_bytes == tm.total and one.plan.zero == 0 and one.plan.dp == 1


def test_multi_gpu_rows_use_zero3_and_shard_the_states(full_13b):
    multi = [r for r in full_13b if r.count > 1]
    assert multi and all(r.plan.zero == 3 and r.plan.dp == r.count for r in multi)
    m = vl.get_model("llama-2-13b")
    for r in multi:
        bd = r.memory.peak
        # 16 bytes per parameter (mixed-fp32-master) sharded over the ranks
        states = bd["weights"] + bd["gradients"] + bd["master weights (fp32)"] + bd["optimizer states"]
        assert states == pytest.approx(16 * m.weight_params / r.count, rel=1e-3)


def test_fewest_only_keeps_the_smallest_count_that_fits(full_13b):
    allrows = R.recommend_gpus("llama-2-13b", "full", 2048, recompute="full", fewest_only=False, include_unfit=True)
    by_card: dict[str, list] = {}
    for r in allrows:
        by_card.setdefault(r.gpu.key, []).append(r)
    for r in full_13b:
        counts_fit = sorted(x.count for x in by_card[r.gpu.key] if x.fits)
        assert r.count == counts_fit[0]
        smaller = [x for x in by_card[r.gpu.key] if x.count < r.count]
        assert all(not x.fits for x in smaller)
    # unfit rows are sorted after every fitting row
    flags = [r.fits for r in allrows]
    assert flags == sorted(flags, reverse=True)


def test_include_unfit_gives_every_card_one_row():
    recs = R.recommend_gpus("llama-2-70b", "full", 2048, recompute="full", include_unfit=True)
    assert sorted(r.gpu.key for r in recs) == sorted(g.key for g in vl.list_gpus())
    miss = [r for r in recs if not r.fits]
    assert miss and all(r.count == 8 for r in miss)     # the closest miss: the largest count tried


def test_more_cards_never_need_more_memory_per_gpu():
    recs = R.recommend_gpus("llama-2-13b", "full", 2048, counts=(2, 4, 8), gpus=["a100-80gb"], fewest_only=False,
                            include_unfit=True)
    totals = [r.per_gpu_bytes for r in sorted(recs, key=lambda r: r.count)]
    assert totals == sorted(totals, reverse=True)


def test_feature_notes_and_require_features():
    recs = R.recommend_gpus("llama-2-7b", "qlora", 2048, recompute="full", attention="flash")
    notes = {r.gpu.key: r.notes for r in recs}
    assert any("no bf16" in n for n in notes["v100-32gb"]) and any("FlashAttention-2" in n for n in notes["t4"])
    assert notes["a100-80gb"] == ()
    strict = R.recommend_gpus("llama-2-7b", "qlora", 2048, recompute="full", attention="flash", require_features=True)
    keys = {r.gpu.key for r in strict}
    assert not keys & {"v100-16gb", "v100-32gb", "t4"} and "a100-80gb" in keys
    # fp16 asked: no bf16 note
    fp16 = R.recommend_gpus("llama-2-7b", "qlora", 2048, recompute="full", precision="fp16")
    assert all("no bf16" not in " ".join(r.notes) for r in fp16)


def test_headroom_changes_the_answer():
    tight = R.recommend_gpus("llama-2-70b", "qlora", 2048, recompute="full", headroom=0.0, gpus=["l40s"])
    loose = R.recommend_gpus("llama-2-70b", "qlora", 2048, recompute="full", headroom=0.2, gpus=["l40s"])
    assert tight[0].count == 1 and loose[0].count == 2


def test_offload_on_one_gpu_uses_the_zero_stage():
    recs = R.recommend_gpus("llama-2-7b", "full", 2048, counts=(1,), recompute="full", offload_optimizer="cpu",
                            gpus=["rtx-4090"], zero=2)
    assert recs and recs[0].plan.zero == 2 and recs[0].memory.host[0].total > 50 * GB


def test_table_shows_the_price_date(qlora_7b):
    table = R.recommendation_table(qlora_7b, top=5)
    assert len(table.rows) == 5 and "price date" in table.columns
    assert "2025-06" in table.caption and "2025-06" in table._repr_html_()
    assert math.isnan(R.recommendation_table(
        R.recommend_gpus("llama-2-7b", "qlora", gpus=["rtx-a5000"], recompute="full")).rows[0]["$/h"])


@pytest.mark.parametrize("kwargs,field", [
    (dict(method="dpo"), "method"), (dict(headroom=1.0), "headroom"), (dict(zero=0), "zero"),
    (dict(counts=(0,)), "counts"), (dict(counts=()), "counts"), (dict(tp=2), "tp"), (dict(seq=0), "seq"),
    (dict(precision="int4"), "precision"), (dict(attention="paged"), "attention"), (dict(gpus=["a100"]), "gpu"),
    (dict(optimizer="lion"), "optimizer"),
])
def test_bad_input_names_the_field(kwargs, field):
    args = dict(model="llama-2-7b", method="qlora") | kwargs
    with pytest.raises(VramlibError, match=field):
        R.recommend_gpus(**args)


def test_unknown_gpu_is_an_unknown_name():
    with pytest.raises(UnknownNameError):
        R.recommend_gpus("llama-2-7b", gpus=["a99"])


# --- max_seq_for_plan --------------------------------------------------------------------------------------------
def test_max_seq_for_plan_on_one_gpu_equals_max_seq_for_training():
    for kw in (dict(method="qlora", recompute="full"), dict(method="lora"), dict(method="full", recompute="full")):
        one = vl.max_seq_for_training("llama-2-7b", "a100-80gb", **kw)
        plan = R.max_seq_for_plan("llama-2-7b", "a100-80gb", buckets="none", **kw)
        assert one == plan


@settings(max_examples=10, deadline=None)
@given(dp=st.sampled_from([2, 4, 8]), att=st.sampled_from(["eager", "sdpa"]), rc=st.sampled_from(["none", "full"]),
       conv=st.sampled_from(["source-12", "mixed-fp32-master"]))
def test_max_seq_for_plan_is_the_boundary(dp, att, rc, conv):
    kw = dict(dp=dp, zero=3, precision="fp16", attention=att, recompute=rc, convention=conv)
    n = R.max_seq_for_plan("source-7b", "v100-32gb", **kw)
    card = vl.get_gpu("v100-32gb")
    if n:
        assert vl.plan_memory("source-7b", seq=n, **kw).fits(card)
    assert not vl.plan_memory("source-7b", seq=n + 1, **kw).fits(card)


def test_max_seq_for_plan_inputs():
    assert R.max_seq_for_plan("llama-2-70b", "rtx-4090") == 0            # the states alone do not fit
    assert R.max_seq_for_plan("source-7b", "40GB", dp=4, zero=3, recompute="full") > \
        R.max_seq_for_plan("source-7b", "32GB", dp=4, zero=3, recompute="full")
    plan = vl.ParallelPlan(dp=4, zero=3, recompute="full")
    assert R.max_seq_for_plan("source-7b", "v100-32gb", plan) == R.max_seq_for_plan("source-7b", "v100-32gb", dp=4,
                                                                                     zero=3, recompute="full")
    with pytest.raises(InvalidValueError, match="seq"):
        R.max_seq_for_plan("source-7b", "v100-32gb", seq=10)
    with pytest.raises(InvalidValueError, match="headroom"):
        R.max_seq_for_plan("source-7b", "v100-32gb", headroom=-0.1)


# --- the source's coefficient -----------------------------------------------------------------------------------
def test_implied_coefficient_is_the_solved_rule():
    from vramlib.core.symbols import L, b, h, s

    c, A = RT.c_act, RT.A_saved
    assert sp.simplify(RT.IMPLIED_COEFFICIENT - A / (b * s * h * L)) == 0
    assert sp.simplify(TF.SOURCE_ACTIVATIONS.subs(c, RT.IMPLIED_COEFFICIENT) - A) == 0


def test_implied_coefficient_values():
    m = vl.get_model("source-7b")
    # Korthikanti et al. Table 2: 34 s b h per layer (selective), 34 + 5 a s / h without recompute, 2 full
    assert RT.implied_coefficient(m, 2048, style="megatron", recompute="selective", scope="layer") == 34
    assert RT.implied_coefficient(m, 2048, style="megatron", recompute="none", scope="layer") == \
        34 + Fraction(5 * 32 * 2048, 4096)
    assert RT.implied_coefficient(m, 2048, style="megatron", recompute="full", scope="layer") == 2
    assert RT.implied_coefficient(m, 2048, recompute="full", scope="layer") == 2          # hf: the layer input
    # tensor + sequence parallelism: one rank's share
    assert RT.implied_coefficient(m, 2048, style="megatron", recompute="selective", scope="layer", tp=8,
                                  sequence_parallel=True) == Fraction(34, 8)
    # round trip: the source's rule with the implied c gives the same bytes
    for kw in (dict(), dict(attention="eager"), dict(recompute="full")):
        c = RT.implied_coefficient(m, 4096, **kw)
        assert TF.source_activation_bytes(m, 4096, coefficient=c) == vl.activation_bytes(m, 4096, scope="model", **kw)


def test_implied_coefficient_bad_input():
    with pytest.raises(UnknownNameError, match="scope"):
        RT.implied_coefficient("source-7b", scope="stage")
    with pytest.raises(InvalidValueError, match="seq"):
        RT.implied_coefficient("source-7b", seq=0)


# --- widgets ------------------------------------------------------------------------------------------------------
def test_finetune_panel_compute_and_bars():
    from vramlib.present.widgets import finetune as W

    bd, cap, verdict = W.finetune_compute("source-30b", "a100-80gb", dp=8, zero=3, convention="source-12")
    pm = vl.plan_memory("source-30b", seq=2048, dp=8, zero=3, convention="source-12")
    assert bd.total == pm.total and cap == vl.get_gpu("a100-80gb").memory_bytes and verdict.startswith("Fits")
    bars, _, _ = W.finetune_bars("source-30b", "a100-80gb", compare_zero=True, dp=8, zero=3, convention="source-12")
    assert [label.split(":")[0] for label, _ in bars] == ["ZeRO-0", "ZeRO-1", "ZeRO-2", "ZeRO-3 (selected)"]
    totals = [b.total for _, b in bars]
    assert totals == sorted(totals, reverse=True)
    bars, _, _ = W.finetune_bars("llama-2-70b", "a100-80gb", tp=8, pp=4, dp=2, zero=1, n_micro=8)
    assert len(bars) == 4 and bars[0][0].startswith("stage 0")
    html = W.render_bars(W.finetune_bars("source-30b", "a100-80gb", compare_zero=True, dp=8, zero=3))
    assert html.count("<svg") == 4 and "vramlib-breakdown" in html
    _, _, v = W.finetune_compute("source-7b", "v100-32gb", dp=4, zero=3, attention="flash")
    assert "no bf16" in v and "FlashAttention-2" in v


def test_finetune_panel_errors_in_place():
    from vramlib.present.widgets import finetune as W

    for bad in (dict(tp=3), dict(method="lora", tp=2), dict(gpu="a99"), dict(precision="int8"), dict(seq=0)):
        html = W.evaluate_bars_panel(lambda **v: W.finetune_bars("source-7b", **v), {"gpu": "v100-32gb", **bad})
        assert "vramlib-error" in html and "Traceback" not in html
    html = W.evaluate_bars_panel(lambda **v: W.finetune_bars("source-7b", **v),
                                 dict(gpu="v100-32gb", dp=4, zero=3, compare_zero=True, offload_optimizer="cpu"))
    assert html.count("<svg") == 3 and "ZeRO-0: offload_optimizer" in html


def test_finetune_panel_widget_and_static_view():
    pytest.importorskip("ipywidgets")
    from vramlib.present.widgets import finetune as W

    box = W.finetune_panel("source-7b", gpu="v100-32gb", dp=4, zero=3, precision="fp16")
    view = box._repr_mimebundle_()["text/html"]
    assert 'data-calc="finetune"' in view and "precision <b>fp16</b>" in view  # the in-browser calculator
    labels = {c.description for row in box.children[:-1] for c in row.children}
    assert {"heads", "KV heads", "precision", "ZeRO stage", "TP", "PP (stages)", "LoRA rank", "optimizer"} <= labels
    _, _, v = W.finetune_compute("source-30b", "a100-80gb", compare_zero=True, dp=8, zero=3, convention="source-12")
    assert "Fullest rank by ZeRO stage: ZeRO-0 " in v and "ZeRO-3 (selected)" in v


def test_recommend_panel_compute_view_and_errors():
    from vramlib.present.widgets import recommend as W

    bd, cap, verdict = W.recommend_compute("llama-2-7b", method="qlora")
    first = R.recommend_gpus("llama-2-7b", "qlora", 2048, recompute="full")[0]
    assert bd.total == first.per_gpu_bytes and cap == first.capacity and verdict.startswith("Cheapest")
    bd, cap, verdict = W.recommend_compute("llama-2-70b", method="full", max_gpus=2)
    assert cap is None and verdict.startswith("Nothing")
    html = W.recommend_view("llama-2-7b", method="full")
    assert "vramlib-table" in html and "price date" in html
    for bad in (dict(n_heads=31), dict(max_gpus=3), dict(headroom_pct=100), dict(method="dpo")):
        html = W.recommend_view("llama-2-7b", **bad)
        assert "vramlib-error" in html and "Traceback" not in html


def test_recommend_panel_widget_and_static_view():
    pytest.importorskip("ipywidgets")
    from vramlib.present.widgets import recommend as W

    box = W.recommend_panel("llama-2-7b", method="qlora")
    view = box._repr_mimebundle_()["text/html"]
    assert 'data-calc="recommend"' in view and "Cheapest" in view  # the in-browser calculator
    labels = {c.description for row in box.children[:-1] for c in row.children}
    assert {"heads", "KV heads", "precision", "method", "LoRA rank", "sequence", "up to GPUs"} <= labels


def test_panel_updates_compile_nothing():
    # the update times (< 50 ms) are measured by tools/bench.py; here the work after one update is counted
    from vramlib.present.widgets import finetune as F
    from vramlib.present.widgets import recommend as W

    vals = dict(gpu="a100-80gb", dp=8, zero=3, convention="source-12", compare_zero=True)
    F.evaluate_bars_panel(lambda **v: F.finetune_bars("source-30b", **v), vals)
    W.recommend_view("llama-2-13b", method="full")
    with counting() as bars:
        for i in range(5):
            F.evaluate_bars_panel(lambda **v: F.finetune_bars("source-30b", **v), vals | {"seq": 2048 + i})
    with counting() as rec:
        for i in range(5):
            W.recommend_view("llama-2-13b", method="full", seq=2048 + i)
    for cost in (bars, rec):                  # new sequence lengths: the same compiled formulas, the same weights
        assert cost.compiles == 0 and cost.weights_misses == 0 and cost.evaluations > 0, (bars, rec)
