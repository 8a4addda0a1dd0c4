"""The browser's copy of vramlib's portable code (:mod:`vramlib.core.portable`), generated at build time.

* ``VL.exact.<NAME>``: every expression portable code evaluates (:func:`vramlib.core.portable.share`), printed to
  JavaScript that computes with exact rationals (``VL.Q``: BigInt numerator / denominator, ``core.js``) -- the
  browser twin of ``formulas.evaluate`` on Fractions, so a plan's bytes are the same to the byte in both places.
* ``VL.shared``: the constants it reads, as JSON.
* ``VL.py.<name>``: every ``@portable`` function, compiled by ``pscript`` from its Python source (the rules are
  written once, in Python); the pscript helpers it needs are included once. A function that calls anything but the
  portable runtime (:data:`vramlib.core.portable.RUNTIME`), another portable function or a Python builtin pscript
  knows is refused here, at build time.

Used by :mod:`vramlib.web.jsgen` (the static book's ``vramlib-calc.js``).
"""
from __future__ import annotations

import importlib
import json
import re

import sympy as sp

from ..core import portable as PT
from ..present.jsdata import _key, to_json

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _big(n: int) -> str:
    return f"{int(n)}n"


def _exact(expr, sym: dict[str, str]) -> str:
    """JavaScript of ``expr`` over ``VL.Q`` values (``sym``: symbol name -> JS variable)."""
    if expr.is_Symbol:
        return sym[expr.name]
    if expr.is_Integer or expr.is_Rational:
        return f"Q({_big(expr.p)}, {_big(expr.q)})"
    if isinstance(expr, sp.Piecewise):
        return _piecewise(expr, sym)
    args = [_exact(a, sym) for a in expr.args]
    if isinstance(expr, sp.Add):
        return "Q.sum([" + ", ".join(args) + "])"
    if isinstance(expr, sp.Mul):
        return "Q.prod([" + ", ".join(args) + "])"
    if isinstance(expr, sp.Pow):
        base, e = expr.args
        if e.is_Integer:
            return f"Q.pow({args[0]}, {int(e)})"
        return f"Q.powq({args[0]}, {args[1]})"
    if isinstance(expr, (sp.Min, sp.Max)):
        return f"Q.{'min' if isinstance(expr, sp.Min) else 'max'}([" + ", ".join(args) + "])"
    if isinstance(expr, sp.ceiling):
        return f"Q.ceilq({args[0]})"
    if isinstance(expr, sp.floor):
        return f"Q.floorq({args[0]})"
    if isinstance(expr, sp.KroneckerDelta):
        return f"(Q.cmp({args[0]}, {args[1]}) === 0 ? Q(1n, 1n) : Q(0n, 1n))"
    if isinstance(expr, sp.Mod):
        return f"Q.mod({args[0]}, {args[1]})"
    raise ValueError(f"no exact JavaScript for {type(expr).__name__}: {expr}")


def _piecewise(expr, sym: dict[str, str]) -> str:
    """Nested ternaries, the last branch (condition True) innermost."""
    if expr.args[-1].cond != sp.true:
        raise ValueError("a Piecewise needs a final (value, True) branch")
    code = _exact(expr.args[-1].expr, sym)
    for e, c in reversed(expr.args[:-1]):
        code = f"(({_cond(c, sym)}) ? ({_exact(e, sym)}) : ({code}))"
    return code


_CMP = {sp.StrictLessThan: "< 0", sp.LessThan: "<= 0", sp.StrictGreaterThan: "> 0", sp.GreaterThan: ">= 0",
        sp.Equality: "=== 0", sp.Unequality: "!== 0"}


def _cond(c, sym: dict[str, str]) -> str:
    if c == sp.true:
        return "true"
    if c == sp.false:
        return "false"
    if isinstance(c, sp.Not):
        return f"!({_cond(c.args[0], sym)})"
    if isinstance(c, sp.And):
        return " && ".join(f"({_cond(a, sym)})" for a in c.args)
    if isinstance(c, sp.Or):
        return " || ".join(f"({_cond(a, sym)})" for a in c.args)
    for kind, op in _CMP.items():
        if isinstance(c, kind):
            return f"Q.cmp({_exact(c.lhs, sym)}, {_exact(c.rhs, sym)}) {op}"
    raise ValueError(f"no exact JavaScript for the condition {c}")


