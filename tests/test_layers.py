"""The layered layout of vramlib: imports flow one way, no cycles, the generated index is current, and
`import vramlib` stays light (it counts modules imported, never seconds)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "vramlib"
LAYERS = ["core", "catalog", "memory", "plans", "solve", "serve", "explain", "present", "web", "workshop"]
"""Lowest first: a module may import its own layer and the layers before it, never one after it."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(("vramlib",) + parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """vramlib modules that ``name`` imports anywhere in its body (function-level imports count too)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("vramlib"):
                continue
            for alias in node.names:  # `from . import formulas` imports a module
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vramlib"))
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_is_in_a_layer():
    loose = [m for m in MODULES if _layer(m) is None and m not in ("vramlib", "vramlib.__main__", "vramlib._index")]
    assert not loose, f"modules outside the layer packages: {loose}"
    assert set(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()) == set(LAYERS)


def test_lower_layers_never_import_upper_ones():
    bad = [(m, i) for m, deps in GRAPH.items() for i in deps
           if _layer(m) is not None and _layer(i) is not None and _layer(i) > _layer(m)]
    assert not bad, "upward imports: " + ", ".join(f"{m} -> {i}" for m, i in bad)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """The checker itself: a core module importing the presentation layer is reported."""
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    from ..present.viz import Table\n")
    MODULES["vramlib.core.x"] = fake
    try:
        deps = _imports("vramlib.core.x", fake)
    finally:
        del MODULES["vramlib.core.x"]
    assert deps == {"vramlib.present.viz"} and _layer("vramlib.present.viz") > _layer("vramlib.core.x")


def test_no_import_cycles():
    """No cycle among modules (a package's __init__ re-exporting its submodules is the edge parent -> child only)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(GRAPH[m]):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_generated_index_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_index.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr or r.stdout


def test_every_public_name_resolves():
    import vramlib as vl

    missing = [n for n in vl.__all__ if not hasattr(vl, n)]
    assert not missing
    for short in ("viz", "parallel", "exercises", "formulas", "widgets", "validation", "planning", "units"):
        assert getattr(vl, short).__name__.endswith("." + short)


@pytest.mark.parametrize("layer", LAYERS)
def test_each_module_says_what_it_owns(layer):
    """Every module opens with a docstring (what it owns; the layer modules also say which chapters use them)."""
    for name, path in MODULES.items():
        if name.split(".")[1:2] == [layer]:
            doc = ast.get_docstring(ast.parse(path.read_text()))
            assert doc and len(doc) > 40, f"{name} has no docstring saying what it owns"


def test_import_vramlib_is_light():
    """`import vramlib` loads neither sympy nor matplotlib nor ipywidgets, and a handful of vramlib modules."""
    code = ("import sys, vramlib; heavy = [m for m in ('sympy', 'numpy', 'matplotlib', 'ipywidgets') if m in sys.modules];"
            "own = [m for m in sys.modules if m.startswith('vramlib')]; print(heavy, len(own))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    heavy, own = r.stdout.rsplit(" ", 1)
    assert heavy == "[]" and int(own) <= 5, r.stdout
