"""Chapters as programs: papermill re-runs each with another scenario; chapter code stays thin."""
from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from scenarios import SCENARIOS

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(p for p in BOOK.glob("*.ipynb"))


def glued(nb: dict) -> dict:
    """Values glued with myst_nb.glue (scrapbook metadata), parsed from their text/plain repr."""
    out = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                text = next(v for k, v in o["data"].items() if k.endswith("text/plain"))
                text = "".join(text) if isinstance(text, list) else text
                try:
                    out[name] = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    out[name] = text
    return out


def code_cells(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_every_chapter_has_a_scenario():
    chapters = [p.stem for p in NOTEBOOKS]
    assert chapters, "no chapters found"
    assert set(chapters) == set(SCENARIOS), set(chapters) ^ set(SCENARIOS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_shape(path):
    nb = json.loads(path.read_text())
    tags = [t for c in nb["cells"] for t in c.get("metadata", {}).get("tags", [])]
    assert tags.count("parameters") == 1
    src = "\n".join(code_cells(nb))
    assert "glue(" in src and "sympify" not in src and "eval(" not in src
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    # every {glue:text}`name...` in the prose is glued by the code
    names = set(glued(nb))
    import re
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            for ref in re.findall(r"\{glue:(?:text|)\}`([A-Za-z0-9_]+)", "".join(c["source"])):
                assert ref in names, f"{path.stem}: prose refers to unglued {ref}"


def _is_stringy(node: ast.AST) -> bool:
    if isinstance(node, (ast.JoinedStr,)) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return True
    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("latex", "join", "format"):
        return True
    return isinstance(node, ast.BinOp) and (_is_stringy(node.left) or _is_stringy(node.right))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_size_arithmetic_in_chapter_code(path):
    """Chapters call vramlib; they do not add, multiply or divide sizes themselves (strings may be joined)."""
    bad = []
    for src in code_cells(json.loads(path.read_text())):
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)):
                if not _is_stringy(node):
                    bad.append(ast.unparse(node))
    assert not bad, f"arithmetic in {path.name}: {bad}"


def default_parameters(nb: dict) -> dict:
    """The literal assignments of the cell tagged ``parameters``."""
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    out = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


@pytest.mark.parametrize("stem", sorted(SCENARIOS))
def test_papermill_alternate_scenario(stem, tmp_path):
    papermill = pytest.importorskip("papermill")
    params, expected_fn = SCENARIOS[stem]
    defaults = default_parameters(json.loads((BOOK / f"{stem}.ipynb").read_text()))
    assert set(params) <= set(defaults), set(params) - set(defaults)
    out = tmp_path / f"{stem}.ipynb"
    papermill.execute_notebook(str(BOOK / f"{stem}.ipynb"), str(out), parameters=params, cwd=str(BOOK),
                               kernel_name="python3", progress_bar=False)
    got = glued(json.loads(out.read_text()))
    expected = expected_fn(defaults | params)
    for name, value in expected.items():
        assert name in got, f"{stem}: {name} not glued"
        if isinstance(value, float):
            assert math.isclose(got[name], value, rel_tol=1e-9), (name, got[name], value)
        else:
            assert got[name] == value, (name, got[name], value)
