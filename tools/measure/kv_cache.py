"""Measure the KV cache transformers' cache objects hold, against ``vramlib.kv_cache_bytes``.

Three parts, nothing downloaded (``HF_HUB_OFFLINE=1``):

* ``catalogue``: every catalogue model at its real shape (all layers, real heads and head dim; the
  source's nominal shapes as Llama configs; image-text configs as their language model) built on the
  ``meta`` device, so nothing is allocated. One prefill forward with ``use_cache=True`` (batch 2, 16
  tokens) and one decode step; the bytes are the sum over the cache layers of ``keys`` and ``values``
  and, for Mamba layers, their conv and recurrent states (numel x element size). Models with a sliding
  window (Mistral-7B v0.1, Phi-3-mini, Gemma-2, Gemma-3, GPT-OSS) are measured again past the window:
  transformers keeps only the last ``sliding_window - 1`` tokens on those layers, and so does
  ``kv_cache_bytes``.
* ``config``: for every catalogue model whose layers are all GQA attention, the per-token formula
  2 x L x n_kv x head_dim x bytes read from transformers' config object (``AutoConfig``, no weights),
  against ``kv_bytes_per_token``.
* ``tiny``: small random models of every family on the CPU (Llama MHA/GQA/MQA, Mistral, Qwen2,
  Gemma-2, Phi-3, Mixtral, Falcon multi-query, GPT-NeoX, GPT-2) in bf16, fp16 and fp32, with real
  storages: the tensor bytes and the bytes of the distinct storages behind them (a slice that views
  a larger storage keeps all of it alive), after a prefill and after three decode steps.

Usage::

    python tools/measure/kv_cache.py            # measure all, rewrite vramlib/data/measured/kv_cache.json
    python tools/measure/kv_cache.py --check    # re-measure, exit 1 if vramlib or the stored JSON differs
    python tools/measure/kv_cache.py --quick    # tiny models and three catalogue models (< 20 s), print only
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Hugging Face offline before transformers loads
from _offline import ROOT, header, language_model_config, meta_safe_rope, write_json  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

import vramlib as vl  # noqa: E402

CONFIG_DIR = ROOT / "vramlib" / "data" / "hf_configs"
OUTPUT = ROOT / "vramlib" / "data" / "measured" / "kv_cache.json"
COMMAND = "python tools/measure/kv_cache.py"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
PREFILL, BATCH, DECODE = 16, 2, 1
QUICK_CATALOGUE = ("llama-2-7b", "falcon-7b", "gemma-2-9b", "gemma-3-4b", "bamba-9b")

# --------------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------------


def catalogue_config(key: str):
    """transformers config of a catalogue model: its config.json, or for the source's nominal shapes a Llama config
    (a GPT-2 config for the GPT-3-like shape)."""
    path = CONFIG_DIR / f"{key}.json"
    if path.exists():
        raw = json.loads(path.read_text())
        return language_model_config({k: v for k, v in raw.items()
                                      if not k.startswith("_") and k != "quantization_config"})
    m = vl.get_model(key)
    if not m.gated_mlp:  # the source's GPT-3-like shape: a GPT-2 layer (LayerNorm, 4h GeLU MLP, learned positions)
        return AutoConfig.for_model("gpt2", n_embd=m.hidden, n_layer=m.n_layers, n_head=m.n_heads, n_inner=m.ffn,
                                    vocab_size=m.vocab, n_positions=m.max_context)
    return AutoConfig.for_model("llama", hidden_size=m.hidden, intermediate_size=m.ffn, num_hidden_layers=m.n_layers,
                                num_attention_heads=m.n_heads, num_key_value_heads=m.n_kv_heads, head_dim=m.head_dim,
                                vocab_size=m.vocab, max_position_embeddings=m.max_context, tie_word_embeddings=False)


def config_kv_heads(config) -> int:
    """KV heads as the model code uses them (Falcon's multi_query overrides its num_kv_heads)."""
    if config.model_type == "falcon":
        if config.new_decoder_architecture:
            return config.num_kv_heads
        return 1 if config.multi_query else config.num_attention_heads
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def config_head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def config_kv_bytes_per_token(config, element_bytes: int = 2) -> dict:
    """2 x layers x KV heads x head dim x bytes, every factor read from the transformers config object."""
    layers, kv, hd = config.num_hidden_layers, config_kv_heads(config), config_head_dim(config)
    return {"layers": layers, "kv_heads": kv, "head_dim": hd, "bytes_per_token": 2 * layers * kv * hd * element_bytes}


def sliding_window(config) -> int | None:
    """The window of the layers transformers caches with DynamicSlidingWindowLayer, if any."""
    w = getattr(config, "sliding_window", None)
    if w is None or getattr(config, "use_sliding_window", True) is False:
        return None
    return w


def sliding_layers(config) -> int:
    types = getattr(config, "layer_types", None)
    if types:
        return sum(t == "sliding_attention" for t in types)
    return config.num_hidden_layers if sliding_window(config) else 0


# --------------------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------------------


def cache_bytes(cache) -> dict:
    """Bytes of the keys and values a cache holds: tensor bytes, and distinct storage bytes (real devices)."""
    tensors, storages, layer_kinds = 0, {}, []
    for layer in cache.layers:
        layer_kinds.append(type(layer).__name__)
        held = [getattr(layer, "keys", None), getattr(layer, "values", None)]
        for name in ("conv_states", "recurrent_states"):  # Mamba layers (LinearAttentionLayer): per-state dicts
            states = getattr(layer, name, None) or {}
            held += list(states.values()) if isinstance(states, dict) else list(states)
        for t in held:
            if t is None or not isinstance(t, torch.Tensor):
                continue
            tensors += t.numel() * t.element_size()
            if t.device.type != "meta":
                st = t.untyped_storage()
                storages[st.data_ptr()] = st.nbytes()
    return {"bytes": tensors, "storage_bytes": sum(storages.values()) if storages else None,
            "layer_kinds": sorted(set(layer_kinds))}


# transformers 5.x renamed past_key_values to cache (the old name still works, with a warning)
_CACHE_KW = "cache" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (5, 20) else "past_key_values"


def _cache_of(res):
    return res["cache"] if "cache" in res else res["past_key_values"]


def run_cache(model, vocab: int, batch: int, prefill: int, decode: int, device: str) -> list[dict]:
    """Prefill ``prefill`` tokens, then ``decode`` single-token steps; the cache's bytes after each."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, prefill), generator=g).to(device)
    out = []
    with torch.no_grad():
        res = model(input_ids=ids, use_cache=True)
        cache = _cache_of(res)
        out.append(dict(cache_bytes(cache), tokens=prefill, step="prefill"))
        for i in range(decode):
            nxt = torch.randint(0, vocab, (batch, 1), generator=g).to(device)
            res = model(input_ids=nxt, use_cache=True, **{_CACHE_KW: cache})
            cache = _cache_of(res)
            out.append(dict(cache_bytes(cache), tokens=prefill + i + 1, step=f"decode {i + 1}"))
    return out


def measure_catalogue(key: str) -> list[dict]:
    config = catalogue_config(key)
    meta_safe_rope(config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.eval()
    rows = []
    for r in run_cache(model, config.vocab_size, BATCH, PREFILL, DECODE, "meta"):
        pred = vl.kv_cache_bytes(key, tokens=r["tokens"], batch=BATCH, dtype="bf16")
        rows.append({"id": f"catalogue/{key}/{r['tokens']}", "part": "catalogue", "model": key, "dtype": "bf16",
                     "batch": BATCH, "tokens": r["tokens"], "step": r["step"], "bytes": r["bytes"],
                     "predicted": pred, "layer_kinds": r["layer_kinds"], "device": "meta"})
    w = sliding_window(config)
    if w is not None and w < 10**5:
        tokens = w + 3
        r = run_cache(model, config.vocab_size, 1, tokens, 0, "meta")[0]
        rows.append({"id": f"sliding/{key}/{tokens}", "part": "sliding", "model": key, "dtype": "bf16", "batch": 1,
                     "tokens": tokens, "step": "prefill", "bytes": r["bytes"],
                     "predicted": vl.kv_cache_bytes(key, tokens=tokens, batch=1, dtype="bf16"),
                     "predicted_every_token": vl.kv_cache_bytes(key, tokens=tokens, batch=1, dtype="bf16",
                                                                runtime="every-token"),
                     "sliding_window": w, "sliding_layers": sliding_layers(config),
                     "layer_kinds": r["layer_kinds"], "device": "meta"})
    return rows


def has_per_token_formula(key: str) -> bool:
    """Whether 2 x L x n_kv x head_dim x bytes describes the model's cache: every layer a GQA attention layer (a
    sliding window changes how many tokens are kept, not the per-token bytes); MLA and Mamba layers do not fit it."""
    m = vl.get_model(key)
    return m.attention == "gqa" and all(k[1] in ("full", "sliding") for k in m.layer_kinds())


def config_row(key: str) -> dict:
    config = catalogue_config(key)
    got = config_kv_bytes_per_token(config, 2)
    row = {"id": f"config/{key}", "part": "config", "model": key, "dtype": "fp16",
           "model_type": config.model_type, **got, "predicted": vl.kv_bytes_per_token(key, "fp16")}
    if config.model_type == "falcon":
        row["config_num_kv_heads"] = config.num_kv_heads
    row["bytes"] = row.pop("bytes_per_token")
    return row


# Tiny random models: (name, model_type, config kwargs, ModelSpec kwargs)
_COMMON = dict(vocab_size=256, max_position_embeddings=256, tie_word_embeddings=False, pad_token_id=None,
               bos_token_id=None, eos_token_id=None)
TINY: list[tuple[str, str, dict]] = [
    ("llama-mha", "llama", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=4)),
    ("llama-gqa", "llama", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=3, num_attention_heads=8,
                                num_key_value_heads=2)),
    ("llama-mqa", "llama", dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=6,
                                num_key_value_heads=1)),
    ("mistral", "mistral", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, sliding_window=None)),
    ("qwen2", "qwen2", dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=6,
                            num_key_value_heads=2, use_sliding_window=False)),
    ("gemma2", "gemma2", dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=32, query_pre_attn_scalar=32, sliding_window=4096,
                              tie_word_embeddings=True)),
    ("phi3", "phi3", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
                          num_key_value_heads=4, sliding_window=None)),
    ("mixtral", "mixtral", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                sliding_window=None)),
    ("falcon-mqa", "falcon", dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, multi_query=True,
                                  new_decoder_architecture=False, parallel_attn=True, bias=False, alibi=False)),
    ("gpt-neox", "gpt_neox", dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                                  num_attention_heads=4)),
    ("gpt2", "gpt2", dict(n_embd=64, n_layer=2, n_head=4, n_positions=256)),
]
TINY_SLIDING: list[tuple[str, str, dict]] = [
    ("gemma2-window8", "gemma2", dict(TINY[5][2], sliding_window=8)),
    ("mistral-window8", "mistral", dict(TINY[3][2], sliding_window=8)),
]
"""Sliding-window layers past the window, on the CPU: the cache keeps a slice (a view) of the last w - 1 tokens."""
TINY_DTYPES = ("bf16", "fp16", "fp32")
TINY_PREFILL, TINY_BATCH, TINY_DECODE = 24, 2, 3


def tiny_config(model_type: str, kw: dict):
    return AutoConfig.for_model(model_type, **{**_COMMON, **kw})


def measure_tiny(name: str, model_type: str, kw: dict, dtype: str) -> list[dict]:
    torch.manual_seed(0)
    config = tiny_config(model_type, kw)
    model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype]).eval()
    spec = vl.ModelSpec.from_hf_config({"model_type": model_type, **{**_COMMON, **kw}}, name=name)
    rows = []
    for r in run_cache(model, config.vocab_size, TINY_BATCH, TINY_PREFILL, TINY_DECODE, "cpu"):
        pred = vl.kv_cache_bytes(spec, tokens=r["tokens"], batch=TINY_BATCH, dtype=dtype)
        rows.append({"id": f"tiny/{name}/{dtype}/{r['tokens']}", "part": "tiny", "model": name,
                     "model_type": model_type, "hf_config": {"model_type": model_type, **_COMMON, **kw}, "kv_heads": spec.n_kv_heads, "heads": spec.n_heads,
                     "head_dim": spec.head_dim, "layers": spec.n_layers, "dtype": dtype, "batch": TINY_BATCH,
                     "tokens": r["tokens"], "step": r["step"], "bytes": r["bytes"],
                     "storage_bytes": r["storage_bytes"], "predicted": pred, "layer_kinds": r["layer_kinds"],
                     "device": "cpu"})
    return rows


def measure_tiny_sliding(name: str, model_type: str, kw: dict) -> list[dict]:
    torch.manual_seed(0)
    config = tiny_config(model_type, kw)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    spec = vl.ModelSpec.from_hf_config({"model_type": model_type, **{**_COMMON, **kw}}, name=name)
    w, n_sw = sliding_window(config), sliding_layers(config)
    rows = []
    for r in run_cache(model, config.vocab_size, TINY_BATCH, TINY_PREFILL, TINY_DECODE, "cpu"):
        rows.append({"id": f"tiny-sliding/{name}/{r['tokens']}", "part": "sliding", "model": name,
                     "model_type": model_type, "hf_config": {"model_type": model_type, **_COMMON, **kw},
                     "dtype": "bf16", "batch": TINY_BATCH, "tokens": r["tokens"], "step": r["step"],
                     "bytes": r["bytes"], "storage_bytes": r["storage_bytes"],
                     "predicted": vl.kv_cache_bytes(spec, tokens=r["tokens"], batch=TINY_BATCH, dtype="bf16"),
                     "predicted_every_token": vl.kv_cache_bytes(spec, tokens=r["tokens"], batch=TINY_BATCH,
                                                                dtype="bf16", runtime="every-token"),
                     "sliding_window": w, "sliding_layers": n_sw, "layer_kinds": r["layer_kinds"], "device": "cpu"})
    return rows


def catalogue_keys() -> list[str]:
    return vl.model_names()


def measure_all(quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    keys = list(QUICK_CATALOGUE) if quick else catalogue_keys()
    for key in keys:
        t0 = time.perf_counter()
        rows.extend(measure_catalogue(key))
        if has_per_token_formula(key):
            rows.append(config_row(key))
        print(f"catalogue {key:16s} ({time.perf_counter() - t0:.1f} s)", flush=True)
    for name, mt, kw in TINY:
        for dtype in (("bf16",) if quick else TINY_DTYPES):
            rows.extend(measure_tiny(name, mt, kw, dtype))
    for name, mt, kw in TINY_SLIDING:
        rows.extend(measure_tiny_sliding(name, mt, kw))
    return rows


def problems(rows: list[dict]) -> list[str]:
    """Rows where vramlib's prediction differs from the measurement."""
    out = []
    for r in rows:
        if r["bytes"] != r["predicted"]:
            out.append(f"{r['id']}: measured {r['bytes']:,d}, vramlib {r['predicted']:,d}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="re-measure; exit 1 on any difference, write nothing")
    parser.add_argument("--quick", action="store_true", help="a few models (< 20 s); print only")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    t0 = time.perf_counter()
    rows = measure_all(quick=args.quick)
    print(f"measured {len(rows)} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    bad = problems(rows)
    for line in bad:
        print("MISMATCH: " + line, file=sys.stderr)
    if args.quick:
        return 1 if bad else 0
    if args.check:
        stored = {r["id"]: r["bytes"] for r in json.loads(OUTPUT.read_text())["rows"]}
        drift = [f"{r['id']}: stored {stored.get(r['id'])}, measured {r['bytes']}" for r in rows
                 if stored.get(r["id"]) != r["bytes"]]
        for line in drift:
            print("STORED DIFFERS: " + line, file=sys.stderr)
        return 1 if bad or drift else 0
    out = {
        **header(COMMAND, "meta (catalogue, sliding) and cpu (tiny)", note=("bytes = sum over the cache layers of keys and values (and Mamba layers' conv and recurrent "
                 "states), numel x element size, after a forward with use_cache=True; storage_bytes (cpu rows) = the "
                 "distinct storages behind them. predicted = vramlib.kv_cache_bytes (catalogue, tiny, sliding: "
                 "transformers' rule, sliding layers keep sliding_window - 1 tokens) or kv_bytes_per_token (config, "
                 "for models whose layers are all GQA attention). Sliding rows: predicted_every_token is what a "
                 "runtime that ignores the window would hold.")),
        "rows": rows,
    }
    write_json(OUTPUT, out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
