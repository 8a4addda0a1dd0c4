"""Every memory formula of the book, written once as a sympy expression.

Chapters display these expressions (``sp.latex``); the numeric functions in
:mod:`vramlib.catalog.models`, :mod:`vramlib.memory.inference`, :mod:`vramlib.memory.training` and
:mod:`vramlib.solve.feasibility` evaluate them through :func:`evaluate` (exact
integer/fraction arithmetic); the static-page calculators are generated from
them. Change a formula here and all three change.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Callable

import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from .symbols import (
    B, E, L, M, N_q, N_t, N_u, P, R, S_shard, T, V, W, b_a, b_g, b_kv, b_m, b_o, b_w, beta_mlp, beta_norm,
    beta_o, beta_qkv, bits_q, bits_u, d, e_att, f, g, h, n_gpu, n_h, n_kv, n_mlp, n_norm, r, tied,
)

# --- parameters (chapters 1-5, 13; the catalogue counts are checked against transformers) -------------
LAYER_GROUPS: dict[str, sp.Expr] = {
    "attn_q": h * n_h * d,
    "attn_k": h * n_kv * d,
    "attn_v": h * n_kv * d,
    "attn_o": n_h * d * h,
    "mlp_gate": n_mlp * g * h * f,
    "mlp_up": n_mlp * h * f,
    "mlp_down": n_mlp * f * h,
    "router": E * h,
    "norm": n_norm * h * (1 + beta_norm),
    "bias": beta_qkv * d * (n_h + 2 * n_kv) + beta_o * h + n_mlp * beta_mlp * ((1 + g) * f + h),
}
"""Parameters of one decoder layer by tensor kind (GQA attention, n_mlp MLPs/experts, router, norms, biases)."""

MODEL_GROUPS: dict[str, sp.Expr] = {
    "embed": V * h,
    "pos_embed": P * h,
    "lm_head": (1 - tied) * V * h,
    "norm": h * (1 + beta_norm),
}
"""Parameters outside the layers: embeddings, learned positions, LM head unless tied, final norm."""

ATTN_PARAMS = sum((LAYER_GROUPS[k] for k in ("attn_q", "attn_k", "attn_v", "attn_o")), sp.Integer(0))
"""Q, K, V, O projection weights of one layer (biases are in LAYER_GROUPS['bias'])."""

MLP_PARAMS = (LAYER_GROUPS["mlp_gate"] + LAYER_GROUPS["mlp_up"] + LAYER_GROUPS["mlp_down"]).subs(n_mlp, 1)
"""One MLP (one expert): up and down projections, plus the gate when g = 1."""

LAYER_PARAMS = sum(LAYER_GROUPS.values(), sp.Integer(0))
"""One decoder layer."""

N_PARAMS = sum(MODEL_GROUPS.values(), sp.Integer(0)) + L * LAYER_PARAMS
"""Whole model; the catalogue's counts equal transformers' (tests/test_models.py)."""

LORA_IN_OUT: dict[str, sp.Expr] = {
    "q_proj": h + n_h * d, "k_proj": h + n_kv * d, "v_proj": h + n_kv * d, "o_proj": n_h * d + h,
    "qkv_proj": h + (n_h + 2 * n_kv) * d,
    "gate_proj": h + f, "up_proj": h + f, "down_proj": f + h, "gate_up_proj": h + 2 * f,
}
"""in_features + out_features of each linear module a LoRA adapter can target (fused names too)."""

LORA_PARAMS_PER_MODULE = r * sp.Symbol("io", positive=True, integer=True)
"""A rank-r adapter on a linear layer adds A (r x in) and B (out x r): r (in + out) parameters."""

# --- weights and KV cache (chapters 1, 2, 5, 6, 7, 8, 14) ----------------------------------------------
WEIGHTS_BYTES = (N_q * bits_q + N_u * bits_u) / 8
"""Weights in bytes: quantized tensors at b_q bits (scales and zeros included), the rest at b_u bits."""

KV_CACHE_BYTES = 2 * L * n_kv * d * b_kv * T * B
"""K and V for every layer, every KV head, every token of every sequence."""

KV_BYTES_PER_TOKEN = KV_CACHE_BYTES.subs({T: 1, B: 1})
"""KV cache of one token of one sequence."""

KV_BUDGET_BYTES = M - W - R
"""What is left for the KV cache after the weights and the reserve (chapter 1's "17 GB")."""

INFERENCE_KV_ONLY = W + KV_CACHE_BYTES + R
"""The source's inference budget: weights + KV cache + a reserve (CUDA context, framework)."""

# Closed forms solved by sympy on first use (module __getattr__ below), keeping `import vramlib` fast.
_SOLVED = {
    # Tokens per sequence that fill the memory M, from INFERENCE_KV_ONLY (then floored): chapters 1, 7.
    "MAX_TOKENS_KV_ONLY": lambda: sp.solve(sp.Eq(M, INFERENCE_KV_ONLY), T)[0],
    # Sequences of T tokens whose KV cache fills M (then floored): chapters 7, 8.
    "MAX_BATCH_KV_ONLY": lambda: sp.solve(sp.Eq(M, INFERENCE_KV_ONLY), B)[0],
    # Parameters whose weights fill M - R at b_q bits each (chapter 5: 24 GB / 0.5 B = 48B).
    "MAX_PARAMS": lambda: sp.solve(sp.Eq(M - R, WEIGHTS_BYTES.subs(N_u, 0)), N_q)[0],
    # GPUs needed when S bytes split evenly and R bytes are replicated on every GPU (then ceiling).
    "MIN_GPUS": lambda: sp.solve(sp.Eq(M, S_shard / n_gpu + R), n_gpu)[0],
}


def __getattr__(name: str) -> sp.Expr:
    if name in _SOLVED:
        value = _SOLVED[name]()
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vramlib.core.formulas' has no attribute {name!r}")

PREFILL_WORKSPACE_BYTES = B * T * (2 * h + 3 * f) * b_a + e_att * B * n_h * T**2 * (4 + b_a) + 4 * B * V
"""Transient peak of a prefill over T tokens: one layer's hidden states and MLP intermediates
(residual, normed input, gate, up, product), the eager attention scores (fp32 softmax plus the
16-bit probabilities; absent with sdpa/flash, e_att = 0) and the last token's fp32 logits."""

INFERENCE_BYTES = W + KV_CACHE_BYTES + PREFILL_WORKSPACE_BYTES + R
"""Inference peak: weights, KV cache, prefill workspace and reserve (chapters 1, 5, 7)."""

# --- training model states (chapters 2, 3, 4, 9, 10, 15) -----------------------------------------------
MODEL_STATES_BYTES = N_t * (b_w + b_g + b_m + b_o)
"""Trainable parameters: compute copy, gradient, fp32 master copy and optimizer state per parameter."""


class _ExactPrinter(PythonCodePrinter):
    """Prints rationals as ``Fraction(p, q)`` so that evaluation stays exact."""

    def _print_Rational(self, expr):  # noqa: N802 (sympy's naming)
        return f"Fraction({expr.p}, {expr.q})"

    def _print_Half(self, expr):  # noqa: N802
        return "Fraction(1, 2)"


# Cost counters (tests/ and tools/bench*.py): tests assert on work done, not on wall-clock time, e.g. that a warm
# widget update adds no LAMBDIFY_CALLS. Plain module ints; read them before and after, never reset them.
LAMBDIFY_CALLS = 0
"""sympy.lambdify compilations so far in this process (compile_exact here, vramlib.solve.planning's numpy path)."""
EVALUATIONS = 0
"""Calls of :func:`evaluate` so far in this process."""


def lambdify(args, expr, **kwargs) -> Callable:
    """``sympy.lambdify``, counted in :data:`LAMBDIFY_CALLS` (the one slow step of a cold formula, ~ms)."""
    global LAMBDIFY_CALLS
    LAMBDIFY_CALLS += 1
    return sp.lambdify(args, expr, **kwargs)


@lru_cache(maxsize=None)
def compile_exact(expr: sp.Expr) -> tuple[tuple[str, ...], Callable]:
    """Lambdify ``expr`` once over its free symbols (sorted by name) with exact arithmetic."""
    args = tuple(sorted(expr.free_symbols, key=lambda s: s.name))
    fn = lambdify(args, expr, modules=[{"Fraction": Fraction, "math": math}, "math"], printer=_ExactPrinter)
    return tuple(a.name for a in args), fn


_INT_CLOSED_HEADS = (sp.Add, sp.Mul, sp.Max, sp.Min, sp.ceiling, sp.floor, sp.Piecewise, sp.Integer, sp.Symbol,
                     sp.core.relational.Relational, sp.logic.boolalg.BooleanFunction, sp.logic.boolalg.BooleanAtom,
                     sp.functions.special.tensor_functions.KroneckerDelta)


def _int_closed(expr) -> bool:
    """True when ``expr`` maps ints to ints with Python's int operators: sums, products, non-negative integer
    powers, integer constants, ceiling/floor/Max/Min/Piecewise of such (no division, no non-integer rational)."""
    if isinstance(expr, sp.Pow):
        return expr.exp.is_Integer and expr.exp >= 0 and _int_closed(expr.base)
    if isinstance(expr, sp.Rational) and not expr.is_Integer or not isinstance(expr, _INT_CLOSED_HEADS):
        return False
    if isinstance(expr, sp.Piecewise):
        return all(_int_closed(e) and _int_closed(c) for e, c in expr.args)
    return all(_int_closed(a) for a in expr.args)


def _int_typed(expr) -> bool:
    """True when the exact evaluation returns an int (a ceiling, a floor, an integer, or a choice among them)."""
    if isinstance(expr, (sp.ceiling, sp.floor, sp.Integer)):
        return True
    if isinstance(expr, sp.Piecewise):
        return all(_int_typed(e) for e, _ in expr.args)
    if isinstance(expr, (sp.Max, sp.Min)):
        return all(_int_typed(a) for a in expr.args)
    return False


@lru_cache(maxsize=None)
def argument_names(expr: sp.Expr) -> tuple[str, ...]:
    """The argument names of ``expr``'s compiled functions: its free symbols, sorted by name."""
    return tuple(sorted(s.name for s in expr.free_symbols))


@lru_cache(maxsize=None)
def compile_int(expr: sp.Expr) -> tuple[Callable, bool] | None:
    """The fast path of :func:`evaluate` for all-int inputs: ``(function of ints, returns int)`` for an
    integer-closed ``expr`` (Python ints instead of Fractions, the same exact value), or for a ratio of two
    integer-closed parts (``sp.together``, never cancelled: the same zero divisions) one exact division at the end;
    None otherwise."""
    args = tuple(sorted(expr.free_symbols, key=lambda s: s.name))
    if _int_closed(expr):
        return lambdify(args, expr, modules=[{"math": math}, "math"]), _int_typed(expr)
    num, den = sp.fraction(sp.together(expr))  # a ratio of integer-closed parts: ints, then one exact division
    if den == 1 or not (_int_closed(num) and _int_closed(den)) or not den.free_symbols <= expr.free_symbols:
        return None
    pair = lambdify(args, (num, den), modules=[{"math": math}, "math"])
    return (lambda *a: Fraction(*pair(*a))), False


def evaluate(expr: sp.Expr, **values) -> int | Fraction:
    """Evaluate ``expr`` with symbol values by name (ints or Fractions in, exact result out).

    Example: ``evaluate(KV_CACHE_BYTES, L=40, n_kv=40, d_head=128, b_kv=2, T=1, B=1) == 819200``.
    All-int inputs to an integer-closed expression take ``compile_int`` (same value and type, ~10x faster).
    """
    global EVALUATIONS
    EVALUATIONS += 1
    names = argument_names(expr)
    try:
        args = [values[n] for n in names]
    except KeyError:
        missing = [n for n in names if n not in values]
        raise TypeError(f"evaluate: missing values for {', '.join(missing)}") from None
    if all(type(a) is int for a in args):
        fast = compile_int(expr)
        if fast is not None:
            r = fast[0](*args)
            return r if fast[1] else Fraction(r)
    # ints become Fractions so that a division inside the expression stays exact (Python's / on ints is a float)
    return compile_exact(expr)[1](*(Fraction(a) if isinstance(a, int) else a for a in args))


def to_int_bytes(value) -> int:
    """Round an exact byte count up to a whole byte."""
    if type(value) is int:
        return value
    fr = Fraction(value)
    return -((-fr.numerator) // fr.denominator)


def latex(expr: sp.Expr) -> str:
    """LaTeX of a formula, for chapters (``display(Math(latex(KV_CACHE_BYTES)))``)."""
    return sp.latex(expr)
