"""Memory of one GPU in a parallel training plan: data parallel with ZeRO 0-3, CPU/NVMe offload, tensor,
sequence, pipeline and expert parallelism, the ZeRO-3 gather buffer and communication buckets.

A plan is read as settings objects: a :class:`ParallelPlan` (the layout), a :class:`vramlib.memory.training.Workload`
(what is trained: method, seq, precision, optimizer, convention ...) and :class:`PlanOptions` (communication buffers,
layers per stage); :func:`plan_memory` builds them from its keywords and works in named steps.

Every formula is a sympy expression written once here (or in :mod:`vramlib.core.formulas` /
:mod:`vramlib.memory.activations`) and evaluated exactly; :mod:`vramlib.solve.planning` lambdifies the same
expressions with numpy for the plan search. Chapters 3, 4, 9, 11 and 12 display them.

Conventions (a plan is always read with one of ``vramlib.memory.training.CONVENTIONS``):

* ``source-12`` -- the source document: 2 + 2 + 8 bytes per parameter, no master copy.
* ``mixed-fp32-master`` -- Rajbhandari et al. 2020 (ZeRO), section 3.1 and Table 1: 2 + 2 + K with K = 12.
  :func:`zero_model_states` with this convention reproduces Table 1 (120 GB baseline for 7.5B parameters;
  31.4 / 16.6 / 1.9 GB at N_d = 64).
* ``deepspeed`` -- DeepSpeed's estimators ``estimate_zero2_model_states_mem_needs`` and
  ``estimate_zero3_model_states_mem_needs`` (``deepspeed/runtime/zero/stage_1_and_2.py`` and ``stage3.py``):
  2-byte weights, 4-byte fp32 gradients, 4-byte master weights, 8-byte Adam states; ZeRO-2 also keeps the
  2-byte gradient partition (the estimator's "18 = 2 + 4 + 4 + 8" after DeepSpeed PR #5099); ZeRO-3 adds
  4 bytes x the largest module's parameters (16-bit weights gathered + their 16-bit gradients). Stage 1
  gives 6 + 12/N_d bytes per parameter, Megatron-LM's distributed optimizer with bf16 parameters and fp32
  gradients. :func:`deepspeed_zero2_estimate` / :func:`deepspeed_zero3_estimate` are the estimators themselves,
  CPU side and ``additional_buffer_factor`` included. Stated exception: at N_d = 1 the estimator's ZeRO-2
  (2 + 18 = 20 B/param) exceeds ZeRO-0/1 (18) -- ZeRO-2 - ZeRO-1 = (6/N_d - 4) Psi, positive only for N_d = 1 --
  and ZeRO-3 adds its gather buffer; :func:`plan_memory` notes it. The convention is kept because it reproduces
  DeepSpeed's printed estimates (chapters 3, 4).

Layout conventions (Megatron-LM, Narayanan et al. 2021; Korthikanti et al. 2022):

* Tensor parallel (``tp`` = t) splits q/k/v/o and the MLP projections, the vocabulary-parallel embedding and the
  LM head by t; norms, biases and the MoE router are replicated. t must divide the attention heads, and divide the
  KV heads (each rank n_kv / t of them) or be a multiple of them (each rank one whole KV head, replicated
  t / n_kv times: vLLM's ``QKVParallelLinear``; Megatron-Core accepts only the first). KV_HEADS_PER_RANK and
  :func:`vramlib.memory.inference.kv_heads_per_gpu` write that rule once.
* Pipeline parallel (``pp`` = p) gives each stage a contiguous block of layers; the embedding (and learned
  positions) sit on the first stage, the final norm, the LM head and the loss on the last. With tied
  embeddings and p > 1 the last stage keeps its own copy of the embedding matrix as the head.
* 1F1B: stage i (0-based, i = 0 is the first stage) holds the activations of min(p - i, m) micro-batches
  (Narayanan et al. 2021, section 2.2; Korthikanti et al. section 4.2.3: the first stage holds p).
  Interleaved 1F1B with v model chunks per stage: (2 (p - i - 1) + (v - 1) p + 1) chunk-micro-batches of
  L / (p v) layers each, which for i = 0 is Korthikanti's p (1 + (p - 1)/(p v)). GPipe holds all m.
* Expert parallel (``ep`` = e) splits the routed experts of each MoE layer over e ranks taken from the
  data-parallel group; ZeRO shards expert states over the expert-data-parallel group of N_d / e ranks.
* Data parallel (``dp`` = N_d) with ZeRO stage 1 (optimizer states and master weights sharded), 2 (+ gradients),
  3 (+ weights; the gathered largest module per rank is the gather buffer).

Offload (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity, Rajbhandari et al. 2021): ``offload_optimizer``
("cpu" or "nvme", ZeRO >= 1) moves master weights and optimizer states, and gradients once they are
partitioned (ZeRO >= 2), to host memory (to NVMe: master and optimizer states; gradients stay in host memory);
``offload_params`` (ZeRO-3 only) moves the weight partition. :class:`PlanMemory` returns both sides.

Communication buckets (``buckets``):

* ``"ddp"``: PyTorch DDP allreduces 25 MiB buckets (``bucket_cap_mb=25``); with the default
  ``gradient_as_bucket_view=False`` the buckets are a second copy of all gradients (PyTorch docs).
* ``"deepspeed"``: ZeRO-1/2 allocate ``reduce_bucket_size`` (5e8 elements) 16-bit IPG buffers, two with
  ``overlap_comm`` (``stage_1_and_2.py``, ``backward()``); ZeRO-3 one reduce bucket plus the
  ``stage3_prefetch_bucket_size`` (5e7) prefetched parameters. ``allgather_bucket_size`` (5e8) chunks an
  in-place all-gather and allocates nothing.
* ``"hf-rule"``: the transformers DeepSpeed guide's rule of thumb, (reduce + allgather buckets) x 2 bytes,
  x 4.5 with ``overlap_comm`` ("5e8 x 2 bytes x 2 x 4.5 = 9 GB").
* ``"auto"``: ddp for ZeRO 0 without model parallelism, none for Megatron's ZeRO 0 (gradients live in its
  contiguous buffer), deepspeed for ZeRO 1-3.

Used in: chapters 3, 4, 9, 11, 12.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from fractions import Fraction

import sympy as sp

from ..memory import activations as A
from ..core import formulas as F
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, check_choice, check_keywords, check_number, \
    check_positive_int, checked_call
from ..memory.inference import allowed_tp, kv_heads_per_gpu, tp_problem, weights_detail
from ..catalog.models import SOURCE_SHAPES, ModelSpec, get_model, weight_params_of
from ..catalog.precision import get_precision
from ..core.symbols import E, P, V, b_g, b_m, b_o, b_w, beta_norm, h, n_mlp, n_s, tied
from ..core.settings import Settings, settings_class
from ..core.signatures import arg, field_args, keywords_through, signature, split_settings
from ..memory.training import CONVENTIONS, TRAINING_PRECISIONS, Workload, as_workload, check_lora_settings, lora_params, \
    adamw_bytes_per_param, optimizer_state_bytes, resolve_activation_style, state_width, step_fallback_note
from ..memory.sharding import (  # noqa: F401 (VL.parallel.MODULE_PARAMS*, vl.parallel.largest_module_params)
    ATTN_PARAMS_RANK, KV_HEADS_PER_RANK, MODULE_PARAMS, MODULE_PARAMS_RANK, N_e, _ev, largest_module,
    largest_module_params,
)
from ..core.portable import Fields, ev, portable, q, q_add, q_ceil, q_div, q_is_zero, q_mul, q_sub, raise_problem, share, \
    shared
from ..memory.fsdp import fsdp_parts, fsdp_problem, fsdp_title
from ..memory.step import OPTIMIZER_IMPLS, PEAKS, check_impl, head_params, largest_tensor, resolve_impl, \
    step_symbols

# --- symbols of this module ---------------------------------------------------------------------
_ind = dict(integer=True, nonnegative=True)
t = A.t                                                  # tensor-parallel size (Korthikanti et al.)
z_sp = A.z_sp                                            # 1 with sequence parallelism
p = sp.Symbol("p", integer=True, positive=True)          # pipeline-parallel size (stages)
i_s = sp.Symbol("i", integer=True, nonnegative=True)     # stage index, 0 = first stage
m = sp.Symbol("m", integer=True, positive=True)          # micro-batches per step per pipeline
v = sp.Symbol("v", integer=True, positive=True)          # model chunks per stage (interleaved 1F1B)
N_d = sp.Symbol("N_d", integer=True, positive=True)      # data-parallel size (the ZeRO paper's N_d)
Psi = sp.Symbol("Psi", nonnegative=True)                 # parameters held by one model-parallel rank (Psi)
K = sp.Symbol("K", nonnegative=True)                     # the ZeRO paper's optimizer bytes per parameter (12)
b_gh = sp.Symbol("b_gh", nonnegative=True)               # bytes of a 16-bit gradient copy kept beside fp32 ones
z_os = sp.Symbol("z_os", **_ind)                         # 1 when optimizer states are sharded (ZeRO >= 1)
z_g = sp.Symbol("z_g", **_ind)                           # 1 when gradients are sharded (ZeRO >= 2)
z_p = sp.Symbol("z_p", **_ind)                           # 1 when weights are sharded (ZeRO 3)
L_i = sp.Symbol("L_i", integer=True, nonnegative=True)   # layers on stage i
z_first = sp.Symbol("z_first", **_ind)                   # 1 on the first pipeline stage
z_last = sp.Symbol("z_last", **_ind)                     # 1 on the last pipeline stage
z_one = sp.Symbol("z_one", **_ind)                       # 1 when there is a single stage (p = 1)
F_i = sp.Symbol("F_i", nonnegative=True)                 # micro-batches whose activations stage i holds

# --- ZeRO model states (Rajbhandari et al. 2020, section 5; Table 1) ------------------------------------
ZERO_PARTS: dict[str, sp.Expr] = {
    "weights": b_w * Psi / N_d**z_p,
    "gradients": b_g * Psi / N_d**z_g,
    "16-bit gradients (DeepSpeed)": b_gh * Psi / N_d**z_g,
    "master weights (fp32)": b_m * Psi / N_d**z_os,
    "optimizer states": b_o * Psi / N_d**z_os,
}
"""Model states of one rank holding Psi parameters, by component; z_os, z_g, z_p switch sharding over N_d on.
Chapters 3, 4, 12."""

ZERO_STAGE_FLAGS: dict[int, dict[sp.Symbol, int]] = {
    0: {z_os: 0, z_g: 0, z_p: 0}, 1: {z_os: 1, z_g: 0, z_p: 0}, 2: {z_os: 1, z_g: 1, z_p: 0}, 3: {z_os: 1, z_g: 1, z_p: 1},
}
"""ZeRO stage -> which states are sharded: 1 = P_os, 2 = P_os+g, 3 = P_os+g+p (the paper's names)."""

ZERO_MODEL_STATES_GENERAL = sum(ZERO_PARTS.values(), sp.Integer(0))
"""All model states of one rank, any stage (the indicators z_os, z_g, z_p). Chapters 3, 12."""

ZERO_STATES: dict[int, dict[str, sp.Expr]] = {
    k: {name: expr.subs(flags) for name, expr in ZERO_PARTS.items()} for k, flags in ZERO_STAGE_FLAGS.items()}
ZERO_MODEL_STATES: dict[int, sp.Expr] = {k: ZERO_MODEL_STATES_GENERAL.subs(flags) for k, flags in ZERO_STAGE_FLAGS.items()}
"""Model states per GPU for ZeRO stage 0-3. Chapters 3, 4, 12."""

ZERO_PAPER: dict[int, sp.Expr] = {k: e.subs({b_w: 2, b_g: 2, b_gh: 0, b_m: 0, b_o: K}) for k, e in ZERO_MODEL_STATES.items()}
"""The paper's form: (2 + 2 + K) Psi, 2 Psi + 2 Psi + K Psi / N_d, 2 Psi + (2 + K) Psi / N_d, (2 + 2 + K) Psi / N_d."""

# --- parameters of one rank (tensor, pipeline, expert parallel): MODULE_PARAMS, MODULE_PARAMS_RANK and
# largest_module_params live in memory.sharding (training's ZeRO-3 gather buffer needs them too)
LAYER_PARAMS_RANK_DENSE = (ATTN_PARAMS_RANK + (n_mlp - E + n_s) * F.MLP_PARAMS / t
                           + F.LAYER_GROUPS["norm"] + F.LAYER_GROUPS["bias"] + F.LAYER_GROUPS["router"]
                           ).subs(F.UNIFORM_LAYER)
"""One layer on one tensor-parallel rank, without routed experts: q, o and the dense/shared MLP split by t, k and
v by KV_HEADS_PER_RANK; norms, biases and router replicated. Chapters 12."""

LAYER_PARAMS_RANK_EXPERTS = E * F.MLP_PARAMS / (t * N_e)
"""One layer's routed experts on one rank: split over expert parallel N_e and tensor parallel t."""

FIRST_STAGE_PARAMS = V * h / t + P * h
"""Extra parameters of the first stage: the vocabulary-parallel embedding and learned positions (replicated)."""

LAST_STAGE_PARAMS = (1 - tied * z_one) * V * h / t + h * (1 + beta_norm)
"""Extra parameters of the last stage: the LM head (its own copy when tied and p > 1) and the final norm."""

STAGE_PARAMS = L_i * (LAYER_PARAMS_RANK_DENSE + LAYER_PARAMS_RANK_EXPERTS) + z_first * FIRST_STAGE_PARAMS \
    + z_last * LAST_STAGE_PARAMS
"""Parameters of one rank of stage i (L_i layers); equals formulas.N_PARAMS for t = N_e = 1 and one stage.
Chapters 11, 12."""

# --- activations of one rank (Korthikanti et al. 2022, section 4) -----------------------------------------
MEGATRON_EMBED_ACT = A.MEGATRON_OUTSIDE_LAYERS.subs(V, 0) / 5
"""The embedding-dropout mask s b h (/ t with sequence parallelism): the paper's p / L term, on the first stage."""

MEGATRON_HEAD_ACT = A.MEGATRON_OUTSIDE_LAYERS - MEGATRON_EMBED_ACT
"""Final layer norm, output-layer input and fp32 logits for the loss: on the last stage."""

IN_FLIGHT: dict[str, sp.Expr] = {
    "1f1b": sp.Min(p - i_s, m, evaluate=False),
    "interleaved": sp.Min(2 * (p - i_s - 1) + (v - 1) * p + 1, m * v, evaluate=False) / v,
    "gpipe": m,
}
"""Micro-batches (in units of a stage's layers) whose activations stage i holds at its peak, by schedule.
Chapter 11."""

A_layer = sp.Symbol("A_layer", nonnegative=True)   # activations of one layer for one micro-batch

STAGE_ACTIVATIONS = F_i * (L_i * A_layer + z_first * MEGATRON_EMBED_ACT + z_last * MEGATRON_HEAD_ACT)
"""Activations of one rank of stage i: F_i micro-batches of L_i layers (A_layer each) plus the embedding / head
terms. A_layer is activations.MEGATRON_LAYER_BY_RECOMPUTE[recompute]. Chapters 11, 12."""

# --- communication buckets ---------------------------------------------------------------------------------
DEEPSPEED_REDUCE_BUCKET = 500_000_000
"""DeepSpeed ``reduce_bucket_size`` default, elements (``deepspeed/runtime/zero/config.py``)."""
DEEPSPEED_ALLGATHER_BUCKET = 500_000_000
"""DeepSpeed ``allgather_bucket_size`` default, elements."""
DEEPSPEED_PREFETCH_BUCKET = 50_000_000
"""DeepSpeed ``stage3_prefetch_bucket_size`` default, elements."""
DDP_BUCKET_CAP_MB = 25
"""PyTorch DDP ``bucket_cap_mb`` default: 25 MiB per bucket (``int(bucket_cap_mb * 1024 * 1024)`` bytes)."""

z_ov = sp.Symbol("z_ov", **_ind)                         # 1 with overlap_comm (DeepSpeed doubles its buffers)
BUCKET_BYTES: dict[str, sp.Expr] = {
    "hf-rule": 2 * (DEEPSPEED_REDUCE_BUCKET + DEEPSPEED_ALLGATHER_BUCKET) * (1 + sp.Rational(7, 2) * z_ov),
    "deepspeed": 2 * DEEPSPEED_REDUCE_BUCKET * (1 + z_ov),
    "deepspeed-zero3": sp.Integer(2 * (DEEPSPEED_REDUCE_BUCKET + DEEPSPEED_PREFETCH_BUCKET)),
}
"""Communication-bucket bytes per rule (``_buckets``): the HF estimate (x 4.5 with overlap_comm), DeepSpeed ZeRO-1/2
(reduce buckets, doubled with overlap_comm) and ZeRO-3 (reduce + prefetch buckets). Chapters 3, 4, 9."""

GATHER_BYTES_PER_PARAM = 4
"""``gather_buffer=True``: bytes per parameter of the largest module held gathered (its 16-bit weights and 16-bit
gradients, DeepSpeed's ``4 x largest_layer_params``)."""

BUCKETS = ("auto", "ddp", "deepspeed", "hf-rule", "none")
OFFLOAD = ("none", "cpu", "nvme")
SCHEDULES = ("1f1b", "gpipe")
ZERO_STAGES = (0, 1, 2, 3)


# --- the plan --------------------------------------------------------------------------------------------
@settings_class
@dataclass(frozen=True)
class ParallelPlan(Settings):
    """How a training step is laid out over ``tp x pp x dp`` GPUs (chapters 3, 4, 11, 12).

    ``zero``: ZeRO stage 0-3 over the data-parallel group. ``ep``: expert-parallel size (from the DP group).
    ``n_micro``: micro-batches per step per pipeline (gradient accumulation steps); global batch =
    ``micro_batch x n_micro x dp`` sequences. ``virtual_stages`` > 1: interleaved 1F1B. ``schedule``:
    "1f1b" or "gpipe". ``offload_optimizer`` / ``offload_params``: "none", "cpu" or "nvme".
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    ep: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    micro_batch: int = 1
    n_micro: int = 1
    virtual_stages: int = 1
    schedule: str = "1f1b"
    offload_optimizer: str = "none"
    offload_params: str = "none"

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep", "micro_batch", "n_micro", "virtual_stages"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        object.__setattr__(self, "zero", check_number("zero", self.zero, minimum=0, maximum=3, integer=True,
                                                      allowed="ZeRO stage must be 0, 1, 2 or 3"))
        if not isinstance(self.sequence_parallel, bool):
            raise InvalidValueError("sequence_parallel", self.sequence_parallel, "must be True or False")
        object.__setattr__(self, "recompute", check_choice("recompute", self.recompute, A.RECOMPUTE))
        object.__setattr__(self, "schedule", check_choice("schedule", self.schedule, SCHEDULES))
        for name in ("offload_optimizer", "offload_params"):
            object.__setattr__(self, name, check_choice(name, getattr(self, name), OFFLOAD))
        raise_problem(plan_problem(Fields(self)))

    @property
    def n_gpus(self) -> int:
        """tp x pp x dp."""
        return self.tp * self.pp * self.dp

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: micro_batch x n_micro x dp."""
        return self.micro_batch * self.n_micro * self.dp

    @property
    def bubble_fraction(self) -> Fraction:
        """Pipeline bubble as a share of the step: (p - 1) / (v m + p - 1) (Narayanan et al. 2021)."""
        return Fraction(self.pp - 1, self.virtual_stages * self.n_micro + self.pp - 1)

    def label(self) -> str:
        """The plan as one line: "TP8 PP4 DP1 ZeRO-1 SP mb1x64 selective recompute" (``plan_label``)."""
        return plan_label(Fields(self))


@portable
def spread_q(totals):
    """(max - min) / max of the stages' totals (exact; 0 for empty stages): the source's balance measure."""
    hi = max(totals)
    return q_div(hi - min(totals), hi) if hi else q(0)


@portable
def plan_problem(plan):
    """None, or the error of a plan whose fields contradict each other (expert ranks outside the data-parallel group,
    sequence parallelism without tensor parallelism, offload below the ZeRO stage that allows it, interleaving rules)."""
    if plan["dp"] % plan["ep"]:
        return ["ep", plan["ep"], "expert parallel ranks come from the data-parallel group: must divide dp=" +
                str(plan["dp"])]
    if plan["sequence_parallel"] and plan["tp"] == 1:
        return ["sequence_parallel", True, "sequence parallelism splits along the tensor-parallel group: needs tp > 1"]
    if plan["offload_optimizer"] != "none" and plan["zero"] == 0:
        return ["offload_optimizer", plan["offload_optimizer"], "optimizer offload needs ZeRO stage 1, 2 or 3"]
    if plan["offload_params"] != "none" and plan["zero"] != 3:
        return ["offload_params", plan["offload_params"], "parameter offload needs ZeRO stage 3"]
    if plan["virtual_stages"] > 1:
        if plan["pp"] == 1:
            return ["virtual_stages", plan["virtual_stages"], "interleaving needs pp > 1"]
        if plan["schedule"] != "1f1b":
            return ["schedule", plan["schedule"], "interleaving (virtual_stages > 1) is a 1F1B schedule"]
        if plan["n_micro"] % plan["pp"]:
            return ["n_micro", plan["n_micro"], "interleaved 1F1B needs a multiple of pp=" + str(plan["pp"]) +
                    " micro-batches"]
    return None


@portable
def layout_problem(m, plan):
    """None, or the error of a model that cannot be laid out this way: tensor parallelism into whole heads, at most
    one stage per layer, interleaving into whole chunks, expert parallelism over whole experts."""
    s = m["spec"]
    bad = tp_problem("tp", plan["tp"], s["name"] + "'s ", s["n_heads"], s["n_kv_heads"])
    if bad is not None:
        return bad
    if plan["pp"] > s["n_layers"]:
        return ["pp", plan["pp"], "at most one stage per layer: pp <= " + str(s["n_layers"])]
    if plan["virtual_stages"] > 1 and s["n_layers"] % (plan["pp"] * plan["virtual_stages"]):
        return ["virtual_stages", plan["virtual_stages"], "interleaving needs n_layers=" + str(s["n_layers"]) +
                " divisible by pp x virtual_stages"]
    if plan["ep"] > 1 and (s["n_experts"] == 0 or s["n_experts"] % plan["ep"]):
        return ["ep", plan["ep"], "must divide the experts of a MoE model (" + s["name"] + ": " + str(s["n_experts"]) +
                ")"]
    return None


@portable
def plan_label(plan):
    """The one-line name of a plan (``ParallelPlan.label``; the calculators print the same)."""
    parts = ["TP" + str(plan["tp"]), "PP" + str(plan["pp"]), "DP" + str(plan["dp"]), "ZeRO-" + str(plan["zero"])]
    if plan["ep"] > 1:
        parts.append("EP" + str(plan["ep"]))
    if plan["sequence_parallel"]:
        parts.append("SP")
    if plan["virtual_stages"] > 1:
        parts.append("v" + str(plan["virtual_stages"]))
    parts.append("mb" + str(plan["micro_batch"]) + "x" + str(plan["n_micro"]))
    if plan["recompute"] != "none":
        parts.append(plan["recompute"] + " recompute")
    if plan["offload_optimizer"] != "none":
        parts.append("opt->" + plan["offload_optimizer"])
    if plan["offload_params"] != "none":
        parts.append("params->" + plan["offload_params"])
    return " ".join(parts)


PLAN_FIELDS = tuple(x.name for x in fields(ParallelPlan))


@dataclass(frozen=True)
class PlanMemory:
    """Per-rank memory of every pipeline stage of a plan: ``stages[i]`` on the GPU, ``host[i]`` in CPU memory,
    ``nvme[i]`` on NVMe (bytes per rank). ``peak`` is the stage with the most GPU memory. Chapters 3, 4, 11, 12."""

    model: str
    plan: ParallelPlan
    stage_layers: tuple[int, ...]
    stages: tuple[Breakdown, ...]
    host: tuple[Breakdown, ...]
    nvme: tuple[int, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def peak_stage(self) -> int:
        totals = [bd.total for bd in self.stages]
        return totals.index(max(totals))

    @property
    def peak(self) -> Breakdown:
        """The GPU Breakdown of the fullest stage (what must fit the card)."""
        return self.stages[self.peak_stage]

    @property
    def total(self) -> int:
        """Bytes on the fullest GPU."""
        return self.peak.total

    @property
    def spread(self) -> Fraction:
        """(max - min) / max of the stages' GPU totals: the source's balance measure (chapter 11)."""
        return spread_q([bd.total for bd in self.stages])

    def fits(self, gpu_or_bytes, headroom: float = 0.0) -> bool:
        """Every stage fits under capacity x (1 - headroom)."""
        return all(bd.fits(gpu_or_bytes, headroom) for bd in self.stages)

    def host_bytes_per_node(self, gpus_per_node: int = 8) -> int:
        """CPU memory of one node: the largest per-rank host footprint x the ranks on the node."""
        return check_positive_int("gpus_per_node", gpus_per_node) * max(bd.total for bd in self.host)


# --- helpers -----------------------------------------------------------------------------------------------
def _conv_bytes(convention: str, precision: str, zero: int) -> dict[str, Fraction]:
    conv = CONVENTIONS[check_choice("convention", convention, CONVENTIONS)]
    prec = get_precision(precision, field="precision")
    if prec.name not in TRAINING_PRECISIONS:
        raise InvalidValueError("precision", precision, "training computes in bf16, fp16 or fp32")
    if prec.name == "fp32":
        return {"b_w": Fraction(4), "b_g": Fraction(4), "b_gh": Fraction(0), "b_m": Fraction(0),
                "gather": Fraction(8 if conv.gather_buffer_per_param else 0)}
    gh = 2 if (conv.name == "deepspeed" and zero == 2) else 0
    return {"b_w": Fraction(conv.weight), "b_g": Fraction(conv.grad), "b_gh": Fraction(gh),
            "b_m": Fraction(conv.master), "gather": Fraction(conv.gather_buffer_per_param)}


def _check_stage(stage, field: str = "zero") -> int:
    return check_number(field, stage, minimum=0, maximum=3, integer=True, allowed="ZeRO stage must be 0, 1, 2 or 3")


def _params_label(n: int) -> str:
    return f"{n / 1e9:g}B" if n < 10**15 else f"{n:,}"


@checked_call
def zero_parts(n_params, dp: int = 1, stage: int = 0, convention: str = "mixed-fp32-master", precision: str = "bf16",
               optimizer_bytes_per_param=None) -> dict[str, Fraction]:
    """Exact model-state bytes (Fractions) of one rank holding ``n_params`` parameters, by component.
    ``optimizer_bytes_per_param`` None: AdamW's two moments in the width of the parameters it updates (8 B, or 4 B
    under ``pure-bf16``: :func:`vramlib.memory.training.state_width`)."""
    stage = _check_stage(stage)
    dp = check_positive_int("dp", dp)
    n_params = check_number("n_params", n_params, minimum=0)
    if optimizer_bytes_per_param is None:
        optimizer_bytes_per_param = adamw_bytes_per_param(convention, precision)
    b_o = check_number("optimizer_bytes_per_param", optimizer_bytes_per_param, minimum=0,
                       allowed="must be a number of bytes >= 0 (Adam: 8)")
    cb = _conv_bytes(convention, precision, stage)
    return dict(zero_states(Fraction(n_params), dp, stage, cb, Fraction(b_o)))


_ZERO_MODEL_STATES_SIGNATURE = signature(
    arg("n_params", annotation="int"), arg("dp", 1, "int"), arg("stage", 0, "int"),
    arg("convention", "mixed-fp32-master", "str"), arg("tp", 1, "int"), arg("pp", 1, "int"),
    arg("precision", "bf16", "str"), arg("optimizer_bytes_per_param", None), arg("largest_layer_params", 0, "int"),
    arg("plan", None, "ParallelPlan | None", keyword_only=True))
"""zero_model_states' arguments as they have always been + ``plan`` (a ParallelPlan for tp, pp, dp and the stage)."""


def _zero_layout(plan: ParallelPlan | None, layout: dict) -> ParallelPlan:
    """The plan whose tp, pp, dp and ZeRO stage zero_model_states reads: ``plan`` (or the defaults) with the
    keywords ``dp``, ``stage``, ``tp``, ``pp`` applied."""
    if plan is not None and not isinstance(plan, ParallelPlan):
        raise InvalidValueError("plan", plan, "give a ParallelPlan (its tp, pp, dp and zero) or tp, pp, dp, stage")
    changes = {k: v for k, v in layout.items() if k != "stage"}
    if "stage" in layout:
        changes["zero"] = _check_stage(layout["stage"], "stage")
    return ParallelPlan(**changes) if plan is None else plan.with_(**changes)


@checked_call
@keywords_through(_ZERO_MODEL_STATES_SIGNATURE)
def zero_model_states(n_params: int, plan: ParallelPlan | None = None, convention: str = "mixed-fp32-master",
                      precision: str = "bf16", optimizer_bytes_per_param=None, largest_layer_params: int = 0,
                      **layout) -> Breakdown:
    """Model states per GPU when ``n_params`` split evenly over ``tp x pp`` and ZeRO ``stage`` shards over ``dp``
    (the ZeRO paper's and the source's arithmetic; no activations). ``layout``: ``dp``, ``stage``, ``tp``, ``pp``
    as keywords, or ``plan=`` a ParallelPlan (its tp, pp, dp and zero; the keywords override it). Chapters 3, 4, 12.

    >>> round(zero_model_states(7_500_000_000, dp=64, stage=1).total / 1e9, 1)  # ZeRO Table 1: P_os
    31.4
    """
    n_params = check_positive_int("n_params", n_params)
    plan = _zero_layout(plan, layout)
    tp, pp, dp, stage = plan.tp, plan.pp, plan.dp, plan.zero
    parts = zero_parts(Fraction(n_params, tp * pp), dp, stage, convention, precision, optimizer_bytes_per_param)
    out = {k: F.to_int_bytes(val) for k, val in parts.items() if val}
    gather = _conv_bytes(convention, precision, stage)["gather"]
    if stage == 3 and gather and largest_layer_params:
        out["ZeRO-3 gather buffer"] = F.to_int_bytes(gather * Fraction(largest_layer_params, tp))
    return Breakdown(out, title=f"{_params_label(n_params)} parameters, TP{tp} PP{pp} DP{dp}, ZeRO-{stage}, {convention}")


@checked_call
def stage_params(model: ModelSpec | str, tp: int = 1, pp: int = 1, ep: int = 1, stage_layers: tuple[int, ...] | None = None,
                 moe_layers=None) -> list[tuple[Fraction, Fraction]]:
    """(non-expert, expert) parameters of one rank of each pipeline stage (exact; nominal shapes scaled to their
    nominal size). Chapters 11, 12."""
    spec = get_model(model)
    tp, ep = check_positive_int("tp", tp), check_positive_int("ep", ep)
    if tp > 1:
        kv_heads_per_gpu(spec, tp)
    if ep > 1 and (not spec.is_moe or spec.n_experts % ep):
        raise InvalidValueError("ep", ep, f"must divide the experts of a MoE model ({spec.name}: {spec.n_experts})")
    layers = _stage_layers(spec, pp, stage_layers)
    return [tuple(x) for x in stage_model_params(spec.view(), tp, ep, list(layers), _moe_flags(spec, moe_layers))]


share(LAYER_PARAMS_RANK_DENSE=LAYER_PARAMS_RANK_DENSE, LAYER_PARAMS_RANK_EXPERTS=LAYER_PARAMS_RANK_EXPERTS,
      FIRST_STAGE_PARAMS=FIRST_STAGE_PARAMS, LAST_STAGE_PARAMS=LAST_STAGE_PARAMS, N_PARAMS=F.N_PARAMS,
      ZERO_PARTS=ZERO_PARTS, ZERO_PART_NAMES=list(ZERO_PARTS), BUCKET_BYTES=BUCKET_BYTES, IN_FLIGHT=IN_FLIGHT,
      STAGE_ACTIVATIONS=STAGE_ACTIVATIONS, MEGATRON_LAYER_BY_RECOMPUTE=A.MEGATRON_LAYER_BY_RECOMPUTE,
      ZERO_STAGE_FLAGS=[{s_.name: x for s_, x in ZERO_STAGE_FLAGS[k].items()} for k in ZERO_STAGES])


@portable
def model_scale(m):
    """Nominal / exact parameters: the source's shapes store their nominal size (weights = nominal x bytes)."""
    n = ev("N_PARAMS", None, m["sym"])
    return q_div(weight_params_of(m["spec"], n), n)


@portable
def layer_rank_params(m, tp, ep):
    """One layer's [non-expert, expert] parameters (exact) on one rank: ``{"moe": ..., "dense": ...}`` for a layer with
    routed experts and one without (its dense MLP and shared experts), LAYER_PARAMS_RANK_DENSE / _EXPERTS."""
    vals = dict(m["sym"])
    vals["t"] = tp
    vals["N_e"] = ep
    dense_vals = dict(vals)
    dense_vals["E"] = 0
    dense_vals["n_mlp"] = 1
    return {"moe": [ev("LAYER_PARAMS_RANK_DENSE", None, vals), ev("LAYER_PARAMS_RANK_EXPERTS", None, vals)],
            "dense": [ev("LAYER_PARAMS_RANK_DENSE", None, dense_vals), q(0)]}


@portable
def stage_model_params(m, tp, ep, layers, moe):
    """[non-expert, expert] parameters (exact) of one rank of each stage holding ``layers[i]`` layers (``moe[j]``:
    layer j has routed experts): LAYER_PARAMS_RANK_* per layer, the embedding on the first stage, the head and final
    norm on the last, scaled by ``model_scale``."""
    pp = len(layers)
    per = layer_rank_params(m, tp, ep)
    vals = dict(m["sym"])
    vals["t"] = tp
    vals["z_one"] = 1 if pp == 1 else 0
    per_moe = per["moe"]
    per_dense = per["dense"]
    first = ev("FIRST_STAGE_PARAMS", None, vals)
    last = ev("LAST_STAGE_PARAMS", None, vals)
    k = model_scale(m)
    out = []
    start = 0
    for i in range(pp):
        n_moe = 0
        for j in range(start, start + layers[i]):
            if moe[j]:
                n_moe += 1
        n_dense = layers[i] - n_moe
        start += layers[i]
        dense = q_add(q_mul(per_moe[0], n_moe), q_mul(per_dense[0], n_dense))
        expert = q_add(q_mul(per_moe[1], n_moe), q_mul(per_dense[1], n_dense))
        if i == 0:
            dense = q_add(dense, first)
        if i == pp - 1:
            dense = q_add(dense, last)
        out.append([q_mul(dense, k), q_mul(expert, k)])
    return out


def _moe_flags(spec: ModelSpec, moe_layers) -> list[bool]:
    if moe_layers is None:
        return [spec.is_moe] * spec.n_layers
    if not spec.is_moe:
        raise InvalidValueError("moe_layers", moe_layers, f"{spec.name} is dense (no experts)")
    if not isinstance(moe_layers, (list, tuple, range, set, frozenset)):
        raise InvalidValueError("moe_layers", moe_layers, "give the indices of the MoE layers, e.g. range(0, 32, 2)")
    idx = set()
    for x in moe_layers:
        if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < spec.n_layers:
            raise InvalidValueError("moe_layers", x, f"layer indices are 0..{spec.n_layers - 1}")
        idx.add(x)
    return [k in idx for k in range(spec.n_layers)]


@checked_call
def even_split(n_layers: int, pp: int) -> tuple[int, ...]:
    """Layers per stage of the even split: the first n_layers mod pp stages get one more."""
    n_layers, pp = check_positive_int("n_layers", n_layers), check_positive_int("pp", pp)
    return tuple(even_layers(n_layers, pp))


@portable
def even_layers(n_layers, pp):
    """The even split: the first n_layers mod pp stages get one more layer."""
    return [n_layers // pp + (1 if k < n_layers % pp else 0) for k in range(pp)]


def _stage_layers(spec: ModelSpec, pp: int, stage_layers) -> tuple[int, ...]:
    pp = check_positive_int("pp", pp)
    if pp > spec.n_layers:
        raise InvalidValueError("pp", pp, f"at most one stage per layer: pp <= {spec.n_layers}")
    if stage_layers is None:
        return even_split(spec.n_layers, pp)
    if not isinstance(stage_layers, (list, tuple)):
        raise InvalidValueError("stage_layers", stage_layers, f"give {pp} layer counts summing to {spec.n_layers}, "
                                                              "e.g. (8, 8)")
    layers = tuple(check_positive_int("stage_layers", x, allow_zero=True) for x in stage_layers)
    if len(layers) != pp or sum(layers) != spec.n_layers:
        raise InvalidValueError("stage_layers", stage_layers, f"give {pp} layer counts summing to {spec.n_layers}")
    return layers


@checked_call
def in_flight(pp: int, stage: int, n_micro: int, schedule: str = "1f1b", virtual_stages: int = 1) -> Fraction:
    """Micro-batches whose activations stage ``stage`` (0-based) holds at its peak (IN_FLIGHT). Chapter 11."""
    pp, n_micro = check_positive_int("pp", pp), check_positive_int("n_micro", n_micro)
    virtual_stages = check_positive_int("virtual_stages", virtual_stages)
    stage = check_number("stage", stage, minimum=0, maximum=pp - 1, integer=True,
                         allowed=f"stages are 0..{pp - 1} (0 = the first)")
    schedule = check_choice("schedule", schedule, SCHEDULES)
    return in_flight_q(pp, stage, n_micro, schedule, virtual_stages)


@portable
def in_flight_q(pp, stage, n_micro, schedule, virtual_stages):
    """IN_FLIGHT of stage ``stage`` under the schedule (interleaved 1F1B when virtual_stages > 1), exact."""
    key = "gpipe" if schedule == "gpipe" else ("interleaved" if virtual_stages > 1 else "1f1b")
    return ev("IN_FLIGHT", key, {"p": pp, "i": stage, "m": n_micro, "v": virtual_stages})


def check_layout(spec: ModelSpec, plan: ParallelPlan) -> None:
    """Raise InvalidValueError when the model cannot be laid out this way (heads, layers, experts): ``layout_problem``."""
    raise_problem(layout_problem(spec.view(), Fields(plan)))


@portable
def bucket_bytes(rule, zero, tp, pp, grad_bytes, overlap_comm):
    """[rule, bytes] of the communication buckets (``auto`` resolved: ddp for ZeRO 0 on one device per replica, none
    for Megatron's ZeRO 0, deepspeed for ZeRO 1-3; DDP copies the gradients, the others are BUCKET_BYTES)."""
    if rule == "auto":
        rule = ("ddp" if tp == 1 and pp == 1 else "none") if zero == 0 else "deepspeed"
    if rule == "none":
        return [rule, 0]
    if rule == "ddp":
        return [rule, q_ceil(grad_bytes)]
    key = rule if rule == "hf-rule" or zero != 3 else "deepspeed-zero3"
    return [rule, q_ceil(ev("BUCKET_BYTES", key, {"z_ov": 1 if overlap_comm else 0}))]


@portable
def megatron_stage_activations(m, plan, seq, layers):
    """Activation bytes of one rank of each stage (STAGE_ACTIVATIONS with the schedule's in-flight micro-batches,
    Korthikanti et al.'s layer activations at the plan's recomputation), rounded up per stage."""
    vals = dict(m["sym"])
    vals["s"] = seq
    vals["b"] = plan["micro_batch"]
    vals["t"] = plan["tp"]
    vals["z_sp"] = 1 if plan["sequence_parallel"] else 0
    vals["A_layer"] = ev("MEGATRON_LAYER_BY_RECOMPUTE", plan["recompute"], vals)
    out = []
    for i in range(len(layers)):
        vals["F_i"] = in_flight_q(plan["pp"], i, plan["n_micro"], plan["schedule"], plan["virtual_stages"])
        vals["L_i"] = layers[i]
        vals["z_first"] = 1 if i == 0 else 0
        vals["z_last"] = 1 if i == plan["pp"] - 1 else 0
        out.append(q_ceil(ev("STAGE_ACTIVATIONS", None, vals)))
    return out


def _stage_activations(spec: ModelSpec, plan: ParallelPlan, seq: int, layers: tuple[int, ...], style: str,
                       precision: str, attention: str) -> list[int]:
    if style == "hf":
        return [A.activation_bytes(spec, seq, plan.micro_batch, precision, attention, plan.recompute, "hf", "model")]
    return megatron_stage_activations(spec.view(), Fields(plan), seq, list(layers))


# --- the main function -------------------------------------------------------------------------------------
@settings_class
@dataclass(frozen=True)
class PlanOptions(Settings):
    """The finer knobs of a plan's memory (chapters 3, 4, 11, 12): communication ``buckets`` (auto | ddp | deepspeed
    | hf-rule | none, see the module doc) and ``overlap_comm``; ``gather_buffer`` (None = the convention's: deepspeed
    4 B x the largest module on the rank; True = 4 B; False = none); ``stage_layers`` (layers per pipeline stage,
    None = the even split) and ``moe_layers`` (indices of the MoE layers, None = every layer of a MoE model);
    ``peak`` ("sum": every part at once; "step": the step's phases where they are measured, ZeRO-3 as FSDP2 runs it,
    :mod:`vramlib.memory.fsdp`) and ``optimizer_impl`` (None: the optimizer's default).
    :func:`plan_memory` takes them as keywords; the layer lists are checked against the model there."""

    buckets: str = "auto"
    overlap_comm: bool = False
    gather_buffer: bool | None = None
    stage_layers: tuple[int, ...] | None = None
    moe_layers: object = None
    peak: str = "sum"
    optimizer_impl: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "buckets", check_choice("buckets", self.buckets, BUCKETS))
        object.__setattr__(self, "peak", check_choice("peak", self.peak, PEAKS))
        if self.optimizer_impl is not None:
            object.__setattr__(self, "optimizer_impl", check_choice("optimizer_impl", self.optimizer_impl,
                                                                    sorted({i for d in OPTIMIZER_IMPLS.values()
                                                                            for i in d})))
        if not isinstance(self.overlap_comm, bool):
            raise InvalidValueError("overlap_comm", self.overlap_comm, "must be True or False")
        if self.gather_buffer is not None and not isinstance(self.gather_buffer, bool):
            raise InvalidValueError("gather_buffer", self.gather_buffer, "must be None (the convention's), True or False")




@dataclass(frozen=True)
class _Step:
    """What every stage of :func:`plan_memory` reads: the model, the plan, the workload and options, the resolved
    activation style, the layers per stage and the convention's bytes per parameter at the plan's ZeRO stage."""

    spec: ModelSpec
    plan: ParallelPlan
    w: Workload
    opts: PlanOptions
    style: str
    layers: tuple[int, ...]
    cb: dict


def _plan_settings(plan, workload, settings: dict) -> tuple[ParallelPlan, Workload, PlanOptions]:
    """The ParallelPlan, Workload and PlanOptions of a plan_memory call: objects given, with keyword fields applied."""
    w_kw, o_kw, plan_fields = split_settings(settings, Workload, PlanOptions)
    check_keywords("plan_memory", plan_fields, PLAN_FIELDS + _PLAN_MEMORY_ARGS)
    if plan is not None and not isinstance(plan, ParallelPlan):
        raise InvalidValueError("plan", plan, "give a ParallelPlan or plan fields as keywords")
    if plan is None:
        plan = ParallelPlan(**plan_fields)
    elif plan_fields:
        plan = plan.with_(**plan_fields)
    return plan, as_workload(workload, w_kw, activation_style="auto"), PlanOptions(**o_kw)


def _check_plan(spec: ModelSpec, plan: ParallelPlan, w: Workload, opts: PlanOptions) -> tuple[str, tuple[int, ...]]:
    """The model-dependent checks of a plan; its activation style and layers per stage."""
    check_layout(spec, plan)
    style = resolve_activation_style(spec, w.activation_style, one_device=plan.tp == plan.pp == 1)
    if w.method != "full" and (plan.tp > 1 or plan.pp > 1):
        raise InvalidValueError("method", w.method, "LoRA/QLoRA plans are modelled with tp=1 and pp=1 (data parallel + "
                                                    "ZeRO)")
    layers = _stage_layers(spec, plan.pp, opts.stage_layers)
    check_lora_settings(spec, w)
    return style, layers


def _trainable(step: _Step) -> dict:
    """What ``plan_stages`` needs beyond the plan: the layer lists, the optimizer bytes per trainable parameter,
    (lora/qlora) the trainable count and the frozen base weights, the gather buffer's bytes per parameter."""
    spec, w, g = step.spec, step.w, step.opts.gather_buffer
    out = {"layers": list(step.layers), "moe": _moe_flags(spec, step.opts.moe_layers), "method": w.method,
           "cb": step.cb, "base": [], "base_label": "", "n_trainable": 0, "buckets": step.opts.buckets,
           "overlap_comm": step.opts.overlap_comm, "reserve": w.reserve_bytes, "convention": w.convention,
           "gather": step.cb["gather"] if g is None else Fraction(GATHER_BYTES_PER_PARAM if g else 0)}
    width = w.state_bytes
    if w.method == "full":
        out["b_o"] = Fraction(optimizer_state_bytes(spec, w.optimizer, state_bytes=width), spec.weight_params)
        return out
    n_t = lora_params(spec, w.lora_rank, w.lora_targets)
    out.update(b_o=Fraction(optimizer_state_bytes(spec, w.optimizer, lora_rank=w.lora_rank, lora_targets=w.lora_targets,
                                                  state_bytes=width), n_t), n_trainable=n_t, base_label=w.base_format(),
               base=[[k, v_] for k, v_ in weights_detail(spec, w.base_format()).items()])
    return out


@portable
def zero_rates(dp, zero, cb, b_o):
    """[[name, bytes per parameter]] (exact) of the ZERO_PARTS at ZeRO stage ``zero`` sharded over ``dp``
    (``cb``: the convention's bytes per parameter, ``b_o``: optimizer bytes per parameter), read at Psi = 1: every
    part is Psi x bytes / N_d^z, linear in Psi (checked where they are shared)."""
    vals = dict(shared("ZERO_STAGE_FLAGS")[zero])
    vals["Psi"] = 1
    vals["N_d"] = dp
    vals["b_w"] = cb["b_w"]
    vals["b_g"] = cb["b_g"]
    vals["b_gh"] = cb["b_gh"]
    vals["b_m"] = cb["b_m"]
    vals["b_o"] = b_o
    return [[name, ev("ZERO_PARTS", name, vals)] for name in shared("ZERO_PART_NAMES")]


@portable
def zero_states(n, dp, zero, cb, b_o):
    """[[name, bytes]] (exact) of the ZERO_PARTS of a rank holding ``n`` trainable parameters (``zero_rates``)."""
    return [[part[0], q_mul(part[1], n)] for part in zero_rates(dp, zero, cb, b_o)]


@portable
def state_place(plan, name):
    """gpu, cpu or nvme: where one model-state component lives under the plan's offload settings (ZeRO-Offload,
    ZeRO-Infinity: gradients go to host memory once partitioned, ZeRO >= 2)."""
    if name in ("weights", "LoRA adapters") and plan["offload_params"] != "none":
        return plan["offload_params"]
    if name in ("master weights (fp32)", "optimizer states") and plan["offload_optimizer"] != "none":
        return plan["offload_optimizer"]
    if "gradients" in name and plan["offload_optimizer"] != "none" and plan["zero"] >= 2:
        return "cpu"
    return "gpu"


@portable
def plan_rates(plan, setup):
    """[``zero_rates`` over dp, over dp / ep]: bytes per dense and per routed-expert parameter of one rank."""
    dense = zero_rates(plan["dp"], plan["zero"], setup["cb"], setup["b_o"])
    if plan["ep"] == 1:
        return [dense, dense]
    return [dense, zero_rates(plan["dp"] // plan["ep"], plan["zero"], setup["cb"], setup["b_o"])]


@portable
def rank_states(rates, dense, expert, method):
    """[[name, bytes]] of one rank's model states: the dense part at its rates (sharded over dp), the routed experts at
    theirs (over dp / ep); LoRA's trainable weights are its adapters."""
    parts = []
    for j in range(len(rates[0])):
        val = q_mul(rates[0][j][1], dense)
        if not q_is_zero(expert):
            val = q_add(val, q_mul(rates[1][j][1], expert))
        name = rates[0][j][0]
        if method != "full" and name == "weights":
            name = "LoRA adapters"
        parts.append([name, val])
    return parts


@portable
def gradient_bytes(pairs):
    """Sum of the components whose name says gradients."""
    total = q(0)
    for pair in pairs:
        if "gradients" in pair[0]:
            total = q_add(total, pair[1])
    return total


@portable
def plan_stages(m, plan, setup):
    """Every stage of a plan: ``{"gpu": [[name, bytes]], "host": [[name, bytes]], "nvme": bytes, "states": bytes,
    "gather": bytes}`` (exact) per stage -- the frozen base (sharded over dp under ZeRO-3), the model states where
    the offload puts them, the ZeRO-3 gather buffer (bytes per parameter x the largest module the stage holds), the
    communication buckets, the activations and the reserve. ``setup``: what :func:`plan_memory` resolved."""
    if setup["method"] == "full":
        per_stage = stage_model_params(m, plan["tp"], plan["ep"], setup["layers"], setup["moe"])
    else:
        per_stage = [[q(setup["n_trainable"]), q(0)]]
    acts = setup["acts"]
    rates = plan_rates(plan, setup)
    label = plan_label(plan)
    out = []
    for i in range(len(per_stage)):
        parts = rank_states(rates, per_stage[i][0], per_stage[i][1], setup["method"])
        gpu = []
        host = []
        nvme = q(0)
        for bp in setup["base"]:
            name = "base weights (" + setup["base_label"] + ")" if bp[0] == "weights" else bp[0]
            gpu.append([name, q_div(bp[1], plan["dp"]) if plan["zero"] == 3 else q(bp[1])])
        states = q(0)
        for part in parts:
            states = q_add(states, part[1])
            if q_is_zero(part[1]):
                continue
            where = state_place(plan, part[0])
            if where == "gpu":
                gpu.append(part)
            elif where == "cpu":
                host.append(part)
            else:
                nvme = q_add(nvme, part[1])
        gather = q(0)
        if plan["zero"] == 3 and not q_is_zero(setup["gather"]) and setup["method"] == "full":
            pos = "single" if plan["pp"] == 1 else ("first" if i == 0 else ("last" if i == plan["pp"] - 1 else "middle"))
            gather = q_mul(q_mul(setup["gather"], largest_module(m, plan["tp"], plan["ep"], pos)), model_scale(m))
            gpu.append(["ZeRO-3 gather buffer", gather])
        grad = gradient_bytes(gpu)
        bucket = bucket_bytes(setup["buckets"], plan["zero"], plan["tp"], plan["pp"],
                              gradient_bytes(parts) if q_is_zero(grad) else grad, setup["overlap_comm"])
        if bucket[1]:
            gpu.append(["communication buckets (" + bucket[0] + ")", q(bucket[1])])
        gpu.append(["activations", q(acts[i] if len(acts) > 1 else acts[0])])
        gpu.append(["reserve (CUDA context, framework)", q(setup["reserve"])])
        title = (m["spec"]["name"] + ": " + label + ", stage " + str(i) + " of " + str(plan["pp"]) + " (" +
                 str(setup["layers"][i]) + " layers), " + setup["method"] + ", " + setup["convention"])
        out.append({"gpu": gpu, "host": host, "nvme": nvme, "states": states, "gather": gather, "title": title,
                    "params": per_stage[i],
                    "host_title": m["spec"]["name"] + ": host memory per rank, stage " + str(i)})
    return out


@portable
def plan_step_values(m, groups, plan, setup, st):
    """The numbers :func:`vramlib.memory.fsdp.fsdp_parts` reads for the one stage of a ZeRO-3 data-parallel plan:
    the held shards ([[component, bytes]] under ``"held_parts"``), the gathered root and layer, their gradients, the
    LM head's, the layer backward's working set and the optimizer's temporaries on the shard; ``st``: the step's
    activations (act, rerun, a_head, a_done), batch, seq, b_a, impl and the updated parameters' width."""
    dp = plan["dp"]
    n = m["spec"]["n_layers"]
    scale = model_scale(m)
    layer = q_mul(layer_rank_params(m, 1, 1)["dense"][0], scale)
    total = stage_model_params(m, 1, 1, setup["layers"], setup["moe"])[0][0]
    root = q_sub(total, q_mul(layer, n))
    b_w = setup["cb"]["b_w"]
    b_g = setup["cb"]["b_g"]
    held = 0
    held_parts = []
    for x in rank_states(plan_rates(plan, setup), total, q(0), "full"):
        if not ("gradients" in x[0]) and not q_is_zero(x[1]):
            held_parts.append([x[0], q_ceil(x[1])])
            held += q_ceil(x[1])
    sym = step_symbols(m, st["seq"], st["batch"], st["b_a"])
    sym["b_g"] = b_g
    temp = ev("STEP_TEMPORARIES", setup["optimizer"] + "|" + st["impl"],
              {"N_t": q_ceil(q_div(total, dp)), "P_max": q_ceil(q_div(q(largest_tensor(m)), dp)), "w": st["width"]})
    return {"held": held, "held_parts": held_parts, "root": q_ceil(q_mul(root, b_w)), "layer": q_ceil(q_mul(layer, b_w)),
            "layer_grad": q_ceil(q_mul(layer, b_g)), "root_grad": q_ceil(q_mul(root, b_g)),
            "head_grad": q_ceil(q_mul(q_mul(q(head_params(groups)), scale), b_g)), "act": st["act"],
            "a_head": st["a_head"], "a_done": st["a_done"], "rerun": st["rerun"],
            "work": q_ceil(ev("FSDP_LAYER_BACKWARD_WORK", None, sym)), "temp": q_ceil(temp), "dp": dp, "layers": n,
            "batch": st["batch"], "seq": st["seq"], "vocab": m["spec"]["vocab"], "b_a": st["b_a"], "impl": st["impl"]}


@portable
def plan_step_stage(m, groups, plan, setup, st):
    """[parts, phases, peak phase, steady] of a ZeRO-3 data-parallel plan's rank priced by FSDP2's phases
    (``plan_step_values``, ``fsdp_parts``): the held shards, the tensors alive at the peak, the reserve; phases and
    steady include the reserve."""
    r = plan_step_values(m, groups, plan, setup, st)
    got = fsdp_parts(r)
    parts = [x for x in r["held_parts"]]
    for x in got[2]:
        parts.append(x)
    parts.append(["reserve (CUDA context, framework)", setup["reserve"]])
    phases = []
    for x in got[0]:
        phases.append([x[0], x[1] + setup["reserve"]])
    return [parts, phases, got[1], r["held"] + setup["reserve"]]


def _fsdp_stage(step: _Step, setup: dict, title: str, notes: tuple) -> Breakdown:
    """The one stage of a ZeRO-3 data-parallel plan priced by FSDP2's phases (:mod:`vramlib.memory.fsdp`)."""
    spec, w, plan = step.spec, step.w, step.plan
    acts = {sc: A.activation_bytes(spec, w.seq, plan.micro_batch, w.dtype, w.attention, plan.recompute, "hf", sc)
            for sc in ("end-of-forward", "rerun", "loss-head", "layer-freed")}
    impl = resolve_impl(w.optimizer, step.opts.optimizer_impl)
    st = {"act": acts["end-of-forward"], "rerun": acts["rerun"], "a_head": acts["loss-head"],
          "a_done": acts["layer-freed"], "batch": plan.micro_batch, "seq": w.seq,
          "b_a": A._activation_dtype_bytes(w.dtype),
          "impl": impl, "width": state_width(Fields(CONVENTIONS[w.convention]), w.dtype)}
    setup = dict(setup, optimizer=w.optimizer)
    parts, phases, peak_phase, steady = plan_step_stage(spec.view(), spec.param_groups(), Fields(plan), setup, st)
    return Breakdown({k: F.to_int_bytes(x) for k, x in parts}, title=fsdp_title(title, impl, peak_phase), notes=notes,
                     phases=dict(phases), peak_phase=peak_phase, steady=steady)


def _fsdp_problem(step: _Step) -> str | None:
    """Why FSDP2's phases do not price this plan (``fsdp_problem``), or None."""
    cb, w = step.cb, step.w
    if step.opts.optimizer_impl is not None:
        check_impl(w.optimizer, step.opts.optimizer_impl)
    return fsdp_problem(Fields(step.spec), Fields(step.plan),
                        {"style": step.style, "method": w.method, "optimizer": w.optimizer, "recompute":
                         step.plan.recompute, "buckets": step.opts.buckets, "gather_buffer": step.opts.gather_buffer,
                         "b_w": cb["b_w"], "b_g": cb["b_g"], "b_m": cb["b_m"]})


def _lower_rates(step: _Step, setup: dict) -> list:
    """``plan_rates`` of each ZeRO stage below the plan's (what :func:`_zero_note` compares with)."""
    plan = step.plan
    return [plan_rates({"dp": plan.dp, "ep": plan.ep, "zero": k},
                       dict(setup, cb=_conv_bytes(step.w.convention, step.w.precision, k))) for k in range(plan.zero)]


def _zero_note(step: _Step, setup: dict, lower: list, i: int, per_stage: tuple, here: Fraction,
               gathered: bool) -> str | None:
    """A note when a lower ZeRO stage (``lower``: their rates) would hold fewer model-state bytes on stage i's rank
    (``here``), else None."""
    plan = step.plan
    for k in range(plan.zero):
        low = sum((x for _, x in rank_states(lower[k], per_stage[0], per_stage[1], setup["method"])), Fraction(0))
        if step.w.method != "full" and plan.zero == 3:      # the frozen base is sharded only under ZeRO-3
            low += sum((Fraction(v_) for _, v_ in setup["base"]), Fraction(0)) * (1 - Fraction(1, plan.dp))
        if here > low:
            why = ("the deepspeed convention's ZeRO-2 keeps DeepSpeed's 16-bit gradient partition beside the fp32 one "
                   "(2 + 18/N_d B/param), which only pays off from dp=2" if plan.zero == 2 and step.cb["b_gh"] else
                   "the ZeRO-3 gather buffer (4 B x the largest module) outweighs what sharding saves" if gathered
                   else "ZeRO shards nothing at dp=1")
            return (f"stage {i}: ZeRO-{plan.zero} keeps {F.to_int_bytes(here - low):,} bytes more model states than "
                    f"ZeRO-{k} at dp={plan.dp}: {why}")
    return None


def _plan_notes(step: _Step) -> list[str]:
    """The named exceptions of a plan known before its stages: replicated KV heads, recomputation that costs (a
    ZeRO stage holding more model states than a lower one is noted per stage in :func:`plan_memory`)."""
    spec, plan, w = step.spec, step.plan, step.w
    out = [f"activations: {step.style} accounting" + (f", seq {w.seq:,} x micro-batch {plan.micro_batch}")]
    if plan.tp > spec.n_kv_heads:
        out.append(f"tp={plan.tp} > n_kv_heads={spec.n_kv_heads}: each rank keeps {kv_heads_per_gpu(spec, plan.tp)} "
                   f"whole KV head, replicated {plan.tp // spec.n_kv_heads}x (vLLM's QKVParallelLinear rule); "
                   "Megatron-Core refuses tp not dividing num_query_groups")
    if step.style == "hf" and plan.recompute != "none":
        note = A.recompute_note(spec, w.seq, plan.micro_batch, w.dtype, w.attention, plan.recompute, "hf")
        if note:
            out.append(note)
    return out


_PLAN_MEMORY_SIGNATURE = signature(
    arg("model", annotation="ModelSpec | str"), arg("plan", None, "ParallelPlan | None"),
    field_args(Workload, ("seq",)), field_args(Workload, ("method", "precision", "optimizer", "convention"), True),
    arg("activation_style", "auto", "str", keyword_only=True),
    field_args(Workload, ("attention", "lora_rank"), True), arg("lora_targets", "all-linear", keyword_only=True),
    field_args(Workload, ("base_weights",), True), field_args(PlanOptions, ("buckets", "overlap_comm", "gather_buffer"),
                                                              True),
    field_args(Workload, ("reserve",), True), field_args(PlanOptions, ("stage_layers",), True),
    arg("moe_layers", None, keyword_only=True), field_args(PlanOptions, ("peak", "optimizer_impl"), True),
    arg("workload", None, "Workload | None", keyword_only=True),
    var_keyword="plan_fields")
"""plan_memory's arguments as they have always been (a Workload's and PlanOptions' fields, plan fields as
keywords) + ``workload``."""


@checked_call
@keywords_through(_PLAN_MEMORY_SIGNATURE)
def plan_memory(model: ModelSpec | str, plan: ParallelPlan | None = None, *, workload: Workload | None = None,
                **settings) -> PlanMemory:
    """Per-GPU (and host) memory of every pipeline stage of a training plan. Chapters 3, 4, 9, 11, 12.

    ``plan`` or plan fields as keywords (``plan_memory(m, tp=8, pp=4, dp=1, zero=1, recompute="selective")``);
    ``workload`` (a :class:`vramlib.memory.training.Workload`) or its fields as keywords (``seq``, ``method``, ``precision`` ...;
    given with a workload they override its fields); the :class:`PlanOptions` fields as keywords.
    ``activation_style``: "auto" (the default here) = "hf" (measured transformers tensors; tp = pp = 1) when the
    family is modelled, else "megatron" (Korthikanti et al. 2022, with TP/SP/PP). ``method``: full | lora | qlora
    (lora and qlora: tp = pp = 1, the frozen base sharded over dp only under ZeRO-3). ``gather_buffer``: None = the
    convention's (deepspeed: 4 B x largest module on the rank), True = 4 B, False = none. ``stage_layers``: layers
    per stage (default: the even split), e.g. from :func:`vramlib.solve.planning.balance_pipeline`. Unknown keywords
    raise with close matches among the plan fields and these arguments.

    Named exceptions (each one a line of the result's ``notes``): tp > n_kv_heads keeps one whole KV head per rank
    (KV_HEADS_PER_RANK, vLLM's rule; Megatron-Core refuses it); at dp = 1 the deepspeed convention's ZeRO-2
    (DeepSpeed's estimator counts a 16-bit gradient partition beside the fp32 one, 2 + 18/N_d B/param against
    ZeRO-1's 6 + 12/N_d) and ZeRO-3 (the gather buffer) need more than ZeRO-0/1 -- for N_d >= 2 the model states
    never grow with the stage; a recomputation level that keeps more than a lighter one (fused q|k|v with eager
    attention, :func:`vramlib.memory.activations.recompute_note`). Not a monotone quantity by design: the communication
    buckets (DDP's gradient copy at ZeRO-0, DeepSpeed's fixed 5e8-element buffers at ZeRO 1-3).
    """
    spec = get_model(model)
    plan, w, opts = _plan_settings(plan, workload, settings)
    style, layers = _check_plan(spec, plan, w, opts)
    step = _Step(spec, plan, w, opts, style, layers, _conv_bytes(w.convention, w.precision, plan.zero))
    setup = _trainable(step)
    setup["acts"] = _stage_activations(spec, plan, w.seq, layers, style, w.dtype, w.attention)
    notes = _plan_notes(step)
    m, pv = spec.view(), Fields(plan)
    stages = plan_stages(m, pv, setup)
    gpu_stages, host_stages, zero_note = [], [], []
    lower = _lower_rates(step, setup) if plan.zero and plan.offload_optimizer == plan.offload_params == "none" else None
    problem = _fsdp_problem(step) if opts.peak == "step" else None
    if problem:
        notes.append(step_fallback_note(problem))
    for i, st in enumerate(stages):
        note = ""
        if lower is not None:
            note = _zero_note(step, setup, lower, i, st["params"], st["states"] + st["gather"], bool(st["gather"])) or ""
        zero_note += [note] if note and not zero_note else []
        stage_notes = tuple(notes + ([note] if note else []))
        if opts.peak == "step" and not problem:
            gpu_stages.append(_fsdp_stage(step, setup, st["title"], stage_notes))
        else:
            gpu_stages.append(Breakdown({k: F.to_int_bytes(x) for k, x in st["gpu"]}, title=st["title"] +
                                        " (sum of parts)" if opts.peak == "step" else st["title"], notes=stage_notes))
        host_stages.append(Breakdown({k: F.to_int_bytes(x) for k, x in st["host"]}, title=st["host_title"]))
    return PlanMemory(spec.name, plan, layers, tuple(gpu_stages), tuple(host_stages),
                      tuple(F.to_int_bytes(st["nvme"]) for st in stages), tuple(notes + zero_note))


_PLAN_MEMORY_ARGS = tuple(_PLAN_MEMORY_SIGNATURE.parameters)[:-1]
"""plan_memory's named arguments (what an unknown keyword is matched against, with the plan fields)."""


# --- DeepSpeed's estimators (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py) ----------------------------
N_tot = sp.Symbol("N", integer=True, positive=True)        # total_params
N_L = sp.Symbol("N_L", integer=True, nonnegative=True)     # largest_layer_params
n_g = sp.Symbol("n_g", integer=True, positive=True)        # num_gpus_per_node
n_n = sp.Symbol("n_n", integer=True, positive=True)        # num_nodes
f_b = sp.Symbol("f_b", positive=True)                      # additional_buffer_factor (1.5)

DEEPSPEED_ZERO2: dict[tuple[str, bool], sp.Expr] = {
    ("gpu", True): 2 * N_tot,
    ("cpu", True): sp.floor(N_tot * sp.Max(4 * n_n * n_g, 16, evaluate=False) * f_b, evaluate=False),
    ("gpu", False): 2 * N_tot + sp.floor(18 * N_tot / (n_n * n_g), evaluate=False),
    ("cpu", False): sp.floor(N_tot * 4 * n_g * f_b, evaluate=False),
}
"""``estimate_zero2_model_states_mem_needs`` (after PR #5099, 2024): (side, cpu_offload) -> bytes. GPU without
offload: 2 = 16-bit params, 18 = 16-bit grads + fp32 grads + fp32 params + Adam. Chapters 3, 4."""

DEEPSPEED_ZERO2_PRE_5099 = {**DEEPSPEED_ZERO2,
                            ("gpu", False): 4 * N_tot + sp.floor(16 * N_tot / (n_n * n_g), evaluate=False)}
"""The same estimator before PR #5099 (what DeepSpeed printed from 2021 to April 2024)."""

DEEPSPEED_ZERO3: dict[tuple[str, bool, bool, bool], sp.Expr] = {
    ("gpu", True, True, True): 4 * N_L,
    ("cpu", True, True, True): sp.floor(N_tot * 18 * f_b / n_n, evaluate=False),
    ("gpu", True, True, False): 4 * N_L,
    ("cpu", True, True, False): sp.floor(N_tot * sp.Max(4 * n_g, 18 / n_n, evaluate=False) * f_b, evaluate=False),
    ("gpu", True, False, True): 4 * N_L + sp.floor(2 * N_tot / (n_n * n_g), evaluate=False),
    ("cpu", True, False, True): sp.floor(N_tot * 16 * f_b / n_n, evaluate=False),
    ("gpu", True, False, False): 4 * N_L + sp.floor(2 * N_tot / (n_n * n_g), evaluate=False),
    ("cpu", True, False, False): sp.floor(N_tot * sp.Max(4 * n_g, 16 / n_n, evaluate=False) * f_b, evaluate=False),
    ("gpu", False, False, True): 4 * N_L + sp.floor(18 * N_tot / (n_n * n_g), evaluate=False),
    ("cpu", False, False, True): sp.floor(N_L * 4 * n_g * f_b, evaluate=False),
    ("gpu", False, False, False): 4 * N_L + sp.floor(18 * N_tot / (n_n * n_g), evaluate=False),
    ("cpu", False, False, False): sp.floor(N_tot * 4 * n_g * f_b, evaluate=False),
}
"""``estimate_zero3_model_states_mem_needs``: (side, cpu_offload, cpu_offload_params, zero_init) -> bytes.
4 x largest layer = its gathered 16-bit params and 16-bit grads. Chapters 3, 4, 12."""


@dataclass(frozen=True)
class DeepSpeedEstimate:
    """One row of DeepSpeed's estimator table: bytes per CPU (node) and per GPU, and the options."""

    stage: int
    cpu_bytes: int
    gpu_bytes: int
    options: str
    largest_layer_bytes: int = 0

    def row(self) -> str:
        """The row as DeepSpeed prints it (GB there = 2^30 bytes)."""
        return f" {self.cpu_bytes / 2**30:7.2f}GB | {self.gpu_bytes / 2**30:6.2f}GB | {self.options}"


def _ds_inputs(total_params, num_gpus_per_node, num_nodes, additional_buffer_factor):
    n = check_positive_int("total_params", total_params)
    g = check_positive_int("num_gpus_per_node", num_gpus_per_node)
    nn = check_positive_int("num_nodes", num_nodes)
    f_b = check_number("additional_buffer_factor", additional_buffer_factor, minimum=0, min_inclusive=False,
                       allowed="must be a positive number (DeepSpeed: 1.5)")
    return dict(N=n, n_g=g, n_n=nn, f_b=Fraction(f_b))


def _model_total_and_largest(total_params, largest_layer_params):
    if isinstance(total_params, (ModelSpec, str)):
        spec = get_model(total_params)
        lg = largest_module_params(spec) if largest_layer_params is None else largest_layer_params
        return spec.n_params, int(lg)
    return total_params, largest_layer_params


@checked_call
def deepspeed_zero2_estimate(total_params, num_gpus_per_node: int = 1, num_nodes: int = 1, cpu_offload: bool = True,
                             additional_buffer_factor=1.5, version: str = "current") -> DeepSpeedEstimate:
    """DeepSpeed's ``estimate_zero2_model_states_mem_needs`` (same arguments and defaults; ``total_params`` may be a
    model). ``version``: "current" (after PR #5099) or "pre-5099". Bytes are exact (DeepSpeed truncates with int()).
    Chapters 3, 4."""
    total, _ = _model_total_and_largest(total_params, 0)
    vals = _ds_inputs(total, num_gpus_per_node, num_nodes, additional_buffer_factor)
    table = DEEPSPEED_ZERO2 if check_choice("version", version, ("current", "pre-5099")) == "current" \
        else DEEPSPEED_ZERO2_PRE_5099
    cpu_offload = bool(cpu_offload)
    cpu, gpu = (int(_ev(table[(side, cpu_offload)], vals)) for side in ("cpu", "gpu"))
    return DeepSpeedEstimate(2, cpu, gpu, f"offload_optimizer={'cpu' if cpu_offload else 'none'}")


@checked_call
def deepspeed_zero3_estimate(total_params, largest_layer_params: int | None = None, num_gpus_per_node: int = 1,
                             num_nodes: int = 1, cpu_offload: bool = True, cpu_offload_params: bool = True,
                             zero_init: bool = True, additional_buffer_factor=1.5) -> DeepSpeedEstimate:
    """DeepSpeed's ``estimate_zero3_model_states_mem_needs`` (same arguments and defaults). With a model for
    ``total_params``, the largest layer is :func:`largest_module_params` unless given. Chapters 3, 4, 12."""
    total, largest = _model_total_and_largest(total_params, largest_layer_params)
    if largest is None:
        raise InvalidValueError("largest_layer_params", None, "give the largest module's parameters (or pass a model)")
    vals = _ds_inputs(total, num_gpus_per_node, num_nodes, additional_buffer_factor)
    vals["N_L"] = check_positive_int("largest_layer_params", largest, allow_zero=True)
    key = (bool(cpu_offload), bool(cpu_offload) and bool(cpu_offload_params), bool(zero_init))
    cpu, gpu = (int(_ev(DEEPSPEED_ZERO3[(side,) + key], vals)) for side in ("cpu", "gpu"))
    opts = (f"offload_param={'cpu' if key[1] else 'none'}, offload_optimizer={'cpu' if key[0] else 'none'}, "
            f"zero_init={int(key[2])}")
    return DeepSpeedEstimate(3, cpu, gpu, opts, 4 * vals["N_L"])


@checked_call
def deepspeed_estimate_table(total_params, largest_layer_params: int | None = None, num_gpus_per_node: int = 1,
                             num_nodes: int = 1, additional_buffer_factor=1.5, stage: int = 3) -> list[DeepSpeedEstimate]:
    """All rows DeepSpeed's ``estimate_zero{2,3}_model_states_mem_needs_all_cold`` prints, in its order."""
    if stage == 2:
        return [deepspeed_zero2_estimate(total_params, num_gpus_per_node, num_nodes, off, additional_buffer_factor)
                for off in (True, False)]
    if stage != 3:
        raise InvalidValueError("stage", stage, "DeepSpeed estimates ZeRO stage 2 or 3")
    rows = []
    for off in (True, False):
        for offp in (True, False):
            if not off and offp:
                continue
            for zi in (True, False):
                rows.append(deepspeed_zero3_estimate(total_params, largest_layer_params, num_gpus_per_node, num_nodes,
                                                     off, offp, zi, additional_buffer_factor))
    return rows


# --- a 175B shape for the source's example (chapter 12) -----------------------------------------------------
SOURCE_175B = SOURCE_SHAPES["source-175b"]
"""The source's 175B model with GPT-3's shape (catalogue key ``source-175b``)."""

__all__ = [
    "BUCKETS", "DEEPSPEED_ZERO2", "DEEPSPEED_ZERO2_PRE_5099", "DEEPSPEED_ZERO3", "DeepSpeedEstimate", "IN_FLIGHT",
    "ATTN_PARAMS_RANK", "KV_HEADS_PER_RANK", "MODULE_PARAMS_RANK", "allowed_tp", "kv_heads_per_gpu", "LAYER_PARAMS_RANK_DENSE", "LAYER_PARAMS_RANK_EXPERTS", "MEGATRON_EMBED_ACT", "MEGATRON_HEAD_ACT", "MODULE_PARAMS",
    "ParallelPlan", "PlanMemory", "PlanOptions", "SOURCE_175B", "STAGE_ACTIVATIONS", "STAGE_PARAMS", "ZERO_MODEL_STATES",
    "ZERO_PAPER", "ZERO_PARTS", "ZERO_STATES", "check_layout", "deepspeed_estimate_table", "deepspeed_zero2_estimate",
    "deepspeed_zero3_estimate", "even_split", "in_flight", "largest_module_params", "plan_memory", "stage_params",
    "zero_model_states", "zero_parts",
]
