"""Benchmark: `import vramlib` time, training_memory, max_tokens, activation_bytes and the widget updates.

Run: `make bench` (or `.venv/bin/python tools/bench.py`). Verdicts are ratios measured in this one run, not
absolute times, so that a loaded machine does not fail them:

* every timing is also given as a multiple of a fixed calibration workload (:func:`calibration`, pure-Python
  exact Fraction arithmetic, the kind of work vramlib's numeric path does; no sympy, no vramlib), timed
  interleaved with it (one calibration run before each timed run): the best timed run over the best calibration
  run (on a shared machine the fastest runs are the least disturbed ones; medians drift when the load changes
  between the two, the best-of ratio does not). It must stay under a budget in calibration units: the issue's
  target divided by what the calibration takes on the reference machine (``REFERENCE_CALIBRATION_S``). The
  targets themselves (issue 2: import < 1 s, calls < 5 ms, widget update < 50 ms; issue 4: the 1,024-GPU plan
  search < 1 s) are printed as information;
* a warm call must compile nothing (sympy.lambdify calls, counted: vramlib.core.formulas.LAMBDIFY_CALLS);
* for the widget updates, the first call after the lambdify caches are cleared ("cold") is shown next to the
  warm ones: the best warm update must be at least ``MIN_SPEEDUP`` times faster;
* ``import vramlib`` is timed in 5 fresh interpreters (medians), ``import sympy`` first and alone: its verdict is
  vramlib's own part as a multiple of sympy's import (``IMPORT_OWN_BUDGET``); ms and calibration units are shown.

Exit status 1 when a verdict fails. The tests assert nothing about time; they count the work instead
(tests/costs.py). tools/bench_plan.py and tools/bench_panels.py use the helpers below.
"""
from __future__ import annotations

import inspect
import statistics
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REFERENCE_CALIBRATION_S = 0.0008
"""What :func:`calibration` takes on the reference machine (one unloaded core of the development container,
CPython 3.11): the absolute targets are divided by it to give the budgets in calibration units."""

IMPORT_OWN_BUDGET = 1.0
"""``import vramlib`` minus ``import sympy`` (its one heavy dependency, timed in the same interpreter), as a multiple
of ``import sympy``: the import verdict (module loading scales with the machine as sympy's does; a sympy.solve
or lambdify at import time would show here)."""

MIN_SPEEDUP = 1.5
"""A warm widget update must be at least this many times faster than the cold one (which lambdifies)."""

def calibration():
    """The fixed reference workload (~0.8 ms): 200 exact Fraction products and sums, bounded denominators."""
    acc = Fraction(0)
    for i in range(1, 201):
        acc += Fraction(i, 7) * Fraction(3, 5)
    return acc


def budget(target_s: float) -> float:
    """The absolute target ``target_s`` in calibration units."""
    return target_s / REFERENCE_CALIBRATION_S


def clear_caches() -> None:
    """Forget every compiled formula (and the weights_detail cache): the next call is cold, as in a fresh
    kernel (formulas sympy solved on first use stay solved)."""
    from vramlib import formulas as F, inference as I, planning as Q

    F.compile_exact.cache_clear()
    Q._np_fn.cache_clear()
    I._weights_detail.cache_clear()


class Timing:
    """One workload: cold time and lambdify count, warm median and best, and the calibration's beside them."""

    def __init__(self, name: str, fn, repeat: int = 30, target_s: float = 0.005, cold: bool = False):
        from vramlib import formulas as F

        self.name, self.target_s, self.cold_s, self.cold_lambdify = name, target_s, None, None
        if cold:
            clear_caches()
        n0 = F.LAMBDIFY_CALLS
        t0 = time.perf_counter()
        fn()  # cold run (after clear_caches) or warm-up
        first = time.perf_counter() - t0
        if cold:
            self.cold_s, self.cold_lambdify = first, F.LAMBDIFY_CALLS - n0
        n1 = F.LAMBDIFY_CALLS
        times, cals = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            calibration()
            t1 = time.perf_counter()
            fn()
            t2 = time.perf_counter()
            cals.append(t1 - t0)
            times.append(t2 - t1)
        self.warm_lambdify = F.LAMBDIFY_CALLS - n1
        self.warm_s, self.cal_s = statistics.median(times), statistics.median(cals)
        self.best_s, self.best_cal_s = min(times), min(cals)

    @property
    def ratio(self) -> float:
        """The best warm run in calibration units (best over best)."""
        return self.best_s / self.best_cal_s

    @property
    def speedup(self) -> float | None:
        """The cold run over the best warm one."""
        return None if self.cold_s is None else self.cold_s / self.best_s

    def problems(self) -> list[str]:
        out = []
        if self.ratio > budget(self.target_s):
            out.append(f"{self.ratio:.0f} cal > budget {budget(self.target_s):.0f}")
        if self.warm_lambdify:
            out.append(f"{self.warm_lambdify} lambdify when warm")
        if self.speedup is not None and self.cold_lambdify and self.speedup < MIN_SPEEDUP:
            out.append(f"warm only {self.speedup:.1f}x faster than cold")
        return out


