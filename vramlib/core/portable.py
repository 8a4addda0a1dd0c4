"""Code written once in Python and run in both places: the rules that *combine* expressions (how a plan's memory is
assembled stage by stage, the pipeline balancer, which module is the largest) are plain Python functions in a small
subset that ``pscript`` compiles to JavaScript; the static book runs the compiled copy, Python calls the function
itself. Owned here: the registry and the runtime those functions see.

* :func:`portable` marks such a function (``@portable``); :mod:`vramlib.web.jsgen` compiles every marked function into
  ``VL.py.<name>``. The subset: dicts read with ``d["key"]`` (no ``len`` of a dict, no dict comprehensions), lists,
  ``for``/``while``, f-strings, ``min``/``max`` of numbers, plain calls of other portable functions.
* :func:`share` names the sympy expressions and constants they read: :func:`ev` evaluates a shared expression
  exactly (Fractions here; the generated exact BigInt functions of ``VL.exact`` in the browser), :func:`shared` reads a
  shared constant (exported as JSON).
* Exact rationals are handled only through ``q``, ``q_add``, ``q_sub``, ``q_mul``, ``q_div``, ``q_ceil``,
  ``q_cmp``, ``q_is_zero``, ``q_float`` (Fractions here, BigInt pairs in ``core.js``), so the same source is exact in
  both languages.

Used by :mod:`vramlib.memory.sharding`, :mod:`vramlib.plans.parallel` and :mod:`vramlib.solve.planning` (chapters 3,
4, 9, 11, 12 and every plan calculator of the static book).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

PORTABLE: dict[str, Callable] = {}
"""name -> function compiled to ``VL.py.<name>`` (names are unique across vramlib)."""

SHARED_EXPRESSIONS: dict[str, Any] = {}
"""NAME -> sympy expression, or dict of them, that portable code evaluates with :func:`ev`."""

SHARED_CONSTANTS: dict[str, Any] = {}
"""NAME -> JSON-able constant that portable code reads with :func:`shared`."""


class Fields:
    """``obj["name"]`` for ``obj.name``: how portable code (which reads dicts, as the browser's JSON objects) sees a
    Python settings object or ModelSpec."""

    __slots__ = ("_obj",)

    def __init__(self, obj):
        self._obj = obj

    def __getitem__(self, name: str):
        return getattr(self._obj, name)


def portable(fn: Callable) -> Callable:
    """Register ``fn`` for compilation to JavaScript (``VL.py.<fn.__name__>``); returns ``fn`` unchanged."""
    if PORTABLE.get(fn.__name__, fn) is not fn:
        raise ValueError(f"portable: two functions named {fn.__name__!r}")
    PORTABLE[fn.__name__] = fn
    return fn


def share(**named) -> None:
    """Name expressions (sympy, or dicts of them) and constants for portable code; a name is bound once."""
    for name, value in named.items():
        is_expr = _is_sympy(value) or (isinstance(value, dict) and value and all(_is_sympy(v) for v in value.values()))
        table = SHARED_EXPRESSIONS if is_expr else SHARED_CONSTANTS
        other = SHARED_CONSTANTS if is_expr else SHARED_EXPRESSIONS
        if name in other or (name in table and table[name] is not value and table[name] != value):
            raise ValueError(f"portable.share: {name!r} is already bound to something else")
        table[name] = value


class _Lazy:
    """An expression made on first use (the closed forms formulas solves lazily)."""

    def __init__(self, make: Callable):
        self.make = make


def share_lazy(**makers: Callable) -> None:
    """Name expressions that are built on first use (``share_lazy(MAX_TOKENS_KV_ONLY=lambda: F.MAX_TOKENS_KV_ONLY)``)."""
    for name, make in makers.items():
        if name in SHARED_EXPRESSIONS or name in SHARED_CONSTANTS:
            raise ValueError(f"portable.share_lazy: {name!r} is already bound")
        SHARED_EXPRESSIONS[name] = _Lazy(make)


def shared_expression(name: str):
    """The shared expression (or dict of them) ``name``, built now if it is lazy."""
    value = SHARED_EXPRESSIONS[name]
    if isinstance(value, _Lazy):
        value = SHARED_EXPRESSIONS[name] = value.make()
    return value


def _is_sympy(value) -> bool:
    """A sympy expression (told apart without importing sympy: constants are shared by modules that never load it)."""
    return type(value).__module__.startswith("sympy.")


def ev(name: str, key, vals: dict) -> Fraction:
    """Exact value of the shared expression ``name`` (``key``: the entry of a dict of expressions, else None) at
    ``vals`` (a dict of ints / Fractions; extra names are ignored)."""
    expr = shared_expression(name)
    if key is not None:
        expr = expr[key]
    return value_at(expr, vals)


def ev_mean(name: str, key, n: int, vals: dict) -> Fraction:
    """The mean of the shared expression over its layer index ``i_l`` = 0 .. n - 1 (``vals``: the other values),
    exactly; compiled once per expression and cached per argument set."""
    expr = shared_expression(name)
    if key is not None:
        expr = expr[key]
    names = _formulas().argument_names(expr)
    return _mean_over(expr, n, tuple((k, vals[k]) for k in names if k != "i_l"))


_MEANS: dict = {}


def _mean_over(expr, n: int, values: tuple) -> Fraction:
    got = _MEANS.get((expr, n, values))
    if got is None:
        names, fn = _formulas().compile_exact(expr)
        vals = dict(values)
        if "i_l" not in names:  # the same on every layer
            got = Fraction(fn(*(vals[k] for k in names)))
        else:
            got = sum((Fraction(fn(*(i if k == "i_l" else vals[k] for k in names))) for i in range(n)),
                      Fraction(0)) / n
        _MEANS[(expr, n, values)] = got
    return got


def value_at(expr, vals: dict) -> Fraction:
    """Exact value of ``expr`` (ints and Fractions in, a Fraction out). Whole Fractions go in as ints, so that an
    integer-closed expression takes formulas.evaluate's int path. An integer result stays an int (an exact rational
    too: the q_* runtime takes both)."""
    F = _formulas()
    names = F.argument_names(expr)
    if not names:
        return _constant(expr)
    args = {}
    for k in names:
        v = vals[k]
        args[k] = v.numerator if type(v) is Fraction and v.denominator == 1 else v
    return F.evaluate(expr, **args)


_F = []


def _formulas():
    """vramlib.core.formulas, imported on first use (core.formulas imports sympy; sharing a constant must not)."""
    if not _F:
        from . import formulas

        _F.append(formulas)
    return _F[0]


_CONSTANTS: dict = {}


def _constant(expr) -> Fraction:
    import sympy as sp

    got = _CONSTANTS.get(expr)
    if got is None:
        got = _CONSTANTS[expr] = Fraction(int(sp.Integer(expr))) if expr.is_Integer else Fraction(str(expr))
    return got


def shared(name: str):
    """A shared constant (what :func:`share` bound)."""
    return SHARED_CONSTANTS[name]


# --- exact rationals: the only arithmetic portable code does on byte counts ------------------------------------
def q(x) -> Fraction:
    """An exact rational from an int, a float (its exact binary value) or a Fraction (an int stays an int)."""
    return x if type(x) is Fraction or type(x) is int else Fraction(x)


def q_decimal(x) -> Fraction:
    """The exact rational of a number as it is written (``Fraction(str(x))``: a price of 1.29 is 129/100)."""
    return Fraction(str(x))


def q_add(a, b) -> Fraction:
    return a + b


def q_sub(a, b) -> Fraction:
    return a - b


def q_mul(a, b) -> Fraction:
    return a * b


def q_div(a, b) -> Fraction:
    return Fraction(a) / b


def q_ceil(a) -> int:
    """Round up to a whole byte (formulas.to_int_bytes)."""
    if type(a) is int:
        return a
    return _formulas().to_int_bytes(a)


def q_floor(a) -> int:
    """The largest integer <= a."""
    a = Fraction(a)
    return a.numerator // a.denominator


def q_int(a) -> int:
    """Python's ``int()`` of an exact value: towards zero."""
    return int(Fraction(a))


