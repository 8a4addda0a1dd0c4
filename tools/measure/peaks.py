"""Measure the peak memory PyTorch allocates for full-size models without a GPU: the model is built under
``torch._subclasses.fake_tensor.FakeTensorMode`` (tensors with shapes, dtypes and devices but no storage) and
``torch.distributed._tools.mem_tracker.MemTracker`` follows every storage by category (parameters, buffers,
gradients, activations, temporaries, optimizer state) and records the peak.

This harness runs on the fake **CPU** device (``step_peaks.py`` runs the fake CUDA one, with training steps):
inference prefill of real model shapes (all layers, transformers'
``sdpa`` attention, which on the CPU dispatches to the CPU flash kernel), a DynamicCache, and either the last
token's logits (``logits_to_keep=1``, as generation does) or every token's (as an evaluation loop does).

Ground truth only: ``vramlib.explain.validation.peak_rows`` compares ``inference_memory`` with it.

    python tools/measure/peaks.py            # writes vramlib/data/measured/peaks.json (about 3 min on 2 CPUs)
    python tools/measure/peaks.py --check    # recompute, exit 1 on any difference
    python tools/measure/peaks.py --quick    # the 0.5B model only, compared with the stored rows (20 s)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _offline import ROOT, header, write_json

OUT = ROOT / "vramlib" / "data" / "measured" / "peaks.json"
MODELS = ("llama-2-7b", "llama-3.1-8b", "qwen2.5-0.5b")
"""Catalogue configs: multi-head attention with a 32K vocabulary, GQA with 128K, a 0.5B model with 152K."""
TOKENS = (512, 2048, 8192)
LOGITS = ("last", "all")


def _config(key: str) -> dict:
    cfg = json.loads((ROOT / "vramlib" / "data" / "hf_configs" / f"{key}.json").read_text())
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


def measure_model(key: str) -> list[dict]:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType
    from transformers import AutoModelForCausalLM

    from _offline import language_model_config

    import _fake_cuda

    _fake_cuda.as_eager_masks()          # the masks a real run builds (no packed-sequence guess on fake tensors)
    rows = []
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = AutoModelForCausalLM.from_config(language_model_config(_config(key)), dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
        model.eval()
        for tokens in TOKENS:
            for logits in LOGITS:
                ids = torch.randint(0, model.config.vocab_size, (1, tokens))
                mt = MemTracker()
                mt.track_external(model)
                with mt, torch.no_grad():
                    model(input_ids=ids, use_cache=True, logits_to_keep=1 if logits == "last" else 0)
                peak = mt.get_tracker_snapshot("peak")
                (device, cats), = peak.items()
                by = {ref.value: int(cats.get(ref, 0)) for ref in _MemRefType}
                rows.append({"id": f"prefill/{key}/{tokens}/{logits}", "model": key, "phase": "prefill",
                             "tokens": tokens, "batch": 1, "dtype": "bf16", "attention": "sdpa", "logits": logits,
                             "device": f"fake {device}", "peak_bytes": int(cats["Total"]), "by_category": by})
    return rows


def run(models=MODELS) -> dict:
    data = header("python tools/measure/peaks.py", "fake cpu (FakeTensorMode) under MemTracker",
                  "Ground truth only. peak_bytes = MemTracker's peak total on the fake device: parameters, the "
                  "DynamicCache, the forward's live tensors and the logits; by_category splits it. Inference "
                  "prefill, batch 1, bf16, transformers sdpa (the CPU flash kernel on this device).")
    data["rows"] = [r for key in models for r in measure_model(key)]
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="recompute and compare with the stored file")
    parser.add_argument("--quick", action="store_true", help="the 0.5B model only, compared; writes nothing")
    args = parser.parse_args(argv)
    data = run(("qwen2.5-0.5b",) if args.quick else MODELS)
    if args.check or args.quick:
        stored = {r["id"]: r["peak_bytes"] for r in json.loads(args.output.read_text())["rows"]
                  if not args.quick or r["model"] == "qwen2.5-0.5b"}
        got = {r["id"]: r["peak_bytes"] for r in data["rows"]}
        diff = sorted(k for k in got.keys() | stored.keys() if got.get(k) != stored.get(k))
        print("peaks: " + ("differs: " + ", ".join(diff) if diff else f"{len(got)} rows reproduce"))
        return 1 if diff else 0
    write_json(args.output, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
