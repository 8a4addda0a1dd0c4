"""Training feasibility on one GPU: the longest sequence that fits, ratios between memory totals, and the
source's rules of thumb for training memory, each written once as a named convention.

* :func:`max_seq_for_training` -- the inverse of :func:`vramlib.memory.training.training_memory` in the sequence length:
  the longest ``seq`` whose training step fits ``memory`` (bisection; the answer fits, answer + 1 does not).
* ``SOURCE_ACTIVATIONS = b s h L c`` -- the source's activation rule of thumb (questions 3, 4 and 10 use
  c = 34..40 bytes), with :func:`source_activation_bytes` and :func:`source_training_memory` (the library's
  model states with the activations replaced by the rule). A named convention, not a measurement: the
  measured accountings are :mod:`vramlib.memory.activations`' ``hf`` and ``megatron`` styles.
* ``MEMORY_RATIO = M_a / M_b`` -- :func:`size_ratio` of two totals (training over inference, 7B over 1B).
* ``LINEARITY = (M_a / M_b) / (N_a / N_b)`` -- how close the memory ratio of two models is to their parameter
  ratio (1 = linear); :func:`scaling_ratio`, :func:`linearity`, :func:`linear_until`.
* ``BYTES_PER_TRAINABLE_PARAM`` -- model states per trainable parameter by convention and optimizer
  (:func:`bytes_per_param`, :func:`model_states_bytes`).

Used in: chapters 2, 3, 4, 9, 10, 15.
"""
from __future__ import annotations

import inspect
from fractions import Fraction

import sympy as sp

from ..core import formulas as F
from ..memory.activations import activation_bytes
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, UnknownNameError, check_choice, check_positive_int, checked_call
from .feasibility import largest_fitting
from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import get_precision
from ..core.symbols import L, N_t, b, h, s
from ..core.portable import portable
from ..catalog.precision import FP32_BYTES
from ..memory.training import CONVENTIONS, OPTIMIZERS, TRAINING_PRECISIONS, training_memory

# --- expressions ---------------------------------------------------------------------------------------
c_act = sp.Symbol("c", positive=True)
"""The source's activation coefficient, bytes per (token x hidden unit x layer)."""

SOURCE_ACTIVATIONS = b * s * h * L * c_act
"""The source's activation rule of thumb: micro-batch x sequence x hidden x layers x c bytes, with c = 34..40
("激活 ≈ b × s × h × L × 40", questions 3, 4; question 10 says the same without the coefficient). It keeps
Korthikanti et al.'s 34 s b h per layer (attention scores dropped, i.e. selective recomputation) and rounds up
to 40; it has no vocabulary term and no dependence on the FFN width, the heads or the attention kernel.
Chapters 3, 4, 9, 10."""

M_a, M_b = sp.symbols("M_a M_b", positive=True)
N_a, N_b = sp.symbols("N_a N_b", positive=True)

MEMORY_RATIO = M_a / M_b
"""Ratio of two memory totals: training over inference (chapter 15), the larger model over the smaller (chapter 10)."""

LINEARITY = (M_a / M_b) / (N_a / N_b)
"""Memory ratio over parameter ratio: 1 when memory is exactly proportional to the parameters, below 1 when
the smaller model needs relatively more (its activations, vocabulary or reserve weigh more). Chapter 10."""

BYTES_PER_TRAINABLE_PARAM = F.MODEL_STATES_BYTES / N_t
"""Model states per trainable parameter: compute copy + gradient + fp32 master + optimizer state
(12 for the source, 16 with an fp32 master copy, 18 for DeepSpeed's accounting). Chapters 2, 3, 9, 15."""

ACTIVATION_RULES = ("hf", "megatron", "source")
"""Activation accountings the ratio functions accept: vramlib.memory.activations' two styles, or the source's rule."""

_TM = inspect.signature(training_memory).parameters


def _default(name: str):
    return _TM[name].default


def as_dense_llama(expr: sp.Expr) -> sp.Expr:
    """An hf activation expression with the family indicators of a dense Llama/Mistral decoder substituted
    (no fused qkv, no Gemma norms or soft-capping, no experts, two norms per layer, 16-bit activations), for
    display in chapters 2, 10 and 15."""
    from ..memory import activations as A
    from ..core.symbols import n_norm

    zeros = dict.fromkeys([A.z_qkv, A.z_gemma, A.z_sc, A.z_fsc, A.z_moe, A.z_oc, A.z_qkn, A.z_q3r, A.z32], 0)
    return expr.subs({**zeros, A.k_e: 1, n_norm: 2})


