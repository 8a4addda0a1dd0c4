"""GPU memory as the CUDA caching allocator reports it, against vramlib: context, inference, one training step.

Run it on a CUDA machine; on a machine without CUDA it prints the plan (every measurement and vramlib's
prediction for it) and exits 0 without writing anything, so the script is checked before a GPU is spent.

What it measures (models are real-shaped but cut to a few layers, random weights built on the GPU, nothing
downloaded):

1. **CUDA context**: ``nvidia-smi``'s used memory (and ``torch.cuda.mem_get_info``) before and after the first
   CUDA call, minus what PyTorch's allocator holds: the memory that is neither weights nor tensors.
2. **Inference**: Llama-2-7B's shape with ``INFER_LAYERS`` layers in bf16, SDPA: the weights
   (``memory_allocated`` after loading) against ``weights_bytes``; for several prompt lengths a prefill with
   ``use_cache=True`` and ``logits_to_keep=1`` (as ``generate`` does): the KV cache held afterwards against
   ``kv_cache_bytes``, and the peak above weights + cache (``max_memory_allocated``) against
   ``prefill_workspace_bytes``; ``memory_reserved`` too.
3. **Training step**: the same shape with ``TRAIN_LAYERS`` layers, one forward/backward/AdamW step, in
   (a) pure bf16 (bf16 parameters, ``torch.optim.AdamW``) and (b) fp32 parameters under ``torch.autocast``
   (bf16), each with and without gradient checkpointing: memory after the forward (the saved activations)
   against ``activation_bytes(style="hf", scope="model")``, the step's peak, and the optimizer state.

Usage::

    python tools/measure/cuda_memory.py                 # CUDA: measure, write vramlib/data/measured/cuda_memory.json
    python tools/measure/cuda_memory.py --plan          # print the plan and vramlib's predictions (any machine)
    python tools/measure/cuda_memory.py --simulate-cpu  # run every step on the CPU at a tiny size (no memory figures)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _offline import ROOT  # noqa: E402  (Hugging Face offline before transformers loads)

import vramlib as vl  # noqa: E402

OUTPUT = ROOT / "vramlib" / "data" / "measured" / "cuda_memory.json"
COMMAND = "python tools/measure/cuda_memory.py"
OPTIMIZER_JSON = ROOT / "vramlib" / "data" / "measured" / "optimizer.json"
BASE_MODEL = "llama-2-7b"
INFER_LAYERS = 4
INFER_TOKENS = (512, 2048, 8192)
TRAIN_LAYERS = 2
TRAIN_SEQ = 2048
TRAIN_SETUPS = (("bf16", "none"), ("bf16", "full"), ("autocast", "none"), ("autocast", "full"))
"""(precision, recompute): "bf16" = bf16 parameters and AdamW states; "autocast" = fp32 parameters, bf16 compute."""


def cut(layers: int, simulate: bool = False) -> vl.ModelSpec:
    """The base model's shape with fewer layers (tiny widths when simulating on the CPU)."""
    m = vl.get_model(BASE_MODEL)
    if simulate:
        return m.with_(name=f"{BASE_MODEL}-sim-{layers}L", n_layers=layers, hidden=128, n_heads=4, n_kv_heads=4,
                       head_dim=32, ffn=256, vocab=512)
    return m.with_(name=f"{BASE_MODEL}-{layers}L", n_layers=layers)


def plan(simulate: bool = False) -> dict:
    """Every planned measurement with vramlib's prediction (computable anywhere)."""
    inf, tr = cut(INFER_LAYERS, simulate), cut(TRAIN_LAYERS, simulate)
    tokens = (64, 128) if simulate else INFER_TOKENS
    seq = 64 if simulate else TRAIN_SEQ
    out = {"inference": {"model": inf.name, "layers": inf.n_layers, "weights_predicted": vl.weights_bytes(inf, "bf16"),
                         "runs": []},
           "training": {"model": tr.name, "layers": tr.n_layers, "seq": seq, "runs": []}}
    for t in tokens:
        out["inference"]["runs"].append({
            "tokens": t, "kv_predicted": vl.kv_cache_bytes(inf, t, dtype="bf16"),
            "workspace_predicted": vl.prefill_workspace_bytes(inf, t, dtype="bf16", attention="sdpa")})
    cpu = {r["setup"]: r["total_per_param"] for r in json.loads(OPTIMIZER_JSON.read_text())["rows"]}
    for precision, recompute in TRAIN_SETUPS:
        out["training"]["runs"].append({
            "precision": precision, "recompute": recompute,
            "activations_predicted": vl.activation_bytes(tr, seq, dtype="bf16", attention="sdpa",
                                                         recompute=recompute, scope="model"),
            "model_states_bytes_per_param_cpu": cpu[precision], "params": tr.n_params})
    return out


