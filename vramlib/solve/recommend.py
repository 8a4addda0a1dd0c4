"""Which GPUs, and how many, for a fine-tuning job: the catalogue cards x counts that fit, cheapest first.

:func:`recommend_gpus` answers question 9's "choose a GPU configuration": for a model, a method (full / LoRA /
QLoRA) and a sequence length it computes the per-GPU memory of the job on 1, 2, 4 and 8 cards with
``vramlib.plans.parallel.plan_memory`` and compares it with every catalogue GPU:

* one card: plain single-GPU training (ZeRO 0, no communication buckets), i.e. :func:`vramlib.memory.training.training_memory`;
* several cards: data parallel with ZeRO stage ``zero`` (3 by default: weights, gradients and optimizer states
  sharded, the frozen base of LoRA/QLoRA too -- FSDP + QLoRA), DeepSpeed's communication buckets included.

The per-GPU memory does not depend on the card, so each count is computed once and compared with every
capacity under ``(1 - headroom)``. Rows are sorted by the hourly cost ``COST_PER_HOUR`` (count x the catalogue's
dated on-demand price, cards without a price last), then fewer GPUs, then more room left. Cards without bf16
(Volta, Turing) or FlashAttention-2 keep their row with a note: fp16 with loss scaling stores the same bytes as
bf16, and PyTorch's SDPA memory-efficient kernel (sm50-sm90) saves the same tensors as FlashAttention-2.

:func:`max_seq_for_plan` is the inverse in the sequence length for a multi-GPU plan (the longest sequence whose
fullest GPU fits), as ``vramlib.max_seq_for_training`` is for one card.

Used in: chapters 4, 9.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp

from ..memory.activations import ATTENTION
from ..core.errors import InvalidValueError, check_choice, check_fraction, check_positive_int, checked_call
from .feasibility import largest_fitting
from ..catalog.hardware import GPU, get_gpu, list_gpus
from ..catalog.models import ModelSpec, get_model
from ..plans.parallel import ParallelPlan, PlanMemory, plan_memory
from ..catalog.precision import get_precision
from ..memory.training import METHODS
from ..core.portable import Fields, ev, portable, q_decimal, q_div, q_float, share, stable_order
from ..memory.breakdown import fits_under

n_cards = sp.Symbol("n", integer=True, positive=True)
price_h = sp.Symbol("p_h", nonnegative=True)

COST_PER_HOUR = n_cards * price_h
"""Dollars per hour of a configuration: cards x the on-demand price of one card-hour. Chapter 9."""

DEFAULT_COUNTS = (1, 2, 4, 8)
_PLAN_FIELDS = {f for f in ParallelPlan.__dataclass_fields__}
_FORBIDDEN = ("tp", "pp", "dp", "ep", "virtual_stages", "plan", "stage_layers")


@dataclass(frozen=True)
class Recommendation:
    """One catalogue GPU x count: the job's fullest GPU (``memory``), whether it fits under the headroom, the cost."""

    gpu: GPU
    count: int
    memory: PlanMemory = field(repr=False)
    headroom: float
    notes: tuple[str, ...] = ()

    @property
    def plan(self) -> ParallelPlan:
        return self.memory.plan

    @cached_property
    def _view(self) -> dict:
        return row_view(self.count, Fields(self.gpu), [bd.total for bd in self.memory.stages], self.headroom)

    @property
    def per_gpu_bytes(self) -> int:
        """Bytes on the fullest GPU."""
        return self._view["per_gpu_bytes"]

    @property
    def capacity(self) -> int:
        return self._view["capacity"]

    @property
    def fits(self) -> bool:
        """Every GPU under capacity x (1 - headroom)."""
        return self._view["fits"]

    @property
    def share(self) -> float:
        """Fullest GPU / capacity."""
        return self._view["share"]

    @property
    def cost_per_hour_usd(self) -> float | None:
        """COST_PER_HOUR at the catalogue price (None when the catalogue has no price for this card)."""
        return self._view["cost"]

    def view(self) -> dict:
        """What the portable ranking and verdict read (``row_view``; the browser's rows are the same)."""
        return self._view

    def label(self) -> str:
        return self._view["label"]

    def row(self) -> dict:
        """A row for vramlib.present.viz.Table (GB = 10^9 bytes)."""
        cost = self.cost_per_hour_usd
        return {"GPUs": self.label(), "plan": "1 GPU" if self.count == 1 else f"ZeRO-{self.plan.zero} x {self.count}",
                "GB per GPU": self.per_gpu_bytes / 1e9, "card GB": self.capacity / 1e9, "use": self.share,
                "$/h": cost if cost is not None else float("nan"),
                "price date": self.gpu.price_date or "no price", "notes": "; ".join(self.notes)}


share(COST_PER_HOUR=COST_PER_HOUR)