# --- the source's rule of thumb ---------------------------------------------------------------------------
@checked_call
def source_activation_bytes(model: ModelSpec | str, seq: int, batch: int = 1, coefficient: int | Fraction = 40) -> int:
    """The source's ``b x s x h x L x c`` bytes (SOURCE_ACTIVATIONS), rounded up to a whole byte.

    >>> source_activation_bytes("source-7b", 2048)      # question 4: "≈ 10.7 GB"
    10737418240
    """
    m = get_model(model)
    seq = check_positive_int("seq", seq)
    batch = check_positive_int("batch", batch)
    if isinstance(coefficient, bool) or not isinstance(coefficient, (int, Fraction)) or coefficient <= 0:
        raise InvalidValueError("coefficient", coefficient, "must be a positive int or Fraction (the source uses 34..40)")
    return F.to_int_bytes(F.evaluate(SOURCE_ACTIVATIONS, b=batch, s=seq, h=m.hidden, L=m.n_layers, c=coefficient))


@checked_call
def source_training_memory(model: ModelSpec | str, seq: int = 2048, micro_batch: int = 1,
                           coefficient: int | Fraction = 40, **training_kwargs) -> Breakdown:
    """:func:`vramlib.memory.training.training_memory` with its ``activations`` replaced by the source's ``b s h L c`` bytes.

    Every other keyword (``method``, ``convention``, ``reserve`` ...) goes to ``training_memory`` with its
    defaults; pass ``convention="source-12", reserve=0`` to reproduce the source.
    """
    bd = training_memory(model, seq=seq, micro_batch=micro_batch, **training_kwargs)
    act = source_activation_bytes(model, seq, micro_batch, coefficient)
    return Breakdown({**bd.to_dict(), "activations": act},
                     title=bd.title + f"; activations: the source's b s h L x {coefficient}", notes=bd.notes)


# --- ratios ---------------------------------------------------------------------------------------------
def _as_number(field: str, x) -> Fraction:
    if isinstance(x, Breakdown):
        x = x.total
    if isinstance(x, bool) or not isinstance(x, (int, float, Fraction)):
        raise InvalidValueError(field, x, "give a Breakdown or a number of bytes (or parameters)")
    if x < 0:
        raise InvalidValueError(field, x, "must not be negative")
    return Fraction(x)


@checked_call
def size_ratio(numerator, denominator) -> float:
    """``numerator / denominator`` (MEMORY_RATIO) for Breakdowns (their totals) or plain numbers."""
    a, b_ = _as_number("numerator", numerator), _as_number("denominator", denominator)
    if b_ == 0:
        raise InvalidValueError("denominator", denominator, "must be positive")
    return float(F.evaluate(MEMORY_RATIO, M_a=a, M_b=b_))


def _training_total(model: ModelSpec, seq: int, activation_style: str, coefficient, kw: dict) -> int:
    if activation_style == "source":
        return source_training_memory(model, seq, coefficient=coefficient, **kw).total
    return training_memory(model, seq=seq, activation_style=activation_style, **kw).total


def _ratio_inputs(big, small, activation_style: str, kw: dict):
    if "seq" in kw:
        raise InvalidValueError("seq", kw["seq"], "pass it as the seq argument")
    style = check_choice("activation_style", activation_style, ACTIVATION_RULES)
    return get_model(big), get_model(small), style


@checked_call
def scaling_ratio(big: ModelSpec | str, small: ModelSpec | str, seq: int = 2048, activation_style: str = "hf",
                  coefficient: int | Fraction = 40, **training_kwargs) -> float:
    """Training memory of ``big`` over that of ``small`` at the same settings (MEMORY_RATIO of the totals).

    ``activation_style``: ``hf`` | ``megatron`` (vramlib.memory.activations) | ``source`` (the source's b s h L c).
    Other keywords go to :func:`vramlib.memory.training.training_memory` (``convention``, ``recompute``, ``reserve`` ...).
    """
    mb, ms, style = _ratio_inputs(big, small, activation_style, training_kwargs)
    return float(F.evaluate(MEMORY_RATIO, M_a=_training_total(mb, seq, style, coefficient, training_kwargs),
                            M_b=_training_total(ms, seq, style, coefficient, training_kwargs)))


def _linearity_exact(mb: ModelSpec, ms: ModelSpec, seq: int, style: str, coefficient, kw: dict) -> Fraction:
    return F.evaluate(LINEARITY, M_a=_training_total(mb, seq, style, coefficient, kw),
                      M_b=_training_total(ms, seq, style, coefficient, kw), N_a=mb.weight_params, N_b=ms.weight_params)


