"""Every chapter's panel update, timed: the compute function behind each calculator with the chapter's own
initial values, read from the built book's placeholders (``make book`` first).

Run: `.venv/bin/python tools/bench_panels.py` (median of 20 runs after a warm-up, one process).
Target (issue 3): every chapter's widget update < 50 ms. Exits 1 if one is slower.
"""
from __future__ import annotations

import html
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "browser")]

from cases import python_result  # noqa: E402  (the browser test's own Python side of a calculator)

PLACEHOLDER = re.compile(r'class="vramlib-calc"[^>]*?data-calc="([^"]+)" data-fixed="([^"]*)" data-controls="([^"]*)"')


def main() -> int:
    pages = sorted((ROOT / "_build" / "html" / "book").glob("ch*.html"))
    if not pages:
        print("no built chapters: run `make book` first", file=sys.stderr)
        return 2
    worst = 0.0
    print(f"{'chapter':<36} {'calculator':<16} {'median':>9}")
    for page in pages:
        for calc, fixed, controls in PLACEHOLDER.findall(page.read_text()):
            fixed_json = json.loads(html.unescape(fixed))
            values = {c["name"]: c["value"] for c in json.loads(html.unescape(controls))}
            python_result(calc, fixed_json, values)  # warm-up (lambdify caches)
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                python_result(calc, fixed_json, values)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            worst = max(worst, med)
            print(f"{page.stem:<36} {calc:<16} {med * 1000:>7.2f}ms")
    print(f"slowest: {worst * 1000:.2f} ms (target 50 ms)")
    return 0 if worst < 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
