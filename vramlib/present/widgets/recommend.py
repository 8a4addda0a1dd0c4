"""The GPU recommender as a panel (chapter 9): model knobs, method, LoRA rank, optimizer, recompute, sequence,
micro-batch, headroom and the largest GPU count -> the cheapest configurations that fit.

:func:`recommend_compute` follows the panel contract ``(Breakdown, capacity, verdict)``: the per-GPU Breakdown of
the cheapest configuration that fits, its card's memory, and a verdict naming the next ones; the panel also shows
the table of ``vramlib.solve.recommend.recommendation_table``. When nothing in the catalogue fits, the Breakdown is
the job on the largest count tried and the verdict says so. Bad inputs show one line in place.
"""
from __future__ import annotations

from typing import Any

from ...core.errors import InvalidValueError, VramlibError
from ...memory.inference import DEFAULT_RESERVE
from ...catalog.models import get_model
from ...solve.recommend import recommend_gpus, recommendation_table
from ...core.units import bytes_text, percent
from ...core.portable import fmt_fixed, portable
from .base import Computed, dropdown, int_box, model_with_heads, panel, render
from .finetune import training_controls

MAX_GPUS = (1, 2, 4, 8)


def _counts(max_gpus: int) -> tuple[int, ...]:
    if max_gpus not in MAX_GPUS:
        raise InvalidValueError("max_gpus", max_gpus, "choose 1, 2, 4 or 8")
    return tuple(c for c in MAX_GPUS if c <= max_gpus)


def recommend_rows(model, n_heads: int | None = None, n_kv_heads: int | None = None, precision: str = "bf16",
                   method: str = "qlora", lora_rank: int = 16, optimizer: str = "adamw",
                   convention: str = "mixed-fp32-master", recompute: str = "full", attention: str = "sdpa",
                   seq: int = 2048, micro_batch: int = 1, headroom_pct: int = 10, max_gpus: int = 8,
                   reserve: int | str = DEFAULT_RESERVE):
    """The recommender's rows for the panel's settings (every card that fits, then the closest misses)."""
    m = get_model(model)
    m = model_with_heads(m, n_heads, n_kv_heads)
    if isinstance(headroom_pct, bool) or not isinstance(headroom_pct, int) or not 0 <= headroom_pct < 100:
        raise InvalidValueError("headroom_pct", headroom_pct, "must be a whole percentage in [0, 100)")
    return recommend_gpus(m, method, seq, _counts(max_gpus), headroom_pct / 100, include_unfit=True,
                          precision=precision, optimizer=optimizer, convention=convention, recompute=recompute,
                          attention=attention, lora_rank=lora_rank, micro_batch=micro_batch, reserve=reserve)


def _verdict(recs) -> str:
    return recommend_verdict([r.view() for r in recs])


@portable
def recommend_verdict(rows):
    """The recommender's verdict from its ranked rows (``row_view``): the cheapest card
    that fits and the next three, or why nothing fits."""
    fit = [r for r in rows if r["fits"]]
    if not len(fit):
        if not len(rows):
            return "No catalogue card to compare."
        return ("Nothing in the catalogue fits under " + percent(1 - rows[0]["headroom"], 0) + " with up to " +
                str(max([r["count"] for r in rows])) + " GPUs: shorten the sequence, recompute activations, use "
                "LoRA/QLoRA or more GPUs.")

    def say(r):
        return r["label"] + (" ($" + fmt_fixed(r["cost"], 2, True) + "/h)" if r["cost"] is not None else " (no price)")

    best = fit[0]
    head = ("Cheapest that fits: " + say(best) + ", " + bytes_text(best["per_gpu_bytes"], 1) + " of " +
            bytes_text(best["capacity"], 1) + " per GPU" +
            (", prices of " + best["price_date"] if best["price_date"] else "") + ".")
    if len(fit) > 1:
        head += (" Next: " + "; ".join([say(r) for r in fit[1:4]]) + ". " + str(len(fit)) + " cards fit in all.")
    return head


def recommend_compute(model, **values) -> Computed:
    """The cheapest fitting configuration's per-GPU Breakdown, its card's memory and the verdict (chapter 9)."""
    recs = recommend_rows(model, **values)
    if not recs:
        raise VramlibError("gpu: no catalogue card to compare")
    pick = recs[0]
    return pick.memory.peak, (pick.capacity if pick.fits else None), _verdict(recs)


def recommend_view(model, top: int = 8, **values) -> str:
    """The panel's HTML: the bar, the verdict and the table of the ``top`` rows."""
    try:
        recs = recommend_rows(model, **values)
        if not recs:
            raise VramlibError("gpu: no catalogue card to compare")
        pick = recs[0]
        html = render((pick.memory.peak, pick.capacity if pick.fits else None, _verdict(recs)))
        return html + recommendation_table(recs, top=top)._repr_html_()
    except VramlibError as e:
        return render(e)
    except Exception as e:  # a bug, not a bad input: one line in place, never a traceback
        return render(VramlibError(f"internal error ({type(e).__name__}): {e}; please report it"))


def recommend_controls(model, precision: str = "bf16", method: str = "qlora", lora_rank: int = 16,
                       optimizer: str = "adamw", convention: str = "mixed-fp32-master", recompute: str = "full",
                       attention: str = "sdpa", seq: int = 2048, micro_batch: int = 1, headroom_pct: int = 10,
                       max_gpus: int = 8) -> dict[str, Any]:
    """Heads, KV heads, precision, method, LoRA rank, optimizer, convention, recompute, attention, sequence,
    micro-batch, headroom, largest GPU count."""

    m = get_model(model)
    values = dict(locals(), n_heads=m.n_heads, n_kv_heads=m.n_kv_heads)
    return {
        **training_controls(m, values, ("n_heads", "n_kv_heads", "precision", "method", "lora_rank", "optimizer",
                                        "convention", "recompute", "attention", "seq", "micro_batch")),
        "headroom_pct": int_box(headroom_pct, 0, 99, "headroom %"),
        "max_gpus": dropdown(MAX_GPUS, max_gpus, "up to GPUs"),
    }


def recommend_panel(model, reserve: int | str = DEFAULT_RESERVE, top: int = 8, **defaults):
    """The recommender panel (chapter 9). In the static book it is the ``recommend`` calculator
    (:func:`recommend_compute`: the cheapest configuration's bar and table, the verdict naming the next ones),
    computed in the browser by ``vramlib/web/js/recommend.js``."""
    m = get_model(model)
    return panel(recommend_compute, recommend_controls(m, **defaults), fixed={"model": m, "reserve": reserve},
                 view=lambda values: recommend_view(top=top, **values))


__all__ = ["MAX_GPUS", "recommend_compute", "recommend_controls", "recommend_panel", "recommend_rows",
           "recommend_view"]
