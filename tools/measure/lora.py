"""LoRA with peft: trainable parameters against ``vramlib.lora_params``, and the bytes a LoRA step saves for backward.

Nothing is downloaded (``HF_HUB_OFFLINE=1``). Two parts:

* ``params``: tiny random models of every family (Llama MHA/GQA/MQA, Mistral, Qwen2 with biases, Gemma-2,
  Phi-3 with fused ``qkv_proj`` / ``gate_up_proj``, Mixtral) with ``peft.LoraConfig(r, target_modules)``
  for r in {8, 16, 64} and the target sets ``all-linear`` (peft's own resolution), ``attention`` and ``qv``
  (the module names ``vramlib.memory.training.lora_modules`` gives); and every catalogue model at its real shape on
  the ``meta`` device with r = 16, ``all-linear``. The count is ``sum(p.numel())`` over parameters with
  ``requires_grad``.
* ``saved``: the bytes autograd saves for backward in one LoRA training step (frozen base, adapters on,
  ``lora_dropout=0``), measured with the hooks of ``tools/measure/saved_tensors.py`` (storages counted once,
  parameters excluded), against ``activation_bytes(style="hf")``, which models full fine-tuning. With full
  recomputation the model calls ``enable_input_require_grads()``, as the Hugging Face Trainer does for PEFT
  models with gradient checkpointing.

Usage::

    python tools/measure/lora.py            # measure all, rewrite vramlib/data/measured/lora.json
    python tools/measure/lora.py --check    # re-measure, exit 1 if the stored JSON or vramlib's counts differ
    python tools/measure/lora.py --quick    # tiny models only, a few configurations (< 30 s), print only
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import platform
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _offline import ROOT, write_json  # noqa: E402  (Hugging Face offline before transformers loads)

import peft  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import vramlib as vl  # noqa: E402
from vramlib.memory.training import lora_modules  # noqa: E402


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KV = _load("kv_cache")          # tiny configs, catalogue configs
ST = _load("saved_tensors")     # saved-tensor hooks and the activation shapes

OUTPUT = ROOT / "vramlib" / "data" / "measured" / "lora.json"
COMMAND = "python tools/measure/lora.py"
RANKS = (8, 16, 64)
TARGETS = ("all-linear", "attention", "qv")
PARAM_FAMILIES = ("llama-mha", "llama-gqa", "llama-mqa", "mistral", "qwen2", "gemma2", "phi3", "mixtral")
CATALOGUE_RANK = 16

SAVED_SHAPES = ("llama-a", "llama-gqa", "mistral", "qwen2-bias", "gemma2", "phi3-fused", "mixtral-moe")
SAVED_VARIANTS = [("bf16", "sdpa", "none", "all-linear", "base"), ("bf16", "sdpa", "none", "qv", "base"),
                  ("fp32", "eager", "none", "all-linear", "base"), ("bf16", "sdpa", "full", "all-linear", "base"),
                  ("bf16", "sdpa", "none", "all-linear", "fp32"), ("bf16", "sdpa", "none", "all-linear", "fp32-autocast")]
"""(dtype, attention, recompute, targets, adapters): adapters "base" = cast to the base model's dtype;
"fp32" = peft's default for a 16-bit base (autocast_adapter_dtype=True: fp32 adapters, each adapted input cast to
fp32); "fp32-autocast" = the same under torch.autocast(bf16), as the Hugging Face Trainer runs with bf16=True."""
SAVED_RANK = 8
QUICK_SAVED = [("llama-a", "bf16", "sdpa", "none", "all-linear", "base"),
               ("llama-a", "bf16", "sdpa", "none", "qv", "base")]

warnings.filterwarnings("ignore")


def peft_targets(spec: vl.ModelSpec, targets: str):
    """What to pass peft: its own 'all-linear' resolution, or the module names vramlib uses."""
    return "all-linear" if targets == "all-linear" else lora_modules(spec, targets)


def trainable(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def adapted_modules(model) -> list[str]:
    names = set()
    for name, _ in model.named_modules():
        if name.endswith(".lora_A"):
            parts = name.split(".")[:-1]
            names.add(parts[-1] if parts[-1] != "base_layer" else parts[-2] + ".base_layer")
    return sorted(names)


# --------------------------------------------------------------------------------------------------
# trainable parameters
# --------------------------------------------------------------------------------------------------


def tiny_param_rows(name: str, quick: bool = False) -> list[dict]:
    _, mt, kw = next(t for t in KV.TINY if t[0] == name)
    config = KV.tiny_config(mt, kw)
    spec = vl.ModelSpec.from_hf_config({"model_type": mt, **{**KV._COMMON, **kw}}, name=name)
    rows = []
    for targets in TARGETS:
        try:
            tm = peft_targets(spec, targets)
        except vl.VramlibError as e:  # e.g. 'qv' on a fused q|k|v projection
            rows.append({"id": f"params/{name}/{targets}", "part": "params", "model": name, "targets": targets,
                         "skipped": str(e)})
            continue
        for r in (RANKS[:1] if quick else RANKS):
            torch.manual_seed(0)
            model = get_peft_model(AutoModelForCausalLM.from_config(config),
                                   LoraConfig(r=r, target_modules=tm, lora_dropout=0.0))
            rows.append({"id": f"params/{name}/{targets}/r{r}", "part": "params", "model": name, "family": mt,
                         "hf_config": {"model_type": mt, **KV._COMMON, **kw},
                         "targets": targets, "rank": r, "params": trainable(model),
                         "predicted": vl.lora_params(spec, r, targets), "modules": adapted_modules(model),
                         "device": "cpu"})
    return rows


def catalogue_param_row(key: str) -> dict:
    config = KV.catalogue_config(key)
    with torch.device("meta"):
        base = AutoModelForCausalLM.from_config(config)
    model = get_peft_model(base, LoraConfig(r=CATALOGUE_RANK, target_modules="all-linear", lora_dropout=0.0))
    return {"id": f"catalogue/{key}", "part": "catalogue", "model": key, "targets": "all-linear",
            "rank": CATALOGUE_RANK, "params": trainable(model),
            "predicted": vl.lora_params(key, CATALOGUE_RANK, "all-linear"), "modules": adapted_modules(model),
            "device": "meta"}


# --------------------------------------------------------------------------------------------------
# saved for backward
# --------------------------------------------------------------------------------------------------


def saved_config(shape: str, dtype: str, attention: str, recompute: str, targets: str, adapters: str) -> dict:
    cfg = dict(ST.SHAPES[shape], shape=shape, dtype=dtype, attention=attention, recompute=recompute,
               targets=targets, adapters=adapters, rank=SAVED_RANK)
    cfg.setdefault("head_dim", cfg["hidden"] // cfg["heads"])
    return cfg


def saved_id(cfg: dict) -> str:
    return (f"saved/{cfg['shape']}/{cfg['dtype']}/{cfg['attention']}/{cfg['recompute']}/{cfg['targets']}"
            f"/{cfg['adapters']}")


def measure_saved(cfg: dict) -> dict:
    """One LoRA training step under the saved-tensor hooks: per-layer bytes and the peak over the step."""
    base = ST.build(dict(cfg, recompute="none" if cfg["recompute"] == "full" else cfg["recompute"]))
    spec = ST.spec_for(cfg)
    model = get_peft_model(base, LoraConfig(r=cfg["rank"], target_modules=peft_targets(spec, cfg["targets"]),
                                            lora_dropout=0.0), autocast_adapter_dtype=cfg["adapters"] != "base")
    if cfg["adapters"] == "base":
        model.to(ST.DTYPES[cfg["dtype"]])
    model.train()
    autocast = (torch.autocast("cpu", dtype=ST.DTYPES[cfg["dtype"]]) if cfg["adapters"] == "fp32-autocast"
                else contextlib.nullcontext())
    if cfg["recompute"] == "full":
        base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": True})
        base.enable_input_require_grads()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    tracker = ST._Tracker(params)
    layers = base.model.layers
    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda m, a, i=i: setattr(tracker, "scope", f"layer{i}"))
        layer.register_forward_hook(lambda m, a, o: setattr(tracker, "scope", "outside"))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=g)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: ST._Held(t, tracker), lambda h: h.t):
        with autocast:
            out = model(input_ids=ids, labels=ids, use_cache=False)
        loss = out.loss
        del out
        forward_end = tracker.live
        tracker.scope = "backward"
        loss.backward()
    del loss
    lora_grads = sum(1 for n, p in model.named_parameters() if "lora_" in n and p.grad is not None)
    per_layer = [sum(tracker.by_scope.get(f"layer{i}", {}).values()) for i in range(len(layers))]
    return {"layer_each": per_layer, "layer": max(per_layer), "model_forward_end": forward_end,
            "model": tracker.peak, "adapters_with_grad": lora_grads}


def saved_rows(picks) -> list[dict]:
    rows = []
    for shape, dtype, attention, recompute, targets, adapters in picks:
        cfg = saved_config(shape, dtype, attention, recompute, targets, adapters)
        try:
            peft_targets(ST.spec_for(cfg), targets)
        except vl.VramlibError:
            continue  # 'qv' on a fused q|k|v projection
        t0 = time.perf_counter()
        m = measure_saved(cfg)
        spec = ST.spec_for(cfg)
        kw = dict(seq=cfg["seq"], batch=cfg["batch"], dtype=dtype, attention=attention, recompute=recompute)
        config = {k: cfg[k] for k in ("family", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "layers",
                                      "batch", "seq", "experts", "top_k", "dtype", "attention", "recompute",
                                      "targets", "adapters", "rank") if k in cfg}
        for scope in ("layer", "model"):
            full_ft = vl.activation_bytes(spec, scope=scope, **kw)
            rows.append({"id": f"{saved_id(cfg)}/{scope}", "part": "saved", "shape": shape, "scope": scope,
                         "config": config, "bytes": m[scope], "full_finetune_predicted": full_ft,
                         "full_finetune_measured": _stored_full(shape, dtype, attention, recompute, scope),
                         "adapters_with_grad": m["adapters_with_grad"],
                         **({"layer_each": m["layer_each"]} if scope == "layer" else
                            {"forward_end_bytes": m["model_forward_end"]})})
        print(f"{saved_id(cfg):52s} layer {m['layer']:>9,d}  model {m['model']:>10,d}  "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return rows


_STORED = None


def _stored_full(shape, dtype, attention, recompute, scope):
    """The full fine-tuning measurement of the same configuration (saved_bytes.json), if stored."""
    global _STORED
    if _STORED is None:
        _STORED = {r["id"]: r["bytes"] for r in json.loads(ST.OUTPUT.read_text())["rows"]}
    return _STORED.get(f"{shape}/{dtype}/{attention}/{recompute}/{scope}")


# --------------------------------------------------------------------------------------------------


def measure_all(quick: bool = False) -> list[dict]:
    rows = []
    for name in PARAM_FAMILIES:
        rows.extend(tiny_param_rows(name, quick=quick))
    if not quick:
        for key in vl.model_names():
            if not vl.get_model(key).gated_mlp and key.startswith("source-"):
                continue  # GPT-3-like nominal shape: GPT-2's fused c_attn is not the separate q/k/v vramlib counts
            t0 = time.perf_counter()
            rows.append(catalogue_param_row(key))
            print(f"catalogue {key:16s} ({time.perf_counter() - t0:.1f} s)", flush=True)
    picks = QUICK_SAVED if quick else [(s, *v) for s in SAVED_SHAPES for v in SAVED_VARIANTS
                                       if not (s == "gemma2" and v[1] == "sdpa")]
    if not quick:  # Gemma-2 has no SDPA path: its variants use eager attention
        picks += [("gemma2", "bf16", "eager", "none", "all-linear", "base"),
                  ("gemma2", "bf16", "eager", "none", "qv", "base"),
                  ("gemma2", "bf16", "eager", "full", "all-linear", "base"),
                  ("gemma2", "bf16", "eager", "none", "all-linear", "fp32")]
    rows.extend(saved_rows(picks))
    return rows


def param_mismatches(rows: list[dict]) -> list[str]:
    return [f"{r['id']}: peft {r['params']:,d}, vramlib {r['predicted']:,d}" for r in rows
            if r["part"] in ("params", "catalogue") and "params" in r and r["params"] != r["predicted"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="re-measure; exit 1 if the stored JSON differs")
    parser.add_argument("--quick", action="store_true", help="tiny models, a few configurations; print only")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    t0 = time.perf_counter()
    rows = measure_all(quick=args.quick)
    print(f"measured {len(rows)} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    for line in param_mismatches(rows):
        print("DIFFERS (documented, see the JSON note): " + line, file=sys.stderr)
    if args.quick:
        return 0
    if args.check:
        stored = {r["id"]: r.get("params", r.get("bytes")) for r in json.loads(OUTPUT.read_text())["rows"]}
        drift = [r["id"] for r in rows if stored.get(r["id"]) != r.get("params", r.get("bytes"))]
        for line in drift:
            print("STORED DIFFERS: " + line, file=sys.stderr)
        return 1 if drift else 0
    out = {
        "command": COMMAND, "torch": torch.__version__, "transformers": transformers.__version__,
        "peft": peft.__version__, "python": platform.python_version(),
        "device": "cpu (tiny, saved) and meta (catalogue)",
        "note": ("params: sum of numel over parameters with requires_grad after peft.get_peft_model(LoraConfig(r, "
                 "target_modules, lora_dropout=0)); predicted = vramlib.lora_params. saved: bytes of the storages "
                 "autograd saves in one LoRA training step (frozen base), parameters excluded, as "
                 "tools/measure/saved_tensors.py; full_finetune_predicted = activation_bytes(style='hf') (full "
                 "fine-tuning), full_finetune_measured = the same configuration in saved_bytes.json."),
        "rows": rows,
    }
    write_json(OUTPUT, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
