"""Training memory: weights, gradients, master weights, optimizer states, activations, LoRA/QLoRA adapters; the
:class:`Workload` settings object (what one training step computes), which :func:`training_memory` and
``vramlib.plans.parallel.plan_memory`` read.

Conventions are parameters, not hidden choices (chapters 3, 4, 9, 10, 15 compare them):

* ``source-12``: the source document's 2 + 2 + 8 = 12 B/param (fp16 weights, fp16 gradients, Adam m and v).
* ``mixed-fp32-master``: mixed precision with an fp32 master copy, 2 + 2 + 4 + 8 = 16 B/param
  (Rajbhandari et al. 2020, ZeRO, section 3.1: "2Ψ + 2Ψ + KΨ" with K = 12).
* ``deepspeed``: DeepSpeed's ``estimate_zero3_model_states_mem_needs`` accounting, 18 B/param
  (2 weights + 4 fp32 gradients + 4 master + 8 Adam) plus 4 B x the largest layer's parameters
  for the gathered layer.
* ``pure-bf16``: plain PyTorch with a model in bf16 (what ``from_pretrained`` gives a bf16 checkpoint): bf16
  weights and gradients, no master copy, and ``torch.optim``'s states in the parameters' dtype -- AdamW's two
  moments are 2 + 2 bytes, so 2 + 2 + 4 = 8 B/param (measured at full size: ``tools/measure/step_peaks.py``).

Used in: chapters 2, 3, 4, 9, 10, 14, 15.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from fractions import Fraction

from ..core import formulas as F
from .activations import ACTIVATION_STYLES, HF_FAMILIES, RECOMPUTE, _activation_dtype_bytes, activation_bytes, \
    recompute_note
from .step import AUTOCAST, LORA_DTYPES, PEAKS, autocast_extra, autocast_problem, check_impl, lora_step_values, \
    resolve_impl, step_parts, step_problem
from .breakdown import Breakdown
import sympy as sp

from ..core.errors import InvalidValueError, UnknownNameError, check_choice, check_number, \
    check_positive_int, checked_call
from .inference import ATTENTION, DEFAULT_RESERVE, weights_detail
from ..catalog.models import MLP_MODULES, ModelSpec, get_model
from ..catalog.precision import FP32_BYTES, get_precision
from ..core.symbols import E, V, beta_hb, beta_mlp, beta_mn, beta_norm, beta_o, beta_pb, beta_qkf, beta_qkh, beta_qkv, \
    beta_sink, c_kv, d, d_in, d_s, f, f_s, g, h, n_g, n_h, n_kv, n_mlp, n_norm, n_s, n_sh, q_r, z_mla, z_ssm
from ..core.units import parse_memory
from ..core.settings import Settings, settings_class
from ..core.signatures import arg, field_args, keywords_through, signature
from ..core.portable import Fields, ev, fmt_fixed, portable, q, q_add, q_ceil, q_div, q_floor, q_mul, raise_problem, share, \
    shared

METHODS = ("full", "lora", "qlora")


@dataclass(frozen=True)
class Convention:
    """Bytes per trainable parameter for the compute copy, the gradient and the master copy (half precision)."""

    name: str
    weight: int
    grad: int
    master: int
    gather_buffer_per_param: int
    source: str
    state: int = 4
    """Bytes per element of the parameters the optimizer updates in half precision -- the fp32 master copy (4) or
    the 16-bit weights themselves (2, pure-bf16) -- which is the width of the states of optimizers that follow their
    parameters' dtype (``Optimizer.follows_params``)."""


TRAINING_PRECISIONS = ("bf16", "fp16", "fp32")
"""The formats training computes in (weights, gradients, activations); 8- and 4-bit formats store frozen bases only."""

CONVENTIONS: dict[str, Convention] = {
    "source-12": Convention("source-12", 2, 2, 0, 0, "the source document: 2 + 2 + 8 bytes"),
    "mixed-fp32-master": Convention("mixed-fp32-master", 2, 2, 4, 0,
                                    "Rajbhandari et al. 2020 (ZeRO): 2 + 2 + 12 bytes with Adam"),
    "deepspeed": Convention("deepspeed", 2, 4, 4, 4,
                            "DeepSpeed estimate_zero3_model_states_mem_needs: 18 bytes + 4 x largest layer"),
    "pure-bf16": Convention("pure-bf16", 2, 2, 0, 0, "plain PyTorch on a bf16 model: 2 + 2 bytes, torch.optim's "
                            "states in the parameters' dtype (AdamW 2 + 2)", state=2),
}


@dataclass(frozen=True)
class Optimizer:
    """Optimizer state per trainable parameter; ``factored`` = Adafactor's row + column statistics."""

    name: str
    bytes_per_param: Fraction
    small_tensor_bytes: Fraction
    factored: bool
    source: str
    follows_params: bool = False
    """True when the states take the dtype of the parameters they update (``torch.optim``'s AdamW and SGD:
    ``zeros_like(param)``); the bytes above are then for fp32 parameters and scale with the convention's
    ``state`` width. bitsandbytes' states and transformers' Adafactor (which steps in fp32) keep theirs."""


