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
    B, E, L, M, N_q, N_t, N_u, P, R, S_shard, T, V, W, b_a, b_g, b_kv, b_m, b_o, b_w, beta_cb, beta_mlp, beta_mn,
    beta_hb, beta_norm, beta_o, beta_pb, beta_qkf, beta_qkh, beta_qkv, beta_rb, beta_sink, bits_q, bits_u, c_kv, d,
    d_in, d_r, d_s, d_v, e_att, f, f_s, g, h, k_c, n_g, n_gpu, n_h, n_kv, n_mlp, n_norm, n_s, n_sh, q_r, r, tied,
    z_att, z_mla, z_qr, z_sg, z_ssm, w, blk, n_bt, K_tok, K_seq, b_ssm
)

# --- parameters (chapters 1-5, 13; the catalogue counts are checked against transformers) -------------
_MLP_WIDTH = n_mlp * f + n_s * f_s
"""Total intermediate width of a layer's MLPs: n_mlp of width f (1 dense MLP, or the E routed experts; k of them for
the active count) and n_s shared experts of width f_s."""
_CONV_DIM = d_in + 2 * n_g * d_s
"""Channels of the Mamba-2 causal convolution: x, B and C."""

LAYER_GROUPS: dict[str, sp.Expr] = {
    "attn_q": z_att * h * n_h * d + z_mla * ((1 - z_qr) * h * n_h * d + q_r * (h + n_h * d)),
    "attn_k": z_att * h * n_kv * d,
    "attn_v": z_att * h * n_kv * d,
    "attn_kv_a": z_mla * h * (c_kv + d_r),
    "attn_kv_b": z_mla * c_kv * n_h * (d - d_r + d_v),
    "attn_o": z_att * n_h * d * h + z_mla * n_h * d_v * h,
    "ssm_in": z_ssm * h * (d_in + _CONV_DIM + n_sh),
    "ssm_conv": z_ssm * _CONV_DIM * (k_c + beta_cb),
    "ssm_out": z_ssm * d_in * h,
    "mlp_gate": g * h * _MLP_WIDTH,
    "mlp_up": h * _MLP_WIDTH,
    "mlp_down": _MLP_WIDTH * h,
    "router": E * h + beta_rb * E + z_sg * h,
    "norm": n_norm * h * (1 + beta_norm) + beta_qkh * 2 * d + beta_qkf * (n_h + n_kv) * d + z_mla * (q_r + c_kv)
            + z_ssm * beta_mn * d_in,
    "bias": beta_qkv * d * (n_h + 2 * n_kv) + beta_o * h + beta_mlp * ((1 + g) * _MLP_WIDTH + (n_mlp + n_s) * h)
            + beta_sink * n_h + z_ssm * (3 * n_sh + beta_pb * (d_in + _CONV_DIM + n_sh + h)),
}
"""Parameters of one decoder layer by tensor kind. A layer's token mixer is GQA attention (z_att: q/k/v/o, MHA to
MQA), multi-head latent attention (z_mla: q_proj or q_a + q_b, kv_a_proj_with_mqa, kv_b_proj, o_proj; DeepSeek-V2/V3)
or a Mamba-2 state-space mixer (z_ssm: in_proj, conv1d, out_proj; dt_bias, A_log and D in ``bias``), or none; its MLP
is n_mlp MLPs of width f (a dense MLP, or the routed experts) plus n_s shared experts of width f_s, or none; router
(with its bias and Qwen2-MoE's shared-expert gate), norms (with q/k norms and MLA's latent norms) and biases (with
attention sinks). :meth:`vramlib.catalog.models.ModelSpec.layer_kinds` gives each layer's values."""

MODEL_GROUPS: dict[str, sp.Expr] = {
    "embed": V * h,
    "pos_embed": P * h,
    "lm_head": (1 - tied) * V * h,
    "norm": h * (1 + beta_norm),
    "bias": beta_hb * V,
}
"""Parameters outside the layers: embeddings, learned positions, LM head unless tied, final norm, an LM-head bias."""

