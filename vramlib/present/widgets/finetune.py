"""Fine-tuning on several GPUs: per-rank bars of a ZeRO / TP / PP plan with the training knobs (chapters 3, 4).

The panels of ``vramlib.present.widgets.parallel`` set the plan (TP, PP, DP, ZeRO, recompute, micro-batches, offload);
this one adds what a fine-tuning chapter needs on top: precision, method (full / LoRA / QLoRA), LoRA rank,
optimizer (8-bit AdamW ...), attention kernel (eager when a card has no FlashAttention-2) -- and a "compare ZeRO
stages" switch that draws one rank per ZeRO stage 0-3 side by side, the selected one marked.

Compute functions: :func:`finetune_compute` follows the panel contract ``(Breakdown, capacity, verdict)`` (the
fullest GPU; with ``compare_zero`` the verdict also lists the fullest rank of each ZeRO stage) and is the static
book's in-browser calculator ``finetune`` (``vramlib/web/js/finetune.js``); :func:`finetune_bars` returns labelled
per-rank Breakdowns, drawn by :func:`render_bars` in Jupyter. Bad inputs raise vramlib errors and show as one line
in place.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...memory.activations import ATTENTION, RECOMPUTE
from ...memory.breakdown import Breakdown
from ...core.errors import InvalidValueError, VramlibError, check_positive_int
from ...catalog.hardware import GPUS, get_gpu
from ...memory.inference import DEFAULT_RESERVE
from ...catalog.models import get_model
from ...plans.parallel import OFFLOAD, PlanMemory, plan_memory
from ...memory.step import PEAKS
from ...memory.training import CONVENTIONS, METHODS, OPTIMIZERS, TRAINING_PRECISIONS
from ...core.units import gb, gib
from ...core.portable import Fields, fmt_fixed, portable, shared
from ..viz import breakdown_svg
from .base import Computed, dropdown, evaluate_panel, int_box, model_with_heads, panel, panel_plan, render
from .parallel import _verdict


BarsComputed = tuple[tuple[tuple[str, Breakdown], ...], "int | None", str]
"""Labelled per-rank Breakdowns, the capacity, a verdict line."""


def finetune_plan(model, gpu: str, n_heads: int | None = None, n_kv_heads: int | None = None,
                  precision: str = "bf16", method: str = "full", lora_rank: int = 16, optimizer: str = "adamw",
                  convention: str = "mixed-fp32-master", zero: int = 3, dp: int = 8, tp: int = 1, pp: int = 1,
                  n_micro: int = 1, recompute: str = "none", attention: str = "sdpa", seq: int = 2048,
                  micro_batch: int = 1, offload_optimizer: str = "none", sequence_parallel: bool = False,
                  reserve: int | str = DEFAULT_RESERVE, peak: str = "sum") -> PlanMemory:
    """The PlanMemory behind the panel (chapters 3, 4). ``gpu`` is validated here; memory does not depend on it.
    ``peak``: "sum" of the parts, or "step" (FSDP2's phases where they apply, else the sum with a note)."""
    get_gpu(gpu)
    m = get_model(model)
    m = model_with_heads(m, n_heads, n_kv_heads)
    plan = panel_plan(tp=tp, pp=pp, dp=dp, zero=zero, recompute=recompute, micro_batch=micro_batch,
                      n_micro=n_micro, sequence_parallel=sequence_parallel, offload_optimizer=offload_optimizer)
    return plan_memory(m, plan, seq, method=method, precision=precision, optimizer=optimizer, convention=convention,
                       attention=attention, lora_rank=lora_rank, reserve=reserve, peak=peak)


def _card_notes(gpu: str, precision: str, attention: str) -> str:
    return card_notes(Fields(get_gpu(gpu)), precision, attention)


@portable
def card_notes(card, precision, attention):
    """" <card> has no bf16 ...; <card> has no FlashAttention-2 ..." when the card lacks what the settings ask for
    (the same bytes either way), else ""."""
    out = []
    if precision == "bf16" and not card["supports_bf16"]:
        out.append(card["key"] + " has no bf16: use fp16 with loss scaling (same bytes)")
    if attention == "flash" and not card["supports_flash_attention_2"]:
        out.append(card["key"] + " has no FlashAttention-2: 'sdpa' (memory-efficient kernel) keeps the same tensors")
    return (" " + "; ".join(out) + ".") if len(out) else ""


@portable
def zero_stage_text(zero, chosen, total):
    """One ZeRO stage of the comparison: "ZeRO-2 (selected) 12.34 GB"."""
    return ("ZeRO-" + str(zero) + (" (selected)" if zero == chosen else "") + " " +
            fmt_fixed(total / shared("GB"), 2, True) + " GB")


def finetune_compute(model, gpu: str, compare_zero: bool = False, **values) -> Computed:
    """The fullest GPU of the plan, the card and a verdict (chapters 3, 4). ``compare_zero``: the verdict also
    gives the fullest rank for each ZeRO stage 0-3 (the selected one marked), what the panel's bars draw.
    The static book's ``finetune`` calculator (``vramlib/web/js/finetune.js``) mirrors this function."""
    card = get_gpu(gpu)
    pm = finetune_plan(model, gpu, **values)
    notes = _card_notes(gpu, values.get("precision", "bf16"), values.get("attention", "sdpa"))
    verdict = _verdict(pm, card.memory_bytes) + notes
    if compare_zero:
        chosen, bits = check_positive_int("zero", values.get("zero", 3), allow_zero=True), []
        for z in (0, 1, 2, 3):
            try:
                pz = finetune_plan(model, gpu, **{**values, "zero": z})
            except VramlibError as e:  # e.g. optimizer offload needs ZeRO >= 1
                bits.append(f"ZeRO-{z}: {e}")
                continue
            bits.append(zero_stage_text(z, chosen, pz.total))
        verdict += " Fullest rank by ZeRO stage: " + "; ".join(bits) + "."
    return pm.peak, card.memory_bytes, verdict


def finetune_bars(model, gpu: str, compare_zero: bool = False, **values) -> BarsComputed:
    """One bar per rank: per pipeline stage, or (``compare_zero``) one rank for each ZeRO stage 0-3 with the
    other settings unchanged, the selected stage marked (chapters 3, 4)."""
    card = get_gpu(gpu)
    pm = finetune_plan(model, gpu, **values)
    verdict = _verdict(pm, card.memory_bytes) + _card_notes(gpu, values.get("precision", "bf16"),
                                                            values.get("attention", "sdpa"))
    if not compare_zero:
        if len(pm.stages) == 1:
            return ((f"one rank ({pm.plan.label()})", pm.peak),), card.memory_bytes, verdict
        return tuple((f"stage {i} ({n} layers)", bd) for i, (n, bd) in enumerate(zip(pm.stage_layers, pm.stages))), \
            card.memory_bytes, verdict
    bars = []
    chosen = check_positive_int("zero", values.get("zero", 3), allow_zero=True)
    for z in (0, 1, 2, 3):
        try:
            pz = finetune_plan(model, gpu, **{**values, "zero": z})
        except InvalidValueError as e:  # e.g. optimizer offload needs ZeRO >= 1
            verdict += f" ZeRO-{z}: {e}."
            continue
        mark = " (selected)" if z == chosen else ""
        bars.append((f"ZeRO-{z}{mark}: fullest rank", pz.peak))
    return tuple(bars), card.memory_bytes, verdict


def render_bars(result: BarsComputed | Exception) -> str:
    """One SVG bar per labelled rank, the verdict, and the table of the selected (or fullest) rank."""
    if isinstance(result, Exception):
        return render(result)
    bars, cap, verdict = result
    if len(bars) == 1:
        return render((bars[0][1], cap, verdict))
    pick = next((i for i, (label, _) in enumerate(bars) if "(selected)" in label),
                max(range(len(bars)), key=lambda i: bars[i][1].total))
    rows = "".join(f"<div><small>{label}: {gb(bd.total):,.2f} GB ({gib(bd.total):,.2f} GiB)</small>"
                   f"{breakdown_svg(bd, cap)}</div>" for label, bd in bars)
    return f"<p><b>{verdict}</b></p>{rows}{bars[pick][1]._repr_html_()}"


def evaluate_bars_panel(compute: Callable[..., BarsComputed], values: Mapping[str, Any]) -> str:
    """Run ``compute(**values)`` and render it; a VramlibError (or a bug) becomes one line in place."""
    return evaluate_panel(compute, values, render_bars)


def training_controls(m, values: Mapping[str, Any], names) -> dict[str, Any]:
    """The training knobs a panel offers, in the order of ``names``, each built the same way in every panel that
    has it (this one and the recommender's): ``values`` holds each knob's initial value."""
    drop, num = dropdown, int_box
    make = {
        "n_heads": lambda v: num(v, 1, 512, "heads"), "n_kv_heads": lambda v: num(v, 1, 512, "KV heads"),
        "precision": lambda v: drop(TRAINING_PRECISIONS, v, "precision"), "gpu": lambda v: drop(sorted(GPUS), v, "GPU"),
        "method": lambda v: drop(METHODS, v, "method"), "lora_rank": lambda v: num(v, 1, 4096, "LoRA rank"),
        "optimizer": lambda v: drop(OPTIMIZERS, v, "optimizer"),
        "convention": lambda v: drop(CONVENTIONS, v, "convention"),
        "zero": lambda v: drop((0, 1, 2, 3), v, "ZeRO stage"), "dp": lambda v: num(v, 1, 65536, "DP (GPUs)"),
        "tp": lambda v: drop((1, 2, 4, 8), v, "TP"), "pp": lambda v: num(v, 1, m.n_layers, "PP (stages)"),
        "n_micro": lambda v: num(v, 1, 4096, "micro-batches"), "recompute": lambda v: drop(RECOMPUTE, v, "recompute"),
        "attention": lambda v: drop(ATTENTION, v, "attention"), "seq": lambda v: num(v, 1, 10**7, "sequence", 512),
        "micro_batch": lambda v: num(v, 1, 4096, "micro-batch"),
    }
    return {name: make[name](values[name]) for name in names}


def finetune_controls(model, gpu: str = "a100-80gb", precision: str = "bf16", method: str = "full",
                      lora_rank: int = 16, optimizer: str = "adamw", convention: str = "mixed-fp32-master",
                      zero: int = 3, dp: int = 8, tp: int = 1, pp: int = 1, n_micro: int = 1, recompute: str = "none",
                      attention: str = "sdpa", seq: int = 2048, micro_batch: int = 1,
                      offload_optimizer: str = "none", compare_zero: bool = True, peak: str = "sum") -> dict[str, Any]:
    """Heads, KV heads, precision, GPU, method, LoRA rank, optimizer, convention, ZeRO stage, DP, TP, PP,
    micro-batches, recompute, attention, sequence, micro-batch, optimizer offload, sequence parallel, the
    compare-ZeRO switch and the peak (sum of parts or the step's phases). Chapters 3, 4."""
    import ipywidgets as w

    m = get_model(model)
    values = dict(locals(), n_heads=m.n_heads, n_kv_heads=m.n_kv_heads)
    return {
        **training_controls(m, values, ("n_heads", "n_kv_heads", "precision", "gpu", "method", "lora_rank", "optimizer",
                                        "convention", "zero", "dp", "tp", "pp", "n_micro", "recompute", "attention",
                                        "seq", "micro_batch")),
        "offload_optimizer": dropdown(OFFLOAD, offload_optimizer, "offload optimizer"),
        "sequence_parallel": w.Checkbox(value=tp > 1, description="sequence parallel", style={"description_width": "initial"}),
        "compare_zero": w.Checkbox(value=compare_zero, description="compare ZeRO stages", style={"description_width": "initial"}),
        "peak": dropdown(PEAKS, peak, "peak"),
    }


def finetune_panel(model, reserve: int | str = DEFAULT_RESERVE, **defaults):
    """Per-rank bars of a fine-tuning plan (chapters 3, 4): every control of :func:`finetune_controls`.

    In the static book the panel is the ``finetune`` calculator (:func:`finetune_compute`, the fullest rank; with
    "compare ZeRO stages" its verdict lists the fullest rank of every stage), computed in the browser."""
    m = get_model(model)
    return panel(finetune_compute, finetune_controls(m, **defaults), fixed={"model": m, "reserve": reserve},
                 view=lambda values: evaluate_bars_panel(finetune_bars, values))


__all__ = ["BarsComputed", "evaluate_bars_panel", "finetune_bars", "finetune_compute", "finetune_controls",
           "finetune_panel", "finetune_plan", "render_bars"]