# bitsandbytes 8-bit optimizers: two uint8 states, blockwise fp32 absmax per 256 values; tensors with
# fewer than 4096 elements (norms, biases) keep 32-bit states (min_8bit_size). Paged variants hold
# the same bytes but let the driver page them to CPU memory under pressure.
_BNB8 = 2 * (1 + Fraction(4, 256))
OPTIMIZERS: dict[str, Optimizer] = {
    "adamw": Optimizer("adamw", Fraction(8), Fraction(8), False, "PyTorch AdamW: exp_avg + exp_avg_sq in the "
                       "parameters' dtype (fp32: 8 B)", follows_params=True),
    "paged-adamw": Optimizer("paged-adamw", Fraction(8), Fraction(8), False, "bitsandbytes PagedAdamW (32-bit)"),
    "adamw-8bit": Optimizer("adamw-8bit", _BNB8, Fraction(8), False, "bitsandbytes AdamW8bit (Dettmers et al. 2022)"),
    "paged-adamw-8bit": Optimizer("paged-adamw-8bit", _BNB8, Fraction(8), False, "bitsandbytes PagedAdamW8bit"),
    "sgd": Optimizer("sgd", Fraction(4), Fraction(4), False, "PyTorch SGD with momentum: one buffer in the "
                     "parameters' dtype", follows_params=True),
    "adafactor": Optimizer("adafactor", Fraction(0), Fraction(4), True,
                           "Shazeer & Stern 2018; HF Adafactor without momentum: fp32 row + column sums"),
}

BNB_MIN_8BIT_SIZE = 4096
"""bitsandbytes' ``min_8bit_size``: a parameter tensor with fewer elements keeps 32-bit optimizer states
(``bitsandbytes/optim/optimizer.py``, ``Optimizer8bit.init_state``: ``p.numel() < config["min_8bit_size"]``)."""


def _large(n: sp.Expr) -> sp.Expr:
    """The elements of one tensor of n elements if bitsandbytes gives it 8-bit states, else 0."""
    return sp.Piecewise((n, n >= BNB_MIN_8BIT_SIZE), (0, True))


_MLP_BIASES = sp.Piecewise((_large((1 + g) * n_mlp * f) + _large(n_mlp * h), E > 0),   # experts' fused (E, .) biases
                           ((1 + g) * _large(f) + _large(h), True)) + n_s * ((1 + g) * _large(f_s) + _large(h))

BNB_LARGE_LAYER = (n_norm * (1 + beta_norm) * _large(h) + beta_qkh * 2 * _large(d)
                   + beta_qkf * (_large(n_h * d) + _large(n_kv * d)) + z_mla * (_large(q_r) + _large(c_kv))
                   + z_ssm * beta_mn * _large(d_in) + beta_qkv * (_large(n_h * d) + 2 * _large(n_kv * d))
                   + beta_o * _large(h) + beta_mlp * _MLP_BIASES + beta_sink * _large(n_h)
                   + z_ssm * (3 * _large(n_sh) + beta_pb * (_large(d_in + d_in + 2 * n_g * d_s + n_sh) + _large(h))))
"""Elements of one layer's norm and bias tensors (``LAYER_GROUPS["norm"]`` and ``["bias"]``, tensor by tensor) that
have at least :data:`BNB_MIN_8BIT_SIZE` elements, so bitsandbytes' 8-bit optimizers quantize their states too
(Llama-2-7B's 4096-wide norms do; Qwen2.5-0.5B's 896-wide ones keep 32-bit states). Fused q|k|v biases are counted
per projection (no catalogued model has a fused bias that crosses the threshold where its parts do not)."""

BNB_LARGE_MODEL = (1 + beta_norm) * _large(h) + beta_hb * _large(V)
"""The same outside the layers: the final norm (and its bias), an LM-head bias."""

share(BNB_LARGE_LAYER=BNB_LARGE_LAYER, BNB_LARGE_MODEL=BNB_LARGE_MODEL, BNB_MIN_8BIT_SIZE=BNB_MIN_8BIT_SIZE)


@portable
def small_state_params(m, groups, opt):
    """Parameters whose optimizer states are the optimizer's ``small_tensor_bytes``: Adafactor's unfactored 1-D
    tensors (every norm and bias), or for the others the norm and bias tensors below bitsandbytes'
    ``min_8bit_size`` (:data:`BNB_LARGE_LAYER`; the two rates are equal for torch.optim's optimizers)."""
    if opt["factored"]:
        return groups["norm"] + groups["bias"]
    large = q_ceil(ev("BNB_LARGE_MODEL", None, m["layers"][0][3]))
    for k in m["layers"]:
        large += k[0] * q_ceil(ev("BNB_LARGE_LAYER", None, k[3]))
    return groups["norm"] + groups["bias"] - large


LORA_TARGETS = ("all-linear", "attention", "qv")

LORA_IN = {"q_proj": h, "k_proj": h, "v_proj": h, "o_proj": n_h * d, "qkv_proj": h, "gate_proj": h, "up_proj": h,
           "down_proj": f, "gate_up_proj": h}
LORA_OUT = {"q_proj": n_h * d, "k_proj": n_kv * d, "v_proj": n_kv * d, "o_proj": h, "qkv_proj": (n_h + 2 * n_kv) * d,
            "gate_proj": f, "up_proj": f, "down_proj": h, "gate_up_proj": 2 * f}
