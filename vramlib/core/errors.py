"""One error hierarchy for every bad input (all chapters, the CLI and the widgets).

Every message is one line: it names the field, what was given and what is
allowed, with close matches for unknown names.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class VramlibError(ValueError):
    """Base class: a bad input to vramlib. ``str(err)`` is a one-line message."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class UnknownNameError(VramlibError, KeyError):
    """A catalogue name (model, GPU, precision, optimizer ...) that does not exist."""

    def __init__(self, field: str, name: object, allowed: Iterable[str], normalise=None):
        allowed = sorted(set(allowed))
        norm = normalise or (lambda s: s)
        lookup = {norm(a): a for a in allowed}
        close = [lookup[c] for c in difflib.get_close_matches(norm(str(name)), list(lookup), n=3, cutoff=0.5)]
        if close:
            hint = "did you mean " + ", ".join(repr(c) for c in close) + "?"
        elif len(allowed) <= 12:
            hint = "allowed: " + ", ".join(allowed)
        else:
            hint = f"{len(allowed)} names allowed, e.g. " + ", ".join(allowed[:6]) + " ..."
        self.field, self.name, self.close_matches = field, name, close
        VramlibError.__init__(self, f"{field}: unknown name {name!r}; {hint}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class InvalidValueError(VramlibError):
    """A value of the right kind but outside what is allowed (non-positive size, kv_heads not dividing heads ...)."""

    def __init__(self, field: str, value: object, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: got {_short(value)}; {allowed}")


def _short(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut in the middle when long (a 300-digit number stays one readable line)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit // 2]}...{text[-10:]} ({len(text)} characters)"


class ConfigError(VramlibError):
    """A Hugging Face ``config.json`` that misses a key or contradicts itself."""

    def __init__(self, field: str, problem: str, source: str = "config"):
        self.field = field
        super().__init__(f"{source}: {field}: {problem}")


def check_positive_int(field: str, value: object, *, allow_zero: bool = False) -> int:
    """Return ``value`` as an int, or raise naming ``field``; rejects bools, floats with fractions and strings."""
    if type(value) is int and (value > 0 or allow_zero and value == 0):  # the common case, no further checks
        return value
    return check_number(field, value, minimum=0 if allow_zero else 1, integer=True,
                        allowed="must be a " + ("non-negative" if allow_zero else "positive") + " integer")


def check_choice(field: str, value: object, allowed: Iterable):
    """Return ``value`` if it is one of ``allowed`` (names case-insensitive; numbers exactly, e.g. block sizes),
    else raise UnknownNameError with close matches."""
    if type(value) is str and value in allowed:  # the common case: exactly one of the names (tuple, dict, set)
        return value
    allowed = list(allowed)
    if isinstance(value, str):
        for a in allowed:
            if isinstance(a, str) and a.lower() == value.strip().lower():
                return a
    elif _is_real_number(value):
        for a in allowed:
            if not isinstance(a, str) and a == value:
                return a
    raise UnknownNameError(field, value, [str(a) for a in allowed])


def _is_real_number(value: object) -> bool:
    import numbers

    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_number(field: str, value: object, *, minimum=None, maximum=None, min_inclusive: bool = True,
                 max_inclusive: bool = True, integer: bool = False, allowed: str | None = None):
    """Return ``value`` (an int, Fraction or float) if it is a finite real number in the given range, else raise
    InvalidValueError naming ``field`` and the allowed range.

    Rejects bools, strings (``"0.1"``), NaN and infinities, and numbers with fractions where ``integer=True``.
    numpy scalars are accepted and returned as Python numbers.
    """
    import math
    import numbers
    from fractions import Fraction

    lo = "" if minimum is None else (f">= {minimum}" if min_inclusive else f"> {minimum}")
    hi = "" if maximum is None else (f"<= {maximum}" if max_inclusive else f"< {maximum}")
    kind = "an integer" if integer else "a number"
    rng = " and ".join(x for x in (lo, hi) if x)
    allowed = allowed or (f"must be {kind}" + (f" {rng}" if rng else ""))
    if not _is_real_number(value):
        raise InvalidValueError(field, value, allowed)
    if isinstance(value, numbers.Integral):
        value = int(value)
    elif isinstance(value, Fraction):
        pass
    else:
        try:
            value = float(value)
        except (OverflowError, ValueError, TypeError):
            raise InvalidValueError(field, value, allowed) from None
        if not math.isfinite(value):
            raise InvalidValueError(field, value, allowed)
    if integer:
        if isinstance(value, float):
            if not value.is_integer():
                raise InvalidValueError(field, value, allowed)
            value = int(value)
        elif isinstance(value, Fraction):
            if value.denominator != 1:
                raise InvalidValueError(field, value, allowed)
            value = int(value)
    if minimum is not None and (value < minimum or (not min_inclusive and value == minimum)):
        raise InvalidValueError(field, value, allowed)
    if maximum is not None and (value > maximum or (not max_inclusive and value == maximum)):
        raise InvalidValueError(field, value, allowed)
    return value


def check_fraction(field: str, value: object, *, allow_one: bool = False):
    """A fraction in [0, 1) (``allow_one``: [0, 1]) such as a headroom or a utilization; raises naming ``field``."""
    return check_number(field, value, minimum=0, maximum=1, max_inclusive=allow_one,
                        allowed=f"must be a fraction in [0, 1{']' if allow_one else ')'}, e.g. 0.1 for 10%")


def check_keywords(where: str, given: Iterable[str], allowed: Iterable[str]) -> None:
    """Raise UnknownNameError for the first keyword in ``given`` that is not in ``allowed`` (with close matches)."""
    allowed = list(allowed)
    for name in given:
        if name not in allowed:
            raise UnknownNameError(f"{where}: argument", name, allowed)


def checked_call(fn):
    """Decorator for public functions and constructors: a call with an unknown keyword, a missing argument or too
    many positional arguments raises UnknownNameError / InvalidValueError (one line, close matches) instead of
    Python's TypeError. Errors raised inside the function are not touched."""
    import functools
    import inspect

    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    where = getattr(fn, "__qualname__", getattr(fn, "__name__", "call")).replace(".__init__", "")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)  # the call binds (checked below only when it fails: no cost when right)
        except TypeError:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as exc:
                bad = exc
            else:
                raise  # a TypeError from inside the function, not from the call
        if not has_var_kw:
            check_keywords(where, kwargs, names)
        missing = [p.name for p in params if p.default is p.empty
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in kwargs]
        raise InvalidValueError(f"{where}: arguments", f"{len(args)} positional, {sorted(kwargs)}",
                                f"expected ({', '.join(names)}); required: {', '.join(missing) or 'none'}"
                                f" ({bad})") from None

    wrapper.__signature__ = sig
    return wrapper


def as_sequence(field: str, value, example: str, single=None, allow_empty: bool = False) -> list:
    """``value`` as a list when it is an ordered sequence (list, tuple, range, 1-D numpy array); a lone value
    passing ``single(value)`` counts as a one-element list. Sets, dicts, text and other scalars raise one line
    naming ``field``; an empty sequence raises too unless ``allow_empty``."""
    import numpy as np

    if single is not None and single(value):
        return [value]
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple, range)):
        raise InvalidValueError(field, value, f"give a list or tuple, e.g. {example}")
    if not value and not allow_empty:
        raise InvalidValueError(field, value, f"give at least one value, e.g. {example}")
    return list(value)
