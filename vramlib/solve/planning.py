"""Planning on top of :mod:`vramlib.plans.parallel`: balance a pipeline, search TP x PP x DP plans, and answer the
inverse questions (the largest model a cluster trains, the fewest GPUs a model needs).

* :func:`balance_pipeline` splits the layers into p contiguous stages minimising the peak stage memory (exact
  dynamic programming over the boundaries; ties broken towards the smallest spread), against the even split,
  with the source's criterion as a verdict: every peak under 90% of the card and a spread (max - min) / max
  under 10% ("balanced") or 20% ("acceptable").
* :func:`search_plans` enumerates TP (within a node, dividing the heads; dividing the KV heads or a multiple of them)
  x PP (dividing the
  rest, at most one stage per layer) x DP, ZeRO stage, recompute level, micro-batch size (and so the number of
  micro-batches for the global batch), keeps the plans whose fullest GPU fits under the safety margin and ranks
  them by the throughput model below. What it enumerates and how it judges is one :class:`PlanSpace` (or its
  fields as keywords). Vectorised: the memory and time expressions are the sympy expressions of
  :mod:`vramlib.plans.parallel` and this module, lambdified once with ``modules="numpy"``.
* :func:`largest_trainable_model` and :func:`min_gpus_for_training`: bisection over a model family's scale
  index, and the closed form of ``sympy.solve`` (formulas.MIN_GPUS) for the data-parallel size; each answer
  fits and the next one does not.

Throughput model (a ranking device, not a simulator; every term is an expression below):

* compute: FLOPs per token 6 N (Kaplan et al. 2020) + 12 L h s for attention scores (forward + backward),
  + (2 N + 4 L h s) with full recomputation (one more forward), + 4 L h s with selective recomputation (the
  attention core again); at ``mfu`` (default 0.40) of the card's dense bf16 (else fp16) peak;
* pipeline bubble: the compute time is stretched by 1 / (1 - bubble), bubble = (p - 1) / (v m + p - 1)
  (Narayanan et al. 2021);
* tensor parallel: 4 all-reduces of b s h bf16 activations per layer per micro-batch (2 forward, 2 backward;
  + 2 with full recomputation; sequence parallelism moves the same bytes as all-gather + reduce-scatter),
  ring volume 2 (t - 1) / t, at the intra-node bandwidth;
* data parallel: gradients all-reduced once per step, 2 (N_d - 1) / N_d x 2 bytes x the rank's parameters
  (ZeRO-3: 3 instead of 2, the ZeRO paper's 1.5x), at the intra-node bandwidth when the DP group fits in a node,
  else the inter-node bandwidth per GPU;
* pipeline: 2 m activations of 2 b s h / t bytes cross each stage boundary (forward and backward);
* no overlap of communication with compute (pessimistic, the same for every plan).

Ranks are placed TP fastest, then DP, then PP (Megatron-LM's order); nodes hold ``gpus_per_node`` GPUs (8).
Bandwidths: the catalogue's ``interconnect_gb_s`` is the vendor's bidirectional figure, so a ring all-reduce runs
at half of it inside a node; between nodes, one NIC per GPU (:data:`INTER_NODE_GB_S`).

Used in: chapters 3, 4, 11, 12 (and 9 for the inverse questions).
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import sympy as sp

from ..memory import activations as A
from ..core import formulas as F
from ..plans import parallel as PL
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, UnknownNameError, as_sequence, check_choice, check_fraction, check_number, \
    check_positive_int, checked_call
from .feasibility import largest_fitting, min_gpus
from ..core.settings import Settings, settings_class
from ..catalog.hardware import GPU, capacity_bytes, get_gpu
from ..memory.inference import DEFAULT_RESERVE
from ..catalog.models import ModelSpec, get_model
from ..plans.parallel import ParallelPlan, PlanMemory, layer_rank_params, model_scale, plan_memory, spread_q, zero_rates
from ..core.portable import ev, infinity, portable, q, q_add, q_cmp, q_div, q_float, q_mul
from ..core.units import percent
from ..core.symbols import L, b, h, s
from ..memory.training import CONVENTIONS, METHODS, OPTIMIZERS, adamw_bytes_per_param, convention_state_bytes, \
    optimizer_state_bytes
from ..core.units import parse_memory

# --- throughput model (sympy, lambdified with numpy for the search) ----------------------------------------
N_act = sp.Symbol("N", positive=True)                    # parameters used per token (active, for MoE)
z_full = sp.Symbol("z_full", integer=True, nonnegative=True)
z_sel = sp.Symbol("z_sel", integer=True, nonnegative=True)
tokens = sp.Symbol("tokens", positive=True)              # tokens per step: b m N_d s
n_gpu = sp.Symbol("n", integer=True, positive=True)
peak = sp.Symbol("C", positive=True)                      # peak FLOP/s of one GPU
mfu = sp.Symbol("mfu", positive=True)
bw_tp = sp.Symbol("B_tp", positive=True)                  # bytes/s of the TP ring
bw_dp = sp.Symbol("B_dp", positive=True)
bw_pp = sp.Symbol("B_pp", positive=True)
Psi_r = sp.Symbol("Psi_r", nonnegative=True)              # parameters of one model-parallel rank
z_pp = sp.Symbol("z_pp", integer=True, nonnegative=True)  # 1 when p > 1
t, p, m, v, N_d, z_p = PL.t, PL.p, PL.m, PL.v, PL.N_d, PL.z_p

FLOPS_PER_TOKEN = 6 * N_act + 12 * L * h * s + z_full * (2 * N_act + 4 * L * h * s) + z_sel * 4 * L * h * s
"""Training FLOPs per token: 6N (forward + backward), attention scores, and the recomputed forward work."""

BUBBLE = (p - 1) / (v * m + p - 1)
"""Pipeline bubble as a share of the step (Narayanan et al. 2021; v = 1: (p - 1) / (m + p - 1)). Chapter 11."""

T_COMPUTE = FLOPS_PER_TOKEN * tokens / (n_gpu * peak * mfu)
T_PIPELINE = T_COMPUTE / (1 - BUBBLE)
T_TP = (L / p) * m * (4 + 2 * z_full) * 2 * (t - 1) / t * 2 * b * s * h / bw_tp
T_DP = (2 + z_p) * (N_d - 1) / N_d * 2 * Psi_r / bw_dp
T_PP = z_pp * 2 * m * 2 * b * s * h / (t * bw_pp)
T_STEP = T_PIPELINE + T_TP + T_DP + T_PP
"""Seconds per optimizer step (no overlap of communication and compute). Chapter 12."""
TOKENS_PER_SECOND = tokens / T_STEP

INTER_NODE_GB_S: dict[str, float] = {
    "v100-16gb": 12.5, "v100-32gb": 12.5,          # 100 Gb/s EDR InfiniBand per GPU (DGX-1/DGX-2 class)
    "a100-40gb": 25.0, "a100-80gb": 25.0,          # DGX A100: 8 x 200 Gb/s HDR, one per GPU
    "h100-sxm-80gb": 50.0, "h100-pcie-80gb": 50.0, "h100-nvl": 50.0, "h200": 50.0,  # 400 Gb/s NDR per GPU
    "b200": 50.0, "mi300x": 50.0,                   # 400 Gb/s NIC per GPU
}
"""GB/s between nodes per GPU (one direction), by card; other cards 12.5 (100 Gb/s Ethernet). Override with
``inter_node_gb_s``."""


@lru_cache(maxsize=None)
def _np_fn(expr: sp.Expr):
    args = tuple(sorted(expr.free_symbols, key=lambda x: x.name))
    return tuple(a.name for a in args), F.lambdify(args, expr, modules="numpy")  # counted


def npeval(expr: sp.Expr, **values):
    """Evaluate a vramlib expression on numpy arrays (float64), by symbol name; the search's numeric path."""
    import numpy as np

    names, fn = _np_fn(expr)
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"npeval: missing values for {', '.join(missing)}")
    return fn(*(np.asarray(values[n], dtype=float) for n in names))