"""in_features and out_features of each linear module a LoRA adapter can target (the static calculators evaluate
these same expressions for their rank check)."""
LORA_SHAPES: dict[str, tuple[sp.Expr, sp.Expr]] = {k: (LORA_IN[k], LORA_OUT[k]) for k in LORA_IN}
"""(in_features, out_features) of each linear module a LoRA adapter can target; their sums are
formulas.LORA_IN_OUT. A rank-r adapter is low-rank only for r <= min(in, out): :func:`lora_params` refuses larger
ranks (peft would build the matrices, but A and B then hold more parameters than a rank-min(in, out) update can
use)."""


def _check_targets_type(targets) -> None:
    if isinstance(targets, str):
        return
    if not isinstance(targets, (list, tuple, set, frozenset)):
        raise InvalidValueError("lora_targets", targets, f"give one of {', '.join(LORA_TARGETS)} or a list of "
                                                         "linear module names, e.g. ['q_proj', 'v_proj']")


def lora_modules(model: ModelSpec | str, targets: str | tuple[str, ...] | list[str] = "all-linear") -> list[str]:
    """Linear module names a LoRA config targets, as peft would find them in this architecture.

    Duplicates in a list (``["q_proj", "q_proj"]``) are dropped, keeping the first: peft stores
    ``target_modules`` as a set, so a module gets one adapter however often it is named. Unknown names raise
    with close matches; an empty list raises."""
    model = get_model(model)
    _check_targets_type(targets)
    have = model.linear_modules()
    if isinstance(targets, str):
        got = lora_target_modules(model.name, have, check_choice("lora_targets", targets, LORA_TARGETS))
        raise_problem(got[1])
        return got[0]
    out: list[str] = []
    for t in (sorted(targets, key=str) if isinstance(targets, (set, frozenset)) else targets):
        if not isinstance(t, str) or t not in have:
            raise UnknownNameError("lora_targets", t, have)
        if t not in out:
            out.append(t)
    if not out:
        raise InvalidValueError("lora_targets", targets, "name at least one linear module")
    return out


share(LORA_IN=LORA_IN, LORA_OUT=LORA_OUT, LORA_IN_OUT=F.LORA_IN_OUT, LORA_PARAMS_PER_MODULE=F.LORA_PARAMS_PER_MODULE,
      MLP_MODULES=list(MLP_MODULES), ATTENTION_MODULES=["q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj"])


@portable
def lora_target_modules(name, have, key):
    """[modules, problem] of a named LoRA target set: every linear module, the attention projections, or q and v
    (refused when the model fuses them into qkv_proj)."""
    if key == "all-linear":
        return [have, None]
    if key == "attention":
        return [[x for x in have if x in shared("ATTENTION_MODULES")], None]
    if "qkv_proj" in have:
        return [[], ["lora_targets", "qv", name + " fuses q, k and v into qkv_proj; use 'attention'"]]
    return [["q_proj", "v_proj"], None]


def max_lora_rank(model: ModelSpec | str, targets: str | tuple[str, ...] | list[str] = "all-linear") -> tuple[int, str]:
    """The largest rank every targeted module admits, min over the modules of min(in_features, out_features),
    and the module that sets it."""
    m = get_model(model)
    return tuple(widest_lora_rank(m.symbols(), lora_modules(m, targets)))


@portable
def widest_lora_rank(sym, mods):
    """[rank, where]: the smallest min(in, out) over the targeted modules and the module that sets it."""
    best = None
    for mod in mods:
        i = q_ceil(ev("LORA_IN", mod, sym))
        o = q_ceil(ev("LORA_OUT", mod, sym))
        if best is None or min(i, o) < best[0]:
            best = [min(i, o), mod + " (" + fmt_fixed(i, 0, True) + " -> " + fmt_fixed(o, 0, True) + ")"]
    return best


@portable
def lora_rank_problem(name, rank, best):
    """None, or the error of a rank above the widest low-rank one (``best``: ``widest_lora_rank``)."""
    if rank > best[0]:
        return ["lora_rank", rank, "must be <= " + fmt_fixed(best[0], 0, True) + " = min(in, out) of " + best[1] +
                " in " + name + " (a rank above a layer's width is not low-rank)"]
    return None


def check_lora_rank(model: ModelSpec | str, rank, targets="all-linear") -> int:
    """``rank`` as an int if it is a positive integer no larger than :func:`max_lora_rank`, else a one-line error
    naming ``lora_rank``."""
    rank = check_positive_int("lora_rank", rank)
    raise_problem(lora_rank_problem(get_model(model).name, rank, list(max_lora_rank(model, targets))))
    return rank


@checked_call
def lora_params(model: ModelSpec | str, rank: int = 16, targets: str | tuple[str, ...] | list[str] = "all-linear",
                allow_wide_rank: bool = False) -> int:
    """Exact adapter parameters: r (in + out) per targeted linear, every layer, every expert.

    ``rank`` must be 1..min(in, out) of every targeted module (:func:`check_lora_rank`): a wider adapter is not
    low-rank, so the book refuses it. peft itself accepts it and allocates r (in + out) all the same (measured on
    tiny models, ``vramlib/data/measured``): ``allow_wide_rank=True`` counts it, as chapter 16 replays those runs.
    Duplicate targets count once (peft's set semantics, see :func:`lora_modules`)."""
    m = get_model(model)
    rank = check_positive_int("lora_rank", rank) if allow_wide_rank is True else check_lora_rank(m, rank, targets)
    return lora_count(m.view(), rank, lora_modules(m, targets))


