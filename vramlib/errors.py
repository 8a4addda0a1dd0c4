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
        super().__init__(f"{field}: got {value!r}; {allowed}")


class ConfigError(VramlibError):
    """A Hugging Face ``config.json`` that misses a key or contradicts itself."""

    def __init__(self, field: str, problem: str, source: str = "config"):
        self.field = field
        super().__init__(f"{source}: {field}: {problem}")


def check_positive_int(field: str, value: object, *, allow_zero: bool = False) -> int:
    """Return ``value`` as an int, or raise naming ``field``; rejects bools, floats with fractions and strings."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok and isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise InvalidValueError(field, value, "must be a " + ("non-negative" if allow_zero else "positive") + " integer")
    return value


def check_choice(field: str, value: object, allowed: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``allowed`` (case-insensitive), else raise UnknownNameError."""
    allowed = list(allowed)
    if isinstance(value, str):
        for a in allowed:
            if a.lower() == value.strip().lower():
                return a
    raise UnknownNameError(field, value, allowed)
