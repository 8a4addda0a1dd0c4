"""Stored notebooks are in the normal form of tools/notebook_format.py, so a one-number change diffs as one line.

The checks count what the normaliser changes (zero for a stored notebook, a second pass changes nothing); they
time nothing.
"""
from __future__ import annotations

import configparser
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import notebook_format as nf  # noqa: E402

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_notebook_is_normal(path):
    found = nf.problems(path)
    assert not found, f"{path.name}: {found}; run python tools/notebook_format.py {path.relative_to(ROOT)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_notebook_keeps_what_nbval_compares(path):
    """nbval compares a cell's outputs only when its stored execution_count is not null: every code cell has one,
    and the glue values the prose and tests/test_chapters.py read are still there."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert "widgets" not in nb["metadata"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] == nf.EXECUTED for c in code)
    outputs = [o for c in code for o in c["outputs"]]
    assert all(o.get("execution_count") is None for o in outputs)
    assert any(o.get("metadata", {}).get("scrapbook") for o in outputs), "no glue output left"
    views = [o["data"][nf.WIDGET_VIEW]["model_id"] for o in outputs if nf.WIDGET_VIEW in o.get("data", {})]
    assert views == [f"{i:032x}" for i in range(1, len(views) + 1)]


def _dirty() -> nbformat.NotebookNode:
    """A notebook as nbclient/Jupyter leave it: widget state, counts, timings, random ids, split streams."""
    view = {"model_id": "9f86d081884c7d659a2feaa0c55ad015", "version_major": 2, "version_minor": 0}
    nb = new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python", "version": "3.11.7"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {view["model_id"]: {}}}},
        "papermill": {"duration": 1.5},
    })
    nb.cells = [
        new_markdown_cell("# t", id="aaaa0001"),
        new_code_cell("x", id="aaaa0002", execution_count=7,
                      metadata={"execution": {"iopub.status.busy": "2026-01-01T00:00:00Z"}, "tags": ["hide-input"],
                                "ExecuteTime": {"end_time": "2026"}},
                      outputs=[new_output("stream", name="stdout", text="a\n"),
                               new_output("stream", name="stdout", text="b\n"),
                               new_output("execute_result", execution_count=7,
                                          data={"text/plain": "1", "application/json": {"b": 1, "a": 2}}),
                               new_output("display_data", data={nf.WIDGET_VIEW: view, "text/plain": "Panel()"})]),
        new_code_cell("y", id="aaaa0003", execution_count=None, outputs=[]),
    ]
    return nb


def test_normalise_removes_every_kind_of_noise():
    nb = _dirty()
    changes = " | ".join(nf.normalise(nb))
    for kind in ("metadata.widgets", "metadata.papermill", "language_info.version", "'execution'", "'ExecuteTime'",
                 "execution_count set to 1 (x2)", "execute_result execution_count", "stream", "model_id"):
        assert kind in changes, (kind, changes)
    text = nf.dumps(nb)
    stored = json.loads(text)
    assert "widgets" not in stored["metadata"] and "version" not in stored["metadata"]["language_info"]
    cell = stored["cells"][1]
    assert cell["metadata"] == {"tags": ["hide-input"]} and cell["execution_count"] == 1
    assert cell["outputs"][0]["text"] == ["a\n", "b\n"]
    assert cell["outputs"][1]["execution_count"] is None
    assert list(cell["outputs"][1]["data"]["application/json"]) == ["a", "b"]  # keys sorted
    assert cell["outputs"][2]["data"][nf.WIDGET_VIEW]["model_id"] == f"{1:032x}"
    assert [c["id"] for c in stored["cells"]] == ["aaaa0001", "aaaa0002", "aaaa0003"]  # cell ids kept
    assert text.endswith("}\n")


def test_normal_form_is_a_fixed_point(tmp_path):
    nb = _dirty()
    nf.normalise(nb)
    assert nf.normalise(nb) == []  # a second pass changes nothing
    path = tmp_path / "nb.ipynb"
    path.write_text(nf.dumps(nb), encoding="utf-8")
    assert nf.problems(path) == [] and nf.normalise_file(path) == []
    path.write_text(json.dumps(json.loads(path.read_text()), indent=2), encoding="utf-8")  # same content, other layout
    assert nf.problems(path) and nf.normalise_file(path) and nf.problems(path) == []


def test_problems_names_an_output_that_varies_between_runs(tmp_path):
    nb = _dirty()
    nb.cells[1].outputs.append(new_output("display_data", data={
        "image/svg+xml": '<svg><metadata><dc:date>2026-01-01T00:00:00</dc:date></metadata></svg>',
        "text/plain": "<Figure size 640x480 with 1 Axes>"}))
    nf.normalise(nb)
    path = tmp_path / "nb.ipynb"
    path.write_text(nf.dumps(nb), encoding="utf-8")
    assert [p for p in nf.problems(path) if "SVG date" in p]


def test_refresh_writes_through_the_normaliser():
    src = (ROOT / "tools" / "refresh_notebooks.py").read_text(encoding="utf-8")
    assert "store_widget_state=False" in src and "record_timing=False" in src
    assert "notebook_format.normalise(nb)" in src and "notebook_format.dumps(nb)" in src


def test_nbval_sanitizers_leave_numbers_alone():
    """A sanitizer may hide what varies between runs (addresses), never a number a catalogue change moves."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "nbval_sanitize.cfg")
    shown = ["25.76 GB (23.99 GiB)", "24,564 MiB", "$0.69/h", "1,008 GB/s", "20,321 tokens", "9.55000000074506",
             "{'fp16': '26.0 GB (24.2 GiB)'}", '<td class="num">6,507,932,160</td>']
    for section in cfg.sections():
        pattern = re.compile(cfg[section]["regex"])
        for text in shown:
            assert pattern.sub(cfg[section]["replace"], text) == text, (section, text)