def q_round(a) -> int:
    """Python's ``round()`` of an exact value: the nearest integer, ties to even."""
    return round(Fraction(a))


def q_cmp(a, b) -> int:
    return (a > b) - (a < b)


def q_is_zero(a) -> bool:
    return a == 0


def q_float(a) -> float:
    """The double nearest the exact value (``float(Fraction)``, correctly rounded)."""
    return float(a)


def infinity() -> float:
    """+inf (``float("inf")`` does not compile: JavaScript spells it Infinity)."""
    return float("inf")


@portable
def stable_order(items, before):
    """Indices of ``items`` in the order ``before(a, b)`` (a strict "a comes first") defines, ties kept in input order:
    an insertion sort, the same in Python and in the browser."""
    order = []
    for i in range(len(items)):
        j = len(order)
        while j > 0 and before(items[i], items[order[j - 1]]):
            j -= 1
        order.insert(j, i)
    return order


def raise_problem(problem) -> None:
    """Raise the one-line error a portable check returned (``[field, value, what is allowed]``); None passes. The
    browser's ``VL.raiseProblem`` throws the same message."""
    if problem is not None:
        from .errors import InvalidValueError

        raise InvalidValueError(problem[0], problem[1], problem[2])


# --- formatting, as Python formats (JavaScript's side in core.js follows Python's rules: round-half-even ties ...) -----
def fmt_fixed(x, digits: int, commas: bool = False) -> str:
    """``f"{x:.{digits}f}"``, or ``f"{x:,.{digits}f}"`` with thousands separators (an exact Fraction is printed
    as the double nearest it, as the browser does)."""
    if type(x) is Fraction:
        x = float(x)
    return f"{x:,.{digits}f}" if commas else f"{x:.{digits}f}"


def fmt_g(x, digits: int) -> str:
    """``f"{x:.{digits}g}"``."""
    return f"{x:.{digits}g}"


def escape(text: str) -> str:
    """``html.escape(text)`` (quotes too)."""
    import html

    return html.escape(text)


def round_even(x) -> int:
    """Python's ``round(x)``: the nearest integer, ties to even."""
    return round(x)


RUNTIME = ("fmt_fixed", "fmt_g", "escape", "round_even", "infinity", "ev", "ev_mean", "shared", "q", "q_decimal", "q_add",
           "q_sub", "q_mul", "q_div", "q_ceil", "q_floor", "q_int", "q_round", "q_cmp", "q_is_zero", "q_float",
           "raise_problem")
"""The names portable code may call besides other portable functions (``core.js`` defines their JS side)."""

__all__ = ["Fields", "PORTABLE", "RUNTIME", "SHARED_CONSTANTS", "SHARED_EXPRESSIONS", "escape", "ev", "ev_mean", "fmt_fixed",
           "fmt_g", "infinity", "portable", "q", "q_add", "q_ceil", "q_cmp", "q_decimal", "q_div", "q_float", "q_floor", "q_int", "q_round",
           "q_is_zero", "q_mul", "q_sub", "raise_problem", "round_even", "share", "share_lazy", "shared", "shared_expression", "stable_order", "value_at"]
