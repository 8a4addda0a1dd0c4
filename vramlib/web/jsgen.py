"""The static book's calculators: JavaScript generated from vramlib's sympy expressions, catalogues as JSON.

One source of truth: every module-level sympy expression of vramlib (``formulas.KV_CACHE_BYTES``,
``activations.HF_MODEL[("sdpa", "full")]``, ... and the closed forms ``formulas`` solves on first
use) is printed to JavaScript with sympy's JavaScript code printer into ``VL.<module>.<NAME>``,
a function of an object of symbol values -- the browser twin of ``formulas.evaluate``. The
catalogues (GPUs, precisions, models, optimizers, conventions) are exported as JSON from the same
Python objects, and so are the constants and defaults the calculators need (``VL.data``: ZeRO flags, bucket
sizes, colours, the calculators' defaults read from their signatures). The rules that combine expressions are
``@portable`` Python compiled by :mod:`vramlib.web.portablegen` (``VL.py``, computing exactly with ``VL.exact``);
the hand-written ``vramlib/web/js/*.js`` checks inputs, glues and draws. ``tests/test_js_literals.py`` refuses a
number Python owns there, ``tests/test_portable.py`` runs the bundle in Node.js against Python and
``tests/browser/test_calculators.py`` proves in a real browser that every calculator equals its Python compute
function. The float functions printed here are kept for reference and tests; the calculators compute exactly.

``python -m vramlib.web.jsgen OUTDIR`` writes ``vramlib-calc.js``, ``vramlib-calc.css`` and
``vramlib-catalogue.json``; the book's Sphinx extension (:mod:`vramlib.web.sphinxext`) does it at build time.
Used in: every chapter with a panel (the static HTML book).
"""
from __future__ import annotations

import importlib
import json
import keyword
import re
import sys
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import sympy as sp
from sympy.printing.jscode import JavascriptCodePrinter

from ..present.jsdata import _key, model_json, to_json
from .portablegen import portable_js

JS_DIR = Path(__file__).resolve().parent / "js"
"""Hand-written orchestration (``core.js`` first, then one file per calculator) and the stylesheet."""

SKIP_MODULES = ("cli", "jsgen", "sphinxext", "widgets", "exercise_bank", "exercises", "sharding", "portable", "portablegen")
"""vramlib modules not scanned for expressions (entry points, UI, this generator; ``sharding``'s expressions reach
the page as ``VL.parallel``, which imports them)."""

_JS_RESERVED = set(keyword.kwlist) | {
    "arguments", "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
    "do", "else", "enum", "eval", "export", "extends", "false", "finally", "for", "function", "if", "implements",
    "import", "in", "instanceof", "interface", "let", "new", "null", "package", "private", "protected", "public",
    "return", "static", "super", "switch", "this", "throw", "true", "try", "typeof", "var", "void", "while",
    "with", "yield", "Math", "Infinity", "NaN", "undefined", "values", "VL",
}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Printer(JavascriptCodePrinter):
    """sympy's JavaScript printer, strict (an unsupported function raises), plus KroneckerDelta."""

    def __init__(self):
        super().__init__({"strict": True})

    def _print_Piecewise(self, expr):  # noqa: N802 -- one-line nested ternaries (a rule written as Piecewise)
        if expr.args[-1].cond != True:  # noqa: E712 (sympy's true)
            raise NotImplementedError("a Piecewise needs a final (value, True) branch to print to JavaScript")
        code = self._print(expr.args[-1].expr)
        for e, c in reversed(expr.args[:-1]):
            code = f"(({self._print(c)}) ? ({self._print(e)}) : ({code}))"
        return code

    def _print_KroneckerDelta(self, expr):  # noqa: N802 (sympy's naming)
        i, j = (self._print(a) for a in expr.args)
        return f"(({i}) === ({j}) ? 1 : 0)"


def js_expression(expr: sp.Expr) -> tuple[list[str], str]:
    """``(argument names, JavaScript source)`` of one sympy expression (names sorted, as ``formulas.evaluate``)."""
    names = sorted(s.name for s in expr.free_symbols)
    for n in names:
        if not _IDENT.match(n) or n in _JS_RESERVED:
            raise ValueError(f"symbol {n!r} is not a usable JavaScript identifier")
    try:
        code = _Printer().doprint(expr)
    except NotImplementedError as e:  # strict printing: a function JavaScript has no twin for
        raise ValueError(f"sympy cannot print this expression to JavaScript: {e}") from None
    if "Not supported" in code or "\n" in code:
        raise ValueError(f"sympy cannot print this expression to JavaScript: {code[:200]}")
    return names, code