# --------------------------------------------------------------------------------------------------
# measuring (CUDA, or the CPU in simulation)
# --------------------------------------------------------------------------------------------------


class Mem:
    """Allocator readings; on the CPU (simulation) every reading is None."""

    def __init__(self, torch, cuda: bool):
        self.t, self.cuda = torch, cuda

    def sync(self):
        if self.cuda:
            self.t.cuda.synchronize()

    def allocated(self):
        self.sync()
        return self.t.cuda.memory_allocated() if self.cuda else None

    def reserved(self):
        return self.t.cuda.memory_reserved() if self.cuda else None

    def peak(self):
        self.sync()
        return self.t.cuda.max_memory_allocated() if self.cuda else None

    def reset_peak(self):
        if self.cuda:
            self.t.cuda.reset_peak_memory_stats()

    def free(self):
        import gc
        gc.collect()
        if self.cuda:
            self.t.cuda.empty_cache()


def _minus(a, b):
    return None if a is None or b is None else a - b


def nvidia_smi_used_mib() -> int | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    try:
        out = subprocess.run([exe, "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", dev],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return int(out[0]) if out else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def measure_context(torch) -> dict:
    before = nvidia_smi_used_mib()
    t0 = time.perf_counter()
    torch.cuda.init()
    x = torch.zeros(1, device="cuda")  # the first kernel: the context and the allocator exist now
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    after = nvidia_smi_used_mib()
    out = {"nvidia_smi_used_mib_before": before, "nvidia_smi_used_mib_after": after,
           "mem_get_info_free": free, "mem_get_info_total": total, "torch_reserved": torch.cuda.memory_reserved(),
           "torch_allocated": torch.cuda.memory_allocated(), "init_seconds": time.perf_counter() - t0}
    out["context_bytes_nvidia_smi"] = (None if before is None or after is None
                                       else (after - before) * 2**20 - out["torch_reserved"])
    out["non_torch_bytes_mem_get_info"] = total - free - out["torch_reserved"]
    del x
    return out


def _build(torch, spec: vl.ModelSpec, dtype, device: str):
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model("llama", hidden_size=spec.hidden, intermediate_size=spec.ffn,
                                  num_hidden_layers=spec.n_layers, num_attention_heads=spec.n_heads,
                                  num_key_value_heads=spec.n_kv_heads, head_dim=spec.head_dim,
                                  vocab_size=spec.vocab, max_position_embeddings=16384, tie_word_embeddings=False,
                                  pad_token_id=None, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model


def _cache_bytes(cache) -> int:
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


def measure_inference(torch, mem: Mem, device: str, p: dict) -> dict:
    spec = cut(INFER_LAYERS, device == "cpu")
    base = mem.allocated()
    model = _build(torch, spec, torch.bfloat16, device).eval()
    weights = _minus(mem.allocated(), base)
    out = dict(p["inference"], weights_measured=weights, runs=[])
    for run in p["inference"]["runs"]:
        t = run["tokens"]
        ids = torch.randint(0, spec.vocab, (1, t), device=device)
        mem.free()
        before = mem.allocated()
        mem.reset_peak()
        with torch.no_grad():
            res = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        peak = mem.peak()
        cache = res["cache"] if "cache" in res else res["past_key_values"]
        kv_obj = _cache_bytes(cache)
        held = _minus(mem.allocated(), before)
        logits = res["logits"].numel() * res["logits"].element_size()
        out["runs"].append(dict(run, kv_cache_object=kv_obj, held_after_prefill=held, logits_bytes=logits,
                                peak_above_start=_minus(peak, before),
                                workspace_measured=None if peak is None else peak - before - kv_obj,
                                reserved=mem.reserved()))
        del res, cache, ids
    del model
    mem.free()
    return out


def measure_training(torch, mem: Mem, device: str, p: dict) -> dict:
    spec = cut(TRAIN_LAYERS, device == "cpu")
    seq = p["training"]["seq"]
    out = dict(p["training"], runs=[])
    for run in p["training"]["runs"]:
        mem.free()
        start = mem.allocated()
        mem.reset_peak()
        dtype = torch.bfloat16 if run["precision"] == "bf16" else torch.float32
        model = _build(torch, spec, dtype, device)
        model.train()
        if run["recompute"] == "full":
            enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
            enable()
        weights = _minus(mem.allocated(), start)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        ids = torch.randint(0, spec.vocab, (1, seq), device=device)
        autocast = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=run["precision"] == "autocast")
        with autocast:
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        after_fwd = mem.allocated()
        loss.backward()
        after_bwd = mem.allocated()
        peak_fwd_bwd = mem.peak()
        opt.step()
        after_step = mem.allocated()
        peak_step = mem.peak()
        state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
        grads = sum(q.grad.numel() * q.grad.element_size() for q in model.parameters() if q.grad is not None)
        out["runs"].append(dict(run, weights_measured=weights,
                                activations_measured=_minus(after_fwd, None if start is None else start + weights),
                                grads_measured=grads, optimizer_state_measured=state,
                                peak_forward_backward=_minus(peak_fwd_bwd, start), peak_step=_minus(peak_step, start),
                                after_backward=_minus(after_bwd, start), after_step=_minus(after_step, start),
                                reserved=mem.reserved(), loss=float(loss.detach())))
        del model, opt, loss, ids
        mem.free()
    return out


def run(simulate: bool) -> dict:
    import torch
    import transformers
    cuda = torch.cuda.is_available() and not simulate
    device = "cuda" if cuda else "cpu"
    p = plan(simulate=not cuda)
    result = {"command": COMMAND + (" --simulate-cpu" if not cuda else ""), "torch": torch.__version__,
              "transformers": transformers.__version__, "python": platform.python_version(),
              "cuda": torch.version.cuda, "device": device, "errors": {}}
    mem = Mem(torch, cuda)
    if cuda:
        result["context"] = measure_context(torch)
        props = torch.cuda.get_device_properties(0)
        result.update(gpu=torch.cuda.get_device_name(0), gpu_total_memory=props.total_memory,
                      capability=f"{props.major}.{props.minor}")
        smi = shutil.which("nvidia-smi")
        if smi:
            result["driver"] = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                              capture_output=True, text=True).stdout.strip()
    for name, fn in (("inference", measure_inference), ("training", measure_training)):
        try:
            result[name] = fn(torch, mem, device, p)
        except Exception as e:  # keep what was measured; record the failure
            result["errors"][name] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    return result