@portable
def lora_count(m, rank, mods):
    """Adapter parameters: r (in + out) per targeted linear (each expert's MLP has its own), every layer."""
    total = 0
    for mod in mods:
        io = q_ceil(ev("LORA_IN_OUT", mod, m["sym"]))
        copies = m["sym"]["n_mlp"] + m["sym"]["n_s"] if mod in shared("MLP_MODULES") else 1
        total += copies * q_ceil(ev("LORA_PARAMS_PER_MODULE", None, {"r": rank, "io": io}))
    return m["spec"]["n_layers"] * total


@checked_call
def optimizer_state_bytes(model: ModelSpec | str, optimizer: str = "adamw", trainable: int | None = None,
                          lora_rank: int | None = None, lora_targets="all-linear", state_bytes: int = 4) -> int:
    """Optimizer state for the trainable parameters (all of them, or the LoRA adapters when lora_rank is set).

    ``trainable``: how many of the model's parameters train (0..weight_params; the small tensors count among
    them first, as 32-bit states under 8-bit optimizers: norms and biases under 4096 elements, ``small_state_params``). Adafactor's factored state depends on which matrices
    train, so ``trainable`` is refused with it. ``state_bytes``: the width of the parameters the optimizer updates
    (4: fp32 parameters or master copy; 2: the bf16 weights of the ``pure-bf16`` convention, :func:`state_width`),
    which ``torch.optim``'s states follow (``Optimizer.follows_params``)."""
    m = get_model(model)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    if isinstance(state_bytes, bool) or state_bytes not in (2, 4):
        raise InvalidValueError("state_bytes", state_bytes, "must be 2 (bf16/fp16 parameters) or 4 (fp32)")
    if trainable is not None:
        if lora_rank is not None:
            raise InvalidValueError("trainable", trainable, "give trainable or lora_rank, not both")
        trainable = check_number("trainable", trainable, minimum=0, maximum=m.weight_params, integer=True,
                                 allowed=f"must be an integer 0..{m.weight_params:,} (the model's parameters)")
        if opt.factored:
            raise InvalidValueError("trainable", trainable, "Adafactor's factored state depends on which matrices "
                                                            "train; omit trainable (all) or give lora_rank")
    if lora_rank is None:
        lora_modules(m, lora_targets)   # unused without lora_rank: still refuse garbage rather than ignore it
    o = optimizer_view(Fields(opt), state_bytes)
    if lora_rank is not None:
        return lora_optimizer_bytes(m.view(), o, lora_params(m, lora_rank, lora_targets), lora_rank,
                                    lora_modules(m, lora_targets))
    return full_optimizer_bytes(m.view(), o, trainable if trainable is not None else m.weight_params,
                                small_state_params(m.view(), m.param_groups(), o))


@portable
def optimizer_view(opt, width):
    """What the state counts read of an optimizer when the parameters it updates are ``width`` bytes wide: its bytes
    per parameter (and per small-tensor parameter) scaled by width / 4 if its states follow the parameters' dtype."""
    scale = q_div(q(width), q(4)) if opt["follows_params"] else q(1)
    return {"bytes_per_param": q_mul(opt["bytes_per_param"], scale),
            "small_tensor_bytes": q_mul(opt["small_tensor_bytes"], scale), "factored": opt["factored"]}


@portable
def state_width(conv, dtype):
    """Bytes per element of the parameters the optimizer updates: 4 in fp32, else the convention's ``state``."""
    return 4 if dtype == "fp32" else conv["state"]


def convention_state_bytes(convention: str, precision: str) -> int:
    """:func:`state_width` of a convention and training precision given by name."""
    conv = CONVENTIONS[check_choice("convention", convention, CONVENTIONS)]
    return state_width(Fields(conv), get_precision(precision, field="precision").name)


def adamw_bytes_per_param(convention: str, precision: str) -> Fraction:
    """AdamW's state per parameter under a convention: its two moments in the width of the parameters it updates
    (8 B; 4 B under pure-bf16) -- the default of the model-state arithmetic (``zero_model_states``)."""
    return optimizer_view(Fields(OPTIMIZERS["adamw"]), convention_state_bytes(convention, precision))["bytes_per_param"]


@portable
def lora_optimizer_bytes(m, opt, n, rank, mods):
    """Optimizer state of ``n`` LoRA adapter parameters: bytes per parameter (``small_tensor_bytes`` for the A (r x in)
    and B (out x r) matrices under bitsandbytes' ``min_8bit_size``), or Adafactor's factored rows and columns of each
    A and B."""
    if opt["factored"]:
        rc = 0
        for x in mods:
            rc += q_ceil(ev("LORA_IN_OUT", x, m["sym"])) + 2 * rank
        return q_floor(opt["small_tensor_bytes"]) * m["spec"]["n_layers"] * rc
    small = 0      # adapter matrices under bitsandbytes' min_8bit_size keep 32-bit states
    for x in mods:
        copies = m["sym"]["n_mlp"] + m["sym"]["n_s"] if x in shared("MLP_MODULES") else 1
        for size in [rank * q_ceil(ev("LORA_IN", x, m["sym"])), rank * q_ceil(ev("LORA_OUT", x, m["sym"]))]:
            if size < shared("BNB_MIN_8BIT_SIZE"):
                small += copies * size
    small = small * m["spec"]["n_layers"]
    return q_ceil(q_add(q_mul(opt["bytes_per_param"], n - small), q_mul(opt["small_tensor_bytes"], small)))


