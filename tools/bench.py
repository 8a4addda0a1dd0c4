"""Benchmark: `import vramlib` time, one training_memory, one max_tokens, one widget update.

Run: `make bench` (or `.venv/bin/python tools/bench.py`). Each call is timed as the median of
repeated runs after one warm-up call, in this one process; import time is measured in fresh
subprocesses (median of 5). Targets (issue 2): import < 1 s, calls < 5 ms, widget update < 50 ms.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def median_time(fn, repeat: int = 50) -> float:
    fn()  # warm-up: lambdify caches, catalogue load
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def import_time() -> float:
    code = "import time; t=time.perf_counter(); import vramlib; print(time.perf_counter()-t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout) for _ in range(5)]
    return statistics.median(runs)


def main() -> int:
    import vramlib as vl
    from vramlib.widgets import evaluate_panel, inference_compute
    from vramlib.widgets.training import training_compute

    m = vl.get_model("llama-2-13b")
    rows = [
        ("import vramlib", import_time(), 1.0),
        ("training_memory (llama-2-13b, full)", median_time(lambda: vl.training_memory(m, method="full", seq=2048)), 0.005),
        ("training_memory (llama-2-13b, qlora)", median_time(lambda: vl.training_memory(m, method="qlora", seq=2048)), 0.005),
        ("max_tokens (closed form)", median_time(lambda: vl.max_tokens(m, "24GiB", "int4")), 0.005),
        ("max_tokens (with prefill, bisection)", median_time(lambda: vl.max_tokens(m, "24GiB", "int4", attention="sdpa")), 0.005),
        ("widget update (chapter 1 panel)", median_time(lambda: evaluate_panel(
            lambda **v: inference_compute(m, **v),
            dict(n_heads=40, n_kv_heads=8, weights="gptq-4bit-g128", kv_dtype="fp16", tokens=8192, gpu="rtx-4090",
                 attention="sdpa", batch=1)), repeat=30), 0.05),
        ("widget update (chapter 2 training panel)", median_time(lambda: evaluate_panel(
            lambda **v: training_compute("llama-33b", **v),
            dict(n_heads=52, n_kv_heads=52, precision="bf16", method="qlora", lora_rank=16, optimizer="adamw",
                 convention="mixed-fp32-master", recompute="full", attention="sdpa", seq=2048, micro_batch=1,
                 gpu="rtx-a6000")), repeat=30), 0.05),
    ]
    width = max(len(r[0]) for r in rows)
    ok = True
    print(f"{'what':<{width}}  {'median':>10}  {'target':>8}")
    for name, secs, target in rows:
        flag = "ok" if secs < target else "SLOW"
        ok &= secs < target
        print(f"{name:<{width}}  {secs * 1000:>8.2f}ms  {target * 1000:>6.0f}ms  {flag}")
    print(f"python {sys.version.split()[0]}, sympy {__import__('sympy').__version__}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