# --- pipeline balancing ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PipelineBalance:
    """A balanced split against the even split (chapter 11). ``layers``: layers per stage; ``stages``: the GPU
    Breakdown of each stage (per rank); ``verdict``: the source's criterion applied to it."""

    model: str
    plan: ParallelPlan
    layers: tuple[int, ...]
    stages: tuple[Breakdown, ...]
    even_layers: tuple[int, ...]
    even_stages: tuple[Breakdown, ...]
    capacity: int | None
    verdict: str
    even_verdict: str

    @property
    def boundaries(self) -> tuple[int, ...]:
        """First layer (0-based) of each stage."""
        return tuple(sum(self.layers[:k]) for k in range(len(self.layers)))

    @property
    def peak(self) -> int:
        return max(bd.total for bd in self.stages)

    @property
    def even_peak(self) -> int:
        return max(bd.total for bd in self.even_stages)

    @property
    def spread(self) -> Fraction:
        return spread([bd.total for bd in self.stages])

    @property
    def even_spread(self) -> Fraction:
        return spread([bd.total for bd in self.even_stages])


def spread(totals: Sequence[int]) -> Fraction:
    """(max - min) / max: the source's balance measure (chapter 11)."""
    return PL.spread_q(list(totals))


def _share(field: str, value, allow_zero: bool = False):
    return check_number(field, value, minimum=0, maximum=1, min_inclusive=allow_zero,
                        allowed=f"must be a fraction in {'[' if allow_zero else '('}0, 1], e.g. 0.9 for 90%")


def _bool(field: str, value) -> bool:
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise InvalidValueError(field, value, "must be True or False")
    return bool(value)


FLOAT_SAFE_MAX = 2**40
"""Largest sequence length, batch or GPU count the float64 paths (the plan search, the pipeline balancer) take:
bytes stay far inside float range and exact to the byte where the search compares them."""


def _bounded(field: str, value) -> int:
    return check_number(field, value, minimum=1, maximum=FLOAT_SAFE_MAX, integer=True,
                        allowed="must be a positive integer <= 2^40 (the float64 search's range)")


def _is_int(x) -> bool:
    import numbers

    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _pos_ints(field: str, value, allow_none: bool = False) -> list[int] | None:
    """A sequence of positive integers (an int alone counts as one), or None when allowed; one-line errors."""
    if value is None and allow_none:
        return None
    vals = as_sequence(field, value, "(1, 2, 4)", _is_int)
    return [check_number(field, x, minimum=1, maximum=FLOAT_SAFE_MAX, integer=True,
                         allowed="must be positive integers (at most 2^40), e.g. (1, 2, 4)") for x in vals]


def balance_verdict(totals: Sequence[int], capacity: int | None = None, peak_share: float = 0.9,
                    good_spread: float = 0.10, ok_spread: float = 0.20) -> str:
    """The source's criterion: peaks under ``peak_share`` of the card, spread under 10% (balanced) / 20%."""
    peak_share = _share("peak_share", peak_share)
    good_spread, ok_spread = _share("good_spread", good_spread), _share("ok_spread", ok_spread)
    limits = [[Fraction(x).limit_denominator().numerator, Fraction(x).limit_denominator().denominator, x]
              for x in (peak_share, good_spread, ok_spread)]
    return balance_words(list(totals), capacity, limits)


@portable
def balance_words(totals, capacity, limits):
    """:func:`balance_verdict` once its thresholds are checked: ``limits`` = [numerator, denominator, value] of the
    peak share, the good and the acceptable spread (compared exactly, printed as given)."""
    spread_ = spread_q(totals)
    hi = max(totals)
    parts = []
    under = True
    if capacity is not None:
        share = q_div(hi, capacity)
        under = q_cmp(share, q_div(limits[0][0], limits[0][1])) <= 0
        parts.append("peak " + percent(q_float(share), 0) + " of the card (" + ("under" if under else "over") + " " +
                     percent(limits[0][2], 0) + ")")
    word = "balanced" if q_cmp(spread_, q_div(limits[1][0], limits[1][1])) <= 0 else (
        "acceptable" if q_cmp(spread_, q_div(limits[2][0], limits[2][1])) <= 0 else "unbalanced")
    parts.append("spread " + percent(q_float(spread_), 1) + ": " + word + " (source: under " + percent(limits[1][2], 0) +
                 "-" + percent(limits[2][2], 0) + ")")
    ok = word != "unbalanced" and under
    return ("meets" if ok else "fails") + " the source's criterion: " + "; ".join(parts)


def peak_limit(gpu: GPU | str | int, peak_share: float = 0.9) -> int:
    """The source's ceiling for a stage's peak: ``peak_share`` (90%) of the card's memory, in bytes (rounded down),
    the same threshold :func:`balance_verdict` applies. Chapters 11, 12."""
    peak_share = _share("peak_share", peak_share)
    return int(capacity_bytes(gpu, field="gpu") * Fraction(peak_share).limit_denominator())


def _layer_costs(spec: ModelSpec, plan: ParallelPlan, seq: int, convention: str, precision: str, optimizer: str,
                 moe_layers) -> tuple[list[float], float]:
    """Per-layer model-state bytes (one rank) and per-layer activation bytes of one micro-batch (megatron)."""
    b_o = Fraction(optimizer_state_bytes(spec, optimizer, state_bytes=convention_state_bytes(convention, precision)),
                   spec.weight_params)
    cb = PL._conv_bytes(convention, precision, plan.zero)
    return layer_costs(spec.view(), PL.Fields(plan), seq, cb, b_o, PL._moe_flags(spec, moe_layers))