@portable
def full_optimizer_bytes(m, opt, n, small_all):
    """Optimizer state of ``n`` trainable parameters, the small tensors (``small_all``: ``small_state_params``) first
    and at ``small_tensor_bytes`` (what 8-bit optimizers keep for tensors under 4096 elements); Adafactor: the
    factored rows and columns of every matrix."""
    small = min(small_all, n)
    if opt["factored"]:
        rc = 0
        for x in m["linear_modules"]:
            rc += q_ceil(ev("LORA_IN_OUT", x, m["sym"])) * (m["sym"]["n_mlp"] + m["sym"]["n_s"] if x in shared("MLP_MODULES") else 1)
        rc = rc * m["spec"]["n_layers"]
        rc += (m["spec"]["vocab"] + m["spec"]["hidden"]) * (1 if m["spec"]["tied_embeddings"] else 2) + small
        return q_floor(opt["small_tensor_bytes"]) * rc
    return q_ceil(q_add(q_mul(opt["bytes_per_param"], n - small), q_mul(opt["small_tensor_bytes"], small)))


@settings_class
@dataclass(frozen=True)
class Workload(Settings):
    """What one training step computes, apart from how it is laid out over GPUs (chapters 2, 3, 4, 9, 10, 15).

    ``method``: full | lora | qlora. ``seq``: tokens per sequence. ``precision``: compute dtype (bf16, fp16, fp32).
    ``optimizer``: a key of OPTIMIZERS. ``convention``: source-12 | mixed-fp32-master | deepspeed (CONVENTIONS).
    ``activation_style``: hf | megatron | auto (hf where the family is modelled and the layout is one device).
    ``attention``: eager | sdpa | flash. ``lora_rank`` / ``lora_targets``: the adapters (lora, qlora; checked even
    for full fine-tuning, so garbage is refused rather than ignored). ``base_weights``: storage of the frozen base
    (None: ``precision`` for lora, nf4-dq for qlora). ``reserve``: CUDA context and framework, bytes or "0.5GB".

    The layout -- micro-batch, recomputation, tp/pp/dp, ZeRO -- is not here: :func:`training_memory` takes
    ``micro_batch`` and ``recompute``, :func:`vramlib.plans.parallel.plan_memory` a ``ParallelPlan``. Every field is
    checked when the Workload is made (one-line errors naming the field, with close matches); model-dependent
    limits (a rank wider than a module, a target the model lacks) when it is used with a model.
    """

    method: str = "full"
    seq: int = 2048
    precision: str = "bf16"
    optimizer: str = "adamw"
    convention: str = "mixed-fp32-master"
    attention: str = "sdpa"
    lora_rank: int = 16
    lora_targets: str | tuple[str, ...] = "all-linear"
    base_weights: str | None = None
    activation_style: str = "hf"
    reserve: int | str = DEFAULT_RESERVE

    def __post_init__(self) -> None:
        put = functools.partial(object.__setattr__, self)
        put("method", check_choice("method", self.method, METHODS))
        put("seq", check_positive_int("seq", self.seq))
        if get_precision(self.precision, field="precision").name not in TRAINING_PRECISIONS:
            raise InvalidValueError("precision", self.precision, "training computes in bf16, fp16 or fp32")
        put("optimizer", check_choice("optimizer", self.optimizer, OPTIMIZERS))
        put("convention", check_choice("convention", self.convention, CONVENTIONS))
        put("attention", check_choice("attention", self.attention, ATTENTION))
        put("lora_rank", check_positive_int("lora_rank", self.lora_rank))
        _check_targets_type(self.lora_targets)
        if isinstance(self.lora_targets, str):
            put("lora_targets", check_choice("lora_targets", self.lora_targets, LORA_TARGETS))
        else:   # a set in lora_modules' order (peft's set semantics); the names are checked against a model
            targets = sorted(self.lora_targets, key=str) if isinstance(self.lora_targets, (set, frozenset)) \
                else self.lora_targets
            if not targets:
                raise InvalidValueError("lora_targets", self.lora_targets, "name at least one linear module")
            for t in targets:
                if not isinstance(t, str):
                    raise InvalidValueError("lora_targets", t, "linear module names are text, e.g. ['q_proj', 'v_proj']")
            put("lora_targets", tuple(targets))
        if self.base_weights is not None:
            get_precision(self.base_weights, field="base_weights")
        put("activation_style", check_choice("activation_style", self.activation_style,
                                             ("auto",) + ACTIVATION_STYLES))
        parse_memory(self.reserve, field="reserve")

    @property
    def dtype(self) -> str:
        """The compute precision's canonical name (bf16, fp16, fp32)."""
        return get_precision(self.precision).name

    @property
    def state_bytes(self) -> int:
        """Bytes per element of the parameters the optimizer updates (:func:`state_width`)."""
        return convention_state_bytes(self.convention, self.precision)

    @property
    def reserve_bytes(self) -> int:
        return parse_memory(self.reserve, field="reserve")

    def base_format(self) -> str:
        """Storage of the frozen base weights of a LoRA/QLoRA step (``base_format_of``)."""
        return base_format_of(self.method, self.base_weights, self.dtype)