def _module(name: str):
    """The module behind a short name (``"parallel"`` -> ``vramlib.plans.parallel``; ``"widgets.recommend"`` ->
    ``vramlib.present.widgets.recommend``)."""
    from .._index import MODULES

    head, _, rest = name.partition(".")
    return importlib.import_module(MODULES[head] + ("." + rest if rest else ""))


def _module_expressions(mod) -> dict[str, Any]:
    """UPPER_CASE sympy expressions (and dicts of them) defined in one module, lazily solved ones included."""
    out: dict[str, Any] = {}
    names = [n for n in vars(mod) if n.isupper() or re.match(r"^[A-Z][A-Z0-9_]*$", n)]
    names += [n for n in getattr(mod, "_SOLVED", {}) if n not in names]
    for name in names:
        if not re.match(r"^[A-Z][A-Z0-9_]*$", name):
            continue
        value = getattr(mod, name)
        if isinstance(value, sp.Expr) and not isinstance(value, sp.Symbol):
            out[name] = value
        elif isinstance(value, dict) and value and all(isinstance(v, sp.Expr) for v in value.values()):
            out[name] = {_key(k): v for k, v in value.items()}
    return out


def expression_modules() -> list[str]:
    """vramlib modules scanned for expressions (every layer module but the entry points and the UI), by the short
    name that is their JavaScript namespace (``VL.formulas``, ``VL.parallel`` ...)."""
    from .._index import MODULES

    return sorted(n for n in MODULES if n not in SKIP_MODULES)


@lru_cache(maxsize=1)
def collect_expressions() -> dict[str, dict[str, Any]]:
    """``{module: {NAME: expr or {key: expr}}}`` for every module that defines expressions."""
    out = {}
    for name in expression_modules():
        exprs = _module_expressions(_module(name))
        if exprs:
            out[name] = exprs
    return out


def formulas_js() -> tuple[str, list[str]]:
    """The ``VL.<module>`` namespaces of generated functions, and the names sympy could not print (stubs that throw)."""
    lines, failed = [], []
    for module, exprs in collect_expressions().items():
        body = []
        for name, value in exprs.items():
            items = value.items() if isinstance(value, dict) else [(None, value)]
            entries = []
            for key, expr in items:
                label = f"{module}.{name}" + (f"[{key}]" if key is not None else "")
                try:
                    args, code = js_expression(expr)
                    fn = f"VL.fn({json.dumps(label)}, {json.dumps(args)}, function ({', '.join(args)}) {{ return {code}; }})"
                except ValueError as e:
                    failed.append(f"{label}: {e}")
                    fn = f"VL.unavailable({json.dumps(label)})"
                entries.append(fn if key is None else f"{json.dumps(key)}: {fn}")
            body.append(f"  {name}: " + (entries[0] if not isinstance(value, dict) else "{\n    " + ",\n    ".join(entries) + "\n  }"))
        lines.append(f"VL.{module} = {{\n" + ",\n".join(body) + "\n};")
    return "\n".join(lines), failed


# --- JSON export: the data helpers live in present.jsdata (the panels' placeholders use them too) ---------


