"""Same numbers as an earlier commit? Run one fixed battery of public calls (the whole fit map, training, inference,
longest context, parallel plans, and the error messages) in this tree and in REV, and compare the JSON byte for
byte. For refactors that must not change a number (issue 11 used it against the pre-layer commit).
Usage: python tools/compare_results.py [REV] [--only-models-of REV] [--exclude a,b]   (default: bench_compare.BASELINE);
exit 1 on any difference. ``--only-models-of``: the battery runs on REV's catalogue only (a tree that added models);
``--exclude``: models whose numbers are meant to change (issue 12: the sliding-window models).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from bench_compare import BASELINE, checkout  # noqa: E402

BATTERY = r'''
import json, os, sys, vramlib as vl
out = []
skip = set(filter(None, os.environ.get("COMPARE_EXCLUDE", "").split(",")))
only = list(filter(None, os.environ.get("COMPARE_MODELS", "").split(",")))
models = [m for m in (only or vl.model_names()) if m not in skip]
gpus = [g.key for g in vl.list_gpus()]; precs = vl.precision_names()
precs = [p for p in precs if p in set(filter(None, os.environ.get("COMPARE_PRECISIONS", "").split(","))) or
         not os.environ.get("COMPARE_PRECISIONS")]
out.append(vl.fit_map(models, gpus, precs))
for mn in models:
    m = vl.get_model(mn)
    for args in [dict(seq=2048), dict(seq=4096, micro_batch=2, precision="fp32"), dict(method="lora", seq=1024), dict(method="qlora", seq=8192, recompute="full")]:
        try: out.append(dict(vl.training_memory(m, **args)))
        except vl.VramlibError as e: out.append(str(e))
    for p in precs:
        try: out.append(dict(vl.inference_memory(m, p, tokens=3000, batch=3)))
        except vl.VramlibError as e: out.append(str(e))
        try: out.append(vl.max_tokens(m, "rtx-4090", p, attention="sdpa"))
        except vl.VramlibError as e: out.append(str(e))
    for kw in [dict(tp=2, pp=2, dp=2, zero=1), dict(dp=8, zero=3), dict(tp=4, pp=1, dp=2, zero=2, recompute="selective")]:
        try: pm = vl.plan_memory(m, **kw); out.append([dict(s) for s in pm.stages])
        except vl.VramlibError as e: out.append(str(e))
plans = [dict(dp=1, zero=2, convention="deepspeed"), dict(dp=1, zero=3, convention="deepspeed"),
         dict(dp=4, zero=3, offload_optimizer="cpu", offload_params="cpu"), dict(dp=2, zero=2, offload_optimizer="nvme"),
         dict(dp=4, zero=3, method="lora", seq=1024), dict(dp=2, zero=1, method="qlora", optimizer="adamw-8bit"),
         dict(tp=2, pp=4, dp=2, zero=1, n_micro=8, schedule="gpipe", sequence_parallel=True),
         dict(tp=1, pp=2, dp=2, zero=1, n_micro=4, virtual_stages=2), dict(dp=8, ep=8, zero=2),
         dict(dp=2, zero=3, gather_buffer=True, overlap_comm=True, buckets="hf-rule"), dict(dp=2, zero=0, buckets="ddp"),
         dict(tp=2, pp=3, dp=1, zero=0, recompute="full", stage_layers=None, reserve="1GB")]
for mn in [m for m in ["llama-2-7b", "llama-2-70b", "mixtral-8x7b", "gpt2", "source-175b", "falcon-7b", "gemma-2-9b",
                       "qwen2.5-7b"] if m not in skip]:
    m = vl.get_model(mn)
    for kw in plans:
        try:
            pm = vl.plan_memory(m, **kw)
            out.append([[dict(s) for s in pm.stages], [dict(s) for s in pm.host], list(pm.nvme), list(pm.notes),
                        [s.title for s in pm.stages], list(pm.stage_layers)])
        except vl.VramlibError as e: out.append(str(e))
    for pp in (1, 2, 4, 8):
        for kw in [dict(), dict(recompute="selective", n_micro=16), dict(zero=1, dp=2, convention="deepspeed")]:
            try:
                b = vl.balance_pipeline(m, seq=2048, gpu="a100-80gb", pp=pp, tp=2 if mn != "gpt2" else 1, **kw)
                out.append([list(b.layers), [dict(s) for s in b.stages], b.verdict, b.even_verdict])
            except vl.VramlibError as e: out.append(str(e))
    for tp in (1, 2, 8):
        for st in ("all", "first", "middle", "last", "single"):
            try: out.append(str(vl.parallel.largest_module_params(m, tp, 1, st)))
            except vl.VramlibError as e: out.append(str(e))
    try: out.append([[str(x) for x in y] for y in vl.parallel.stage_params(m, 2, 4)])
    except vl.VramlibError as e: out.append(str(e))
json.dump(out, open(sys.argv[1], "w"), default=str, sort_keys=True)
print(len(out))
'''


def run(tree: Path, out: Path, env: dict) -> None:
    r = subprocess.run([sys.executable, "-c", BATTERY, str(out)], cwd=tree, capture_output=True, text=True,
                       env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", **env})
    if r.returncode:
        raise SystemExit(f"battery failed in {tree}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")


def _listing(tree: Path, what: str) -> str:
    r = subprocess.run([sys.executable, "-c", f"import vramlib as vl; print(','.join(vl.{what}()))"], cwd=tree,
                       capture_output=True, text=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    return r.stdout.strip()


def main(rev: str = BASELINE, *opts: str) -> int:
    env = {"COMPARE_EXCLUDE": opts[opts.index("--exclude") + 1] if "--exclude" in opts else ""}
    with tempfile.TemporaryDirectory() as tmp, checkout(rev) as old:
        if "--only-models-of" in opts:  # the older tree's catalogue and formats (this tree may have added some)
            env["COMPARE_MODELS"], env["COMPARE_PRECISIONS"] = _listing(old, "model_names"), _listing(old,
                                                                                                  "precision_names")
        run(old, Path(tmp) / "old.json", env)
        run(ROOT, Path(tmp) / "new.json", env)
        a, b = (Path(tmp) / "old.json").read_bytes(), (Path(tmp) / "new.json").read_bytes()
    print(f"{len(a):,} bytes of results from {rev}, {len(b):,} from this tree: " + ("identical" if a == b else "DIFFERENT"))
    return 0 if a == b else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