@portable
def layer_costs(m, plan, seq, cb, b_o, moe):
    """[per-layer model-state bytes of one rank (floats of the exact values), one layer's activations of one
    micro-batch (megatron)]: what the balancer moves between stages (``moe[j]``: layer j has routed experts)."""
    per = layer_rank_params(m, plan["tp"], plan["ep"])
    k = model_scale(m)
    per_d = q(0)
    for part in zero_rates(plan["dp"], plan["zero"], cb, b_o):
        per_d = q_add(per_d, part[1])
    per_e = q(0)
    for part in zero_rates(plan["dp"] // plan["ep"], plan["zero"], cb, b_o):
        per_e = q_add(per_e, part[1])
    states = []
    for j in range(len(moe)):
        p_ = per["moe"] if moe[j] else per["dense"]
        states.append(q_float(q_add(q_mul(q_mul(p_[0], k), per_d), q_mul(q_mul(p_[1], k), per_e))))
    vals = dict(m["sym"])
    vals["s"] = seq
    vals["b"] = plan["micro_batch"]
    vals["t"] = plan["tp"]
    vals["z_sp"] = 1 if plan["sequence_parallel"] else 0
    return [states, q_float(ev("MEGATRON_LAYER_BY_RECOMPUTE", plan["recompute"], vals))]


@portable
def prefix_sums(xs):
    """[0, x0, x0 + x1, ...] summed left to right (numpy's cumsum order)."""
    out = [0.0]
    for x in xs:
        out.append(out[len(out) - 1] + x)
    return out


@portable
def fixed_costs(totals, even_layers, S, act, flights):
    """Each stage's bytes that do not move with its layers: the even split's total minus its layers' states (``S``:
    their prefix sums) and in-flight activations."""
    fixed = []
    a = 0
    for i in range(len(flights)):
        z = a + even_layers[i]
        fixed.append(totals[i] - (S[z] - S[a]) - flights[i] * act * (z - a))
        a = z
    return fixed


@portable
def balanced_layers(totals, even_layers, states, act, flights):
    """Layers per stage of the contiguous split with the smallest peak, and among those the one whose smallest stage
    is largest: exact dynamic programming over the stage boundaries. Stage i holding layers [a, e) costs its fixed
    bytes (the even split's total minus its layers' costs: embedding, head, buffers, reserve) + the layers' model
    states + flights[i] micro-batches of their activations (``totals``, ``even_layers``: the even split)."""
    n = len(states)
    pp = len(flights)
    inf = infinity()
    S = prefix_sums(states)
    fixed = fixed_costs(totals, even_layers, S, act, flights)
    best = [0.0]
    for e in range(n):
        best.append(inf)
    arg = []
    for i in range(pp):
        nxt = []
        at = []
        for e in range(n + 1):
            top = inf
            where = 0
            for a in range(e):
                c = max(best[a], fixed[i] + (S[e] - S[a]) + flights[i] * act * (e - a))
                if c < top:
                    top = c
                    where = a
            nxt.append(top)
            at.append(where)
        arg.append(at)
        best = nxt
    target = best[n] * (1 + 1e-12)
    low = [inf]
    for e in range(n):
        low.append(-inf)
    arg2 = []
    for i in range(pp):
        nxt = []
        at = []
        for e in range(n + 1):
            top = -inf
            where = 0
            for a in range(e):
                c = fixed[i] + (S[e] - S[a]) + flights[i] * act * (e - a)
                if c <= target and min(low[a], c) > top:
                    top = min(low[a], c)
                    where = a
            nxt.append(top)
            at.append(where)
        arg2.append(at)
        low = nxt
    bounds = []
    z = n
    for i in range(pp - 1, -1, -1):
        a = arg2[i][z] if low[n] > -inf else arg[i][z]
        bounds.append(z - a)
        z = a
    bounds.reverse()
    return bounds


@checked_call
def balance_pipeline(model: ModelSpec | str, plan: ParallelPlan | None = None, seq: int = 2048, *,
                     gpu: GPU | str | int | None = None, convention: str = "mixed-fp32-master", precision: str = "bf16",
                     optimizer: str = "adamw", peak_share: float = 0.9, **kwargs) -> PipelineBalance:
    """Split the layers into ``plan.pp`` contiguous stages minimising the peak per-GPU memory (chapter 11).

    Exact dynamic programming over the stage boundaries with each stage's own costs: its layers' model states,
    its 1F1B in-flight micro-batches (p - i on stage i) times its layers' activations, the embedding on the first
    stage and the LM head + loss on the last. Among the optimal splits, the one with the largest smallest stage
    (smallest spread). The stages are then computed exactly by :func:`vramlib.plans.parallel.plan_memory` (``kwargs``
    go there: moe_layers, buckets, reserve, overlap_comm ...). Plan fields may be given as keywords too.
    """
    spec = get_model(model)
    if plan is not None and not isinstance(plan, ParallelPlan):
        raise InvalidValueError("plan", plan, "give a ParallelPlan or plan fields as keywords (pp=4, ...)")
    peak_share = _share("peak_share", peak_share)
    seq = _bounded("seq", seq)
    plan_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ParallelPlan.__dataclass_fields__}
    plan = (plan or ParallelPlan()).with_(**plan_kw) if plan_kw else (plan or ParallelPlan())
    PL.check_layout(spec, plan)
    if plan.virtual_stages > 1:
        raise InvalidValueError("virtual_stages", plan.virtual_stages,
                                "the balancer splits contiguous stages (no interleaving)")
    cap = None if gpu is None else capacity_bytes(gpu, field="gpu")
    common = dict(convention=convention, precision=precision, optimizer=optimizer, activation_style="megatron",
                  **kwargs)
    even = plan_memory(spec, plan, seq, **common)
    if plan.pp == 1:
        v = balance_verdict([even.total], cap, peak_share)
        return PipelineBalance(spec.name, plan, even.stage_layers, even.stages, even.stage_layers, even.stages, cap,
                               v, v)
    if kwargs.get("buckets") == "ddp":
        raise InvalidValueError("buckets", "ddp", "DDP buckets copy every gradient (not a fixed cost); pipelines use "
                                                  "Megatron's or DeepSpeed's buffers: 'auto', 'deepspeed' or 'none'")
    states, act = _layer_costs(spec, plan, seq, convention, precision, optimizer, kwargs.get("moe_layers"))
    flights = [float(PL.in_flight(plan.pp, i, plan.n_micro, plan.schedule)) for i in range(plan.pp)]
    layers = tuple(balanced_layers([x.total for x in even.stages], list(even.stage_layers), states, act, flights))
    bal = plan_memory(spec, plan, seq, stage_layers=layers, **common)
    if max(x.total for x in bal.stages) > even.total:  # cannot happen up to rounding; keep the even split then
        bal = even
    return PipelineBalance(spec.name, plan, bal.stage_layers, bal.stages, even.stage_layers, even.stages, cap,
                           balance_verdict([x.total for x in bal.stages], cap, peak_share),
                           balance_verdict([x.total for x in even.stages], cap, peak_share))


# --- plan search -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankedPlan:
    """A plan that fits, with its fullest GPU (exact bytes) and the throughput model's terms (seconds per step)."""

    plan: ParallelPlan
    peak_bytes: int
    tokens_per_s: float
    step_s: float
    compute_s: float
    bubble: float
    tp_comm_s: float
    dp_comm_s: float
    pp_comm_s: float
    mfu: float
    memory: PlanMemory | None = field(default=None, repr=False, compare=False)

    def row(self) -> dict:
        return {"plan": self.plan.label(), "GB per GPU": self.peak_bytes / 1e9, "tokens/s": self.tokens_per_s,
                "step (s)": self.step_s, "bubble": self.bubble, "TP comm (s)": self.tp_comm_s,
                "DP comm (s)": self.dp_comm_s, "MFU": self.mfu}


@dataclass(frozen=True)
class PlanSearch:
    """The ranked plans that fit (best first), how many were enumerated and fit, and the search time."""

    model: str
    gpu: str
    n_gpus: int
    plans: tuple[RankedPlan, ...]
    n_candidates: int
    n_fitting: int
    seconds: float
    capacity: int
    headroom: float

    @property
    def best(self) -> RankedPlan | None:
        return self.plans[0] if self.plans else None

    def table(self, top: int = 10):
        from ..core.table import Table

        return Table([r.row() for r in self.plans[:top]], caption=f"{self.model} on {self.n_gpus} x {self.gpu}: "
                     f"{self.n_fitting:,} of {self.n_candidates:,} plans fit under {1 - self.headroom:.0%}",
                     formats={"GB per GPU": ".1f", "tokens/s": ",.0f", "step (s)": ".2f", "bubble": ".1%",
                              "TP comm (s)": ".2f", "DP comm (s)": ".2f", "MFU": ".1%"})