@lru_cache(maxsize=1)
def catalogue_json() -> dict[str, Any]:
    """Catalogues the calculators need, exported from vramlib's own objects."""
    from ..catalog import models, precision
    from ..catalog.hardware import GPUS
    from ..core import palette as viz
    from ..core.errors import VramlibError
    from ..memory import activations, inference, step, training

    precs = {}
    kv_formats = []
    for name in precision.precision_names():
        p = precision.get_precision(name)
        precs[name] = {**to_json(precision.precision_view(p)), "aliases": list(p.aliases)}  # what portable code reads
        try:
            precs[name]["kv_bytes_per_element"] = to_json(precision.kv_bytes_per_element(name))
            kv_formats.append(name)
        except VramlibError as e:  # formats a KV cache cannot use: the browser shows vramlib's own message
            precs[name]["kv_error"] = str(e)
    return {
        "gpus": {k: {**to_json(g), "supports_bf16": g.supports_bf16,
                     "supports_flash_attention_2": g.supports_flash_attention_2} for k, g in sorted(GPUS.items())},
        "precisions": precs,
        "precision_names": precision.precision_names(),
        "kv_formats": kv_formats,
        "models": {k: model_json(m) for k, m in sorted(models.catalogue().items())},  # what VL.model reads
        "optimizers": to_json(training.OPTIMIZERS),
        "conventions": to_json(training.CONVENTIONS),
        "constants": {
            "ATTENTION": list(inference.ATTENTION), "RECOMPUTE": list(activations.RECOMPUTE),
            "ACTIVATION_STYLES": list(activations.ACTIVATION_STYLES), "METHODS": list(training.METHODS),
            "LORA_TARGETS": list(training.LORA_TARGETS), "TRAINING_PRECISIONS": list(training.TRAINING_PRECISIONS),
            "FP32_BYTES": precision.FP32_BYTES, "SCOPES": list(activations.SCOPES + activations.STEP_SCOPES),
            "LORA_DTYPES": list(step.LORA_DTYPES), "PEAKS": list(step.PEAKS), "AUTOCAST": step.AUTOCAST,
        },
        "serving": _module_constants("serving", ("GRAPH_ACCOUNTING", "UNUSED_KEY", "DRIVER_RESERVED",
                                                 "VLLM_ENTRYPOINTS")),
        "parallel": {**_module_constants("parallel", (
            "ZERO_STAGES", "BUCKETS", "OFFLOAD", "SCHEDULES", "GATHER_BYTES_PER_PARAM")), "CONV_BYTES": conv_bytes_table()},
        "planning": {"BALANCE": _fraction_defaults("planning.balance_verdict", ("peak_share", "good_spread", "ok_spread"))},
        "units": _module_constants("units", ("GB", "GiB", "MB", "MiB", "_UNITS")),
        "viz": {"PALETTE": to_json(viz.PALETTE),   # COMPONENT_COLOURS as pairs: the first match wins, keep the order
                "COMPONENT_COLOURS": [[k, i] for k, i in viz.COMPONENT_COLOURS.items()]},
        "recommend": _module_constants("widgets.recommend", ("MAX_GPUS",)),
        "offload": offload_json(),
        "defaults": {name: function_defaults(name) for name in DEFAULTS_OF},
    }


def offload_json() -> dict[str, Any]:
    """What the offload calculator reads: the host memories (name, bandwidth), llama.cpp's cache types, the -ngl
    choice that asks for the most layers."""
    from ..catalog.hosts import HOSTS
    from ..present.widgets.offload import AUTO
    from ..serve.llamacpp import KV_TYPES

    return {"HOSTS": {k: {"name": h.name, "bandwidth_gb_s": float(h.bandwidth_gb_s)} for k, h in HOSTS.items()},
            "KV_TYPES": list(KV_TYPES), "AUTO": AUTO}


DEFAULTS_OF = (
    "parallel.plan_memory", "parallel.ParallelPlan", "planning.balance_verdict", "planning.balance_pipeline", "training.training_memory",
    "training.lora_params", "inference.inference_memory", "feasibility.largest_fitting",
    "training_feasibility.max_seq_for_training", "design.evaluate_design", "serving.ServingConfig",
    "widgets.finetune.finetune_plan", "widgets.finetune.finetune_compute", "widgets.parallel.plan_memory_compute",
    "widgets.parallel.balance_stages_compute", "widgets.recommend.recommend_rows", "widgets.design.design_compute",
    "widgets.bookshelf.bookshelf_compute", "widgets.inference.inference_compute", "feasibility.max_tokens",
    "activations.activation_bytes", "training_feasibility._largest_by_secant", "widgets.training.training_compute",
    "recommend.recommend_gpus", "offload.OffloadConfig", "llamacpp.LlamaCppConfig",
)
"""Python functions whose keyword defaults the calculators use: ``VL.data.defaults["<module>.<function>"]``."""


def _function(name: str):
    module, _, attr = name.rpartition(".")
    return getattr(_module(module), attr)


