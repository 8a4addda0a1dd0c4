"""Re-execute the chapters in place (``make refresh``) and store them in the normal form of
``tools/notebook_format.py`` (no widget state, no execution counts or timings, stable ids), so that a diff shows
only the outputs that really changed.

nbval then compares these stored outputs with a fresh run in ``make test``.
Usage: python tools/refresh_notebooks.py [book/chXX-*.ipynb ...]   (default: every notebook under book/)
To normalise stored notebooks without executing them: python tools/notebook_format.py [--check] [paths]
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_format  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parents[1]


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False, store_widget_state=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    notebook_format.normalise(nb)
    text = notebook_format.dumps(nb)
    if path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    print(f"refreshed {path.relative_to(ROOT)}")


if __name__ == "__main__":
    paths = [Path(p).resolve() for p in sys.argv[1:]] or sorted((ROOT / "book").glob("*.ipynb"))
    for p in paths:
        refresh(p)
