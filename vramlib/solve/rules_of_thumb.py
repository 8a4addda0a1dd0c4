"""The source's rules of thumb for training memory, read back from the measured accountings.

The source estimates activations as ``b x s x h x L x c`` bytes with a coefficient c of "34..40" (questions 3
and 4) or "15-40" (question 9). That rule is ``vramlib.solve.training_feasibility.SOURCE_ACTIVATIONS``, evaluated
by ``vramlib.solve.training_feasibility.source_activation_bytes``; it is not written again here. This module solves
it for c (``sympy.solve``) so that any accounting of :mod:`vramlib.memory.activations` -- measured Hugging Face tensors
(``hf``) or Korthikanti et al. (``megatron``), with or without recomputation -- can be stated as the coefficient
the source would have to use to get the same bytes:

* ``IMPLIED_COEFFICIENT = A / (b s h L)``: bytes per token, per hidden unit, per layer;
* :func:`implied_coefficient` evaluates it for a model and an accounting (whole step, or one layer).

Used in: chapters 3, 4, 9.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import sympy as sp

from ..core import formulas as F
from ..memory.activations import activation_bytes
from ..core.errors import check_choice, check_keywords, check_positive_int
from ..catalog.models import ModelSpec, get_model
from .training_feasibility import SOURCE_ACTIVATIONS, c_act

A_saved = sp.Symbol("A", nonnegative=True)
"""Bytes saved for backward by some accounting (whole step, or one layer with L = 1)."""


@lru_cache(maxsize=1)
def _solved() -> sp.Expr:
    return sp.solve(sp.Eq(A_saved, SOURCE_ACTIVATIONS), c_act)[0]


IMPLIED_COEFFICIENT = _solved()
"""The source's coefficient that reproduces A bytes: ``sympy.solve(A = b s h L c, c)`` = A / (b s h L).
Chapters 3, 4, 9."""

SCOPES = ("model", "layer")
_ARGUMENTS = ("model", "seq", "batch", "style", "recompute", "attention", "dtype", "scope", "tp", "sequence_parallel")


def implied_coefficient(model: ModelSpec | str, seq: int = 2048, batch: int = 1, style: str = "hf",
                        recompute: str = "none", attention: str = "sdpa", dtype: str = "bf16",
                        scope: str = "model", **tensor_parallel) -> Fraction:
    """The coefficient c for which the source's ``b s h L c`` equals ``activation_bytes`` (exact Fraction).

    ``scope="model"``: the whole step's peak (embeddings, LM head and the fp32 logits of the loss included) spread
    over the L layers; ``scope="layer"``: one decoder layer (L = 1). The other arguments are those of
    :func:`vramlib.memory.activations.activation_bytes`; ``tensor_parallel``: its ``tp=1`` and ``sequence_parallel=False``
    (the megatron style's activations of one tensor-parallel rank, so c is then per GPU).

    >>> implied_coefficient("source-7b", 2048, style="megatron", recompute="selective", scope="layer")
    Fraction(34, 1)
    """
    check_keywords("implied_coefficient", tensor_parallel, _ARGUMENTS)
    tp, sequence_parallel = tensor_parallel.get("tp", 1), tensor_parallel.get("sequence_parallel", False)
    m = get_model(model)
    seq = check_positive_int("seq", seq)
    batch = check_positive_int("batch", batch)
    scope = check_choice("scope", scope, SCOPES)
    act = activation_bytes(m, seq, batch, dtype=dtype, attention=attention, recompute=recompute, style=style,
                           scope=scope, tp=tp, sequence_parallel=sequence_parallel)
    layers = m.n_layers if scope == "model" else 1
    return Fraction(F.evaluate(IMPLIED_COEFFICIENT, A=act, b=batch, s=seq, h=m.hidden, L=layers))


__all__ = ["A_saved", "IMPLIED_COEFFICIENT", "SCOPES", "implied_coefficient"]