def test_problems_names_a_cell_whose_output_nbval_ignores(tmp_path):
    nb = _dirty()
    nb.cells[1].metadata["tags"].append("nbval-ignore-output")
    nf.normalise(nb)
    path = tmp_path / "nb.ipynb"
    path.write_text(nf.dumps(nb), encoding="utf-8")
    assert [p for p in nf.problems(path) if "changes at every refresh" in p]


def test_every_notebook_starts_with_the_colab_install_cell():
    """Opened on Colab, a chapter installs vramlib first (tools/colab_cell.py, from _config.yml's repository); the cell
    is removed from the HTML and does nothing where vramlib is installed."""
    import colab_cell

    assert colab_cell.main(["--check"]) == 0
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = nb["cells"][colab_cell.first_code(nb)]
        assert cell["metadata"].get("tags") == ["remove-cell"], path.name
        assert "git+https://github.com/vram-book/vram-book" in "".join(cell["source"])


def test_every_glossary_term_is_linked_on_first_use():
    """In every chapter the first use of each glossary term (tools/link_terms.py TERMS, defined on the glossary page)
    is a {term} link; the check finds a first use left plain."""
    import link_terms

    assert link_terms.main(["--check"]) == 0
    glossary = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    assert all(f"\n{t}\n" in glossary for t in link_terms.TERMS), "a linked term has no glossary entry"
    assert link_terms.chapter_problems(["We use a KV cache, then {term}`KV cache`."]) == ["KV cache"]
    assert link_terms.chapter_problems(["{term}`KV cache` first, then the KV cache."]) == []


def test_cheatsheet_is_printed_from_the_library():
    """book/cheatsheet.md is what tools/make_cheatsheet.py writes from vramlib's expressions (never retyped)."""
    import make_cheatsheet

    assert (ROOT / "book" / "cheatsheet.md").read_text() == make_cheatsheet.page()
    assert "KV cache" in make_cheatsheet.page() and len(make_cheatsheet.ROWS) >= 7
