"""Parallel-training panels: TP / PP / DP / ZeRO stage / recompute / micro-batches / offload (chapters 3, 4, 11, 12).

Compute functions follow the panel contract, ``(Breakdown, capacity_or_None, verdict)`` -- the fullest GPU --
and the ``*_stages_compute`` variants return a tuple of per-stage (per-rank) Breakdowns instead, which
:func:`render_stages` draws as one bar per pipeline stage. Bad inputs raise vramlib errors, shown in place.
:func:`plan_panel` and :func:`balance_panel` name their calculators (``plan_stages``, ``balance_stages``): the static
book runs them in the browser (``vramlib/web/js/parallel.js``, the balancer's dynamic programme included).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...memory.breakdown import Breakdown
from ...core.errors import VramlibError
from ...catalog.hardware import GPUS, get_gpu
from ...catalog.models import get_model
from ...plans.parallel import OFFLOAD, ParallelPlan, PlanMemory, plan_memory
from ...solve.planning import PlanSpace, balance_pipeline, balance_verdict, search_plans
from ...memory.training import CONVENTIONS, TRAINING_PRECISIONS
from ...core.units import bytes_text, gb, gib, percent
from ...core.portable import fmt_fixed, portable, shared
from ..viz import breakdown_svg
from .base import (
    Computed, bounded_int, evaluate_panel, model_with_heads, panel_plan, range_problem, render, with_static_view,
)

StagesComputed = tuple[tuple[Breakdown, ...], "int | None", str]
"""Per-stage panels: the Breakdown of every stage, the capacity, a verdict line."""


def _model(model, n_heads: int | None, n_kv_heads: int | None):
    m = get_model(model)
    m = model_with_heads(m, n_heads, n_kv_heads)
    return m


def _plan(tp, pp, dp, zero, recompute, micro_batch, n_micro, sequence_parallel, offload_optimizer, offload_params,
          virtual_stages=1, schedule="1f1b") -> ParallelPlan:
    return panel_plan(tp=tp, pp=pp, dp=dp, zero=zero, recompute=recompute, micro_batch=micro_batch,
                      n_micro=n_micro, sequence_parallel=sequence_parallel, offload_optimizer=offload_optimizer,
                      offload_params=offload_params, virtual_stages=virtual_stages, schedule=schedule)


def _verdict(pm: PlanMemory, cap: int) -> str:
    return plan_verdict(plan_view(pm), cap)


def plan_view(pm: PlanMemory) -> dict:
    """What ``plan_verdict`` reads of a PlanMemory (the browser's plan result has the same fields)."""
    return {"total": pm.total, "peak_stage": pm.peak_stage, "stage_totals": [bd.total for bd in pm.stages],
            "spread": float(pm.spread), "host_totals": [bd.total for bd in pm.host], "nvme": list(pm.nvme),
            "n_gpus": pm.plan.n_gpus, "global_batch": pm.plan.global_batch}


@portable
def plan_verdict(pm, cap):
    """The plan panels' verdict: fits with so much free on the fullest GPU or short by so much; the stages, host and
    NVMe memory per rank; GPUs and global batch."""
    free = cap - pm["total"]
    if free >= 0:
        head = ("Fits on every GPU: " + bytes_text(free, 1) + " free on the fullest (stage " + str(pm["peak_stage"]) +
                ").")
    else:
        head = ("Does not fit: the fullest GPU (stage " + str(pm["peak_stage"]) + ") is short by " +
                bytes_text(-free, 1) + ".")
    if len(pm["stage_totals"]) > 1:
        head += (" Stages: " + " / ".join([fmt_fixed(t / shared("GB"), 1, False) for t in pm["stage_totals"]]) +
                 " GB (spread " + percent(pm["spread"], 0) + ").")
    host = max(pm["host_totals"])
    if host:
        head += " Host memory per rank: " + bytes_text(host, 1) + "."
    if max(pm["nvme"]):
        head += " NVMe per rank: " + bytes_text(max(pm["nvme"]), 1) + "."
    return (head + " " + fmt_fixed(pm["n_gpus"], 0, True) + " GPUs, global batch " +
            fmt_fixed(pm["global_batch"], 0, True) + " sequences.")


def plan_memory_compute(model, gpu: str, tp: int = 1, pp: int = 1, dp: int = 1, zero: int = 0,
                        recompute: str = "none", micro_batch: int = 1, n_micro: int = 1, seq: int = 2048,
                        convention: str = "mixed-fp32-master", sequence_parallel: bool = False,
                        offload_optimizer: str = "none", offload_params: str = "none", method: str = "full",
                        n_heads: int | None = None, n_kv_heads: int | None = None, precision: str = "bf16",
                        virtual_stages: int = 1, schedule: str = "1f1b") -> PlanMemory:
    """The PlanMemory behind the panels (chapters 3, 4, 11, 12)."""
    m = _model(model, n_heads, n_kv_heads)
    plan = _plan(tp, pp, dp, zero, recompute, micro_batch, n_micro, sequence_parallel, offload_optimizer,
                 offload_params, virtual_stages, schedule)
    return plan_memory(m, plan, seq, method=method, convention=convention, precision=precision)


def plan_compute(model, gpu: str, **values) -> Computed:
    """The fullest GPU of a plan, the card, and a verdict listing every stage (chapters 3, 4, 12)."""
    card = get_gpu(gpu)
    pm = plan_memory_compute(model, gpu, **values)
    return pm.peak, card.memory_bytes, _verdict(pm, card.memory_bytes)


def plan_stages_compute(model, gpu: str, **values) -> StagesComputed:
    """Every pipeline stage's GPU Breakdown (per rank), the card and the verdict (chapters 11, 12)."""
    card = get_gpu(gpu)
    pm = plan_memory_compute(model, gpu, **values)
    return pm.stages, card.memory_bytes, _verdict(pm, card.memory_bytes)


def balance_stages_compute(model, gpu: str, pp: int = 4, tp: int = 1, dp: int = 1, zero: int = 0,
                           recompute: str = "none", micro_batch: int = 1, n_micro: int = 8, seq: int = 2048,
                           convention: str = "mixed-fp32-master", sequence_parallel: bool = False,
                           n_heads: int | None = None, n_kv_heads: int | None = None,
                           balanced: bool = True, precision: str = "bf16", schedule: str = "1f1b",
                           virtual_stages: int = 1) -> StagesComputed:
    """The balanced split (or the even split, ``balanced=False``) stage by stage, with both verdicts (chapter 11).
    ``schedule``: "1f1b" or "gpipe"; ``virtual_stages`` > 1 (interleaved 1F1B): the even split, since the balancer
    splits contiguous stages."""
    m = _model(model, n_heads, n_kv_heads)
    card = get_gpu(gpu)
    plan = _plan(tp, pp, dp, zero, recompute, micro_batch, n_micro, sequence_parallel, "none", "none",
                 virtual_stages, schedule)
    if plan.virtual_stages > 1:
        pm = plan_memory(m, plan, seq, convention=convention, precision=precision, activation_style="megatron")
        verdict = (f"Interleaved 1F1B, {plan.virtual_stages} model chunks per GPU (the balancer splits contiguous "
                   f"stages only): even split {list(pm.stage_layers)}, peak {gb(pm.total):.1f} GB, "
                   f"{balance_verdict([bd.total for bd in pm.stages], card.memory_bytes)}.")
        return pm.stages, card.memory_bytes, verdict
    res = balance_pipeline(m, plan, seq, gpu=card, convention=convention, precision=precision)
    stages = res.stages if balanced else res.even_stages
    verdict = (f"Balanced split {list(res.layers)}: peak {gb(res.peak):.1f} GB, {res.verdict}. "
               f"Even split {list(res.even_layers)}: peak {gb(res.even_peak):.1f} GB, {res.even_verdict}.")
    return stages, card.memory_bytes, verdict


def search_compute(model, gpu: str, n_gpus: int = 64, seq: int = 2048, global_batch: int = 512,
                   convention: str = "mixed-fp32-master", headroom: float = 0.1, mfu: float = 0.4) -> Computed:
    """The best plan the search finds for ``n_gpus`` cards: its fullest GPU and the top plans (chapter 12)."""
    card = get_gpu(gpu)
    space = PlanSpace(seq=seq, global_batch=global_batch, convention=convention, headroom=headroom, mfu=mfu, top=3)
    res = search_plans(model, card, n_gpus, space=space)
    if not res.plans:
        raise VramlibError(f"n_gpus: no plan of {n_gpus} x {card.key} fits {get_model(model).name} under "
                           f"{1 - headroom:.0%} ({res.n_candidates:,} tried); add GPUs or lower the batch")
    best = res.best
    bd = best.memory.peak
    verdict = (f"{res.n_fitting:,} of {res.n_candidates:,} plans fit; best: {best.plan.label()} at "
               f"{best.tokens_per_s:,.0f} tokens/s (MFU {best.mfu:.0%}, bubble {best.bubble:.0%}). Next: "
               + "; ".join(f"{r.plan.label()} {r.tokens_per_s:,.0f}" for r in res.plans[1:]))
    return bd, card.memory_bytes, verdict


def render_stages(result: StagesComputed | Exception) -> str:
    """One SVG bar per stage (the fullest one marked), the verdict, and the fullest stage's table."""
    if isinstance(result, Exception):
        return render(result)
    stages, cap, verdict = result
    if len(stages) == 1:
        return render((stages[0], cap, verdict))
    top = max(range(len(stages)), key=lambda i: stages[i].total)
    bars = "".join(f"<div><small>stage {i}{' (fullest)' if i == top else ''}: {gb(bd.total):,.2f} GB "
                   f"({gib(bd.total):,.2f} GiB)</small>{breakdown_svg(bd, cap)}</div>" for i, bd in enumerate(stages))
    return f"<p><b>{verdict}</b></p>{bars}{stages[top]._repr_html_()}"


def evaluate_stages_panel(compute: Callable[..., StagesComputed], values: Mapping[str, Any]) -> str:
    """Run ``compute(**values)`` and render the stages; VramlibError becomes an in-place message."""
    return evaluate_panel(compute, values, render_stages)


def stages_panel(compute: Callable[..., StagesComputed], controls: Mapping[str, Any],
                 fixed: Mapping[str, Any] | None = None):
    """An ipywidgets VBox whose output shows one bar per pipeline stage: ``compute(**fixed, **values)``.

    Give ``compute`` as the named function (``plan_stages_compute``) and its non-control arguments as ``fixed``
    (``{"model": m}``): the static book then runs the calculator of the same name (``vramlib/web/js/parallel.js``)."""
    import ipywidgets as w

    fixed = dict(fixed or {})
    out = w.HTML()

    def update(_=None) -> None:
        problem = range_problem(controls)
        out.value = render(problem) if problem else evaluate_stages_panel(
            compute, {**fixed, **{k: c.value for k, c in controls.items()}})

    for c in controls.values():
        c.observe(update, names="value")
    update()
    box = w.VBox([w.HBox(list(controls.values())[i:i + 3]) for i in range(0, len(controls), 3)] + [out])
    return with_static_view(box, controls, out.value, compute=compute, fixed=fixed)


def plan_controls(model, gpu: str = "a100-80gb", tp: int = 1, pp: int = 1, dp: int = 8, zero: int = 3,
                  recompute: str = "none", micro_batch: int = 1, n_micro: int = 1, seq: int = 2048,
                  convention: str = "mixed-fp32-master", offload: bool = True, precision: str = "bf16",
                  sequence_parallel: bool | None = None) -> dict[str, Any]:
    """The knobs: heads, KV heads, precision, GPU, TP, PP, DP, ZeRO, recompute, micro-batch, micro-batches,
    sequence, convention, sequence parallel (default: on when tp > 1) and offload. Chapters 3, 4, 11, 12."""
    import ipywidgets as w

    m = get_model(model)
    style = {"description_width": "initial"}
    ctl: dict[str, Any] = {
        "n_heads": bounded_int(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "precision": w.Dropdown(options=list(TRAINING_PRECISIONS), value=precision, description="precision",
                                style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
        "tp": w.Dropdown(options=[1, 2, 4, 8], value=tp, description="TP", style=style),
        "pp": bounded_int(value=pp, min=1, max=m.n_layers, description="PP (stages)", style=style),
        "dp": bounded_int(value=dp, min=1, max=65536, description="DP", style=style),
        "zero": w.Dropdown(options=[0, 1, 2, 3], value=zero, description="ZeRO stage", style=style),
        "recompute": w.Dropdown(options=["none", "selective", "full"], value=recompute, description="recompute",
                                style=style),
        "micro_batch": bounded_int(value=micro_batch, min=1, max=1024, description="micro-batch", style=style),
        "n_micro": bounded_int(value=n_micro, min=1, max=4096, description="micro-batches", style=style),
        "seq": bounded_int(value=seq, min=1, max=10**6, step=512, description="sequence", style=style),
        "convention": w.Dropdown(options=list(CONVENTIONS), value=convention, description="convention", style=style),
        "sequence_parallel": w.Checkbox(value=tp > 1 if sequence_parallel is None else bool(sequence_parallel),
                                        description="sequence parallel", style=style),
    }
    if offload:
        ctl["offload_optimizer"] = w.Dropdown(options=list(OFFLOAD), value="none", description="offload optimizer",
                                              style=style)
        ctl["offload_params"] = w.Dropdown(options=list(OFFLOAD), value="none", description="offload params",
                                           style=style)
    return ctl


def plan_panel(model, **defaults):
    """Per-stage bars of a plan (chapters 3, 4, 11, 12): every control of :func:`plan_controls`."""
    m = get_model(model)
    return stages_panel(plan_stages_compute, plan_controls(m, **defaults), fixed={"model": m})


def balance_panel(model, gpu: str = "a100-80gb", pp: int = 4, n_micro: int = 8, schedule: str = "1f1b",
                  virtual_stages: int = 1, **defaults):
    """Balanced vs even split, stage by stage, with the schedule (1F1B, GPipe, interleaved chunks). Chapter 11."""
    import ipywidgets as w

    m = get_model(model)
    style = {"description_width": "initial"}
    ctl = plan_controls(m, gpu=gpu, pp=pp, n_micro=n_micro, dp=defaults.pop("dp", 1), zero=defaults.pop("zero", 0),
                        offload=False, **defaults)
    ctl["schedule"] = w.Dropdown(options=["1f1b", "gpipe"], value=schedule, description="schedule", style=style)
    ctl["virtual_stages"] = bounded_int(value=virtual_stages, min=1, max=16, description="chunks per GPU "
                                             "(interleaved)", style=style)
    ctl["balanced"] = w.Checkbox(value=True, description="balanced split")
    return stages_panel(balance_stages_compute, ctl, fixed={"model": m})


__all__ = [
    "balance_panel", "balance_stages_compute", "evaluate_stages_panel", "plan_compute", "plan_controls",
    "plan_memory_compute", "plan_panel", "plan_stages_compute", "render_stages", "search_compute", "stages_panel",
]
