"""Memory sizes: parse what people type, print both GB (10^9) and GiB (2^30).

Inside vramlib every size is an exact int of bytes; only the edges convert.
Used in: every chapter (the GB/GiB convention is explained in the intro).
"""
from __future__ import annotations

import re
from fractions import Fraction

from .errors import InvalidValueError
from .portable import fmt_fixed, portable, share, shared

GB = 10**9
GiB = 2**30
MB = 10**6
MiB = 2**20

_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


_PARSED: dict[str, int] = {}
"""Sizes already read (``"0.5GB"`` -> 500000000): the same text always means the same bytes."""


def parse_memory(value: int | str, field: str = "memory") -> int:
    """Return bytes for an int of bytes or a string like ``"24GiB"``, ``"80 GB"``, ``"0.5GB"``, ``"512 MiB"``.

    A string needs a unit (``"24"`` is refused: bytes to the library, GB to a person); ``"0"`` is zero.

    Parsed with a regular expression, never evaluated. Raises InvalidValueError naming ``field``.
    """
    import numbers

    if isinstance(value, bool):
        raise InvalidValueError(field, value, "give bytes as an int or a string such as '24GiB' or '80 GB'")
    if isinstance(value, numbers.Integral):
        if value < 0:
            raise InvalidValueError(field, value, "must be >= 0 bytes")
        return int(value)
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        known = _PARSED.get(value)
        if known is not None:
            return known
        m = _PATTERN.match(value)
        if m and m.group(2).lower() in _UNITS:
            n = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
            if len(_PARSED) < 4096:
                _PARSED[value] = n
            return n
        if m and not m.group(2) and Fraction(m.group(1)) == 0:
            return 0
        if m and not m.group(2):  # "24": bytes to the library, GB to a person; say which it could mean
            raise InvalidValueError(field, value, f"a size needs a unit: did you mean '{m.group(1)}GB' (10^9 bytes) "
                                    f"or '{m.group(1)}GiB' (2^30)? Units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB")
        raise InvalidValueError(field, value, "expected a number and a unit from B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. '24GiB')")
    raise InvalidValueError(field, value, "give bytes as an int or a string such as '24GiB' or '80 GB'")


parse_memory.validates_itself = True  # its messages name the caller's field (core.api.public_api)


def gb(n_bytes: float) -> float:
    """Bytes -> GB (10^9)."""
    return n_bytes / GB


def gib(n_bytes: float) -> float:
    """Bytes -> GiB (2^30)."""
    return n_bytes / GiB


def mb(n_bytes: float) -> float:
    """Bytes -> MB (10^6)."""
    return n_bytes / MB


def mib(n_bytes: float) -> float:
    """Bytes -> MiB (2^20), the unit nvidia-smi prints."""
    return n_bytes / MiB


def fmt_bytes(n_bytes: float, digits: int = 1) -> str:
    """``'26.0 GB (24.2 GiB)'``: both units, always labelled."""
    from .errors import check_number

    n_bytes = check_number("n_bytes", n_bytes)
    digits = check_number("digits", digits, minimum=0, maximum=12, integer=True)
    return bytes_text(n_bytes, digits)


share(GB=GB, GiB=GiB)


@portable
def percent(x, digits):
    """``f"{x:.{digits}%}"``: x x 100 with ``digits`` decimals and a percent sign (Python multiplies the float by 100)."""
    return fmt_fixed(x * 100, digits, False) + "%"


@portable
def bytes_text(n_bytes, digits):
    """:func:`fmt_bytes` without the checks: both units, ``digits`` decimals, thousands separated."""
    return (fmt_fixed(n_bytes / shared("GB"), digits, True) + " GB (" + fmt_fixed(n_bytes / shared("GiB"), digits, True) +
            " GiB)")
