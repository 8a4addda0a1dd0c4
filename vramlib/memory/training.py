"""Training memory: weights, gradients, master weights, optimizer states, activations, LoRA/QLoRA adapters.

Conventions are parameters, not hidden choices (chapters 3, 4, 9, 10, 15 compare them):

* ``source-12``: the source document's 2 + 2 + 8 = 12 B/param (fp16 weights, fp16 gradients, Adam m and v).
* ``mixed-fp32-master``: mixed precision with an fp32 master copy, 2 + 2 + 4 + 8 = 16 B/param
  (Rajbhandari et al. 2020, ZeRO, section 3.1: "2Ψ + 2Ψ + KΨ" with K = 12).
* ``deepspeed``: DeepSpeed's ``estimate_zero3_model_states_mem_needs`` accounting, 18 B/param
  (2 weights + 4 fp32 gradients + 4 master + 8 Adam) plus 4 B x the largest layer's parameters
  for the gathered layer.

Used in: chapters 2, 3, 4, 9, 10, 14, 15.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..core import formulas as F
from .activations import ACTIVATION_STYLES, RECOMPUTE, activation_bytes, recompute_note
from .breakdown import Breakdown
import sympy as sp

from ..core.errors import InvalidValueError, UnknownNameError, check_choice, check_number, check_positive_int, checked_call
from .inference import ATTENTION, DEFAULT_RESERVE, weights_detail
from ..catalog.models import MLP_MODULES, ModelSpec, get_model
from ..catalog.precision import get_precision
from ..core.symbols import d, f, h, n_h, n_kv
from ..core.units import parse_memory

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


CONVENTIONS: dict[str, Convention] = {
    "source-12": Convention("source-12", 2, 2, 0, 0, "the source document: 2 + 2 + 8 bytes"),
    "mixed-fp32-master": Convention("mixed-fp32-master", 2, 2, 4, 0,
                                    "Rajbhandari et al. 2020 (ZeRO): 2 + 2 + 12 bytes with Adam"),
    "deepspeed": Convention("deepspeed", 2, 4, 4, 4,
                            "DeepSpeed estimate_zero3_model_states_mem_needs: 18 bytes + 4 x largest layer"),
}


@dataclass(frozen=True)
class Optimizer:
    """Optimizer state per trainable parameter; ``factored`` = Adafactor's row + column statistics."""

    name: str
    bytes_per_param: Fraction
    small_tensor_bytes: Fraction
    factored: bool
    source: str


# bitsandbytes 8-bit optimizers: two uint8 states, blockwise fp32 absmax per 256 values; tensors with
# fewer than 4096 elements (norms, biases) keep 32-bit states (min_8bit_size). Paged variants hold
# the same bytes but let the driver page them to CPU memory under pressure.
_BNB8 = 2 * (1 + Fraction(4, 256))
OPTIMIZERS: dict[str, Optimizer] = {
    "adamw": Optimizer("adamw", Fraction(8), Fraction(8), False, "PyTorch AdamW: fp32 exp_avg + exp_avg_sq"),
    "paged-adamw": Optimizer("paged-adamw", Fraction(8), Fraction(8), False, "bitsandbytes PagedAdamW (32-bit)"),
    "adamw-8bit": Optimizer("adamw-8bit", _BNB8, Fraction(8), False, "bitsandbytes AdamW8bit (Dettmers et al. 2022)"),
    "paged-adamw-8bit": Optimizer("paged-adamw-8bit", _BNB8, Fraction(8), False, "bitsandbytes PagedAdamW8bit"),
    "sgd": Optimizer("sgd", Fraction(4), Fraction(4), False, "PyTorch SGD with momentum: one fp32 buffer"),
    "adafactor": Optimizer("adafactor", Fraction(0), Fraction(4), True,
                           "Shazeer & Stern 2018; HF Adafactor without momentum: fp32 row + column sums"),
}

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
        key = check_choice("lora_targets", targets, LORA_TARGETS)
        if key == "all-linear":
            return have
        if key == "attention":
            return [x for x in have if x in ("q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj")]
        if "qkv_proj" in have:
            raise InvalidValueError("lora_targets", "qv", f"{model.name} fuses q, k and v into qkv_proj; use 'attention'")
        return ["q_proj", "v_proj"]
    out: list[str] = []
    for t in (sorted(targets, key=str) if isinstance(targets, (set, frozenset)) else targets):
        if not isinstance(t, str) or t not in have:
            raise UnknownNameError("lora_targets", t, have)
        if t not in out:
            out.append(t)
    if not out:
        raise InvalidValueError("lora_targets", targets, "name at least one linear module")
    return out