@portable
def base_format_of(method, base_weights, dtype):
    """Storage of the frozen base weights of a LoRA/QLoRA step: ``base_weights``, else nf4-dq (qlora) or the
    compute dtype (lora)."""
    return base_weights or ("nf4-dq" if method == "qlora" else dtype)


WORKLOAD_FIELDS = tuple(x.name for x in fields(Workload))


def as_workload(workload: Workload | None, settings: dict, **defaults) -> Workload:
    """``workload`` with ``settings`` (Workload fields given as keywords) applied, or a Workload made of them
    (``defaults`` first: a caller's own defaults, e.g. plan_memory's activation_style="auto")."""
    if workload is None:
        return Workload(**{**defaults, **settings})
    if not isinstance(workload, Workload):
        raise InvalidValueError("workload", workload, "give a vramlib.Workload or its fields as keywords")
    return workload.with_(**settings) if settings else workload


def resolve_activation_style(spec: ModelSpec, style: str, one_device: bool = True) -> str:
    """``auto`` -> hf when the family is modelled and the layout is one device, else megatron; an hf request on a
    tensor/pipeline-parallel layout raises (the hf accounting models one device per replica)."""
    got = activation_style_for(Fields(spec), style, one_device)
    raise_problem(got[1])
    return got[0]


share(HF_FAMILIES=list(HF_FAMILIES), TRAINING_PRECISIONS=list(TRAINING_PRECISIONS))


@portable
def activation_style_for(spec, style, one_device):
    """[style, problem]: ``auto`` -> hf when the family's tensors are modelled (:data:`HF_FAMILIES`, RMSNorm, gated
    MLP, no shared experts) and the layout is one device, else megatron; hf on a tensor/pipeline-parallel layout is a
    problem (the hf accounting models one device per replica)."""
    hf_ok = (spec["family"] in shared("HF_FAMILIES") and spec["norm"] == "rmsnorm" and spec["gated_mlp"]
             and not spec["n_shared_experts"])
    if style == "auto":
        return ["hf" if (one_device and hf_ok) else "megatron", None]
    if style == "hf" and not one_device:
        return [style, ["activation_style", "hf", "the hf accounting models one device per replica (HF Trainer with "
                        "DDP/ZeRO/FSDP): needs tp=1 and pp=1; use 'megatron'"]]
    return [style, None]


def check_lora_settings(spec: ModelSpec, w: Workload) -> None:
    """The model-dependent LoRA checks of a full fine-tuning workload, whose LoRA fields are unused: still refuse
    a target the model lacks rather than ignore it."""
    if w.method == "full":
        lora_modules(spec, w.lora_targets)


def _model_state_parts(m: ModelSpec, w: Workload, trainable_dtype: str | None = None) -> dict[str, int]:
    """Weights (or base + adapters), gradients, the fp32 master copy, optimizer states and, for the deepspeed
    convention's full fine-tuning in half precision, the ZeRO-3 gather buffer of the largest module
    (``model_state_parts``). ``trainable_dtype``: the dtype of the parameters that train (None: the compute dtype;
    "fp32" for fp32 LoRA adapters or fp32 weights under autocast)."""
    conv = CONVENTIONS[w.convention]
    dtype = trainable_dtype or w.dtype
    setup = {"method": w.method, "dtype": dtype, "conv": Fields(conv), "fp32": FP32_BYTES}
    width = state_width(Fields(conv), dtype)
    if w.method == "full":
        setup.update(n_t=m.weight_params, optimizer=optimizer_state_bytes(m, w.optimizer, state_bytes=width), base=[],
                     base_label="")
        if conv.gather_buffer_per_param and dtype != "fp32":
            from .sharding import largest_module_params

            setup["largest"] = largest_module_params(m)
    else:
        setup.update(n_t=lora_params(m, w.lora_rank, w.lora_targets), base_label=w.base_format(),
                     base=[[k, v] for k, v in weights_detail(m, w.base_format()).items()],
                     optimizer=optimizer_state_bytes(m, w.optimizer, lora_rank=w.lora_rank, lora_targets=w.lora_targets,
                                                     state_bytes=width))
    return dict(model_state_parts(setup))


share(MODEL_STATES_BYTES=F.MODEL_STATES_BYTES)


