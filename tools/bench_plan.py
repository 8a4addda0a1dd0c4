"""Benchmark the plan search: the 1,024-GPU search (issue 4, chapter 12's closing note: < 1 s), as ratios.

Run: ``.venv/bin/python tools/bench_plan.py`` (options: ``--model``, ``--gpu``, ``--gpus``, ``--seq``,
``--batch``, ``--repeat``, ``--top``, ``--target``). One cold search (lambdify caches cleared first), then the
median of ``--repeat`` warm searches, each after one run of tools/bench.py's calibration workload, in this process.
Prints the times in ms and in calibration units (best warm run over best calibration run), how many plans were
enumerated and fit, the numpy evaluations and exact plan_memory calls of a warm search, and the top plans.

Verdict (exit status 1 when one fails), as in tools/bench.py: the best warm search in calibration units stays under
``--target`` divided by the reference calibration time (the target in ms is information), and a warm search
compiles nothing (vramlib.core.formulas.LAMBDIFY_CALLS). The test suite times nothing (tests/costs.py counts instead).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from bench import budget, calibration, clear_caches  # noqa: E402


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
    ap.add_argument("--target", type=float, default=1.0, help="seconds on the reference machine (tools/bench.py)")
    args = ap.parse_args(argv)

    import numpy
    import sympy

    import vramlib as vl
    from vramlib import formulas as F
    from vramlib import planning as Q

    model = vl.get_model(args.model)
    calls = {"npeval": 0, "plan_memory": 0}

    def counted(name):
        original = getattr(Q, name)

        def wrapper(*a, **kw):
            calls[name] += 1
            return original(*a, **kw)
        return wrapper

    def run():
        return Q.search_plans(model, args.gpu, args.gpus, args.seq, args.batch, convention=args.convention,
                              top=args.top)

    clear_caches()
    n0 = F.LAMBDIFY_CALLS
    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    cold_lambdify, n1 = F.LAMBDIFY_CALLS - n0, F.LAMBDIFY_CALLS
    times, cals = [], []
    originals = {name: getattr(Q, name) for name in calls}
    try:
        for name in calls:  # counted during the warm runs (the wrapper's cost is a few hundred calls: noise)
            setattr(Q, name, counted(name))
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            calibration()
            t1 = time.perf_counter()
            res = run()
            t2 = time.perf_counter()
            cals.append(t1 - t0)
            times.append(t2 - t1)
    finally:
        for name, fn in originals.items():
            setattr(Q, name, fn)
    warm_lambdify = F.LAMBDIFY_CALLS - n1
    med, cal = statistics.median(times), statistics.median(cals)
    ratio, limit = min(times) / min(cals), budget(args.target)  # best over best, as in tools/bench.py
    problems = ([f"{ratio:.0f} cal > budget {limit:.0f}"] if ratio > limit else []) + \
               ([f"{warm_lambdify} lambdify when warm"] if warm_lambdify else [])
    print(f"plan search: {model.name} on {args.gpus:,} x {args.gpu}, seq {args.seq:,}, global batch {args.batch:,}, "
          f"{args.convention}")
    print(f"{res.n_candidates:,} plans enumerated, {res.n_fitting:,} fit under {1 - res.headroom:.0%} of "
          f"{res.capacity / 1e9:.1f} GB; per warm search {calls['npeval'] // args.repeat} numpy evaluations "
          f"(vectorised over the plans) and {calls['plan_memory'] // args.repeat} exact plan_memory calls")
    print(f"warm median {med * 1000:.0f} ms, best {min(times) * 1000:.0f} ms over {args.repeat} runs = {ratio:.0f} cal "
          f"(best over best calibration, {min(cals) * 1000:.2f} ms; median calibration {cal * 1000:.2f} ms); budget "
          f"{limit:.0f} cal = target {args.target * 1000:.0f} ms on the reference machine; cold {first * 1000:.0f} ms "
          f"({first / min(times):.1f}x the best warm), lambdify cold/warm {cold_lambdify}/{warm_lambdify}: "
          f"{'ok' if not problems else '; '.join(problems)}")
    print(res.table(args.top))
    print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, sympy {sympy.__version__}")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
