"""Plain JSON data for the browser: catalogue objects, a ModelSpec with its symbol values and GGUF bits
(``model_json``), a panel's fixed arguments (``to_js_value``) and back (``from_js_value``). The panels' static
placeholders (:mod:`.widgets.base`, :mod:`.widgets.bookshelf`) and the calculators' catalogue
(:mod:`vramlib.web.jsgen`) both use it. Used in: every chapter with a panel (the static HTML book).
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any


def _key(k) -> str:
    return "|".join(str(x) for x in k) if isinstance(k, tuple) else str(k)


def to_json(obj: Any) -> Any:
    """Plain JSON data: Fractions become floats, dataclasses dicts, tuples lists."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, Fraction):
        return obj.numerator if obj.denominator == 1 else obj.numerator / obj.denominator
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {_key(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_json(v) for v in obj]
    raise TypeError(f"to_json: cannot export {type(obj).__name__}")


def model_json(spec) -> dict[str, Any]:
    """A ModelSpec for the browser: its fields, symbol values, linear modules and the hf-style indicators
    (or the error vramlib raises for a family the hf activation expressions do not model)."""
    from ..memory.activations import _hf_indicators
    from ..core.errors import VramlibError

    if spec.uniform_problem():  # the browser's calculators read one uniform layer: the page says why not
        return {"$model": to_json(spec), "uniform_problem": spec.uniform_problem()}
    try:
        hf: Any = dict(_hf_indicators(spec))
    except VramlibError as e:
        hf = {"error": str(e)}
    return {"$model": to_json(spec), "symbols": spec.symbols(), "symbols_active": spec.symbols(active=True),
            "linear_modules": spec.linear_modules(), "hf": hf}


def to_js_value(value: Any) -> Any:
    """A panel's fixed argument as JSON for ``data-fixed`` (a ModelSpec becomes :func:`model_json`)."""
    from ..catalog.models import ModelSpec

    if isinstance(value, ModelSpec):
        return model_json(value)
    return to_json(value)


def from_js_value(value: Any) -> Any:
    """The inverse of :func:`to_js_value` (tests rebuild a panel's Python arguments from the page)."""
    from ..catalog.models import ModelSpec

    if isinstance(value, dict) and "$model" in value:
        return ModelSpec(**value["$model"])
    return value
