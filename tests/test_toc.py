import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import make_toc  # noqa: E402


def test_toc_lists_every_chapter_in_source_order():
    assert (ROOT / "_toc.yml").read_text() == make_toc.toc_text(), "run tools/make_toc.py"
    chapters = sorted(p.stem for p in (ROOT / "book").glob("ch*.ipynb"))
    listed = [s for _, stems in make_toc.PARTS for s in stems]
    assert set(chapters) <= set(listed)
    source = [s for s in listed if s[:2] == "ch" and s[2:4].isdigit() and int(s[2:4]) <= 15]
    assert source == sorted(source) and len(source) == 15    # ch01 ... ch15: the source's order
    assert listed.index("ch17-offload-unified-cpu") == listed.index("ch08-vllm-vs-nvidia-smi") + 1  # with inference