GQA_LAYER = {beta_hb: 0, z_att: 1, z_mla: 0, q_r: 0, z_qr: 0, c_kv: 0, d_r: 0, d_v: 0, beta_qkh: 0, beta_qkf: 0,
             beta_sink: 0, n_s: 0, f_s: 0, beta_rb: 0, z_sg: 0, z_ssm: 0, d_in: 0, n_g: 0, d_s: 0, n_sh: 0, k_c: 0,
             beta_cb: 0, beta_pb: 0, beta_mn: 0}
"""The values that make LAYER_GROUPS the classic layer (GQA attention, n_mlp MLPs of width f): the 2023 models'
formulas, as chapters display them."""

ATTN_PARAMS = sum((LAYER_GROUPS[k] for k in ("attn_q", "attn_k", "attn_v", "attn_o")), sp.Integer(0)).subs(GQA_LAYER)
"""Q, K, V, O projection weights of one GQA layer (biases are in LAYER_GROUPS['bias'])."""

MLP_PARAMS = (LAYER_GROUPS["mlp_gate"] + LAYER_GROUPS["mlp_up"] + LAYER_GROUPS["mlp_down"]).subs({n_mlp: 1, n_s: 0})
"""One MLP (one expert): up and down projections, plus the gate when g = 1."""

LAYER_PARAMS = sum(LAYER_GROUPS.values(), sp.Integer(0))
"""One decoder layer (any kind: evaluate with the layer kind's values)."""

N_PARAMS = sum(MODEL_GROUPS.values(), sp.Integer(0)) + L * LAYER_PARAMS
"""A model of L layers of one kind; a model of several kinds sums LAYER_PARAMS per kind (ModelSpec.param_groups).
The catalogue's counts equal transformers' (tests/test_models.py, tools/measure/architectures.py)."""

UNIFORM_LAYER = {**{k: v for k, v in GQA_LAYER.items() if k not in (n_s, f_s, beta_qkh)}, f_s: f}
"""The classic layer with shared experts of the routed experts' width and per-head q/k norms (Qwen3): the one layer
kind the single-layer calculations (plans, sharding, design levers) model; their expressions are written for it."""

N_PARAMS_UNIFORM = N_PARAMS.subs(UNIFORM_LAYER)
"""N_PARAMS of L layers of the one uniform kind, as chapter 13 displays it and the design levers solve it."""

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

KV_LAYER_ELEMENTS = z_att * 2 * n_kv * d + z_mla * (c_kv + d_r)
"""Elements one token adds to one attention layer's cache: a key and a value per KV head (GQA), or MLA's compressed
latent and its shared RoPE key, one of each per token (DeepSeek-V2/V3: transformers' ``cache.update(k_nope, k_pe)``
"while the latent KV is still compressed"; vLLM's MLAAttentionSpec, one head of kv_lora_rank + qk_rope_head_dim)."""

KV_TOKENS_HELD: dict[str, sp.Expr] = {
    "transformers|full": T,
    "transformers|sliding": sp.Min(T, w - 1),
    "transformers|chunked": sp.Min(T, w - 1),
    "vllm|full": blk * sp.ceiling(T / blk),
    "vllm|sliding": blk * (sp.ceiling(sp.Min(w - 1 + n_bt, T) / blk) + 1),
    "vllm|chunked": blk * sp.ceiling(sp.Min(w + n_bt, T) / blk),
    "every-token|full": T,
    "every-token|sliding": T,
    "every-token|chunked": T,
}
"""Tokens of a T-token sequence one layer's cache holds, by runtime and layer kind (w: the window or chunk).
transformers 5.24 (cache_utils.py): a DynamicLayer keeps every token; sliding and chunked layers are both a
DynamicSlidingWindowLayer of w (``sliding_window`` or ``attention_chunk_size``), which keeps "the last
``sliding_window - 1`` tokens (or all of them if lower than that)". vLLM (v1/kv_cache_interface.py,
``max_memory_usage_bytes`` with max_model_len = T, the figure its KV-capacity and concurrency checks use): whole
blocks of blk tokens; a sliding layer holds w - 1 + n_bt tokens (the window plus one scheduled step) and one block
more, a chunked layer w + n_bt. ``every-token``: a runtime that ignores windows and chunks."""

