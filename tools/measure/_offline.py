"""Shared set-up of the measurement scripts: Hugging Face offline (nothing is ever fetched from the Hub),
the repository on ``sys.path`` (so ``import vramlib`` finds this checkout), and the JSON writer.

Import it before transformers: ``from _offline import ROOT, write_json``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_json(path: Path, data: dict) -> None:
    """Write a measurement file (indented, trailing newline) and say so on stderr."""
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)


def language_model_config(cfg: dict):
    """transformers' config of the language model a ``config.json`` (without private keys) describes: the config
    class's own ``get_text_config(decoder=True)``, so an image-text config (Gemma-3, Llama-4, Mistral-3) gives its
    ``text_config`` as transformers builds it, and a text-only config itself."""
    from transformers import AutoConfig

    cfg = dict(cfg)
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg).get_text_config(decoder=True)


def meta_safe_rope(config) -> bool:
    """Swap a longrope rotary embedding (Phi-3.5-MoE) for the default one: longrope reads a tensor's value
    (``.item()``), which the meta device cannot, and no parameter or cache shape depends on it. True if swapped."""
    rope = getattr(config, "rope_parameters", None)
    if not rope or rope.get("rope_type") != "longrope":
        return False
    config.rope_parameters = {"rope_type": "default", "rope_theta": rope.get("rope_theta", 10000.0)}
    return True


def header(command: str, device: str, note: str) -> dict:
    """The fields every measurement file opens with: the command, the library versions, the device, a note."""
    import platform

    import torch
    import transformers

    return {"command": command, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "device": device, "note": note}


def run_cases(script: str, ids: list[str], jobs: int, extra: tuple[str, ...] = ()) -> list[dict]:
    """Each case id in a fresh ``python <script> --child ID [extra]`` process (``jobs`` at a time), so one case's
    state never leaks into another's; each child prints its row as the last line of JSON."""
    import subprocess
    import time

    rows, pending, running = [], list(ids), []
    while pending or running:
        while pending and len(running) < jobs:
            i = pending.pop(0)
            running.append((i, subprocess.Popen([sys.executable, script, "--child", i, *extra],
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)))
        time.sleep(0.5)
        for item in list(running):
            i, proc = item
            if proc.poll() is not None:
                out = proc.stdout.read().strip().splitlines()
                row = json.loads(out[-1]) if out else {"id": i, "not_measured": f"process exited {proc.returncode}"}
                print(f"{i}: {row.get('peak_bytes', row.get('not_measured'))} ({row.get('seconds')} s)",
                      file=sys.stderr, flush=True)
                rows.append(row)
                running.remove(item)
    return rows


def cases_main(args, name: str, cases: dict, quick, out: Path, run, data: dict) -> int:
    """The case scripts' common command line (``--list``, ``--only``, ``--check``; step_peaks.py, fsdp_peaks.py):
    list the ids, refuse unknown ones, re-measure and compare (default: the ``quick`` ids), or measure and write
    ``data`` with its ``rows`` (``--only`` merges into the stored file). ``run(ids, jobs)`` measures rows."""
    if args.list:
        print("\n".join(cases))
        return 0
    for i in (args.only or []) + (args.check or []):
        if i not in cases:
            print(f"unknown case id {i!r}; see --list", file=sys.stderr)
            return 2
    if args.check is not None:
        stored = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
        got = {r["id"]: r for r in run(args.check or list(quick), args.jobs)}
        diff = [i for i in got if got[i].get("peak_bytes") != stored.get(i, {}).get("peak_bytes")]
        print(f"{name}: " + ("differs: " + ", ".join(diff) if diff else f"{len(got)} rows reproduce"))
        return 1 if diff else 0
    old = {r["id"]: r for r in json.loads(out.read_text())["rows"]} if args.only and out.exists() else {}
    new = {r["id"]: r for r in run(args.only or list(cases), args.jobs)}
    data["rows"] = [new.get(i) or old[i] for i in cases if i in new or i in old]
    write_json(out, data)
    return 0
