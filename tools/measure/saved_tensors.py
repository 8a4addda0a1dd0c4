"""Measure the bytes PyTorch autograd saves for backward in tiny Hugging Face decoder models.

Every configuration builds a small random model from a config (no download,
``HF_HUB_OFFLINE=1``), runs one training forward with ``labels`` (so the loss
is part of the graph) under :func:`torch.autograd.graph.saved_tensors_hooks`,
then runs backward. The pack hook sees every tensor an autograd node saves;
it counts each *storage* once (``untyped_storage().data_ptr()``), skips the
storages of model parameters, and tracks which storages are still held by a
saved tensor as the backward frees them.

Three numbers come out of each run:

* ``layer``: the storages saved while one decoder layer ran its forward (one
  layer's own de-duplication; every layer gives the same number, checked);
* ``model_forward_end``: everything saved when the forward has finished;
* ``model``: the peak of the saved bytes over forward *and* backward. Without
  recomputation it equals ``model_forward_end``; with full recomputation
  (gradient checkpointing) the backward re-runs one layer's forward and saves
  its activations again, which is the peak the book reports. To see that
  recomputation through the hooks the measurement uses
  ``use_reentrant=True`` (its re-run forward saves through the default
  hooks); transformers' default non-reentrant checkpoint keeps exactly the
  same tensors (``--check`` compares the forward-end bytes of both).

``recompute="selective"`` wraps the attention core (the
``attn_implementation`` function: QK^T, softmax, attention over V) in a
non-reentrant ``torch.utils.checkpoint``: only its inputs q, k, v are kept
and the score matrices, softmax statistics and the kernel's own saves are
recomputed in backward (Korthikanti et al. 2022, section 5, applied to a HF
layer).

The results go to ``vramlib/data/measured/saved_bytes.json``; the
predictions are :func:`vramlib.memory.activations.activation_bytes` with
``style="hf"``.

Usage::

    python tools/measure/saved_tensors.py            # measure all, rewrite the JSON
    python tools/measure/saved_tensors.py --check    # re-measure, exit 1 if a prediction misses
    python tools/measure/saved_tensors.py --quick    # a few tiny shapes (< 20 s), print only
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _offline import ROOT, write_json  # noqa: E402  (Hugging Face offline before transformers loads)

import torch  # noqa: E402
import transformers  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS  # noqa: E402
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # noqa: E402

OUTPUT = ROOT / "vramlib" / "data" / "measured" / "saved_bytes.json"
COMMAND = "python tools/measure/saved_tensors.py"
TOLERANCE = {"median": 0.05, "max": 0.10}
"""A prediction may miss a measurement by this much (relative); the library aims for exact."""

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}

# ---------------------------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------------------------
# A shape: family + the config fields that matter. Every shape is measured under several
# (dtype, attention, recompute) variants; "model" and "layer" scope come from the same run.

SHAPES: dict[str, dict] = {
    "llama-a": dict(family="llama", hidden=64, heads=4, kv_heads=4, ffn=96, vocab=128, layers=2, batch=2, seq=16),
    "llama-gqa": dict(family="llama", hidden=128, heads=8, kv_heads=2, ffn=320, vocab=500, layers=3, batch=1, seq=48),
    "llama-mqa-long": dict(family="llama", hidden=96, heads=6, kv_heads=1, ffn=256, vocab=300, layers=2, batch=3, seq=96),
    "llama-wide-head": dict(family="llama", hidden=64, heads=2, kv_heads=2, head_dim=48, ffn=200, vocab=1000,
                            layers=2, batch=2, seq=40),
    "mistral": dict(family="mistral", hidden=128, heads=4, kv_heads=2, ffn=352, vocab=640, layers=2, batch=2, seq=64),
    "qwen2-bias": dict(family="qwen2", hidden=96, heads=6, kv_heads=2, ffn=224, vocab=700, layers=2, batch=2, seq=32),
    "gemma2": dict(family="gemma2", hidden=96, heads=4, kv_heads=2, head_dim=32, ffn=256, vocab=512, layers=2,
                   batch=2, seq=24),
    "phi3-fused": dict(family="phi3", hidden=128, heads=8, kv_heads=4, ffn=320, vocab=400, layers=2, batch=2, seq=32),
    "mixtral-moe": dict(family="mixtral", hidden=64, heads=4, kv_heads=2, ffn=128, vocab=256, layers=2, batch=2,
                        seq=24, experts=4, top_k=2),
    "qwen3-qknorm": dict(family="qwen3", hidden=128, heads=8, kv_heads=2, head_dim=16, ffn=320, vocab=500, layers=3,
                         batch=1, seq=48),
    "qwen3-wide-head": dict(family="qwen3", hidden=96, heads=3, kv_heads=1, head_dim=64, ffn=256, vocab=300, layers=2,
                            batch=2, seq=40),
    "qwen3-moe": dict(family="qwen3_moe", hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=256, layers=2,
                      batch=2, seq=24, experts=4, top_k=2),
    "qwen3-moe-wide": dict(family="qwen3_moe", hidden=96, heads=6, kv_heads=2, head_dim=16, ffn=160, vocab=300,
                           layers=3, batch=1, seq=40, experts=8, top_k=4),
}

# (dtype, attention, recompute) variants per shape
FULL_VARIANTS = [
    ("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("fp32", "sdpa", "none"), ("fp32", "eager", "none"),
    ("bf16", "sdpa", "full"), ("bf16", "eager", "full"), ("bf16", "eager", "selective"), ("fp32", "sdpa", "full"),
]
SHAPE_VARIANTS: dict[str, list] = {
    "llama-a": FULL_VARIANTS + [("fp32", "eager", "selective"), ("bf16", "sdpa", "selective"), ("fp16", "sdpa", "none")],
    "llama-gqa": FULL_VARIANTS + [("bf16", "sdpa", "selective")],
    "llama-mqa-long": [("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("bf16", "sdpa", "full"),
                       ("fp32", "eager", "none")],
    "llama-wide-head": [("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("fp32", "sdpa", "none")],
    "mistral": [("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("bf16", "sdpa", "full")],
    "qwen2-bias": [("bf16", "sdpa", "none"), ("fp32", "eager", "none"), ("bf16", "eager", "full")],
    # Gemma-2 has no SDPA path in transformers (_supports_sdpa = False: SDPA cannot softcap).
    "gemma2": [("bf16", "eager", "none"), ("fp32", "eager", "none"), ("bf16", "eager", "full"),
               ("bf16", "eager", "selective")],
    "phi3-fused": [("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("fp32", "sdpa", "none"),
                   ("bf16", "sdpa", "selective"), ("bf16", "sdpa", "full")],
    "mixtral-moe": [("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("fp32", "sdpa", "none"),
                    ("bf16", "sdpa", "full")],
    "qwen3-qknorm": FULL_VARIANTS + [("bf16", "sdpa", "selective"), ("fp16", "sdpa", "none")],
    "qwen3-wide-head": [("bf16", "sdpa", "none"), ("fp32", "eager", "none"), ("bf16", "eager", "selective"),
                        ("bf16", "sdpa", "full")],
    "qwen3-moe": [("bf16", "sdpa", "none"), ("bf16", "eager", "none"), ("fp32", "sdpa", "none"),
                  ("bf16", "sdpa", "full"), ("bf16", "eager", "selective")],
    "qwen3-moe-wide": [("bf16", "sdpa", "none"), ("fp32", "eager", "none"), ("bf16", "sdpa", "full")],
}
QUICK = [("llama-a", "bf16", "sdpa", "none"), ("llama-a", "fp32", "eager", "none"),
         ("llama-a", "bf16", "eager", "selective"), ("llama-a", "bf16", "sdpa", "full"),
         ("phi3-fused", "bf16", "sdpa", "none")]


def all_configs(quick: bool = False) -> list[dict]:
    if quick:
        picks = QUICK
    else:
        picks = [(name, *v) for name, variants in SHAPE_VARIANTS.items() for v in variants]
    out = []
    for name, dtype, attention, recompute in picks:
        cfg = dict(SHAPES[name], shape=name, dtype=dtype, attention=attention, recompute=recompute)
        cfg.setdefault("head_dim", cfg["hidden"] // cfg["heads"])
        out.append(cfg)
    return out


def config_id(cfg: dict) -> str:
    return f"{cfg['shape']}/{cfg['dtype']}/{cfg['attention']}/{cfg['recompute']}"


# ---------------------------------------------------------------------------------------------
# building models
# ---------------------------------------------------------------------------------------------

def hf_config(cfg: dict):
    fam = cfg["family"]
    kw = dict(hidden_size=cfg["hidden"], intermediate_size=cfg["ffn"], num_hidden_layers=cfg["layers"],
              num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"], head_dim=cfg["head_dim"],
              vocab_size=cfg["vocab"], max_position_embeddings=max(256, 2 * cfg["seq"]),
              pad_token_id=None, bos_token_id=None, eos_token_id=None, tie_word_embeddings=False)
    if fam in ("qwen2", "qwen3", "qwen3_moe"):
        kw.update(use_sliding_window=False)
    if fam == "qwen3_moe":  # every layer sparse, top-k weights renormalised as Qwen3-30B-A3B ships
        kw.update(moe_intermediate_size=cfg["ffn"], num_experts=cfg["experts"], num_experts_per_tok=cfg["top_k"],
                  norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
    if fam == "mistral":
        # a window shorter than the sequence makes transformers build a mask, which SDPA then keeps (not modelled)
        kw.update(sliding_window=None)
    if fam == "gemma2":
        kw.update(query_pre_attn_scalar=cfg["head_dim"], sliding_window=4096,
                  attn_logit_softcapping=50.0, final_logit_softcapping=30.0, tie_word_embeddings=True)
    if fam == "phi3":
        kw.pop("head_dim")
    if fam == "mixtral":
        kw.update(num_local_experts=cfg["experts"], num_experts_per_tok=cfg["top_k"], sliding_window=None,
                  router_jitter_noise=0.0)
    return AutoConfig.for_model(fam, **kw)


def _selective_name(base: str) -> str:
    name = f"vramlib_selective_{base}"
    if name not in ALL_ATTENTION_FUNCTIONS:
        inner = ALL_ATTENTION_FUNCTIONS.get_interface(base, None) if base != "eager" else None

        def selective(module, query, key, value, attention_mask, **kwargs):
            fn = inner if inner is not None else _eager_for(module)

            def core(q, k, v):
                out, _ = fn(module, q, k, v, attention_mask, **kwargs)
                return out
            # Only q, k, v are checkpoint inputs; the shared mask is captured (it is built once per forward).
            # Reentrant, so that the backward's re-run saves through the measuring hooks.
            return checkpoint(core, query, key, value, use_reentrant=True), None
        ALL_ATTENTION_FUNCTIONS.register(name, selective)
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])  # the base kernel's mask
    return name


def _eager_for(module):
    mod = sys.modules[type(module).__module__]
    return mod.eager_attention_forward


def build(cfg: dict):
    torch.manual_seed(0)
    config = hf_config(cfg)
    attn = cfg["attention"]
    if cfg["recompute"] == "selective":
        attn = _selective_name(attn)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    model = model.to(DTYPES[cfg["dtype"]])
    model.train()
    if cfg["recompute"] == "full":
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": cfg.get("reentrant", True)})
    return model


# ---------------------------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------------------------

class _Tracker:
    """Counts the bytes of storages held by saved tensors (parameters excluded), with the peak."""

    def __init__(self, param_ptrs: set[int]):
        self.param_ptrs = param_ptrs
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.live = 0
        self.peak = 0
        self.scope = "outside"
        self.by_scope: dict[str, dict[int, int]] = {}

    def add(self, t: torch.Tensor):
        st = t.untyped_storage()
        ptr, nbytes = st.data_ptr(), st.nbytes()
        if ptr in self.param_ptrs or nbytes == 0:
            return None
        self.by_scope.setdefault(self.scope, {})[ptr] = nbytes
        if self.refs.get(ptr, 0) == 0:
            self.refs[ptr] = 0
            self.sizes[ptr] = nbytes
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        self.refs[ptr] += 1
        return ptr

    def release(self, ptr: int):
        self.refs[ptr] -= 1
        if self.refs[ptr] == 0:
            self.live -= self.sizes.pop(ptr)
            del self.refs[ptr]


class _Held:
    __slots__ = ("t", "ptr", "tracker")

    def __init__(self, t, tracker):
        self.t, self.tracker = t, tracker
        self.ptr = tracker.add(t)

    def __del__(self):
        if self.ptr is not None:
            self.tracker.release(self.ptr)


def measure(cfg: dict, forward_only: bool = False) -> dict:
    model = build(cfg)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    tracker = _Tracker(params)
    layers = model.model.layers
    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda m, a, i=i: setattr(tracker, "scope", f"layer{i}"))
        layer.register_forward_hook(lambda m, a, o: setattr(tracker, "scope", "outside"))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=g)

    def pack(t):
        return _Held(t, tracker)

    def unpack(h):
        return h.t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = model(input_ids=ids, labels=ids, use_cache=False)
        loss = out.loss
        del out
        forward_end = tracker.live
        tracker.scope = "backward"
        if not forward_only:
            loss.backward()
    del loss
    per_layer = [sum(tracker.by_scope.get(f"layer{i}", {}).values()) for i in range(len(layers))]
    result = {"layer_each": per_layer, "layer": max(per_layer), "model_forward_end": forward_end,
              "model": tracker.peak}
    if cfg["recompute"] == "full" and cfg.get("reentrant", True):
        # transformers' default checkpoint (non-reentrant) must keep the same tensors after the forward
        result["model_forward_end_default_checkpoint"] = measure(dict(cfg, reentrant=False),
                                                                 forward_only=True)["model_forward_end"]
    return result


# ---------------------------------------------------------------------------------------------
# predictions and the JSON
# ---------------------------------------------------------------------------------------------

def spec_for(cfg: dict):
    from vramlib.explain.validation import saved_spec
    return saved_spec(cfg, cfg["shape"])


def predict(cfg: dict, scope: str) -> int:
    from vramlib.memory.activations import activation_bytes
    return activation_bytes(spec_for(cfg), seq=cfg["seq"], batch=cfg["batch"], dtype=cfg["dtype"],
                            attention=cfg["attention"], recompute=cfg["recompute"], style="hf", scope=scope)


def rows_for(cfg: dict, m: dict) -> list[dict]:
    keys = ("family", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "layers", "batch", "seq",
            "experts", "top_k", "dtype", "attention", "recompute")
    config = {k: cfg[k] for k in keys if k in cfg}
    out = []
    for scope in ("layer", "model"):
        row = {"id": f"{config_id(cfg)}/{scope}", "shape": cfg["shape"], "scope": scope, "config": config,
               "bytes": m[scope], "torch": torch.__version__, "transformers": transformers.__version__}
        if scope == "layer":
            row["layer_each"] = m["layer_each"]
        else:
            row["forward_end_bytes"] = m["model_forward_end"]
            if "model_forward_end_default_checkpoint" in m:
                row["forward_end_bytes_non_reentrant"] = m["model_forward_end_default_checkpoint"]
        out.append(row)
    return out


def compare(rows: list[dict]) -> tuple[list[str], list[float]]:
    lines, errors = [], []
    for row in rows:
        cfg = dict(row["config"], shape=row["shape"])
        try:
            pred = predict(cfg, row["scope"])
        except Exception as e:  # noqa: BLE001 (report, do not hide)
            lines.append(f"{row['id']:48s} measured {row['bytes']:>12,d}  prediction failed: {e}")
            errors.append(float("inf"))
            continue
        err = abs(pred - row["bytes"]) / row["bytes"]
        errors.append(err)
        lines.append(f"{row['id']:48s} measured {row['bytes']:>12,d}  predicted {pred:>12,d}  error {100 * err:6.2f}%")
    return lines, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="re-measure and exit 1 if activation_bytes(style='hf') misses beyond the tolerance")
    parser.add_argument("--quick", action="store_true", help="only a few tiny shapes (< 20 s); does not write")
    parser.add_argument("--only", action="append", metavar="SHAPE",
                        help="measure one shape (repeatable); compares, does not write")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))

    configs = all_configs(quick=args.quick)
    if args.only:
        configs = [c for c in configs if c["shape"] in args.only]
    start = time.perf_counter()
    rows, problems = [], []
    for cfg in configs:
        t0 = time.perf_counter()
        m = measure(cfg)
        if len(set(m["layer_each"])) != 1:
            problems.append(f"{config_id(cfg)}: layers differ {m['layer_each']}")
        fe = m.get("model_forward_end_default_checkpoint")
        if fe is not None and fe != m["model_forward_end"]:
            problems.append(f"{config_id(cfg)}: non-reentrant checkpoint keeps {fe:,d} B, reentrant "
                            f"{m['model_forward_end']:,d} B after the forward")
        rows.extend(rows_for(cfg, m))
        print(f"{config_id(cfg):40s} layer {m['layer']:>10,d}  model {m['model']:>11,d}"
              f"  ({time.perf_counter() - t0:.2f} s)", flush=True)
    elapsed = time.perf_counter() - start
    print(f"measured {len(configs)} configuration(s), {len(rows)} rows in {elapsed:.1f} s", file=sys.stderr)

    lines, errors = compare(rows)
    for line in lines:
        print(line)
    med, worst = statistics.median(errors), max(errors)
    print(f"relative error: median {100 * med:.3f}%, max {100 * worst:.3f}%", file=sys.stderr)
    ok = med <= TOLERANCE["median"] and worst <= TOLERANCE["max"] and not problems
    for line in problems:
        print("PROBLEM: " + line, file=sys.stderr)
    if args.check or args.quick or args.only:
        if not ok:
            print("CHECK FAILED: predictions miss the measurements beyond the tolerance", file=sys.stderr)
        return 0 if ok else 1

    out = {
        "command": COMMAND,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": "cpu",
        "python": platform.python_version(),
        "tolerance": TOLERANCE,
        "note": ("bytes of the storages autograd saves for backward (saved_tensors_hooks), each storage once, "
                 "model parameters excluded. scope 'layer': one decoder layer's forward; scope 'model': the "
                 "peak over forward and backward of a whole causal-LM training step with labels (loss included)."),
        "rows": rows,
    }
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUTPUT, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