@settings_class
@dataclass(frozen=True)
class PlanSpace(Settings):
    """What :func:`search_plans` enumerates and how it judges a plan (chapter 12).

    The job: ``global_batch`` sequences of ``seq`` tokens per step, trained with ``convention`` (bytes per
    parameter), ``precision`` and ``optimizer``. The space: ``zero_stages``, ``recompute`` levels,
    ``micro_batches``, ``virtual_stages`` (interleaving), and ``tp`` / ``pp`` / ``ep`` (None: every size the model
    and the cluster allow; an int alone is one value). The judgement: a plan fits when its fullest GPU is under
    ``(1 - headroom)`` of the card, with ``buckets`` / ``overlap_comm`` / ``reserve`` as in
    :func:`vramlib.plans.parallel.plan_memory`; the fitting plans are ranked by the throughput model at ``mfu``, with
    ``gpus_per_node`` GPUs per node and ``inter_node_gb_s`` (None: :data:`INTER_NODE_GB_S`) between nodes; the
    ``top`` plans are recomputed exactly. Each field is checked here (one line naming it); what depends on the
    model (tp dividing the heads, pp at most the layers, ep dividing the experts) is checked by the search.
    """

    seq: int = 2048
    global_batch: int = 1024
    convention: str = "mixed-fp32-master"
    precision: str = "bf16"
    optimizer: str = "adamw"
    zero_stages: Sequence[int] = (0, 1, 2, 3)
    recompute: Sequence[str] = A.RECOMPUTE
    micro_batches: Sequence[int] = (1, 2, 4, 8)
    virtual_stages: Sequence[int] = (1,)
    tp: Sequence[int] | None = None
    pp: Sequence[int] | None = None
    ep: Sequence[int] | None = None
    headroom: float = 0.1
    mfu: float = 0.4
    gpus_per_node: int = 8
    inter_node_gb_s: float | None = None
    buckets: str = "auto"
    overlap_comm: bool = False
    reserve: int | str = DEFAULT_RESERVE
    top: int = 10

    def __post_init__(self) -> None:
        fix = functools.partial(object.__setattr__, self)
        for name in ("seq", "global_batch", "gpus_per_node"):
            fix(name, _bounded(name, getattr(self, name)))
        fix("headroom", check_fraction("headroom", self.headroom))
        fix("mfu", check_number("mfu", self.mfu, minimum=0, maximum=1, min_inclusive=False,
                                allowed="must be a fraction in (0, 1]"))
        fix("top", check_positive_int("top", self.top))
        zs = as_sequence("zero_stages", self.zero_stages, "(0, 1, 2, 3)", _is_int)
        if any(not _is_int(z) or z not in PL.ZERO_STAGES for z in zs):
            raise InvalidValueError("zero_stages", self.zero_stages, "give ZeRO stages from 0, 1, 2, 3")
        fix("zero_stages", tuple(sorted({int(z) for z in zs})))
        fix("recompute", tuple(check_choice("recompute", r, A.RECOMPUTE) for r in
                               as_sequence("recompute", self.recompute, "('none', 'selective')",
                                           lambda x: isinstance(x, str))))
        for name in ("micro_batches", "virtual_stages", "tp", "pp", "ep"):
            vals = _pos_ints(name, getattr(self, name), allow_none=name in ("tp", "pp", "ep"))
            fix(name, None if vals is None else tuple(vals))
        if self.inter_node_gb_s is not None:
            fix("inter_node_gb_s", check_number("inter_node_gb_s", self.inter_node_gb_s, minimum=0,
                                                min_inclusive=False))
        fix("overlap_comm", _bool("overlap_comm", self.overlap_comm))
        fix("convention", check_choice("convention", self.convention, CONVENTIONS))
        PL._conv_bytes(self.convention, self.precision, 0)          # validates the precision
        fix("optimizer", check_choice("optimizer", self.optimizer, OPTIMIZERS))
        fix("buckets", check_choice("buckets", self.buckets, PL.BUCKETS))
        parse_memory(self.reserve, field="reserve")


@checked_call
def search_plans(model: ModelSpec | str, gpu: GPU | str, n_gpus: int, seq: int | None = None,
                 global_batch: int | None = None, *, space: PlanSpace | None = None, **settings) -> PlanSearch:
    """Every TP x PP x DP x ZeRO x recompute x micro-batch plan of ``n_gpus`` cards for ``global_batch``
    sequences of ``seq`` tokens; those whose fullest GPU fits under ``(1 - headroom)`` of the card, ranked by
    tokens/s (module doc). ``space``: a :class:`PlanSpace`; its fields may be given as keywords instead (or on top
    of it; ``seq`` and ``global_batch`` also by position). TP stays within a node, divides the heads and divides or
    is a multiple of the KV heads (``allowed_tp``); explicit ``tp`` / ``pp`` / ``ep`` values
    the model cannot use raise (an int alone is one value). Sequence parallelism is on whenever TP > 1 (same
    traffic, less memory). Megatron activation accounting. Chapter 12.

    The enumeration is vectorised (numpy, float64); the ``top`` plans are then recomputed exactly with
    :func:`vramlib.plans.parallel.plan_memory` (``peak_bytes``).
    """
    t0 = time.perf_counter()
    spec = get_model(model)
    card = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    n_gpus = _bounded("n_gpus", n_gpus)
    given = {k: v for k, v in (("seq", seq), ("global_batch", global_batch)) if v is not None}
    space = PlanSpace.build("search_plans", space, {**given, **settings}, field="space",
                            also=("model", "gpu", "n_gpus", "space"))
    rows = _layouts(spec, n_gpus, space, _check_space(spec, space))
    if not rows:
        return PlanSearch(spec.name, card.key, n_gpus, (), 0, 0, time.perf_counter() - t0, card.memory_bytes,
                          space.headroom)
    grid = _grid(rows, space)
    params = _grid_params(spec, grid)
    peak_mem, zp = _grid_memory(spec, grid, space, params)
    times = _grid_times(spec, card, n_gpus, grid, space, params, zp)
    ranked, n_fit = _ranked(spec, card, n_gpus, grid, space, peak_mem, times)
    return PlanSearch(spec.name, card.key, n_gpus, tuple(ranked), len(grid.T), n_fit, time.perf_counter() - t0,
                      card.memory_bytes, space.headroom)


def _check_space(spec: ModelSpec, space: PlanSpace) -> list[int]:
    """The TP sizes the model allows; explicit ``tp`` / ``pp`` / ``ep`` values it cannot use raise one line."""
    ok_tp = PL.allowed_tp(spec.n_heads, spec.n_kv_heads)
    for x in space.tp or ():
        if x not in ok_tp:
            PL.kv_heads_per_gpu(spec, x)               # raises naming tp and the allowed sizes
    for x in space.pp or ():
        if x > spec.n_layers:
            raise InvalidValueError("pp", x, f"at most one stage per layer: pp <= {spec.n_layers}")
    for x in space.ep or ():
        if x > 1 and (not spec.is_moe or spec.n_experts % x):
            raise InvalidValueError("ep", x, f"must divide the experts of a MoE model ({spec.name}: {spec.n_experts})")
    return ok_tp