def print_plan(p: dict) -> None:
    i, t = p["inference"], p["training"]
    print(f"inference: {i['model']} ({i['layers']} layers, bf16, sdpa); weights predicted "
          f"{i['weights_predicted']:,d} B")
    for r in i["runs"]:
        print(f"  prefill {r['tokens']:>6,d} tokens (logits_to_keep=1): KV predicted {r['kv_predicted']:,d} B, "
              f"workspace predicted {r['workspace_predicted']:,d} B")
    print(f"training: {t['model']} ({t['layers']} layers), seq {t['seq']:,d}, batch 1, AdamW")
    for r in t["runs"]:
        print(f"  {r['precision']:8s} recompute {r['recompute']:4s}: activations predicted "
              f"{r['activations_predicted']:,d} B; model states {r['model_states_bytes_per_param_cpu']} B/param "
              f"x {r['params']:,d}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="print the plan and predictions; measure nothing")
    parser.add_argument("--simulate-cpu", action="store_true",
                        help="run every step on the CPU at a tiny size (checks the code; no memory figures)")
    parser.add_argument("--output", default=str(OUTPUT), help="where to write the JSON (CUDA runs only)")
    args = parser.parse_args(argv)
    if args.plan:
        print_plan(plan())
        return 0
    import torch
    if args.simulate_cpu:
        result = run(simulate=True)
        print(json.dumps({k: v for k, v in result.items() if k in ("device", "errors")}, indent=1))
        return 1 if result["errors"] else 0
    if not torch.cuda.is_available():
        print("CUDA is not available: nothing measured, nothing written. The plan a CUDA run would execute:")
        print_plan(plan())
        return 0
    result = run(simulate=False)
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.output}; errors: {list(result['errors']) or 'none'}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