def exact_function(label: str, expr: sp.Expr) -> str:
    """``function (v) {...}``: the exact value (a ``VL.Q``) of ``expr`` at the values object ``v``."""
    names = sorted(s.name for s in expr.free_symbols)
    for n in names:
        if not _IDENT.match(n):
            raise ValueError(f"{label}: symbol {n!r} is not a usable JavaScript identifier")
    sym = {n: f"a_{n}" for n in names}
    head = "".join(f"var a_{n} = VL.qv(v, {json.dumps(n)}, {json.dumps(label)}); " for n in names)
    return f"function (v) {{ {head}return {_exact(expr, sym)}; }}"


def exact_js() -> str:
    """``VL.exact`` (the shared expressions, exact) and ``VL.shared`` (the shared constants)."""
    entries = []
    for name in sorted(PT.SHARED_EXPRESSIONS):
        value = PT.shared_expression(name)
        if isinstance(value, dict):
            inner = ",\n    ".join(f"{json.dumps(_key(k))}: {exact_function(f'{name}[{_key(k)}]', e)}"
                                   for k, e in value.items())
            entries.append(f"  {name}: {{\n    {inner}\n  }}")
        else:
            entries.append(f"  {name}: {exact_function(name, value)}")
    consts = json.dumps({k: to_json(v) for k, v in sorted(PT.SHARED_CONSTANTS.items())}, sort_keys=True,
                        separators=(",", ":"))
    return "VL.exact = {\n" + ",\n".join(entries) + "\n};\nVL.shared = " + consts + ";\n"


_BUILTINS = {"dict", "list", "len", "range", "min", "max", "str", "float", "int", "abs", "sum", "print", "isinstance",
             "True", "False", "None", "enumerate", "zip", "reversed", "sorted", "round", "divmod", "bool"}


def compiled_functions() -> tuple[str, set[str], set[str]]:
    """The ``@portable`` functions compiled by pscript, and the pscript helper functions / methods they use."""
    from pscript import py2js

    _load_portable_modules()
    code, funcs, methods = [], set(), set()
    known = set(PT.PORTABLE) | set(PT.RUNTIME) | _BUILTINS
    for name, fn in sorted(PT.PORTABLE.items()):
        js = py2js(fn, inline_stdlib=False)
        unknown = {v.split(".")[0] for v in js.meta["vars_unknown"]} - known
        if unknown:
            raise ValueError(f"portable function {name} uses {sorted(unknown)}: portable code may call only the portable "
                             f"runtime ({', '.join(PT.RUNTIME)}), other portable functions and builtins")
        if re.search(r"""float\(\s*["'][+-]?(inf|nan)""", js.meta["pycode"]):
            raise ValueError(f"portable function {name}: float('inf') is NaN in JavaScript; call infinity()")
        code.append(str(js))
        funcs |= set(js.meta["std_functions"])
        methods |= set(js.meta["std_methods"])
    return "\n".join(code), funcs, methods


PORTABLE_MODULES = (
    "core.units", "catalog.hardware", "catalog.models", "catalog.precision", "memory.breakdown", "memory.activations",
    "memory.allocator", "memory.fsdp", "memory.inference", "memory.sharding", "memory.step", "memory.training", "plans.parallel", "solve.feasibility", "solve.planning",
    "solve.recommend", "solve.training_feasibility", "serve.serving", "serve.llamacpp", "serve.offload",
    "catalog.hosts", "explain.bookshelf", "explain.design",
    "present.widgets.bookshelf", "present.widgets.design", "present.widgets.finetune", "present.widgets.inference",
    "present.widgets.offload", "present.widgets.parallel", "present.widgets.recommend", "present.widgets.serving", "present.widgets.training",
)
"""The modules that define portable functions (the registry fills as they are imported)."""


def _load_portable_modules() -> None:
    """Import every module that defines portable functions."""
    for name in PORTABLE_MODULES:
        importlib.import_module(f"vramlib.{name}")


def portable_js() -> str:
    """The whole generated block: exact expressions, shared constants, then ``VL.py`` in a closure that binds the
    portable runtime to its ``core.js`` implementation."""
    from pscript.stdlib import get_partial_std_lib

    body, funcs, methods = compiled_functions()
    std = get_partial_std_lib(sorted(funcs), sorted(methods), indent=1)
    runtime = "".join(f"  var {n} = VL.portable.{n};\n" for n in PT.RUNTIME)
    export = "".join(f"  VL.py.{n} = {n};\n" for n in sorted(PT.PORTABLE))
    return (exact_js() + "VL.py = {};\n(function () {\n" + runtime + std + "\n" + body + "\n" + export + "})();\n")


__all__ = ["compiled_functions", "exact_function", "exact_js", "portable_js"]
