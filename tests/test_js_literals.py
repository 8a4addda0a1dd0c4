"""No number that Python owns is retyped in the static book's hand-written JavaScript (``vramlib/web/js/*.js``).

Byte sizes, bucket sizes, bits, defaults (0.5 GB reserve, 2048 tokens, LoRA rank 16), thresholds and rules are
written once, in vramlib: the calculators read them as exported data (``VL.data``: :func:`vramlib.web.jsgen.catalogue_json`,
widget defaults from the functions' signatures) or call the generated expressions (``VL.<module>.<NAME>``). This test
scans every JS file for numeric literals (comments, strings and regular expressions stripped) and fails on any literal
other than 0, 1 and 2 that is not listed below with a reason:

* ``PRESENTATION``: layout and formatting numbers Python does not own as quantities (SVG geometry, percent scale,
  digits of a format, JS-only float tolerances);
* ``TWINS``: numbers that still retype a Python rule or default -- a named, shrinking list (each one a twin to remove;
  an entry no longer found fails too, so the list only shrinks).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from vramlib.web.jsgen import JS_DIR

ALWAYS = {"0", "1", "2"}
"""Allowed everywhere: identities, halves, index arithmetic."""

_FLOAT_TOL = "float tolerance of JS arithmetic (Python computes exactly with Fractions; no Python number)"
_PCT = "percent scale of a printed share (Python's :.0% format)"

PRESENTATION: dict[tuple[str, str], str] = {
    # core.js
    ("core.js", "1e-6"): _FLOAT_TOL + ": '0.5GB' parsed in floats",
    ("core.js", "0.5"): "the exact binary tie of Python's round-half-even in f'{x:.nf}'",
    ("core.js", "10"): "decimal base of f'{x:.nf}' formatting",
    ("core.js", "100"): _PCT,
    ("core.js", "560"): "SVG geometry of the stacked bar (width)",
    ("core.js", "44"): "SVG geometry of the stacked bar (height)",
    ("core.js", "8"): "SVG geometry of the stacked bar (margins)",
    ("core.js", "40"): "characters of a bad input echoed in an error message",
    ("core.js", "1000"): "the decimal k/M/G suffix a reader typed, explained in an error message",
    ("core.js", "1024"): "the binary k/M/G suffix a reader typed, explained in an error message; divisor search cap",
    ("core.js", "3"): "controls per row of a panel; the G suffix's power",
    ("core.js", "4"): "divisors listed in an error message",
    ("core.js", "12"): "choices listed in full in an error message; digits kept of a stepped input",
    ("core.js", "6"): "choices listed when there are more",
    # parallel.js
    ("core.js", "64"): "bits of the quotient kept when a Fraction is rounded to a double (IEEE 754 arithmetic)",
    # recommend.js
    ("recommend.js", "100"): _PCT + "; headroom_pct / 100 as the Python panel does",
    # design.js
    # serving.js
}

TWINS: dict[tuple[str, str], str] = {
}
"""Twins still to remove, with why they remain. ``(file, "*")``: every literal of that file."""


_NUMBER = re.compile(r"(?<![\w.$])(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?n?|\.\d+(?:[eE][+-]?\d+)?)(?![\w.])")


def strip_js(src: str) -> str:
    """The source with comments, string and template literals and regular-expression literals blanked (lines kept)."""
    out: list[str] = []
    i, n = 0, len(src)
    last = ""  # the last significant character emitted: decides whether "/" starts a regular expression
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'`" or (c == "/" and last in "(,=:[!&|?{};+-*%<>~^" ):
            j = i + 1
            in_class = False
            while j < n and (src[j] != c or (c == "/" and in_class)):
                if src[j] == "\\":
                    j += 1
                elif c == "/" and src[j] == "[":
                    in_class = True
                elif c == "/" and src[j] == "]":
                    in_class = False
                j += 1
            out.append('""' + "\n" * src.count("\n", i, j))
            last = '"'
            i = j + 1
            continue
        out.append(c)
        if not c.isspace():
            last = c
        i += 1
    return "".join(out)


def js_literals(js_dir: Path = JS_DIR) -> Counter:
    """``{(file, literal): count}`` of the numeric literals in the hand-written JS (BigInt 0n/1n count as 0/1)."""
    found: Counter = Counter()
    for path in sorted(js_dir.glob("*.js")):
        for m in _NUMBER.finditer(strip_js(path.read_text())):
            lit = m.group(1)
            lit = lit[:-1] if lit.endswith("n") else lit
            found[(path.name, lit)] += 1
    return found


def _allowed(key: tuple[str, str]) -> bool:
    return key[1] in ALWAYS or key in PRESENTATION or key in TWINS or (key[0], "*") in TWINS


def test_no_python_number_in_js():
    """Every numeric literal of vramlib/web/js is 0, 1, 2 or listed with a reason."""
    bad = sorted(f"{f}: {lit} (x{n})" for (f, lit), n in js_literals().items() if not _allowed((f, lit)))
    assert not bad, ("numeric literals in vramlib/web/js that Python may own -- export them from vramlib (jsgen) or, for "
                     "layout only, list them in PRESENTATION with a reason:\n" + "\n".join(bad))


def test_allowlists_only_shrink():
    """Every allowlist entry is still needed (a twin removed leaves no stale entry behind)."""
    found = set(js_literals())
    files = {f for f, _ in found}
    stale = [k for k in list(PRESENTATION) + list(TWINS) if (k[1] == "*" and k[0] not in files) or
             (k[1] != "*" and k not in found)]
    assert not stale, f"allowlist entries no longer found in vramlib/web/js (remove them): {stale}"


def test_the_scanner_sees_literals_and_skips_text():
    src = 'var a = 500000000; /* 42 */ var s = "2048 tokens"; // 16\nvar r = /[0-9]{3}/.test(x) ? 0.5 : 1e9 / 8;'
    got = _NUMBER.findall(strip_js(src))
    assert got == ["500000000", "0.5", "1e9", "8"]


def test_parallel_twins_are_gone():
    """The plan model's constants are exported or generated, never spelled in parallel.js / finetune.js."""
    for f in ("parallel.js", "finetune.js"):
        text = strip_js((JS_DIR / f).read_text())
        assert "500000000" not in text and "50000000" not in text, f
    assert "FT.planMemory" not in (JS_DIR / "finetune.js").read_text()


def test_every_generated_function_the_js_names_exists():
    """``VL.<module>.<NAME>`` (or an alias ``var P = VL.parallel`` then ``P.NAME``) in the hand-written JS must be an
    expression jsgen prints: a name Python dropped or renamed fails here, not as an undefined in the browser."""
    from vramlib.web.jsgen import collect_expressions

    exprs = collect_expressions()
    missing = []
    for path in sorted(JS_DIR.glob("*.js")):
        src = strip_js(path.read_text())
        aliases = {a: m for a, m in re.findall(r"\b([A-Za-z_]\w*)\s*=\s*VL\.([a-z_]+)\b(?!\.)", src) if m in exprs}
        refs = [(m, n) for m, n in re.findall(r"\bVL\.([a-z_]+)\.([A-Z][A-Z0-9_]*)\b", src) if m in exprs]
        refs += [(aliases[a], n) for a, n in re.findall(r"\b([A-Za-z_]\w*)\.([A-Z][A-Z0-9_]*)\b", src) if a in aliases]
        missing += [f"{path.name}: VL.{m}.{n}" for m, n in refs if n not in exprs[m]]
    assert not missing, "JS names generated functions that do not exist: " + ", ".join(sorted(set(missing)))