def max_lora_rank(model: ModelSpec | str, targets: str | tuple[str, ...] | list[str] = "all-linear") -> tuple[int, str]:
    """The largest rank every targeted module admits, min over the modules of min(in_features, out_features),
    and the module that sets it."""
    m = get_model(model)
    vals = m.symbols()
    best = None
    for mod in lora_modules(m, targets):
        i, o = (int(F.evaluate(e, **vals)) for e in LORA_SHAPES[mod])
        if best is None or min(i, o) < best[0]:
            best = (min(i, o), f"{mod} ({i:,} -> {o:,})")
    return best


def check_lora_rank(model: ModelSpec | str, rank, targets="all-linear") -> int:
    """``rank`` as an int if it is a positive integer no larger than :func:`max_lora_rank`, else a one-line error
    naming ``lora_rank``."""
    rank = check_positive_int("lora_rank", rank)
    cap, where = max_lora_rank(model, targets)
    if rank > cap:
        raise InvalidValueError("lora_rank", rank, f"must be <= {cap:,} = min(in, out) of {where} in "
                                                    f"{get_model(model).name} (a rank above a layer's width is not "
                                                    "low-rank)")
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
    vals = m.symbols()
    total = 0
    for mod in lora_modules(m, targets):
        io = int(F.evaluate(F.LORA_IN_OUT[mod], **vals))
        copies = vals["n_mlp"] if mod in MLP_MODULES else 1
        total += copies * int(F.evaluate(F.LORA_PARAMS_PER_MODULE, r=rank, io=io))
    return m.n_layers * total


@checked_call
def optimizer_state_bytes(model: ModelSpec | str, optimizer: str = "adamw", trainable: int | None = None,
                          lora_rank: int | None = None, lora_targets="all-linear") -> int:
    """Optimizer state for the trainable parameters (all of them, or the LoRA adapters when lora_rank is set).

    ``trainable``: how many of the model's parameters train (0..weight_params; the norms and biases count among
    them first, as 32-bit states under 8-bit optimizers). Adafactor's factored state depends on which matrices
    train, so ``trainable`` is refused with it."""
    m = get_model(model)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    vals = m.symbols()
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
    if lora_rank is not None:
        n = lora_params(m, lora_rank, lora_targets)
        if opt.factored:  # A (r x in) and B (out x r): rows + columns of each
            mods = lora_modules(m, lora_targets)
            rc = sum(int(F.evaluate(F.LORA_IN_OUT[x], **vals)) + 2 * lora_rank for x in mods)
            return int(opt.small_tensor_bytes) * m.n_layers * rc
        return F.to_int_bytes(opt.bytes_per_param * n)
    groups = m.param_groups()
    n = trainable if trainable is not None else m.weight_params
    small = min(groups["norm"] + groups["bias"], n)
    if opt.factored:
        rc = sum(int(F.evaluate(F.LORA_IN_OUT[x], **vals)) * (vals["n_mlp"] if x in MLP_MODULES else 1)
                 for x in m.linear_modules()) * m.n_layers
        rc += (m.vocab + m.hidden) * (1 if m.tied_embeddings else 2) + small
        return int(opt.small_tensor_bytes) * rc
    return F.to_int_bytes(opt.bytes_per_param * (n - small) + opt.small_tensor_bytes * small)


