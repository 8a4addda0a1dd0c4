"""Each chapter's HTML plus its own assets stays under 2 MB (tools/page_weight.py reports the table)."""
from __future__ import annotations

import importlib.util
import json

from .conftest import ARTIFACTS, ROOT


def _tool():
    spec = importlib.util.spec_from_file_location("page_weight", ROOT / "tools" / "page_weight.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_chapter_under_2_mb(build_dir):
    pw = _tool()
    rows = pw.weights(build_dir)
    chapters = [r for r in rows if "/ch" in r["page"]]
    assert chapters, "no chapter pages built"
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "page-weight.json").write_text(json.dumps(rows, indent=1))
    top = chapters[0]
    print(f"\nlargest chapter: {top['page']} {top['page_plus_own'] / 1e6:.3f} MB (HTML + own assets)")
    over = [(r["page"], r["page_plus_own"]) for r in chapters if r["page_plus_own"] >= pw.LIMIT_BYTES]
    assert not over, f"over 2 MB: {over}"
