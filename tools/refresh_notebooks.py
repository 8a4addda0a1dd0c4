"""Re-execute the chapters in place (``make refresh``) without timing metadata, so diffs show only real changes.

nbval then compares these stored outputs with a fresh run in ``make test``.
Usage: python tools/refresh_notebooks.py [book/chXX-*.ipynb ...]   (default: every notebook under book/)
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False, store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    widgets = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json")
    if widgets:  # a canonical order for the widget models (their creation order varies between runs)
        def canonical(item):
            return re.sub(r"[0-9a-f]{32}", "X", json.dumps(item[1], sort_keys=True))
        widgets["state"] = dict(sorted(widgets["state"].items(), key=canonical))
    text = nbformat.writes(nb)
    # widget model ids are random uuids: renumber them in order of appearance so re-runs diff cleanly
    ids: dict[str, str] = {}
    for found in re.findall(r"[0-9a-f]{32}", text):
        ids.setdefault(found, f"{len(ids) + 1:032x}")
    text = re.sub(r"[0-9a-f]{32}", lambda mo: ids[mo.group(0)], text)
    path.write_text(text)
    print(f"refreshed {path.relative_to(ROOT)}")


if __name__ == "__main__":
    paths = [Path(p).resolve() for p in sys.argv[1:]] or sorted((ROOT / "book").glob("*.ipynb"))
    for p in paths:
        refresh(p)
