"""Every chapter's panel update, timed as ratios: the compute function behind each calculator with the chapter's
own initial values, read from the built book's placeholders (``make book`` first).

Run: `.venv/bin/python tools/bench_panels.py`. Per calculator, as in tools/bench.py: one cold update (lambdify
caches cleared first), then 20 warm updates, each after one run of the calibration workload, in this one process.
Verdicts (exit status 1 when one fails): every warm update, its best run over the calibration's best, stays under
the budget in calibration units (issue 3's target, 50 ms, divided by the reference calibration time; the ms are
information), compiles nothing (vramlib.core.formulas.LAMBDIFY_CALLS), and is at least ``MIN_SPEEDUP`` times faster
than the cold one when that lambdified. The test suite times nothing (tests/costs.py counts instead).
Exit status 2: no built book.
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(ROOT / "tests" / "browser")]

from bench import Timing, print_table  # noqa: E402
from cases import python_result  # noqa: E402  (the browser test's own Python side of a calculator)

PLACEHOLDER = re.compile(r'class="vramlib-calc"[^>]*?data-calc="([^"]+)" data-fixed="([^"]*)" data-controls="([^"]*)"')


def main() -> int:
    pages = sorted((ROOT / "_build" / "html" / "book").glob("ch[0-9][0-9]-*.html"))
    if not pages:
        print("no built chapters: run `make book` first", file=sys.stderr)
        return 2
    rows = []
    for page in pages:
        for calc, fixed, controls in PLACEHOLDER.findall(page.read_text()):
            fixed_json = json.loads(html.unescape(fixed))
            values = {c["name"]: c["value"] for c in json.loads(html.unescape(controls))}
            rows.append(Timing(f"{page.stem} {calc}", lambda: python_result(calc, fixed_json, values), repeat=20,
                               target_s=0.05, cold=True))
    ok = print_table(rows)
    worst = max(rows, key=lambda r: r.ratio)
    print(f"slowest: {worst.name}, {worst.warm_s * 1000:.2f} ms = {worst.ratio:.1f} cal (target 50 ms, information)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
