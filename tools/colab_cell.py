"""Put (or refresh) the Colab install cell at the top of every chapter notebook: the first code cell installs vramlib
from the book's repository (``_config.yml``: ``repository.url``) when it is missing, as on Colab, and does nothing
where vramlib is installed (Binder, a local checkout, CI). Hidden from the HTML (``remove-cell``).

Usage: ``python tools/colab_cell.py [--check]`` (``tests/test_notebook_format.py`` checks every notebook has it).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELL_ID = "colab-install"


def repository_url() -> str:
    m = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", (ROOT / "_config.yml").read_text(), re.M)
    if not m:
        raise SystemExit("_config.yml has no repository.url")
    return m.group(1)


def cell_source() -> str:
    return ("# On Colab (or anywhere vramlib is missing): install the book's library from its repository\n"
            "import importlib.util, subprocess, sys\n"
            "if importlib.util.find_spec(\"vramlib\") is None:\n"
            f"    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"vramlib @ git+{repository_url()}\"],\n"
            "                   check=True)\n")


def first_code(nb: dict) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")


def has_cell(nb: dict) -> bool:
    c = nb["cells"][first_code(nb)]
    return c.get("id") == CELL_ID and "".join(c["source"]) == cell_source()


def put_cell(nb: dict) -> None:
    cells = [c for c in nb["cells"] if c.get("id") != CELL_ID]
    i = next(k for k, c in enumerate(cells) if c["cell_type"] == "code")
    cells.insert(i, {"cell_type": "code", "execution_count": 1, "id": CELL_ID,
                     "metadata": {"tags": ["remove-cell"]}, "outputs": [],
                     "source": cell_source().splitlines(True)})
    nb["cells"] = cells


def main(argv: list[str]) -> int:
    bad = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        if has_cell(nb):
            continue
        if "--check" in argv:
            bad.append(path.name)
            continue
        put_cell(nb)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"installed the Colab cell in {path.name}")
    if bad:
        print("no Colab install cell: " + ", ".join(bad) + "; run python tools/colab_cell.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
