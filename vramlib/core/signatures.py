"""Keyword front doors for functions whose settings live in settings objects (issue 11).

A public function such as ``training_memory`` keeps the signature readers know (``help``, ``inspect``, the hostile
sweep of ``tests/test_hostile_library.py`` and ``checked_call``'s one-line errors all read it), while its body
takes a few settings objects (:class:`vramlib.memory.training.Workload`, ``ParallelPlan``, ``PlanOptions``) built
from the keywords. :func:`keywords_through` binds a call to the documented signature and passes on, by name, only
the arguments the caller gave, so the defaults stay with the settings objects. Used in: chapters 1-16 (through
training_memory, inference_memory, activation_bytes, plan_memory, zero_model_states).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import MISSING, fields

REQUIRED = inspect.Parameter.empty
_P = inspect.Parameter


def arg(name: str, default=REQUIRED, annotation: str = "", keyword_only: bool = False) -> inspect.Parameter:
    """One documented parameter; ``annotation`` (text, as ``from __future__ import annotations`` leaves it) is what
    ``vramlib.core.api.public_api`` checks simple types against."""
    return _P(name, _P.KEYWORD_ONLY if keyword_only else _P.POSITIONAL_OR_KEYWORD, default=default,
              annotation=annotation or _P.empty)


def field_args(cls, names=None, keyword_only: bool = False) -> list[inspect.Parameter]:
    """Parameters for fields of a dataclass (all, or ``names`` in that order), with their defaults and annotations:
    the one place each default lives."""
    by_name = {f.name: f for f in fields(cls)}
    out = []
    for n in (names if names is not None else list(by_name)):
        f = by_name[n]
        out.append(arg(n, REQUIRED if f.default is MISSING else f.default, str(f.type), keyword_only))
    return out


def signature(*params, var_keyword: str | None = None) -> inspect.Signature:
    """A signature of parameters (each an :func:`arg` or a list of them, e.g. :func:`field_args`), then
    ``**var_keyword``."""
    flat = [x for p in params for x in (p if isinstance(p, list) else [p])]
    if var_keyword:
        flat.append(_P(var_keyword, _P.VAR_KEYWORD))
    return inspect.Signature(flat)


def keywords_through(sig: inspect.Signature):
    """Decorator: document the function with ``sig`` and call it with keywords only -- positional arguments bound
    to their names by ``sig``, only the arguments given (a ``**`` parameter of ``sig`` spread out). Put
    ``checked_call`` above it for one-line errors on unknown or missing arguments."""
    var_kw = next((p.name for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD), None)
    positional = [p.name for p in sig.parameters.values() if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)]
    known = frozenset(sig.parameters) - {var_kw}

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if len(args) <= len(positional) and (var_kw or known.issuperset(kwargs)) \
                    and not any(n in kwargs for n in positional[:len(args)]):  # binds: no inspect.bind per call
                return fn(**dict(zip(positional, args)), **kwargs)
            given = sig.bind(*args, **kwargs).arguments
            extra = given.pop(var_kw, {}) if var_kw else {}
            return fn(**given, **extra)

        wrapper.__signature__ = sig
        return wrapper

    return decorate


def split_settings(settings: dict, *groups) -> list[dict]:
    """``settings`` split by the names in each group (a dataclass or an iterable of names), in order; what no group
    names is left in the last dict of the result."""
    rest = dict(settings)
    out = []
    for group in groups:
        names = {f.name for f in fields(group)} if isinstance(group, type) else set(group)
        out.append({k: rest.pop(k) for k in list(rest) if k in names})
    return out + [rest]


__all__ = ["REQUIRED", "arg", "field_args", "keywords_through", "signature", "split_settings"]