def _layouts(spec: ModelSpec, n_gpus: int, space: PlanSpace, ok_tp: list[int]) -> list[tuple[int, ...]]:
    """Every layout (t, p, d, e, b, m, v) of ``n_gpus`` cards for the global batch: TP within a node."""
    node = min(space.gpus_per_node, n_gpus)
    tps = [x for x in (space.tp or ok_tp) if node % x == 0 and x in ok_tp and n_gpus % x == 0]  # bounded by the heads
    experts = [x for x in range(1, spec.n_experts + 1) if spec.n_experts % x == 0] if spec.is_moe else [1]
    rows = []
    for t_ in tps:
        for p_ in (space.pp or range(1, spec.n_layers + 1)):                 # bounded by the layers
            if (n_gpus // t_) % p_ or p_ > spec.n_layers:
                continue
            d_ = n_gpus // (t_ * p_)
            for e_ in (space.ep or experts):
                if d_ % e_ or (e_ > 1 and spec.n_experts % e_):
                    continue
                for b_ in space.micro_batches:
                    if space.global_batch % (d_ * b_):
                        continue
                    m_ = space.global_batch // (d_ * b_)
                    for v_ in space.virtual_stages:
                        if v_ > 1 and (p_ == 1 or spec.n_layers % (p_ * v_) or m_ % p_):
                            continue
                        rows.append((t_, p_, d_, e_, b_, m_, v_))
    return rows


@dataclass
class _Grid:
    """The enumerated plans as float64 arrays, one entry per layout x ZeRO stage x recompute level: TP, PP, DP,
    EP, micro-batch, micro-batches, virtual stages, ZeRO stage and the index into ``space.recompute``."""

    lay: object
    T: object
    Pp: object
    D: object
    Ee: object
    Bm: object
    M: object
    Vv: object
    Z: object
    RC: object


def _grid(rows: list[tuple[int, ...]], space: PlanSpace) -> _Grid:
    import numpy as np

    lay = np.array(rows, dtype=float)
    nz, nr = len(space.zero_stages), len(space.recompute)
    # broadcast layouts x zero stages x recompute levels
    T, Pp, D, Ee, Bm, M, Vv = (np.repeat(lay[:, j], nz * nr) for j in range(7))
    Z = np.tile(np.repeat(np.array(space.zero_stages, dtype=float), nr), len(rows))
    RC = np.tile(np.arange(nr), len(rows) * nz)
    return _Grid(lay, T, Pp, D, Ee, Bm, M, Vv, Z, RC)


def _grid_params(spec: ModelSpec, g: _Grid) -> dict:
    """Parameters per rank of the first and the last stage (dense and expert parts), even split of the layers."""
    import numpy as np

    n, k = spec.n_layers, float(model_scale(spec.view()))
    L0 = np.ceil(n / g.Pp)                       # layers of the first stage (even split)
    Ll = np.floor(n / g.Pp)                      # of the last stage
    Ll = np.where(g.Pp == 1, L0, Ll)
    sv = {k_: float(v_) for k_, v_ in spec.symbols().items()}
    lay_d = npeval(PL.LAYER_PARAMS_RANK_DENSE, **sv, t=g.T) * k
    lay_e = npeval(PL.LAYER_PARAMS_RANK_EXPERTS, **sv, t=g.T, N_e=g.Ee) * k
    one = (g.Pp == 1).astype(float)
    first = npeval(PL.FIRST_STAGE_PARAMS, **sv, t=g.T) * k
    last = npeval(PL.LAST_STAGE_PARAMS, **sv, t=g.T, z_one=one) * k
    return dict(k=k, sv=sv, L0=L0, Ll=Ll, one=one, lay_d=lay_d, lay_e=lay_e, first=first, last=last,
                psi_first_d=L0 * lay_d + first + one * last, psi_last_d=Ll * lay_d + last + one * first,
                psi_first_e=L0 * lay_e, psi_last_e=Ll * lay_e)


def _grid_memory(spec: ModelSpec, g: _Grid, space: PlanSpace, ps: dict):
    """The fullest GPU of every plan (first or last stage): model states, ZeRO-3 gather buffer, communication
    buckets, activations and the reserve; and the ZeRO-3 indicator the throughput model needs."""
    import numpy as np

    b_o = Fraction(optimizer_state_bytes(spec, space.optimizer,
                                         state_bytes=convention_state_bytes(space.convention, space.precision)),
                   spec.weight_params)
    res = parse_memory(space.reserve, field="reserve")
    # model states: the ZeRO expression with the stage indicators as arrays
    conv = {zs: PL._conv_bytes(space.convention, space.precision, zs) for zs in PL.ZERO_STAGES}
    cb = {key: np.select([g.Z == zs for zs in PL.ZERO_STAGES], [float(conv[zs][key]) for zs in PL.ZERO_STAGES])
          for key in ("b_w", "b_g", "b_gh", "b_m", "gather")}
    zos, zg, zp = (g.Z >= 1).astype(float), (g.Z >= 2).astype(float), (g.Z >= 3).astype(float)

    def states(psi, nd):
        return npeval(PL.ZERO_MODEL_STATES_GENERAL, Psi=psi, N_d=nd, b_w=cb["b_w"], b_g=cb["b_g"], b_gh=cb["b_gh"],
                      b_m=cb["b_m"], b_o=float(b_o), z_os=zos, z_g=zg, z_p=zp)

    st_first = states(ps["psi_first_d"], g.D) + states(ps["psi_first_e"], g.D / g.Ee)
    st_last = states(ps["psi_last_d"], g.D) + states(ps["psi_last_e"], g.D / g.Ee)
    gather_first, gather_last = _gather_buffers(spec, g, space, conv, cb, ps["k"])
    grads_first = (cb["b_g"] + cb["b_gh"]) * (ps["psi_first_d"] + ps["psi_first_e"]) / np.where(zg > 0, g.D, 1)
    grads_last = (cb["b_g"] + cb["b_gh"]) * (ps["psi_last_d"] + ps["psi_last_e"]) / np.where(zg > 0, g.D, 1)
    bucket_first, bucket_last = (_buckets(g, space, grads) for grads in (grads_first, grads_last))
    act_first, act_last = _grid_activations(g, space, ps)
    mem_first = st_first + gather_first + bucket_first + act_first + res
    mem_last = st_last + gather_last + bucket_last + act_last + res
    return np.maximum(mem_first, mem_last), zp


def _gather_buffers(spec: ModelSpec, g: _Grid, space: PlanSpace, conv: dict, cb: dict, k: float):
    """ZeRO-3 gather buffer of the first and the last stage: the stage's largest module on one rank (exact per
    (t, e), then looked up)."""
    import numpy as np

    gather_first = np.zeros_like(g.T)
    gather_last = np.zeros_like(g.T)
    if conv[3]["gather"] and 3 in space.zero_stages:
        for t_ in set(g.lay[:, 0].astype(int)):
            for e_ in set(g.lay[:, 3].astype(int)):
                sel = (g.T == t_) & (g.Ee == e_) & (g.Z == 3)
                for p1 in (True, False):
                    s1 = sel & ((g.Pp == 1) == p1)
                    if not s1.any():
                        continue
                    gf = float(PL.largest_module_params(spec, t_, e_, "single" if p1 else "first")) * k
                    gl = float(PL.largest_module_params(spec, t_, e_, "single" if p1 else "last")) * k
                    gather_first[s1] = cb["gather"][s1] * gf
                    gather_last[s1] = cb["gather"][s1] * gl
    return gather_first, gather_last


def _buckets(g: _Grid, space: PlanSpace, grads):
    """Communication buckets of one stage (the same rules as plan_memory); ``grads``: its gradient bytes."""
    import numpy as np

    ds = np.where(g.Z == 3, 2.0 * (PL.DEEPSPEED_REDUCE_BUCKET + PL.DEEPSPEED_PREFETCH_BUCKET),
                  2.0 * PL.DEEPSPEED_REDUCE_BUCKET * (2 if space.overlap_comm else 1))
    if space.buckets == "auto":
        mp1 = (g.T == 1) & (g.Pp == 1)
        return np.where(g.Z == 0, np.where(mp1, grads, 0.0), ds)
    hf = 2.0 * (PL.DEEPSPEED_REDUCE_BUCKET + PL.DEEPSPEED_ALLGATHER_BUCKET) * (4.5 if space.overlap_comm else 1)
    return {"ddp": grads, "deepspeed": ds, "hf-rule": np.full_like(g.T, hf), "none": np.zeros_like(g.T)}[space.buckets]


def _grid_activations(g: _Grid, space: PlanSpace, ps: dict):
    """Activations of the first and the last stage (Korthikanti et al.), one expression per recompute level, with
    the micro-batches each stage holds in flight (1F1B or interleaved)."""
    import numpy as np

    sv, seq = ps["sv"], space.seq
    zsp = (g.T > 1).astype(float)
    a_layer = np.zeros_like(g.T)
    for j, r in enumerate(space.recompute):
        sel = g.RC == j
        a_layer[sel] = npeval(A.MEGATRON_LAYER_BY_RECOMPUTE[r], s=seq, b=g.Bm[sel], h=sv["h"], n_h=sv["n_h"],
                              t=g.T[sel], z_sp=zsp[sel])
    inter_v = g.Vv > 1
    f0 = np.where(inter_v, npeval(PL.IN_FLIGHT["interleaved"], p=g.Pp, i=0, m=g.M, v=g.Vv),
                  npeval(PL.IN_FLIGHT["1f1b"], p=g.Pp, i=0, m=g.M))
    fl = np.where(inter_v, npeval(PL.IN_FLIGHT["interleaved"], p=g.Pp, i=g.Pp - 1, m=g.M, v=g.Vv),
                  npeval(PL.IN_FLIGHT["1f1b"], p=g.Pp, i=g.Pp - 1, m=g.M))
    common = dict(A_layer=a_layer, s=seq, b=g.Bm, h=sv["h"], V=sv["V"], t=g.T, z_sp=zsp)
    act_first = npeval(PL.STAGE_ACTIVATIONS, F_i=f0, L_i=ps["L0"], z_first=1, z_last=ps["one"], **common)
    act_last = npeval(PL.STAGE_ACTIVATIONS, F_i=fl, L_i=ps["Ll"], z_first=ps["one"], z_last=1, **common)
    return act_first, act_last


def _grid_times(spec: ModelSpec, card: GPU, n_gpus: int, g: _Grid, space: PlanSpace, ps: dict, zp) -> dict:
    """The throughput model's terms (seconds per step) of every plan, and its tokens/s."""
    import numpy as np

    flops = (card.bf16_tflops or card.fp16_tflops) * 1e12
    intra = card.interconnect_gb_s / 2 * 1e9
    inter = (space.inter_node_gb_s if space.inter_node_gb_s is not None
             else INTER_NODE_GB_S.get(card.key, 12.5)) * 1e9
    zf = np.array([r == "full" for r in space.recompute], dtype=float)[g.RC]
    zs = np.array([r == "selective" for r in space.recompute], dtype=float)[g.RC]
    tok = g.Bm * g.M * g.D * space.seq
    dp_bw = np.where(g.T * g.D <= space.gpus_per_node, intra, inter)
    pp_bw = np.where(g.T * g.D * g.Pp <= space.gpus_per_node, intra, inter)
    n = spec.n_layers
    psi_rank = (n * (ps["lay_d"] + ps["lay_e"]) + ps["first"] + ps["last"]) / g.Pp
    common = dict(N=float(spec.n_active_params), L=n, h=ps["sv"]["h"], s=space.seq, z_full=zf, z_sel=zs, tokens=tok,
                  n=float(n_gpus), C=flops, mfu=space.mfu, p=g.Pp, v=g.Vv, m=g.M, t=g.T, b=g.Bm, B_tp=intra,
                  B_dp=dp_bw, B_pp=pp_bw, N_d=g.D, z_p=zp, Psi_r=psi_rank, z_pp=(g.Pp > 1).astype(float))
    out = {name: npeval(expr, **common) for name, expr in (("compute", T_COMPUTE), ("pipe", T_PIPELINE),
                                                           ("tp", T_TP), ("dp", T_DP), ("pp", T_PP))}
    out["step"] = out["pipe"] + out["tp"] + out["dp"] + out["pp"]
    out["tokens_per_s"] = tok / out["step"]
    out["flops"] = flops
    return out


def _ranked(spec: ModelSpec, card: GPU, n_gpus: int, g: _Grid, space: PlanSpace, peak_mem, times: dict):
    """The ``top`` plans that fit, best throughput first (equal throughput -- ZeRO 0-2 move the same bytes --:
    less memory first), each recomputed exactly with plan_memory; and how many fit."""
    import numpy as np

    fits = peak_mem <= card.memory_bytes * (1 - space.headroom)
    tps_ = times["tokens_per_s"]
    order = np.lexsort((peak_mem, -np.where(fits, np.round(tps_, 6), -np.inf)))
    n_fit = int(fits.sum())
    res = parse_memory(space.reserve, field="reserve")
    ranked = []
    for j in order[:min(space.top, n_fit)]:
        plan = ParallelPlan(tp=int(g.T[j]), pp=int(g.Pp[j]), dp=int(g.D[j]), zero=int(g.Z[j]), ep=int(g.Ee[j]),
                            sequence_parallel=bool(g.T[j] > 1), recompute=space.recompute[int(g.RC[j])],
                            micro_batch=int(g.Bm[j]), n_micro=int(g.M[j]), virtual_stages=int(g.Vv[j]))
        exact = plan_memory(spec, plan, space.seq, convention=space.convention, precision=space.precision,
                            optimizer=space.optimizer, activation_style="megatron", buckets=space.buckets,
                            overlap_comm=space.overlap_comm, reserve=res)
        model_flops = 6 * spec.n_active_params * tps_[j]
        ranked.append(RankedPlan(plan, exact.total, float(tps_[j]), float(times["step"][j]),
                                 float(times["compute"][j]), float(npeval(BUBBLE, p=g.Pp[j], v=g.Vv[j], m=g.M[j])),
                                 float(times["tp"][j]), float(times["dp"][j]), float(times["pp"][j]),
                                 float(model_flops / (n_gpus * times["flops"])), exact))
    return ranked, n_fit


# --- inverse questions -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelFamily:
    """A one-parameter family of shapes, ``shape(k)`` growing with k (chapter 3, 9).

    ``kind="width"`` (Llama-like): hidden 128 k, k heads of 128 (``kv_heads``: None = MHA, else that many KV
    heads), k layers, SwiGLU FFN 256 ceil(8 h / 3 / 256), vocabulary 32,000 -- k = 32 is Llama-2-7B's shape and
    k = 40 Llama-2-13B's. ``kind="depth"``: the ``base`` model with k layers.
    """

    name: str
    kind: str = "width"
    base: str | None = None
    kv_heads: int | None = None
    vocab: int = 32000

    @property
    def step(self) -> int:
        """Scale indices that give valid shapes are multiples of this (the KV heads must divide the heads)."""
        return (self.kv_heads or 1) if self.kind == "width" else 1

    def shape(self, k: int) -> ModelSpec:
        k = check_positive_int("k", k)
        if self.kind == "depth":
            return get_model(self.base).with_(n_layers=k, name=f"{self.base}-L{k}", nominal_params=None)
        hid = 128 * k
        kv = self.kv_heads or k
        if k % kv:
            raise InvalidValueError("k", k, f"must be a multiple of kv_heads={kv}")
        ffn = 256 * math.ceil(Fraction(8 * hid, 3 * 256))
        return ModelSpec(f"{self.name}-h{hid}-L{k}", k, hid, k, kv, 128, ffn, self.vocab,
                         source=f"family {self.name}: h = 128 k, k heads, k layers, ffn 256 ceil(8h/3/256)")


FAMILIES: dict[str, ModelFamily] = {
    "llama-width": ModelFamily("llama-width"),
    "llama-width-gqa8": ModelFamily("llama-width-gqa8", kv_heads=8),
}
"""Built-in families; ``ModelFamily("x", kind="depth", base="source-13b")`` scales depth only."""


def get_family(family: ModelFamily | str) -> ModelFamily:
    if isinstance(family, ModelFamily):
        return family
    if isinstance(family, str):
        key = family.strip().lower()
        if key in FAMILIES:
            return FAMILIES[key]
        if key.startswith("depth:"):
            return ModelFamily(key, kind="depth", base=key.split(":", 1)[1])
    raise UnknownNameError("family", family, list(FAMILIES) + ["depth:<model>"])


@dataclass(frozen=True)
class LargestModel:
    """The largest member of a family that fits (``memory``), and the next one, which does not."""

    family: str
    k: int
    model: ModelSpec | None
    memory: PlanMemory | None
    next_model: ModelSpec
    next_memory: PlanMemory
    capacity: int
    plan: ParallelPlan

    @property
    def n_params(self) -> int:
        return self.model.n_params if self.model else 0


def _layout(n_gpus: int, tp: int, pp: int) -> int:
    if n_gpus % (tp * pp):
        raise InvalidValueError("n_gpus", n_gpus, f"must be a multiple of tp x pp = {tp * pp}")
    return n_gpus // (tp * pp)


@checked_call
def largest_trainable_model(gpu: GPU | str, n_gpus: int, seq: int = 2048, *, family: ModelFamily | str = "llama-width",
                            method: str = "full", zero: int = 3, headroom: float = 0.0, k_max: int = 4096,
                            **kwargs) -> LargestModel:
    """Largest model of ``family`` whose plan (``tp x pp x dp`` on ``n_gpus`` cards, ZeRO ``zero``) fits every GPU
    under ``(1 - headroom)`` of its memory: bisection on the family's scale index k. ``kwargs``: the plan's fields
    (``tp=1``, ``pp=1``, ``recompute``, ``micro_batch`` ...; dp is n_gpus / (tp x pp)) and
    :func:`vramlib.plans.parallel.plan_memory`'s options (convention, method options ...). Chapters 3, 9.
    """
    fam = get_family(family)
    card = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    n_gpus = check_positive_int("n_gpus", n_gpus)
    seq = check_positive_int("seq", seq)
    tp, pp = check_positive_int("tp", kwargs.pop("tp", 1)), check_positive_int("pp", kwargs.pop("pp", 1))
    headroom = check_fraction("headroom", headroom)
    k_max = check_positive_int("k_max", k_max)
    method = check_choice("method", method, METHODS)
    dp = _layout(n_gpus, tp, pp)
    plan_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ParallelPlan.__dataclass_fields__}
    for k in ("dp",):
        if k in plan_kw:
            raise InvalidValueError(k, plan_kw[k], "is n_gpus / (tp x pp) here; not a keyword")
    plan = ParallelPlan(tp=tp, pp=pp, dp=dp, zero=zero, **plan_kw)
    # valid scale indices: multiples of the family's step (KV heads divide the heads) and, for width families, of
    # tp's share of the heads: k heads with tp | k and (tp | kv or kv | tp) -- lcm(step, tp) covers both
    step = fam.step if fam.kind == "depth" else _lcm(fam.step, tp)
    lo = max(1, -(-pp // step))
    if k_max // step < lo:
        raise InvalidValueError("k_max", k_max, f"must be at least {lo * step} (the smallest valid scale index here)")

    def memory(j: int) -> PlanMemory:
        return plan_memory(fam.shape(j * step), plan, seq, method=method, **kwargs)

    def fits(j: int) -> bool:
        spec = fam.shape(j * step)
        if spec.n_layers < pp or tp not in PL.allowed_tp(spec.n_heads, spec.n_kv_heads):
            return False
        return memory(j).fits(card, headroom)

    memory(lo)                                          # validates every keyword once (one-line errors)
    j = largest_fitting(fits, lo=lo, limit=k_max // step, field="k_max")
    if j == 0:
        return LargestModel(fam.name, 0, None, None, fam.shape(step * lo), memory(lo), card.memory_bytes, plan)
    return LargestModel(fam.name, j * step, fam.shape(j * step), memory(j), fam.shape((j + 1) * step), memory(j + 1),
                        card.memory_bytes, plan)


@checked_call
def largest_trainable_table(gpu: GPU | str, n_gpus: int, seq: int = 2048, *, methods: Sequence[str] = METHODS,
                            stages: Sequence[int] = (0, 1, 2, 3), family: ModelFamily | str = "llama-width",
                            **kwargs) -> list[dict]:
    """The largest trainable member of ``family`` for every method x ZeRO stage (rows for a vramlib.present.viz.Table):
    method, ZeRO stage, scale index, shape, parameters, GB on the fullest GPU. Chapters 3, 9."""
    rows = []
    for method in methods:
        for zero in stages:
            r = largest_trainable_model(gpu, n_gpus, seq, family=family, method=method, zero=zero, **dict(kwargs))
            rows.append({"method": method, "ZeRO": zero, "k": r.k, "model": r.model.name if r.model else "none",
                         "parameters (B)": r.n_params / 1e9,
                         "GB on the fullest GPU": r.memory.total / 1e9 if r.memory else float("nan")})
    return rows


def _lcm(a: int, b_: int) -> int:
    return a * b_ // math.gcd(a, b_)


@dataclass(frozen=True)
class MinGpus:
    """The fewest GPUs (``n_gpus`` = tp x pp x dp) for a model; ``memory`` fits, ``memory_below`` (one DP rank
    fewer) does not. ``n_gpus`` is 0 when no data-parallel size helps (the replicated part alone does not fit)."""

    model: str
    n_gpus: int
    dp: int
    memory: PlanMemory | None
    memory_below: PlanMemory | None
    capacity: int


def _sharded_components(plan: ParallelPlan, method: str) -> set[str]:
    out = set()
    if plan.zero >= 3:
        out |= {"weights", "LoRA adapters"}
    if plan.zero >= 2:
        out |= {"gradients", "16-bit gradients (DeepSpeed)"}
    if plan.zero >= 1:
        out |= {"master weights (fp32)", "optimizer states"}
    return out


@checked_call
def min_gpus_for_training(model: ModelSpec | str, gpu: GPU | str, seq: int = 2048, *, method: str = "full",
                          zero: int = 3, headroom: float = 0.0, gpus_per_node: int = 8, **kwargs) -> MinGpus:
    """Fewest GPUs of ``gpu`` that train ``model`` with ``tp x pp`` model parallelism and ZeRO ``zero`` over the
    data-parallel ranks. Per GPU the memory is S / N_d + R (S: what ZeRO shards, R: the rest), so N_d comes
    from formulas.MIN_GPUS (``sympy.solve`` of M = S / n + R), then checked exactly. ``kwargs``: the layout
    ``tp=1``, ``pp=1`` (``None``: also search it -- TP within a node and dividing the heads, any number of stages,
    fewest GPUs first, then the smallest tp x pp), the plan's other fields and plan_memory's options.
    Chapters 3, 4, 12."""
    seq = check_positive_int("seq", seq)
    headroom = check_fraction("headroom", headroom)
    gpus_per_node = check_positive_int("gpus_per_node", gpus_per_node)
    method = check_choice("method", method, METHODS)
    if "dp" in kwargs:
        raise InvalidValueError("dp", kwargs["dp"], "is what min_gpus_for_training solves for; not a keyword")
    tp, pp = (kwargs.pop(k, 1) for k in ("tp", "pp"))
    tp, pp = (None if x is None else check_positive_int(k, x) for k, x in (("tp", tp), ("pp", pp)))
    if tp is None or pp is None:
        options = dict(method=method, zero=zero, headroom=headroom, **kwargs)
        return _min_gpus_any_layout(get_model(model), gpu, seq, tp, pp, gpus_per_node, options)
    spec = get_model(model)
    card = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    plan_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ParallelPlan.__dataclass_fields__}
    plan = ParallelPlan(tp=tp, pp=pp, dp=1, zero=zero, **plan_kw)
    if plan.ep > 1:
        raise InvalidValueError("ep", plan.ep, "min_gpus_for_training varies the data-parallel size; use ep=1")
    budget = int(card.memory_bytes * Fraction(1 - headroom).limit_denominator(10**6))
    sharded = _sharded_components(plan, method)

    frozen = ("quantization constants", "unquantized tensors")

    cache: dict[int, PlanMemory] = {}

    def memory(dp: int) -> PlanMemory:
        if dp not in cache:
            cache[dp] = plan_memory(spec, plan.with_(dp=dp), seq, method=method, **kwargs)
        return cache[dp]

    def is_sharded(name: str) -> bool:
        return name in sharded or (zero == 3 and (name.startswith("base weights") or name in frozen))

    base = memory(1)
    need = 1
    for bd in base.stages:
        s_ = sum(v_ for k_, v_ in bd.items() if is_sharded(k_))
        n_ = min_gpus(s_, budget, bd.total - s_)
        if n_ == 0:
            return MinGpus(spec.name, 0, 0, None, base, card.memory_bytes)
        need = max(need, n_)
    while not memory(need).fits(budget):   # per-component rounding can cost a byte or two
        need += 1
    while need > 1 and memory(need - 1).fits(budget):
        need -= 1
    below = memory(need - 1) if need > 1 else None
    return MinGpus(spec.name, need * tp * pp, need, memory(need), below, card.memory_bytes)


def _min_gpus_any_layout(spec: ModelSpec, gpu, seq: int, tp: int | None, pp: int | None, gpus_per_node: int,
                         options: dict) -> MinGpus:
    """min_gpus_for_training over the layouts (``tp`` / ``pp`` None: every size), fewest GPUs first, then the
    smallest tp x pp; ``options``: the call's method, zero, headroom and other keywords."""
    ok_tp = PL.allowed_tp(spec.n_heads, spec.n_kv_heads)
    tps = [tp] if tp is not None else [x for x in ok_tp if gpus_per_node % x == 0]
    pps = [pp] if pp is not None else list(range(1, spec.n_layers + 1))
    layouts = sorted(((t_, p_) for t_ in tps for p_ in pps), key=lambda x: (x[0] * x[1], x[1]))
    best = None
    for t_, p_ in layouts:
        if best is not None and best.n_gpus and t_ * p_ >= best.n_gpus:
            break
        if options["method"] != "full" and (t_ > 1 or p_ > 1):
            continue
        kw = dict(options)
        if t_ == 1:  # sequence parallelism (asked for the TP layouts) needs tp > 1
            kw.pop("sequence_parallel", None)
        r = min_gpus_for_training(spec, gpu, seq, tp=t_, pp=p_, **kw)
        if r.n_gpus and (best is None or not best.n_gpus or r.n_gpus < best.n_gpus):
            best = r
        elif best is None:
            best = r
    if best is None:  # every layout skipped (LoRA/QLoRA with tp or pp > 1): let the plan say why, in one line
        return min_gpus_for_training(spec, gpu, seq, tp=tps[0], pp=pps[0], **options)
    return best


@lru_cache(maxsize=None)
def max_params_zero_expr(stage: int) -> sp.Expr:
    """Parameters per model-parallel rank whose model states fill M with ZeRO ``stage`` (``sympy.solve`` of
    M = ZERO_MODEL_STATES[stage]): the ZeRO paper's Table 2 ("max model size"). Chapters 3, 12."""
    return sp.solve(sp.Eq(sp.Symbol("M", positive=True), PL.ZERO_MODEL_STATES[stage]), PL.Psi)[0]


@checked_call
def max_params_model_states(memory, dp: int = 1, stage: int = 0, convention: str = "mixed-fp32-master",
                            model_parallel: int = 1, precision: str = "bf16", optimizer_bytes_per_param=None) -> int:
    """Most parameters whose model states alone fit ``memory`` per GPU with ZeRO ``stage`` over ``dp`` ranks and
    ``model_parallel``-way model parallelism (Rajbhandari et al. 2020, Table 2). ``optimizer_bytes_per_param`` None:
    AdamW in the convention's width (8 B; 4 B under pure-bf16). Chapters 3, 12."""
    cap = capacity_bytes(memory, field="memory")
    dp, mp = check_positive_int("dp", dp), check_positive_int("model_parallel", model_parallel)
    stage = PL._check_stage(stage, "stage")
    if optimizer_bytes_per_param is None:
        optimizer_bytes_per_param = adamw_bytes_per_param(convention, precision)
    b_o = check_number("optimizer_bytes_per_param", optimizer_bytes_per_param, minimum=0,
                       allowed="must be a number of bytes >= 0 (Adam: 8)")
    cb = PL._conv_bytes(convention, precision, stage)
    vals = dict(M=Fraction(cap), N_d=Fraction(dp), b_w=cb["b_w"], b_g=cb["b_g"], b_gh=cb["b_gh"], b_m=cb["b_m"],
                b_o=Fraction(b_o))
    per_rank = int(PL._ev(max_params_zero_expr(stage), vals) // 1)

    def fits(n: int) -> bool:  # the Breakdown rounds each component up: step back a parameter if that tips it
        return n > 0 and PL.zero_model_states(n * mp, dp, stage, convention, tp=mp, precision=precision,
                                              optimizer_bytes_per_param=optimizer_bytes_per_param).total <= cap

    while per_rank > 0 and not fits(per_rank):
        per_rank -= 1
    return per_rank * mp


__all__ = [
    "BUBBLE", "FAMILIES", "FLOPS_PER_TOKEN", "INTER_NODE_GB_S", "LargestModel", "MinGpus",
    "ModelFamily", "PipelineBalance", "PlanSearch", "PlanSpace", "RankedPlan", "TOKENS_PER_SECOND", "T_STEP",
    "balance_pipeline",
    "balance_verdict", "get_family", "largest_trainable_model", "largest_trainable_table", "max_params_model_states",
    "min_gpus_for_training",
    "max_params_zero_expr", "npeval", "peak_limit", "search_plans", "spread",
]
