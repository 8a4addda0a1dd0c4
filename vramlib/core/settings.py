"""Settings objects: the frozen dataclasses that stand for a long argument list (issue 11) -- ``ParallelPlan`` and
``PlanOptions`` (plans.parallel), ``Workload`` (memory.training), ``PlanSpace`` (solve.planning), ``ServingConfig``
and ``Efficiency`` (serve.serving). Each subclass validates its fields in ``__post_init__`` with the one-line checks of
:mod:`vramlib.core.errors`; this module owns what they share: building one from a function's ``settings=`` object
and keywords (unknown keywords are one line with close matches) and ``with_``.

Used in: chapters 3, 4, 6, 8, 11, 12 (through the functions that take settings), the CLI and the widgets.
"""
from __future__ import annotations

import dataclasses
import functools

from .errors import InvalidValueError, check_keywords, checked_call


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of the settings dataclasses: ``with_``, ``fields`` and ``build``."""

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The field names, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def with_(self, **changes):
        """A copy with ``changes`` (validated again); an unknown name is one line with close matches."""
        check_keywords(type(self).__name__, changes, self.fields())
        return dataclasses.replace(self, **changes) if changes else self

    @classmethod
    def build(cls, where: str, given, settings: dict, field: str = "settings", also=()):
        """The settings a call of ``where`` asks for: ``given`` (an instance or None) with the keyword
        ``settings`` applied. A ``given`` of another type or an unknown keyword raises one line; its close matches
        come from the fields and ``also`` (the call's other argument names)."""
        if given is not None and not isinstance(given, cls):
            raise InvalidValueError(field, given, f"must be a {cls.__name__} (or give its fields as keywords)")
        if any(k not in cls.fields() for k in settings):
            check_keywords(where, settings, cls.fields() + tuple(also))
        if given is None:
            return cls(**settings)
        return given.with_(**settings)


@functools.lru_cache(maxsize=None)
def param_names(fn) -> tuple[str, ...]:
    """The names ``fn`` takes by keyword (for the close matches of an unknown one)."""
    import inspect

    return tuple(n for n, p in inspect.signature(fn).parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                      p.KEYWORD_ONLY))


def settings_class(cls):
    """Decorator for a Settings subclass (after ``@dataclass(frozen=True)``): a call with an unknown or missing
    field is a one-line error with close matches instead of Python's TypeError."""
    cls.__init__ = checked_call(cls.__init__)
    return cls


__all__ = ["Settings", "param_names", "settings_class"]