@checked_call
def linearity(big: ModelSpec | str, small: ModelSpec | str, seq: int = 2048, activation_style: str = "hf",
              coefficient: int | Fraction = 40, **training_kwargs) -> float:
    """LINEARITY: the training-memory ratio of ``big`` over ``small`` divided by their parameter ratio
    (``weight_params``: the nominal size for the source's shapes). 1 = linear in the parameters."""
    mb, ms, style = _ratio_inputs(big, small, activation_style, training_kwargs)
    return float(_linearity_exact(mb, ms, seq, style, coefficient, training_kwargs))


@checked_call
def linear_until(big: ModelSpec | str, small: ModelSpec | str, tolerance: float | Fraction = Fraction(1, 10),
                 activation_style: str = "hf", coefficient: int | Fraction = 40, limit: int = 2**24,
                 **training_kwargs) -> int:
    """Longest sequence at which :func:`linearity` is still at least ``1 - tolerance``.

    Assumes the ratio falls as the sequence grows (activations grow, the parameter-bound states do not), which
    holds when the small model's activations are relatively larger; returns 0 if not even one token is within
    the tolerance, and ``limit`` if the ratio never leaves it up to ``limit`` tokens.
    """
    mb, ms, style = _ratio_inputs(big, small, activation_style, training_kwargs)
    tol = Fraction(tolerance)
    if not 0 <= tol < 1:
        raise InvalidValueError("tolerance", tolerance, "must be a fraction in [0, 1)")
    floor = 1 - tol
    return largest_fitting(lambda n: _linearity_exact(mb, ms, n, style, coefficient, training_kwargs) >= floor,
                           limit=check_positive_int("limit", limit))


# --- model states per parameter -------------------------------------------------------------------------------
def _state_bytes(convention: str, optimizer: str, precision: str) -> dict[str, int | Fraction]:
    conv = CONVENTIONS[check_choice("convention", convention, CONVENTIONS)]
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    prec = get_precision(precision, field="precision")
    if prec.name not in TRAINING_PRECISIONS:
        raise InvalidValueError("precision", precision, "training computes in bf16, fp16 or fp32")
    # as training_memory: fp32 training keeps fp32 weights and gradients and no separate master copy
    b_w_, b_g_, b_m_ = (conv.weight, conv.grad, conv.master) if prec.name != "fp32" else (FP32_BYTES, FP32_BYTES, 0)
    return {"b_w": b_w_, "b_g": b_g_, "b_m": b_m_, "b_o": opt.bytes_per_param}


@checked_call
def bytes_per_param(convention: str = "source-12", optimizer: str = "adamw", precision: str = "bf16") -> Fraction:
    """Bytes of model states per trainable parameter (BYTES_PER_TRAINABLE_PARAM), large tensors; exact.

    >>> [int(bytes_per_param(c)) for c in ("source-12", "mixed-fp32-master", "deepspeed")]
    [12, 16, 18]
    """
    return Fraction(F.evaluate(BYTES_PER_TRAINABLE_PARAM, **_state_bytes(convention, optimizer, precision)))


@checked_call
def model_states_bytes(n_trainable: int, convention: str = "source-12", optimizer: str = "adamw",
                       precision: str = "bf16") -> int:
    """Model states of ``n_trainable`` parameters (formulas.MODEL_STATES_BYTES), rounded up to a whole byte.

    The source's "33M x 12 B ≈ 0.4 GB" (question 2): ``model_states_bytes(33_000_000)``. Unlike
    :func:`vramlib.memory.training.training_memory`, no tensor is treated as small (8-bit optimizers keep those 32-bit).
    """
    n = check_positive_int("n_trainable", n_trainable, allow_zero=True)
    return F.to_int_bytes(F.evaluate(F.MODEL_STATES_BYTES, N_t=n, **_state_bytes(convention, optimizer, precision)))


# --- the inverse solver -------------------------------------------------------------------------------------
def _largest_by_secant(total, cap: int, limit: int, probe: int = 4096) -> int:
    """Largest n in [1, limit] with total(n) <= cap, for a non-decreasing total with total(1) <= cap
    (``largest_by_secant``)."""
    return largest_by_secant(total, cap, limit, probe)


