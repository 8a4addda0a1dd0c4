"""The source document's own arithmetic, reproduced on purpose so chapters can show both numbers.

The source often rounds a byte count to MiB ("819,200 B ≈ 0.78 MB") and then divides or multiplies
it with a figure in GB (10^9 bytes). These functions compute exactly what the source computed, so a
chapter can put the source's figure next to the exact one and explain the gap.
Used in: chapters 1, 2, 7.
"""
from __future__ import annotations

from fractions import Fraction

from ..core.units import MB, MiB


def rounded_mib(n_bytes: int, digits: int = 2) -> float:
    """The source's "≈ 0.78 MB": bytes in MiB, rounded (it calls them MB)."""
    return round(n_bytes / MiB, digits)


def tokens_mixed_units(free_bytes: int, per_token_bytes: int, digits: int = 2) -> float:
    """The source's "17,000 / 0.78 ≈ 21,800 tokens": free memory in MB (10^6) over per-token MiB, rounded."""
    return float(Fraction(free_bytes, MB)) / rounded_mib(per_token_bytes, digits)


def total_mixed_units(per_token_bytes: int, tokens: int, digits: int = 2) -> float:
    """The source's "0.78 MB x 100,000 = 78 GB": rounded per-token MiB times tokens, read as GB (x 1000)."""
    return rounded_mib(per_token_bytes, digits) * tokens / 1000


def weights_plus_kv_mixed_units(weights_bytes: int, per_token_bytes: int, tokens: int, digits: int = 2) -> float:
    """The source's "78 GB + 26 GB ≈ 104 GB": weights in GB plus :func:`total_mixed_units` (chapter 7)."""
    from ..core.units import GB

    return float(Fraction(weights_bytes, GB)) + total_mixed_units(per_token_bytes, tokens, digits)
