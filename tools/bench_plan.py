"""Benchmark the plan search: the 1,024-GPU search must take < 1 s (issue 4; chapter 12's closing note).

Run: ``.venv/bin/python tools/bench_plan.py`` (options: ``--model``, ``--gpu``, ``--gpus``, ``--seq``,
``--batch``, ``--repeat``, ``--top``). One warm-up search (lambdify caches), then the median of ``--repeat``
timed searches in this process; prints the time, how many plans were enumerated and fit, and the top plans.
Exit status 1 when the median is over the target.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="source-175b", help="catalogue name (source-175b is the source's GPT-3-shaped 175B)")
    ap.add_argument("--gpu", default="a100-80gb")
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1536, help="global batch, sequences")
    ap.add_argument("--convention", default="mixed-fp32-master")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--target", type=float, default=1.0, help="seconds")
    args = ap.parse_args(argv)

    import numpy
    import sympy

    import vramlib as vl
    from vramlib.planning import search_plans

    model = vl.get_model(args.model)

    def run():
        return search_plans(model, args.gpu, args.gpus, args.seq, args.batch, convention=args.convention, top=args.top)

    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = run()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"plan search: {model.name} on {args.gpus:,} x {args.gpu}, seq {args.seq:,}, global batch {args.batch:,}, "
          f"{args.convention}")
    print(f"{res.n_candidates:,} plans enumerated, {res.n_fitting:,} fit under {1 - res.headroom:.0%} of "
          f"{res.capacity / 1e9:.1f} GB")
    print(f"median {med * 1000:.0f} ms over {args.repeat} runs (first run, with lambdify: {first * 1000:.0f} ms); "
          f"target {args.target * 1000:.0f} ms: {'ok' if med < args.target else 'SLOW'}")
    print(res.table(args.top))
    print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, sympy {sympy.__version__}")
    return 0 if med < args.target else 1


if __name__ == "__main__":
    raise SystemExit(main())
