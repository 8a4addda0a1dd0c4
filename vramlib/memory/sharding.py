"""Parameters of one module and of one tensor/expert-parallel rank: ``MODULE_PARAMS`` (weight + bias of each
module), ``MODULE_PARAMS_RANK`` (the same on one rank: split by t, k and v with whole KV heads, routed experts over
t x N_e) and ``largest_module_params`` (DeepSpeed's ``model_to_params``, the ZeRO-3 gather buffer). Owned here, below
both ``training`` (single-GPU gather buffer) and ``plans.parallel`` (per-rank stages). Used in: chapters 3, 12.
"""
from __future__ import annotations

from fractions import Fraction
import sympy as sp

from ..catalog.models import ModelSpec, get_model
from ..core import formulas as F
from ..core.errors import check_choice, check_positive_int, checked_call
from ..core.portable import ev, portable, q, q_cmp, q_div, q_mul, share, shared, value_at
from ..core.symbols import E, V, beta_mlp, beta_o, beta_qkv, d, f, h, n_h, n_kv
from . import activations as A
from . import inference as _tp_rule
from .inference import kv_heads_per_gpu

t = A.t                                                  # tensor-parallel size (Korthikanti et al.)
N_e = sp.Symbol("N_e", integer=True, positive=True)      # expert-parallel size

# --- parameters of each module and of one rank ------------------------------------------------------------
MODULE_PARAMS: dict[str, sp.Expr] = {
    "q_proj": (h + beta_qkv) * n_h * d, "k_proj": (h + beta_qkv) * n_kv * d, "v_proj": (h + beta_qkv) * n_kv * d,
    "qkv_proj": (h + beta_qkv) * (n_h + 2 * n_kv) * d, "o_proj": n_h * d * h + beta_o * h,
    "gate_proj": (h + beta_mlp) * f, "up_proj": (h + beta_mlp) * f, "gate_up_proj": 2 * (h + beta_mlp) * f,
    "down_proj": (f + beta_mlp) * h, "experts": E * F.MLP_PARAMS, "router": E * h,
    "embed_tokens": V * h, "lm_head": V * h,
}
"""Direct parameters of each module (weight + bias), what DeepSpeed's ``model_to_params`` takes the largest of for
the ZeRO-3 gather buffer. A layer's routed experts are one module (transformers >= 5 stores them as two 3-D
parameters), their biases ignored. Chapters 3, 12."""

KV_HEADS_PER_RANK = _tp_rule.KV_HEADS_PER_GPU.subs(_tp_rule.n_gpu, t)
"""KV heads one tensor-parallel rank holds: inference.KV_HEADS_PER_GPU (the one rule, vLLM's: n_kv / t, or one whole
head replicated when t >= n_kv) in this module's t."""

ATTN_PARAMS_RANK = F.ATTN_PARAMS.subs(n_kv, 0) / t + 2 * h * d * KV_HEADS_PER_RANK
"""Q, K, V, O projection weights of one layer on one tensor-parallel rank: q and o split by t, k and v hold
KV_HEADS_PER_RANK whole heads each."""

MODULE_PARAMS_RANK: dict[str, sp.Expr] = {
    **{k: e / t for k, e in MODULE_PARAMS.items() if k not in ("router", "experts")},
    "k_proj": (h + beta_qkv) * KV_HEADS_PER_RANK * d, "v_proj": (h + beta_qkv) * KV_HEADS_PER_RANK * d,
    "qkv_proj": (h + beta_qkv) * (n_h / t + 2 * KV_HEADS_PER_RANK) * d,
    "experts": E * F.MLP_PARAMS / (t * N_e), "router": E * h,
}
"""MODULE_PARAMS on one tensor-parallel rank: split by t (the vocabulary-parallel embedding and head too), k and v
with KV_HEADS_PER_RANK whole heads, routed experts over t x N_e, the router replicated."""


_ev = value_at
"""Exact value of an expression at Fraction values (:func:`vramlib.core.portable.value_at`)."""


share(MODULE_PARAMS_RANK=MODULE_PARAMS_RANK, MLP_PARAMS=F.MLP_PARAMS, MODULE_NAMES=list(MODULE_PARAMS_RANK),
      MLP_MODULE_NAMES=["gate_proj", "up_proj", "gate_up_proj", "down_proj"])


@portable
def largest_module(m, tp, ep, stage):
    """Parameters (exact) of the largest single module on one rank of a stage at ``"all"``, ``"first"``, ``"middle"``,
    ``"last"`` or ``"single"`` (the rule of :func:`largest_module_params`, written once for Python and the browser)."""
    vals = dict(m["sym"])
    vals["t"] = tp
    vals["N_e"] = ep
    moe = m["spec"]["n_experts"] > 0
    cands = []
    for name in m["linear_modules"]:
        if name not in shared("MODULE_NAMES") or (moe and name in shared("MLP_MODULE_NAMES")):
            continue
        cands.append(ev("MODULE_PARAMS_RANK", name, vals))
    if moe:
        cands.append(ev("MODULE_PARAMS_RANK", "experts", vals))
        cands.append(ev("MODULE_PARAMS_RANK", "router", vals))
        if m["spec"]["n_shared_experts"]:
            cands.append(q_div(q_mul(ev("MLP_PARAMS", None, vals), q(m["spec"]["n_shared_experts"])), q(tp)))
    emb = ev("MODULE_PARAMS_RANK", "embed_tokens", vals)
    if stage in ("all", "first", "single"):
        cands.append(emb)
    if stage in ("all", "last") or (stage == "single" and not m["spec"]["tied_embeddings"]):
        cands.append(emb)
    best = cands[0]
    for c in cands:
        if q_cmp(c, best) > 0:
            best = c
    return best


@checked_call
def largest_module_params(model: ModelSpec | str, tp: int = 1, ep: int = 1, stage: str = "all") -> Fraction:
    """Parameters of the largest single module on one rank (DeepSpeed's ``model_to_params``: the most direct
    parameters of any ``nn.Module``), split by ``tp`` (and ``ep`` for the routed experts). ``stage``: "all"
    (every module), "first", "middle", "last" (which of embedding and LM head the stage holds) or "single".
    Chapters 3, 12."""
    spec = get_model(model)
    stage = check_choice("stage", stage, ("all", "first", "middle", "last", "single"))
    tp, ep = check_positive_int("tp", tp), check_positive_int("ep", ep)
    if tp > 1:
        kv_heads_per_gpu(spec, tp)
    return largest_module(spec.view(), tp, ep, stage)