@portable
def largest_by_secant(total, cap, limit, probe):
    """Largest n in [1, limit] with total(n) <= cap, for a non-decreasing total with total(1) <= cap.

    Secant steps bracket the answer (exact in one step when total is affine, as activations are with a fused
    attention kernel), then regula falsi narrows the bracket, falling back to bisection whenever a step fails to
    halve it: exact for any non-decreasing total, in about ten evaluations where doubling from 1 and bisecting
    takes some thirty.
    """
    lo = 1
    t_lo = total(1)
    x = max(2, min(probe, limit))
    hi = None
    t_hi = None
    while hi is None:                                 # bracket: lo fits, hi does not
        t_x = total(x)
        if t_x > cap:
            hi = x
            t_hi = t_x
            break
        if x >= limit:
            return limit
        guess = x + (cap - t_x) * (x - lo) // max(1, t_x - t_lo) + 1 if t_x > t_lo else 2 * x
        lo = x
        t_lo = t_x
        x = min(limit, max(guess + guess // 128, lo + 1))
    width = hi - lo
    while hi - lo > 1:
        if hi - lo > width // 2 and width != hi - lo:  # last step did not halve the bracket: bisect
            mid = (lo + hi) // 2
        else:
            mid = min(max(lo + (cap - t_lo) * (hi - lo) // (t_hi - t_lo), lo + 1), hi - 1)
        width = hi - lo
        t_mid = total(mid)
        if t_mid <= cap:
            lo = mid
            t_lo = t_mid
        else:
            hi = mid
            t_hi = t_mid
    return lo


def memory_bytes(value, field: str = "memory") -> int:
    """hardware.capacity_bytes, with an unknown GPU name reported as a value error that says a size works too."""
    from ..catalog.hardware import capacity_bytes

    try:
        return capacity_bytes(value, field=field)
    except UnknownNameError as err:
        hint = (" (did you mean " + ", ".join(repr(c) for c in err.close_matches) + "?)") if err.close_matches else ""
        raise InvalidValueError(field, value, "give bytes, a size such as '80GB' or a catalogue GPU name"
                                + hint) from None


@checked_call
def max_seq_for_training(model: ModelSpec | str, memory: int | str, limit: int = 2**40, **training_kwargs) -> int:
    """Longest sequence (tokens per sequence, at ``micro_batch``) whose training step fits ``memory``.

    ``memory``: bytes, ``"48GB"``/``"48GiB"`` or a GPU name. Every keyword goes to
    :func:`vramlib.memory.training.training_memory` (``method``, ``recompute``, ``attention``, ``convention``, ``reserve`` ...).
    A secant guess and bisection run on the step's phases (or, for a sum of parts, on the activations alone, the only
    part that grows with the sequence), and the answer is confirmed on ``training_memory(...).total``: it fits and answer + 1 does not; 0 when not even one token fits
    (the model states alone are too large). Memory only: compare with ``model.max_context``.
    """
    if "seq" in training_kwargs:
        raise InvalidValueError("seq", training_kwargs["seq"], "is what max_seq_for_training solves for; do not pass it")
    m = get_model(model)
    cap = memory_bytes(memory)
    limit = check_positive_int("limit", limit)

    def fits(n: int) -> bool:
        return training_memory(m, seq=n, **training_kwargs).total <= cap

    base = training_memory(m, seq=1, **training_kwargs)   # validates every keyword once
    if base.total > cap:
        return 0
    if base.peak_phase is not None:     # priced by its phases: several terms grow with the sequence
        n = _largest_by_secant(lambda k: training_memory(m, seq=k, **training_kwargs).total, cap, limit)
    else:       # a sum of parts: only the activations depend on the sequence, so bisect on them alone ...
        fixed = base.total - base["activations"]
        kw = {k: training_kwargs.get(k, _default(k)) for k in
              ("micro_batch", "precision", "attention", "recompute", "activation_style")}

        def act(n: int) -> int:
            return activation_bytes(m, seq=n, batch=kw["micro_batch"], dtype=get_precision(kw["precision"]).name,
                                    attention=kw["attention"], recompute=kw["recompute"],
                                    style=kw["activation_style"], scope="model")

        n = _largest_by_secant(lambda k: fixed + act(k), cap, limit)
    # ... then confirm on the full breakdown (and bisect on it if training_memory ever grows another seq term)
    if n == limit or (fits(n) and not fits(n + 1)):
        return n
    return largest_fitting(fits, limit=limit)


__all__ = [
    "ACTIVATION_RULES", "BYTES_PER_TRAINABLE_PARAM", "LINEARITY", "MEMORY_RATIO", "SOURCE_ACTIVATIONS",
    "as_dense_llama", "bytes_per_param", "linear_until", "linearity", "max_seq_for_training", "memory_bytes",
    "model_states_bytes",
    "scaling_ratio", "size_ratio", "source_activation_bytes", "source_training_memory",
]