def print_table(rows: list[Timing]) -> bool:
    """Print the rows; True when every verdict holds."""
    width = max(len(r.name) for r in rows)
    print(f"{'what':<{width}}  {'median':>9}  {'best':>9}  {'x cal':>6}  {'budget':>6}  {'target':>7}  {'cold':>9}  "
          f"{'lambdify':>8}  {'cold/warm':>9}  verdict")
    ok = True
    for r in rows:
        bad = r.problems()
        ok &= not bad
        cold = f"{r.cold_s * 1000:7.1f}ms" if r.cold_s is not None else f"{'':9}"
        lam = f"{r.cold_lambdify}/{r.warm_lambdify}" if r.cold_lambdify is not None else f"-/{r.warm_lambdify}"
        speed = f"{r.speedup:8.1f}x" if r.speedup is not None else f"{'':9}"
        print(f"{r.name:<{width}}  {r.warm_s * 1000:7.2f}ms  {r.best_s * 1000:7.2f}ms  {r.ratio:6.1f}  "
              f"{budget(r.target_s):6.0f}  "
              f"{r.target_s * 1000:5.0f}ms  {cold}  {lam:>8}  {speed}  {'ok' if not bad else '; '.join(bad)}")
    cal, best = statistics.median(r.cal_s for r in rows), min(r.best_cal_s for r in rows)
    print(f"calibration: median {cal * 1000:.2f} ms, best {best * 1000:.2f} ms in this run (reference "
          f"{REFERENCE_CALIBRATION_S * 1000:.2f} ms: the median runs at {REFERENCE_CALIBRATION_S / cal:.2f}x the "
          f"reference speed); x cal = best / best calibration; budget = target / reference; lambdify = cold/warm "
          f"compilations; cold/warm = cold / best; the ms targets are information, the verdicts are ratios")
    return ok


def import_time() -> tuple[float, float, float, float]:
    """Medians over 5 fresh interpreters of: ``import vramlib`` seconds, the part of it that is ``import sympy``
    (imported first, timed alone), the calibration (timed 10 times before and 10 times after the imports), and
    vramlib's own part as a multiple of sympy's import (a ratio per interpreter)."""
    code = ("import statistics, time\nfrom fractions import Fraction\n" + inspect.getsource(calibration) +
            "def cal():\n    t = time.perf_counter(); calibration(); return time.perf_counter() - t\n"
            "cals = [cal() for _ in range(10)]\n"
            "t0 = time.perf_counter()\nimport sympy\nt1 = time.perf_counter()\nimport vramlib\n"
            "t2 = time.perf_counter()\ncals += [cal() for _ in range(10)]\n"
            "print(t2 - t0, t1 - t0, statistics.median(cals))")
    runs = [tuple(map(float, subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                            check=True).stdout.split())) for _ in range(5)]
    own = statistics.median((r[0] - r[1]) / r[1] for r in runs)  # per interpreter, then the median
    return (*(statistics.median(r[k] for r in runs) for k in range(3)), own)


def main() -> int:
    import vramlib as vl
    from vramlib.present.widgets import evaluate_panel, inference_compute
    from vramlib.present.widgets.training import training_compute

    imp, imp_sympy, imp_cal, own = import_time()
    m = vl.get_model("llama-2-13b")
    mix = vl.get_model("mixtral-8x7b")
    panel1 = dict(n_heads=40, n_kv_heads=8, weights="gptq-4bit-g128", kv_dtype="fp16", tokens=8192, gpu="rtx-4090",
                  attention="sdpa", batch=1)
    panel2 = dict(n_heads=52, n_kv_heads=52, precision="bf16", method="qlora", lora_rank=16, optimizer="adamw",
                  convention="mixed-fp32-master", recompute="full", attention="sdpa", seq=2048, micro_batch=1,
                  gpu="rtx-a6000")
    rows = [
        Timing("training_memory (llama-2-13b, full)", lambda: vl.training_memory(m, method="full", seq=2048)),
        Timing("training_memory (llama-2-13b, qlora)", lambda: vl.training_memory(m, method="qlora", seq=2048)),
        Timing("max_tokens (closed form)", lambda: vl.max_tokens(m, "24GiB", "int4")),
        Timing("max_tokens (with prefill, bisection)", lambda: vl.max_tokens(m, "24GiB", "int4", attention="sdpa")),
        Timing("activation_bytes (mixtral, model, selective)",
               lambda: vl.activation_bytes(mix, 4096, scope="model", recompute="selective"), repeat=100),
        Timing("widget update (chapter 1 panel)", lambda: evaluate_panel(
            lambda **v: inference_compute(m, **v), panel1), target_s=0.05, cold=True),
        Timing("widget update (chapter 2 training panel)", lambda: evaluate_panel(
            lambda **v: training_compute("llama-33b", **v), panel2), target_s=0.05, cold=True),
    ]
    ok = print_table(rows)
    imp_ok = own <= IMPORT_OWN_BUDGET
    print(f"import vramlib: {imp * 1000:.0f} ms (target 1000 ms; {imp / imp_cal:.0f} cal, budget {budget(1.0):.0f}), "
          f"of which sympy {imp_sympy * 1000:.0f} ms; vramlib's own part = {own:.2f} x sympy's import "
          f"(budget {IMPORT_OWN_BUDGET:.2f}; fresh interpreters): {'ok' if imp_ok else 'SLOW'}")
    print(f"python {sys.version.split()[0]}, sympy {__import__('sympy').__version__}")
    return 0 if ok and imp_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