def function_defaults(name: str) -> dict[str, Any]:
    """``{argument: default}`` of one vramlib function (or class), read from its signature: the panels' defaults are
    the Python ones, never retyped in JS. Defaults JSON cannot hold are left out."""
    import inspect

    out = {}
    for p in inspect.signature(_function(name)).parameters.values():
        if p.default is inspect.Parameter.empty:
            continue
        try:
            out[p.name] = to_json(p.default)
        except TypeError:
            continue
    return out


def _fraction_defaults(name: str, args: tuple[str, ...]) -> dict[str, list[int]]:
    """Float defaults as the exact ``[numerator, denominator]`` Python compares with (``limit_denominator``)."""
    d = function_defaults(name)
    return {a: [Fraction(d[a]).limit_denominator().numerator, Fraction(d[a]).limit_denominator().denominator]
            for a in args}


def conv_bytes_table() -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``parallel._conv_bytes`` for every convention, training precision and ZeRO stage: bytes per parameter of the
    weights, gradients, 16-bit gradient copy, master weights and the gather buffer."""
    from ..memory.training import CONVENTIONS
    from ..plans import parallel
    from ..memory.training import TRAINING_PRECISIONS

    return {c: {p: {str(z): to_json(parallel._conv_bytes(c, p, z)) for z in parallel.ZERO_STAGES}
                for p in TRAINING_PRECISIONS} for c in CONVENTIONS}


def _module_constants(module: str, names: tuple[str, ...]) -> dict[str, Any]:
    """Plain constants of a vramlib module that its calculator's JS needs (a missing name is an error: the page would
    otherwise read undefined)."""
    try:
        mod = _module(module)
    except (ImportError, KeyError):
        raise ValueError(f"jsgen: no vramlib module {module!r} to export constants from") from None
    missing = [n for n in names if not hasattr(mod, n)]
    if missing:
        raise ValueError(f"jsgen: {module} has no {', '.join(missing)} to export")
    return {n.lstrip("_"): to_json(getattr(mod, n)) for n in names}


def js_sources() -> list[Path]:
    """Hand-written JS: core.js first, then the calculators in name order."""
    files = sorted(JS_DIR.glob("*.js"))
    core = [p for p in files if p.name == "core.js"]
    return core + [p for p in files if p.name != "core.js"]


def js_calculators() -> list[str]:
    """Names of the calculators the JS registers (``VL.register("inference", ...)``)."""
    found = []
    for path in js_sources():
        found += re.findall(r"""VL\.register\(\s*["']([a-z0-9_]+)["']""", path.read_text())
    return sorted(found)


@lru_cache(maxsize=1)
def build_js() -> str:
    """The whole ``vramlib-calc.js``: generated formulas, catalogues, then the hand-written orchestration."""
    from .. import __version__

    formulas, failed = formulas_js()
    data = json.dumps(catalogue_json(), sort_keys=True, separators=(",", ":"))
    head = (f"/* vramlib-calc.js -- vramlib {__version__}. GENERATED by vramlib/web/jsgen.py from vramlib's sympy "
            "expressions and catalogues; do not edit. Hand-written orchestration: vramlib/web/js/*.js. */\n")
    parts = [head, "(function () {\n\"use strict\";\n", (JS_DIR / "core.js").read_text(),
             "\n/* ---- generated from the sympy expressions ---- */\n", formulas,
             f"\nVL.unprintable = {json.dumps(failed)};\n",
             "\n/* ---- portable code compiled from Python, exact expressions (portablegen) ---- */\n", portable_js(),
             "\n/* ---- catalogues exported from vramlib ---- */\n", f"VL.data = {data};\n"]
    for path in js_sources()[1:]:
        parts += [f"\n/* ---- {path.name} ---- */\n", path.read_text()]
    parts.append("\nVL.start();\n})();\n")
    return "".join(parts)


def build_css() -> str:
    return (JS_DIR / "calc.css").read_text()


def write_assets(outdir: str | Path) -> list[Path]:
    """Write vramlib-calc.js, vramlib-calc.css and vramlib-catalogue.json into ``outdir``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"vramlib-calc.js": build_js(), "vramlib-calc.css": build_css(),
             "vramlib-catalogue.json": json.dumps(catalogue_json(), sort_keys=True, indent=1)}
    written = []
    for name, text in files.items():
        path = out / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_assets(sys.argv[1] if len(sys.argv) > 1 else "."):
        print(f"{p} ({p.stat().st_size:,} bytes)")