@checked_call
def training_memory(model: ModelSpec | str, method: str = "full", seq: int = 2048, micro_batch: int = 1,
                    precision: str = "bf16", optimizer: str = "adamw", convention: str = "mixed-fp32-master",
                    recompute: str = "none", attention: str = "sdpa", lora_rank: int = 16,
                    lora_targets: str | tuple[str, ...] = "all-linear", base_weights: str | None = None,
                    activation_style: str = "hf", reserve: int | str = DEFAULT_RESERVE) -> Breakdown:
    """Peak memory of one training step on one GPU (no sharding; see vramlib.plans.parallel for ZeRO/TP/PP).

    ``method``: full | lora | qlora. ``base_weights``: storage of frozen base weights (lora: ``precision``;
    qlora: ``nf4-dq``). ``convention``: source-12 | mixed-fp32-master | deepspeed. ``lora_rank`` is at most
    min(in, out) of every targeted module; duplicate ``lora_targets`` count once.

    Recomputation is not always a saving: with a fused q|k|v projection (Phi-3) and eager attention, selective
    recomputation keeps the whole q|k|v output alive (v is a view of it) where eager copies v, so for short
    sequences it holds more than no recomputation (see :mod:`vramlib.memory.activations`); the Breakdown's notes then say
    so (:func:`vramlib.memory.activations.recompute_note`).
    """
    m = get_model(model)
    method = check_choice("method", method, METHODS)
    if method == "full":   # the LoRA options are unused: still refuse garbage rather than ignore it
        lora_modules(m, lora_targets)
        check_positive_int("lora_rank", lora_rank)
    conv = CONVENTIONS[check_choice("convention", convention, CONVENTIONS)]
    prec = get_precision(precision, field="precision")
    if prec.name not in ("bf16", "fp16", "fp32"):
        raise InvalidValueError("precision", precision, "training computes in bf16, fp16 or fp32")
    check_choice("attention", attention, ATTENTION)
    check_choice("recompute", recompute, RECOMPUTE)
    seq = check_positive_int("seq", seq)
    micro_batch = check_positive_int("micro_batch", micro_batch)
    activation_style = check_choice("activation_style", activation_style, ACTIVATION_STYLES)
    half = prec.name != "fp32"
    b_w, b_g, b_m = (conv.weight, conv.grad, conv.master) if half else (4, 4, 0)
    parts: dict[str, int] = {}
    if method == "full":
        n_t = m.weight_params
        parts["weights"] = F.to_int_bytes(F.evaluate(F.WEIGHTS_BYTES, N_q=n_t, b_q=8 * b_w, N_u=0, b_u=16))
        opt = optimizer_state_bytes(m, optimizer)
    else:
        base = base_weights or ("nf4-dq" if method == "qlora" else prec.name)
        for k, v in weights_detail(m, base).items():
            parts[k if k != "weights" else f"base weights ({base})"] = v
        n_t = lora_params(m, lora_rank, lora_targets)
        parts["LoRA adapters"] = F.to_int_bytes(F.evaluate(F.WEIGHTS_BYTES, N_q=n_t, b_q=8 * b_w, N_u=0, b_u=16))
        opt = optimizer_state_bytes(m, optimizer, lora_rank=lora_rank, lora_targets=lora_targets)
    parts["gradients"] = int(F.evaluate(F.MODEL_STATES_BYTES, N_t=n_t, b_w=0, b_g=b_g, b_m=0, b_o=0))
    if b_m:
        parts["master weights (fp32)"] = int(F.evaluate(F.MODEL_STATES_BYTES, N_t=n_t, b_w=0, b_g=0, b_m=b_m, b_o=0))
    parts["optimizer states"] = opt
    if conv.gather_buffer_per_param and method == "full" and half:
        from .sharding import largest_module_params

        parts["ZeRO-3 gather buffer"] = F.to_int_bytes(conv.gather_buffer_per_param * largest_module_params(m))
    parts["activations"] = activation_bytes(m, seq=seq, batch=micro_batch, dtype=prec.name, attention=attention,
                                            recompute=recompute, style=activation_style, scope="model")
    parts["reserve (CUDA context, framework)"] = parse_memory(reserve, field="reserve")
    note = recompute_note(m, seq, micro_batch, prec.name, attention, recompute, activation_style)
    return Breakdown(parts, title=f"{m.name}: {method} fine-tuning, {precision}, {optimizer}, {convention}, "
                                  f"seq {seq:,} x {micro_batch}, recompute {recompute}",
                     notes=(note,) if note else ())