@portable
def model_state_parts(setup):
    """[[component, bytes]] of one GPU's model states: the weights in the compute format (full) or the frozen base as
    stored plus the adapters (lora, qlora), the gradients, the fp32 master copy (the convention's bytes per trainable
    parameter in half precision; 4 + 4 + 0 in fp32), the optimizer states and, for the convention's ZeRO-3 gather
    buffer (full, half precision), bytes per parameter x the largest module (``setup["largest"]``)."""
    conv = setup["conv"]
    half = setup["dtype"] != "fp32"
    b_w = conv["weight"] if half else setup["fp32"]
    b_g = conv["grad"] if half else setup["fp32"]
    b_m = conv["master"] if half else 0
    n_t = setup["n_t"]
    parts = []
    for bp in setup["base"]:
        parts.append(["base weights (" + setup["base_label"] + ")" if bp[0] == "weights" else bp[0], bp[1]])
    own = q_ceil(ev("MODEL_STATES_BYTES", None, {"N_t": n_t, "b_w": b_w, "b_g": 0, "b_m": 0, "b_o": 0}))
    parts.append(["weights" if setup["method"] == "full" else "LoRA adapters", own])
    parts.append(["gradients", q_floor(ev("MODEL_STATES_BYTES", None, {"N_t": n_t, "b_w": 0, "b_g": b_g, "b_m": 0,
                                                                       "b_o": 0}))])
    if b_m:
        parts.append(["master weights (fp32)", q_floor(ev("MODEL_STATES_BYTES", None, {"N_t": n_t, "b_w": 0, "b_g": 0,
                                                                                       "b_m": b_m, "b_o": 0}))])
    parts.append(["optimizer states", setup["optimizer"]])
    if conv["gather_buffer_per_param"] and setup["method"] == "full" and half:
        parts.append(["ZeRO-3 gather buffer", q_ceil(q_mul(conv["gather_buffer_per_param"], setup["largest"]))])
    return parts


_TRAINING_SIGNATURE = signature(
    arg("model", annotation="ModelSpec | str"), field_args(Workload, ("method", "seq")),
    arg("micro_batch", 1, "int"), field_args(Workload, ("precision", "optimizer", "convention")),
    arg("recompute", "none", "str"),
    field_args(Workload, ("attention", "lora_rank", "lora_targets", "base_weights", "activation_style", "reserve")),
    arg("workload", None, "Workload | None", keyword_only=True),
    arg("optimizer_impl", None, "str | None", keyword_only=True), arg("lora_dtype", "fp32", "str", keyword_only=True),
    arg("peak", "sum", "str", keyword_only=True))
"""training_memory's arguments, in the order they have always had (positional calls keep working), + ``workload``,
``optimizer_impl``, ``lora_dtype`` and ``peak``."""


@checked_call
@keywords_through(_TRAINING_SIGNATURE)
def training_memory(model: ModelSpec | str, workload: Workload | None = None, micro_batch: int = 1,
                    recompute: str = "none", optimizer_impl: str | None = None, lora_dtype: str = "fp32",
                    peak: str = "sum", **settings) -> Breakdown:
    """Peak memory of one training step on one GPU (no sharding; see vramlib.plans.parallel for ZeRO/TP/PP).

    The step is a :class:`Workload` (``workload=``) and/or its fields as keywords (``method``, ``seq``, ``precision``,
    ``optimizer``, ``convention``, ``attention``, ``lora_rank``, ``lora_targets``, ``base_weights``,
    ``activation_style``, ``reserve``; given with a workload they override its fields), run ``micro_batch``
    sequences at a time with ``recompute`` none | selective | full.

    ``method``: full | lora | qlora. ``base_weights``: storage of frozen base weights (lora: ``precision``;
    qlora: ``nf4-dq``). ``convention``: a key of ``CONVENTIONS``, or ``fp32-autocast`` (fp32 weights under CUDA
    autocast, :data:`vramlib.memory.step.AUTOCAST`). ``lora_rank`` is at most min(in, out) of every targeted
    module; duplicate ``lora_targets`` count once. ``lora_dtype``: fp32 | bf16, the adapters' dtype (peft's default
    fp32: 4 + 4 B of adapter and gradient, no master copy). ``optimizer_impl``: foreach | fused | for-loop
    (:data:`vramlib.memory.step.OPTIMIZER_IMPLS`; None: the optimizer's default, torch.optim's foreach).

    ``peak``: ``sum`` (default) -- every tensor alive at once (the source document's arithmetic); ``step`` -- the
    largest phase of the step as PyTorch allocates it
    (:data:`vramlib.memory.step.PHASES`, measured at full size; the Breakdown lists the tensors alive then and
    carries ``phases``, ``peak_phase`` and ``steady``); where the phases are not modelled (another accounting, a
    paged optimizer, LoRA on a subset of linears ...) the estimate is the sum of parts and the notes say why.

    Recomputation is not always a saving: with a fused q|k|v projection (Phi-3) and eager attention, selective
    recomputation keeps the whole q|k|v output alive (v is a view of it) where eager copies v, so for short
    sequences it holds more than no recomputation (see :mod:`vramlib.memory.activations`); the Breakdown's notes then say
    so (:func:`vramlib.memory.activations.recompute_note`).
    """
    autocast = settings.get("convention") == AUTOCAST      # a step convention, not a Workload one (see AUTOCAST)
    if autocast:
        settings = {**settings, "convention": "mixed-fp32-master"}     # its states are the fp32 ones (trainable_dtype)
    w = as_workload(workload, settings)
    m = get_model(model)
    check_lora_settings(m, w)
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    micro_batch = check_positive_int("micro_batch", micro_batch)
    lora_dtype = check_choice("lora_dtype", lora_dtype, LORA_DTYPES)
    peak = check_choice("peak", peak, PEAKS)
    impl = check_impl(w.optimizer, optimizer_impl)
    style = resolve_activation_style(m, w.activation_style)
    st = step_settings(Fields(w), w.dtype, style, recompute, micro_batch, autocast, lora_dtype, impl)
    raise_problem(autocast_problem(Fields(m), st))
    states = list(_model_state_parts(m, w, st["trainable_dtype"]).items())
    problem = step_problem(Fields(m), st) if peak == "step" else None
    labels = [w.method, w.precision, w.optimizer, AUTOCAST if autocast else w.convention, w.seq, micro_batch, recompute]
    note = recompute_note(m, w.seq, micro_batch, w.dtype, w.attention, recompute, style)
    notes = ((note,) if note else ()) + ((step_fallback_note(problem),) if problem else ())
    if w.method == "qlora" and peak == "step" and not problem:
        notes += ("QLoRA: the LoRA step measured on a bf16 base, with the base priced as stored (" + w.base_format() +
                  "); bitsandbytes' dequantisation buffers (one layer's weight in bf16 at a time) are not included",)
    if peak == "sum" or problem:
        act = activation_bytes(m, seq=w.seq, batch=micro_batch, dtype=w.dtype, attention=w.attention,
                               recompute=recompute, style=style, scope="model")
        if autocast:
            act += autocast_extra(m.view(), m.param_groups(), w.seq, micro_batch, _activation_dtype_bytes(w.dtype))
        got = training_parts(m.name, states, act, w.reserve_bytes, labels)
        return Breakdown(dict(got[0]), title=got[1], notes=notes)
    return _priced_by_phases(m, w, st, states, labels, notes)


