"""Run every measurement: the CPU ones always, the CUDA one when a GPU is present.

Each script writes its own JSON under ``vramlib/data/measured/`` (with the command that reproduces it and the
library versions); this runner calls them in turn, in separate processes, and prints a summary.

Usage::

    python tools/measure/run_all.py            # measure everything, rewrite the JSON files (about 60 min on 2 CPUs,
                                               # 45 of them the fake-CUDA training steps)
    python tools/measure/run_all.py --check    # re-measure, write nothing, exit 1 if any script reports a difference
    python tools/measure/run_all.py --quick    # the scripts' quick modes (about 2 min), write nothing
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

CPU_SCRIPTS = ("param_counts", "saved_tensors", "kv_cache", "architectures", "peaks", "step_peaks", "fsdp_peaks",
               "lora", "optimizer")
"""In order; each supports --check. Quick modes exist for saved_tensors, kv_cache, architectures, peaks and lora."""
QUICK = {"saved_tensors": ["--quick"], "kv_cache": ["--quick"], "architectures": ["--quick"], "peaks": ["--quick"],
         "step_peaks": ["--check"], "fsdp_peaks": ["--check"],
         "lora": ["--quick"],
         "param_counts": ["--check", "--only", "llama-2-7b"], "optimizer": ["--check"]}
OPTIONAL = {"bnb_int8": "bitsandbytes"}
"""Scripts that need a package vramlib does not depend on: run (with --check when checking, skipped when quick)
only where it is installed."""


def installed(package: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(package) is not None


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def commands(check: bool = False, quick: bool = False, cuda: bool | None = None) -> list[list[str]]:
    """The command lines run_all executes, in order."""
    out = []
    for name in CPU_SCRIPTS:
        args = QUICK[name] if quick else (["--check"] if check else [])
        out.append([sys.executable, str(HERE / f"{name}.py"), *args])
    for name, package in OPTIONAL.items():
        if not quick and installed(package):
            out.append([sys.executable, str(HERE / f"{name}.py"), *(["--check"] if check else [])])
    if cuda is None:
        cuda = cuda_available()
    if cuda and not (check or quick):
        out.append([sys.executable, str(HERE / "step_peaks.py"), "--real-cuda"])
        out.append([sys.executable, str(HERE / "cuda_memory.py")])
    elif not cuda:
        out.append([sys.executable, str(HERE / "cuda_memory.py"), "--plan"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="re-measure and compare; write nothing")
    parser.add_argument("--quick", action="store_true", help="quick modes only; write nothing")
    args = parser.parse_args(argv)
    summary, failed = [], []
    for cmd in commands(check=args.check, quick=args.quick):
        name = Path(cmd[1]).stem + (" " + " ".join(cmd[2:]) if len(cmd) > 2 else "")
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, cwd=ROOT).returncode
        summary.append(f"{name:40s} rc={rc}  {time.perf_counter() - t0:6.1f} s")
        if rc:
            failed.append(name)
    print("\n".join(["", "run_all summary:"] + summary))
    if not cuda_available():
        print("no CUDA device: cuda_memory.py printed its plan only (run it on a GPU to measure)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