@portable
def row_view(count, card, totals, headroom):
    """One card x count as the ranking and the verdict read it: fits (every stage under capacity x (1 - headroom)),
    the hourly cost, the share of the card the fullest GPU uses, the label and the card's facts."""
    per = max(totals)
    return {"fits": fits_under(totals, card["memory_bytes"], headroom),
            "cost": hourly_cost(count, card["price_per_hour_usd"]), "count": count,
            "share": q_float(q_div(per, card["memory_bytes"])), "key": card["key"],
            "label": str(count) + " x " + card["key"], "per_gpu_bytes": per, "capacity": card["memory_bytes"],
            "price_date": card["price_date"], "headroom": headroom}


@portable
def hourly_cost(count, price):
    """COST_PER_HOUR at the price as written (``None`` without a price), as a float."""
    if price is None:
        return None
    return q_float(ev("COST_PER_HOUR", None, {"n": count, "p_h": q_decimal(price)}))


@portable
def card_rows(rows, fewest_only, include_unfit):
    """Which of one card's rows (one per GPU count, in count order) to keep: with ``fewest_only`` the smallest count
    that fits, else (``include_unfit``) the largest count tried, the closest miss; otherwise every fitting row (and
    the rest with ``include_unfit``). Returns their indices."""
    fitting = [i for i in range(len(rows)) if rows[i]["fits"]]
    unfit = [i for i in range(len(rows)) if not rows[i]["fits"]]
    if fewest_only:
        if len(fitting):
            return [fitting[0]]
        return [unfit[len(unfit) - 1]] if include_unfit and len(unfit) else []
    return fitting + (unfit if include_unfit else [])


@portable
def rank_order(rows):
    """Indices of ``rows`` best first: fitting rows first, priced before unpriced, cheaper, fewer GPUs, more room
    left, then by card key (a stable insertion sort)."""
    def before(a, b):
        if a["fits"] != b["fits"]:
            return a["fits"]
        if (a["cost"] is None) != (b["cost"] is None):
            return b["cost"] is None
        if a["cost"] is not None and a["cost"] != b["cost"]:
            return a["cost"] < b["cost"]
        if a["count"] != b["count"]:
            return a["count"] < b["count"]
        if a["share"] != b["share"]:
            return a["share"] < b["share"]
        return a["key"] < b["key"]

    return stable_order(rows, before)

def _notes(gpu: GPU, precision: str, attention: str) -> tuple[str, ...]:
    return tuple(row_notes(Fields(gpu), precision, attention))


@portable
def row_notes(card, precision, attention):
    """The recommender's notes on a card that lacks the requested bf16 or FlashAttention-2 (same bytes either way)."""
    out = []
    if precision == "bf16" and not card["supports_bf16"]:
        out.append("no bf16: fp16 with loss scaling (same bytes)")
    if attention == "flash" and not card["supports_flash_attention_2"]:
        out.append("no FlashAttention-2: SDPA memory-efficient kernel (same saved tensors)")
    return out


def _plan_for(count: int, zero: int, plan_fields: dict) -> tuple[ParallelPlan, str]:
    offload = plan_fields.get("offload_optimizer", "none") != "none" or plan_fields.get("offload_params", "none") != "none"
    layout = count_layout(count, zero, offload)
    return ParallelPlan(dp=layout[0], zero=layout[1], **plan_fields), layout[2]


@portable
def count_layout(count, zero, offload):
    """[dp, ZeRO stage, buckets] of one GPU count: one card is plain training (ZeRO 0, no communication buckets)
    unless something is offloaded; several are data parallel at ``zero`` with the automatic buckets."""
    if count == 1 and not offload:
        return [1, 0, "none"]
    return [count, zero, "auto"]


_ROW_FLAGS = ("fewest_only", "include_unfit", "require_features")


@checked_call
def recommend_gpus(model: ModelSpec | str, method: str = "qlora", seq: int = 2048,
                   counts: Sequence[int] = DEFAULT_COUNTS, headroom: float = 0.1, *, zero: int = 3,
                   gpus: Sequence[GPU | str] | None = None, **options) -> list[Recommendation]:
    """Catalogue GPUs x ``counts`` on which one step of fine-tuning ``model`` fits, cheapest per hour first.

    ``method``: full | lora | qlora. ``options``: which rows (``fewest_only=True``: per card, only the smallest
    count that fits -- more cards of the same kind cost more for the same answer; ``include_unfit=False``: also the
    rows that do not fit, sorted after those that do; ``require_features=False``: drop cards that lack the
    requested bf16 or FlashAttention-2 instead of noting it), then what goes to ``vramlib.plans.parallel.plan_memory``:
    training options (``precision``, ``optimizer``, ``convention``, ``attention``, ``lora_rank``, ``reserve`` ...)
    and plan fields (``recompute``, ``micro_batch``, ``offload_optimizer`` ...). Chapter 9.
    """
    m = get_model(model)
    method = check_choice("method", method, METHODS)
    seq = check_positive_int("seq", seq)
    headroom = check_fraction("headroom", headroom)
    if isinstance(zero, bool) or zero not in (1, 2, 3):
        raise InvalidValueError("zero", zero, "the ZeRO stage of the multi-GPU rows must be 1, 2 or 3")
    fewest_only, include_unfit, require_features = _row_flags(options)
    for k in _FORBIDDEN:
        if k in options:
            raise InvalidValueError(k, options[k], "set by the recommender (counts, zero); not a keyword")
    from ..core.errors import as_sequence

    counts = sorted({check_positive_int("counts", c) for c in as_sequence("counts", counts, "(1, 2, 4, 8)")})
    cards = list_gpus() if gpus is None else [g if isinstance(g, GPU) else get_gpu(g) for g in
                                              as_sequence("gpus", gpus, "('a100-80gb', 'h100-sxm-80gb')",
                                                          lambda x: isinstance(x, (str, GPU)))]
    precision = get_precision(options.get("precision", "bf16"), field="precision").name
    attention = check_choice("attention", options.get("attention", "sdpa"), ATTENTION)
    per_count = _memory_per_count(m, method, seq, counts, zero, options)
    out: list[Recommendation] = []
    for g in cards:
        notes = _notes(g, precision, attention)
        if notes and require_features:
            continue
        rows = [Recommendation(g, c, per_count[c], headroom, notes) for c in counts]
        out += [rows[i] for i in card_rows([{"fits": r.fits} for r in rows], fewest_only, include_unfit)]
    return [out[i] for i in rank_order([r.view() for r in out])]


