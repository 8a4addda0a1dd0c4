"""The one stored form of the book's notebooks, so that a diff shows only what a change really changed.

``normalise(nb)`` puts an executed notebook in that form, in place, and returns what it had to change (an empty
list: the notebook was already normal). ``dumps(nb)`` is the text written to disk. ``make refresh``
(``tools/refresh_notebooks.py``) writes every notebook through these two; ``tests/test_notebook_format.py`` fails
when a stored notebook is not a fixed point of them. ``python tools/notebook_format.py [--check] [paths]``
normalises stored notebooks without re-executing them (``--check``: only report).

The normal form:

* no widget state (``metadata.widgets``): the static book never shows a widget view (``_config.yml``, and
  ``vramlib.web.sphinxext`` drops the state), nbval does not compare widget views, and the state repeated every
  number of every panel (plus a model per layout and style) in an order that changed between runs;
* no volatile metadata: the notebook's ``papermill``/``vscode`` blocks and ``language_info.version`` (the
  Python of whoever refreshed); a cell's ``execution``/``ExecuteTime``/``papermill`` timings and the UI's
  ``collapsed``/``scrolled``/``trusted`` flags;
* execution counts carry no information: every code cell has ``execution_count`` 1 and every
  ``execute_result`` ``null``. (A code cell cannot be ``null``: nbval 0.11 treats a cell whose count is
  ``null`` as never run and then *skips the comparison of its outputs*, or fails with "Unrun reference cell
  has outputs". A constant keeps nbval comparing every cell and never changes in a diff, not even when a cell
  is inserted above.)
* widget view ids (``model_id``, random uuids at every run) renumbered 1, 2, 3... in order of appearance;
* consecutive stream outputs of one name merged (what nbval and myst-nb compare and show anyway);
* the JSON text as ``nbformat.write`` produces it: keys sorted at every level (so JSON-valued outputs too),
  one-space indent, multi-line strings split into lines, a final newline (what Jupyter writes on save).

Cell ids (nbformat 4.5) are kept as they are: they are stable once written, and renumbering them would make
every cell below an inserted one change. Outputs that nbval compares (text, HTML, LaTeX, glue values) are never
rewritten here: their determinism is the code's job (a rewritten stored output would no longer equal a fresh
run). What the code must do for that is checked by ``problems``: no output matching ``NONDETERMINISM``, and no
cell whose output nbval is told to ignore (``nbval-ignore-output``): such an output changes at every refresh.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EXECUTED = 1
NOTEBOOK_METADATA_DROPPED = ("widgets", "papermill", "vscode", "execution")
CELL_METADATA_DROPPED = ("execution", "ExecuteTime", "papermill", "collapsed", "scrolled", "trusted")
"""Patterns that mean an output varies between two runs of the same code: a matplotlib SVG's date or its random
ids (set ``svg.hashsalt`` and ``SOURCE_DATE_EPOCH``), a pandas Styler's random table id (``Styler(uuid=...)``),
an object repr with its address. ``problems`` reports them; the code that prints them must be fixed."""
NONDETERMINISM = {
    "an SVG date (matplotlib metadata; set SOURCE_DATE_EPOCH)": re.compile(r"<dc:date>"),
    "a random SVG clip/path id (matplotlib; set rcParams['svg.hashsalt'])": re.compile(r'id="p[0-9a-f]{10}"'),
    "a random pandas Styler id (pass Styler(uuid=...))": re.compile(r"T_[0-9a-f]{5}_"),
    "an object address in a repr": re.compile(r" at 0x[0-9a-fA-F]{6,}>"),
}


def _merge_streams(outputs: list) -> list:
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream"
                and prev.get("name") == out.get("name")):
            prev["text"] = "".join(prev["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


def normalise(nb: nbformat.NotebookNode) -> list[str]:
    """Put ``nb`` (nbformat v4) in normal form in place; return one line per kind of change made (empty: none)."""
    counts: dict[str, int] = {}

    def note(what: str) -> None:
        counts[what] = counts.get(what, 0) + 1

    for key in NOTEBOOK_METADATA_DROPPED:
        if key in nb.metadata:
            del nb.metadata[key]
            note(f"metadata.{key} removed")
    if "version" in nb.metadata.get("language_info", {}):
        del nb.metadata.language_info["version"]
        note("metadata.language_info.version removed")

    ids: dict[str, str] = {}
    for i, cell in enumerate(nb.cells):
        for key in CELL_METADATA_DROPPED:
            if key in cell.get("metadata", {}):
                del cell.metadata[key]
                note(f"cell metadata {key!r} removed")
        if cell.cell_type != "code":
            continue
        if cell.get("execution_count") != EXECUTED:
            note(f"code cell execution_count set to {EXECUTED}")
            cell.execution_count = EXECUTED
        merged = _merge_streams(cell.outputs)
        if len(merged) != len(cell.outputs):
            note("consecutive stream outputs merged")
            cell.outputs = merged
        for out in cell.outputs:
            if out.get("output_type") == "execute_result" and out.get("execution_count") is not None:
                note("execute_result execution_count set to null")
                out.execution_count = None
            view = out.get("data", {}).get(WIDGET_VIEW)
            if isinstance(view, dict) and "model_id" in view:
                old = view["model_id"]
                new = ids.setdefault(old, f"{len(ids) + 1:032x}")
                if old != new:
                    view["model_id"] = new
                    note("widget view model_id renumbered")
    return [what if n == 1 else f"{what} (x{n})" for what, n in counts.items()]


def dumps(nb: nbformat.NotebookNode) -> str:
    """The stored text: what ``nbformat.write`` (and Jupyter's save) writes, keys sorted, final newline."""
    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"


def problems(path: Path) -> list[str]:
    """Why the stored ``path`` is not in normal form (empty: it is). Does not write."""
    text = Path(path).read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    found = normalise(nb)
    if not found and dumps(nb) != text:
        found.append("JSON layout differs from nbformat.write (key order, indent, line splitting, final newline)")
    for cell in nb.cells:
        if "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []) or "NBVAL_IGNORE_OUTPUT" in cell.source:
            found.append(f"cell {cell.get('id')}: nbval ignores its output, so its stored output changes at every "
                         "refresh (glue a count of work, not a time)")
        for out in cell.get("outputs", []):
            for mime, value in out.get("data", {}).items():
                if isinstance(value, str):
                    for what, pattern in NONDETERMINISM.items():
                        if pattern.search(value):
                            found.append(f"cell {cell.get('id')}: {mime} has {what}")
    return found


def normalise_file(path: Path) -> list[str]:
    """Normalise the stored notebook at ``path`` (no execution); return the changes (the file is rewritten only
    when there are any)."""
    text = Path(path).read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    changes = normalise(nb)
    new = dumps(nb)
    if new != text:
        Path(path).write_text(new, encoding="utf-8")
        changes = changes or ["JSON layout rewritten as nbformat.write does"]
    return changes


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(p) for p in argv if p != "--check"] or sorted((ROOT / "book").glob("*.ipynb"))
    bad = 0
    for path in paths:
        found = problems(path) if check else normalise_file(path)
        if found:
            bad += 1
            print(f"{path}: " + "; ".join(found))
    if check and bad:
        print(f"{bad} notebook(s) not in normal form: run python tools/notebook_format.py (or make refresh)")
    return 1 if check and bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