KV_CACHE_BYTES = (L * KV_TOKENS_HELD["transformers|full"] * KV_LAYER_ELEMENTS * b_kv * B).subs({z_att: 1, z_mla: 0})
"""K and V for every layer, every KV head, every token of every sequence: the per-layer forms above for L full GQA
layers (2 L n_kv d b_kv T B, as chapters display it)."""

KV_BYTES_PER_TOKEN = KV_CACHE_BYTES.subs({T: 1, B: 1})
"""KV cache of one token of one sequence."""

SSM_STATE_BYTES = (d_in + 2 * n_g * d_s) * k_c * b_kv + d_in * d_s * b_ssm
"""Bytes of one Mamba-2 layer's state, once per sequence whatever its length (transformers 5.24's
LinearAttentionLayer): the convolution window over x, B and C (k_c columns of d_in + 2 n_g d_s channels, in the cache
dtype) and the recurrent state, n_sh heads x head dim x d_s = d_in x d_s, in the dtype of the chunked scan's final
state: fp32 (b_ssm = 4) whatever the model's dtype (measured: tools/measure/architectures.py, tiny/bamba)."""

KV_BUDGET_BYTES = M - W - R
"""What is left for the KV cache after the weights and the reserve (chapter 1's "17 GB")."""

INFERENCE_KV_ONLY = W + KV_CACHE_BYTES + R
"""The source's inference budget: weights + KV cache + a reserve (CUDA context, framework)."""

# Closed forms solved by sympy on first use (module __getattr__ below), keeping `import vramlib` fast.
_SOLVED = {
    # Tokens per sequence, and sequences, that fill the memory M with the weights, a reserve and a KV cache of K_tok
    # bytes per token where it grows linearly (every layer full attention) or K_seq bytes per whole sequence otherwise
    # (windows, chunks, Mamba states: ModelSpec.layer_kinds); then floored.
    "MAX_TOKENS_PER_TOKEN_BYTES": lambda: sp.solve(sp.Eq(M, W + K_tok * T * B + R), T)[0],
    "MAX_BATCH_PER_SEQUENCE_BYTES": lambda: sp.solve(sp.Eq(M, W + K_seq * B + R), B)[0],
    # The same two for L uniform GQA layers (INFERENCE_KV_ONLY, as chapters 1, 7 and 8 display them).
    "MAX_TOKENS_KV_ONLY": lambda: __getattr__("MAX_TOKENS_PER_TOKEN_BYTES").subs(K_tok, KV_BYTES_PER_TOKEN),
    "MAX_BATCH_KV_ONLY": lambda: __getattr__("MAX_BATCH_PER_SEQUENCE_BYTES").subs(K_seq, KV_CACHE_BYTES.subs(B, 1)),
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

PREFILL_LOGITS_ALL_BYTES = B * T * (V + h) * b_a
"""The end of a prefill that keeps every token's logits (``logits_to_keep=0``, as an evaluation loop runs the
model): the logits in the activation format and the final hidden state they came from, alive together; exact on
the full-size peaks MemTracker tracked (``tools/measure/peaks.py``) wherever they set the peak."""

PREFILL_WORKSPACE_ALL_LOGITS_BYTES = sp.Max(PREFILL_WORKSPACE_BYTES, PREFILL_LOGITS_ALL_BYTES)
"""The prefill's transient peak when every token's logits are kept: the larger of the layer's workspace and the
logits at the end (``inference_memory(..., logits="all")``)."""

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