def _row_flags(options: dict) -> tuple[bool, bool, bool]:
    """``fewest_only`` (default True), ``include_unfit`` and ``require_features`` (False), taken out of
    ``options``; each must be True or False."""
    out = []
    for name in _ROW_FLAGS:
        flag = options.pop(name, name == "fewest_only")
        if not isinstance(flag, bool):
            raise InvalidValueError(name, flag, "must be True or False")
        out.append(flag)
    return out[0], out[1], out[2]


def _memory_per_count(m: ModelSpec, method: str, seq: int, counts: list[int], zero: int,
                      training_kwargs: dict) -> dict[int, PlanMemory]:
    """The job's per-GPU memory on each count of cards (one card: plain training; several: ZeRO ``zero``)."""
    training_kwargs = dict(training_kwargs)
    plan_fields = {k: training_kwargs.pop(k) for k in list(training_kwargs) if k in _PLAN_FIELDS}
    user_buckets = training_kwargs.pop("buckets", None)
    per_count: dict[int, PlanMemory] = {}
    for c in counts:
        plan, buckets = _plan_for(c, zero, plan_fields)
        per_count[c] = plan_memory(m, plan, seq, method=method, buckets=user_buckets or buckets, **training_kwargs)
    return per_count



@checked_call
def recommendation_table(recs: Sequence[Recommendation], top: int | None = None, caption: str | None = None):
    """A vramlib.present.viz.Table of recommendations (the price dates in the caption and in a column)."""
    from ..core.table import Table

    rows = [r.row() for r in (recs if top is None else recs[:top])]
    if caption is None:
        first = recs[0] if recs else None
        dates = sorted({r.gpu.price_date for r in recs if r.gpu.price_date})
        caption = ((f"{first.memory.model}: " if first else "") + "configurations that fit, cheapest first "
                   f"(on-demand prices of {', '.join(dates) or 'no date'}; check the provider before you budget)")
    return Table(rows, caption=caption, formats={"GB per GPU": ".1f", "card GB": ".1f", "use": ".0%", "$/h": ".2f"})


@checked_call
def max_seq_for_plan(model: ModelSpec | str, gpu: GPU | str | int, plan: ParallelPlan | None = None, *,
                     headroom: float = 0.0, limit: int = 2**24, **kwargs) -> int:
    """Longest sequence whose plan fits every GPU under ``(1 - headroom)``: bisection on
    ``vramlib.plans.parallel.plan_memory`` (the answer fits, answer + 1 does not; 0 if one token does not fit).

    ``gpu``: a GPU, a catalogue name, or bytes. ``plan`` or plan fields as keywords; other keywords go to
    ``plan_memory``. Chapter 4.
    """
    if "seq" in kwargs:
        raise InvalidValueError("seq", kwargs["seq"], "is what max_seq_for_plan solves for; do not pass it")
    from ..catalog.hardware import capacity_bytes

    m = get_model(model)
    cap = capacity_bytes(gpu, field="gpu")
    headroom = check_fraction("headroom", headroom)
    if plan is not None and not isinstance(plan, ParallelPlan):
        raise InvalidValueError("plan", plan, "give a ParallelPlan or plan fields as keywords")
    plan_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in _PLAN_FIELDS}
    plan = (plan or ParallelPlan()).with_(**plan_kw) if plan_kw else (plan or ParallelPlan())

    def fits(n: int) -> bool:
        return plan_memory(m, plan, n, **kwargs).fits(cap, headroom)

    return largest_fitting(fits, limit=check_positive_int("limit", limit))


__all__ = ["COST_PER_HOUR", "DEFAULT_COUNTS", "Recommendation", "max_seq_for_plan", "recommend_gpus",
           "recommendation_table"]
