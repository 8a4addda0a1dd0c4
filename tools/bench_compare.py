"""Timings of this tree against an earlier version, in one run, as ratios (``make bench``).

Each version runs the same probe (:data:`PROBE`, public API calls only) in its own fresh interpreters,
alternating A, B, A, B ... so that both see the same machine load; the verdict is the ratio of the best runs.
Imports are wall-clock times; calls are CPU times (``time.process_time``), which load disturbs less.
Usage: python tools/bench_compare.py [REV]   (default REV: the commit before issue 11, see BASELINE)
"""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "7945ff9"
"""The last commit before the layered layout (issue 11)."""

PROBE = r'''
import json, sys, time
t0 = time.perf_counter()
import vramlib as vl
t_import = time.perf_counter() - t0
m = vl.get_model("llama-2-7b")
vl.training_memory(m, seq=2048, micro_batch=1)
t_first = time.perf_counter() - t0
calls = {
    "training_memory": lambda: vl.training_memory(m, seq=2048, micro_batch=1),
    "max_tokens": lambda: vl.max_tokens(m, "rtx-4090", "int8"),
    "inference_memory": lambda: vl.inference_memory(m, "fp16", tokens=4096),
    "kv_cache_bytes": lambda: vl.kv_cache_bytes(m, tokens=4096),
    "plan_memory": lambda: vl.plan_memory(m, tp=2, pp=2, dp=2, zero=1),
}
out = {"import vramlib": t_import, "import + first training_memory (cold)": t_first}
for name, fn in calls.items():
    fn(); fn()
    best = float("inf")
    for _ in range(5):
        n = 50
        t = time.process_time()  # CPU time: a shared, loaded machine disturbs it less than the wall clock
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t) / n)
    out[name] = best
names = vl.model_names()[:40]
gpus = [g.key for g in vl.list_gpus()][:20]
fmts = vl.precision_names()[:19]
t = time.process_time()
fits = 0
for mn in names:
    spec = vl.get_model(mn)
    for f in fmts:
        try:
            w = vl.weights_bytes(spec, f)
        except vl.VramlibError:
            continue
        for g in gpus:
            fits += w <= vl.get_gpu(g).memory_bytes
out["fit map (models x formats x GPUs, weights)"] = time.process_time() - t
t = time.process_time()
vl.fit_map(vl.model_names(), [g.key for g in vl.list_gpus()], vl.precision_names())
out["vl.fit_map, every model x GPU x format (cold)"] = time.process_time() - t
t = time.process_time()
vl.fit_map(vl.model_names(), [g.key for g in vl.list_gpus()], vl.precision_names())
out["vl.fit_map, every model x GPU x format (warm)"] = time.process_time() - t
print(json.dumps(out))
'''


def run(tree: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=tree,
                       env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    if r.returncode:
        raise SystemExit(f"probe failed in {tree}: {r.stderr.strip().splitlines()[-1]}")
    return json.loads(r.stdout)


@contextlib.contextmanager
def checkout(rev: str):
    """A temporary detached worktree of ``rev`` (removed afterwards): the earlier version to compare with."""
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old), rev], cwd=ROOT, check=True)
        try:
            yield old
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=True)


def main(rev: str = BASELINE, rounds: int = 4) -> None:
    best: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    with checkout(rev) as old:
        for _ in range(rounds):
            for label, tree in (("old", old), ("new", ROOT)):
                for k, v in run(tree).items():
                    best[label][k] = min(v, best[label].get(k, float("inf")))
    print(f"{'probe':46} {rev:>12} {'this tree':>12} {'old/new':>8}")
    for k in best["old"]:
        o, n = best["old"][k], best["new"][k]
        unit = 1e3
        print(f"{k:46} {o * unit:10.3f}ms {n * unit:10.3f}ms {o / n:8.1f}x")


if __name__ == "__main__":
    main(*sys.argv[1:2])