def _priced_by_phases(m: ModelSpec, w: Workload, st: dict, states: list, labels: list, notes: tuple) -> Breakdown:
    """The step's Breakdown by its phases (:func:`vramlib.memory.step.step_parts`): ``st`` (``step_settings``) gains
    the activations at the end of forward and in a re-run layer, the trainable parameters, their width and the LoRA
    values."""
    act = {scope: activation_bytes(m, w.seq, st["batch"], w.dtype, w.attention, st["recompute"], "hf", scope)
           for scope in ("end-of-forward", "rerun")}
    st.update(act=act["end-of-forward"], rerun=act["rerun"], b_a=_activation_dtype_bytes(w.dtype),
              reserve=w.reserve_bytes, n_t=m.weight_params if w.method == "full" else
              lora_params(m, w.lora_rank, w.lora_targets),
              width=state_width(Fields(CONVENTIONS[w.convention]), st["trainable_dtype"]),
              lora=None if w.method == "full" else lora_step_values(m.view(), lora_modules(m, w.lora_targets),
                                                                     w.lora_rank, st["lora_dtype"]))
    parts, phases, peak_phase, steady = step_parts(m.view(), m.param_groups(), states, st)
    return Breakdown(dict(parts), title=step_title(m.name, labels, st, peak_phase), notes=notes,
                     phases=dict(phases), peak_phase=peak_phase, steady=steady)


@portable
def training_parts(name, states, activations, reserve, labels):
    """[[component, bytes], title] of one training step priced as a sum of parts: the model states, the activations
    and the reserve; ``labels`` = [method, precision, optimizer, convention, seq, micro_batch, recompute] for the
    title."""
    parts = [x for x in states]
    parts.append(["activations", activations])
    parts.append(["reserve (CUDA context, framework)", reserve])
    return [parts, name + ": " + labels[0] + " fine-tuning, " + labels[1] + ", " + labels[2] + ", " + labels[3] +
            ", seq " + fmt_fixed(labels[4], 0, True) + " x " + str(labels[5]) + ", recompute " + labels[6] +
            " (sum of parts)"]


@portable
def step_title(name, labels, st, peak_phase):
    """The title of a step priced by its phases: what trains, how, and the phase that sets the peak."""
    what = labels[0] + " fine-tuning" if labels[0] == "full" else labels[0] + " (" + st["lora_dtype"] + " adapters)"
    return (name + ": " + what + ", " + labels[1] + ", " + labels[2] + " (" + st["impl"] + "), " + labels[3] +
            ", seq " + fmt_fixed(labels[4], 0, True) + " x " + str(labels[5]) + ", recompute " + labels[6] +
            ": peak in the " + peak_phase)


@portable
def step_fallback_note(problem):
    """The note of a step the phases do not model: it is priced as a sum of parts, and why."""
    return "peak: sum of parts (every tensor alive at once) -- " + problem


@portable
def step_settings(w, dtype, style, recompute, batch, autocast, lora_dtype, impl):
    """The settings of one step that the phase model reads (``step_problem``, ``step_parts``): the Workload's (or
    the calculator's options) ``w``, its canonical compute ``dtype``, the resolved activation ``style``, and the
    optimizer implementation (None: the optimizer's default, where it has phases)."""
    impl = resolve_impl(w["optimizer"], impl)
    fp32 = autocast or (w["method"] != "full" and lora_dtype == "fp32")
    return {"method": w["method"], "dtype": dtype, "precision": w["precision"], "optimizer": w["optimizer"],
            "lora_targets": w["lora_targets"], "style": style, "recompute": recompute, "batch": batch,
            "seq": w["seq"], "autocast": autocast, "lora_dtype": lora_dtype, "impl": impl,
            "trainable_dtype": "fp32" if fp32 else dtype}
