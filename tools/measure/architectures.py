"""Ground truth from transformers for per-layer architectures: what it builds, and what its caches hold.

For every case -- a small random model with the layer-pattern logic of a real family (sliding / chunked /
full attention layers, MoE and dense layers, MLA, Mamba and attention hybrids), built on the CPU with
``AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **hf_config))`` -- this records, and
predicts nothing:

* ``hf_config``: the exact dict given to ``AutoConfig.for_model`` (with ``model_type``), so another program
  can rebuild the model; ``resolved``: the attributes transformers derived from it (layer types, windows,
  chunk size, head dim, MoE layer lists, expert counts and sizes, Mamba sizes, ...).
* ``params``: ``sum(p.numel() for p in model.parameters())`` (a shared tensor is yielded once, so tied
  embeddings count once), split into embedding, lm_head (0 when tied), other (final norm, ...), and per
  decoder layer its total and every parameter by its dotted name relative to the layer. Multimodal models
  are split by component (language model, vision tower, projector) as well.
* ``active``: the parameters one token touches: the total minus, in every MoE layer, the routed experts it
  does not use, (n_experts - top_k) / n_experts of the parameters of the layer's ``experts`` module.
  Shared experts, routers, gates and their biases are touched.
* ``cache``: a prefill forward with ``use_cache=True`` (batch 2, random ids) at three lengths -- below the
  window (or chunk), equal to it, and 3 x window + 1 -- then two one-token decode steps fed the returned
  cache; after each, every layer of the returned cache object: its class, the shape, dtype and bytes
  (numel x element size) of keys and values, of conv and recurrent (SSM) states, of any other tensor it
  holds, and the bytes of the distinct storages behind them (a slice keeps its whole storage alive).

A family that does not build or run records why (``status`` and ``error``) instead of failing.

``--config PATH.json`` (repeatable) measures real ``config.json`` files at full size on the ``meta``
device (nothing is allocated): parameters and active parameters as above, and the cache of a meta-device
prefill (batch 1) at 16 tokens and, when the model has a window or chunk, window + 3 tokens. Printed, or
stored under the ``full_size`` key of ``--output`` (other keys kept).

Usage::

    python tools/measure/architectures.py                  # all tiny cases (< 1 min), rewrite architectures.json
    python tools/measure/architectures.py --check          # re-measure tiny rows + stored full_size, exit 1 on a difference
    python tools/measure/architectures.py --quick          # a few tiny cases (< 30 s), print only
    python tools/measure/architectures.py --only gemma2    # some tiny cases (repeatable), update their rows
    python tools/measure/architectures.py --list           # the case names
    python tools/measure/architectures.py --config a.json --config b.json                 # full size, print only
    python tools/measure/architectures.py --config a.json --output vramlib/data/measured/architectures.json
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import re
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Hugging Face offline before transformers loads
from _offline import ROOT, header, meta_safe_rope, write_json  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

OUTPUT = ROOT / "vramlib" / "data" / "measured" / "architectures.json"
COMMAND = "python tools/measure/architectures.py"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SEED = 0
BATCH = 2  # tiny cases
DECODE_STEPS = 2
DEFAULT_WINDOW = 8  # the lengths of a model without a window: 5, 8, 25
FULL_BATCH = 1  # full-size (meta) cases
FULL_TOKENS = 16

# --------------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------------

_COMMON = dict(vocab_size=256, max_position_embeddings=256, tie_word_embeddings=False,
               pad_token_id=None, bos_token_id=None, eos_token_id=None)
_ATTN = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)


def _cfg(model_type: str, **kw) -> dict:
    return {"model_type": model_type, **_COMMON, **kw}


# (name, hf_config, build options); every option not given takes the default in measure_tiny.
CASES: list[tuple[str, dict, dict]] = [
    ("llama", _cfg("llama", **_ATTN, num_hidden_layers=4), {}),
    ("mistral-window8", _cfg("mistral", **_ATTN, num_hidden_layers=4, sliding_window=8), {}),
    ("qwen2-sliding", _cfg("qwen2", **_ATTN, num_hidden_layers=4, use_sliding_window=True, sliding_window=8,
                           max_window_layers=2), {}),
    ("qwen2-full", _cfg("qwen2", **_ATTN, num_hidden_layers=4, use_sliding_window=False, sliding_window=8,
                        max_window_layers=2), {}),
    ("qwen2_moe", _cfg("qwen2_moe", **_ATTN, num_hidden_layers=6, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, shared_expert_intermediate_size=64, decoder_sparse_step=2,
                       mlp_only_layers=[3]), {}),
    ("qwen3", _cfg("qwen3", **_ATTN, num_hidden_layers=4, head_dim=16), {}),
    ("qwen3_moe", _cfg("qwen3_moe", **_ATTN, num_hidden_layers=6, head_dim=16, num_experts=4,
                       num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=2,
                       mlp_only_layers=[3]), {}),
    # MLA: num_key_value_heads must equal num_attention_heads (the decompressed K/V are per head)
    ("deepseek_v2", _cfg("deepseek_v2", **dict(_ATTN, num_key_value_heads=4), num_hidden_layers=4,
                         q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                         v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                         moe_intermediate_size=32, first_k_dense_replace=1, topk_method="greedy"), {}),
    ("deepseek_v3", _cfg("deepseek_v3", **dict(_ATTN, num_key_value_heads=4), num_hidden_layers=4,
                         q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                         v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                         moe_intermediate_size=32, first_k_dense_replace=1, n_group=4, topk_group=2),
     {"dtype": "bf16"}),
    ("gemma", _cfg("gemma", **_ATTN, num_hidden_layers=4, head_dim=16, tie_word_embeddings=True), {}),
    ("gemma2", _cfg("gemma2", **_ATTN, num_hidden_layers=4, head_dim=16, query_pre_attn_scalar=16,
                    sliding_window=8, tie_word_embeddings=True), {"dtype": "bf16"}),
    ("gemma3_text", _cfg("gemma3_text", **_ATTN, num_hidden_layers=8, head_dim=16, query_pre_attn_scalar=16,
                         sliding_window=16, tie_word_embeddings=True), {}),
    ("llama4_text", _cfg("llama4_text", **dict(_ATTN, intermediate_size=64), num_hidden_layers=4, head_dim=16,
                         intermediate_size_mlp=128, attention_chunk_size=8, interleave_moe_layer_step=2,
                         num_local_experts=4, num_experts_per_tok=1), {}),
    ("gpt_oss", _cfg("gpt_oss", **dict(_ATTN, intermediate_size=64), num_hidden_layers=4, head_dim=16,
                     sliding_window=8, num_local_experts=4, num_experts_per_tok=2), {}),
    ("phi3-window8", _cfg("phi3", **_ATTN, num_hidden_layers=4, sliding_window=8), {}),
    ("phimoe", _cfg("phimoe", **_ATTN, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=2), {}),
    ("olmo2", _cfg("olmo2", **_ATTN, num_hidden_layers=4), {}),
    ("cohere", _cfg("cohere", **_ATTN, num_hidden_layers=4, tie_word_embeddings=True), {}),
    ("cohere2", _cfg("cohere2", **_ATTN, num_hidden_layers=8, head_dim=16, sliding_window=8,
                     tie_word_embeddings=True), {}),
    ("granite", _cfg("granite", **_ATTN, num_hidden_layers=4), {}),
    ("granitemoe", _cfg("granitemoe", **_ATTN, num_hidden_layers=4, num_local_experts=4,
                        num_experts_per_tok=2), {}),
    # Falcon-7B layout (one shared K/V head, parallel attention + MLP) and Falcon-40B/180B layout (GQA)
    ("falcon-mqa", _cfg("falcon", hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                        multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False,
                        alibi=False), {}),
    ("falcon-new-arch", _cfg("falcon", hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                             num_kv_heads=2, new_decoder_architecture=True, parallel_attn=True, bias=False,
                             alibi=False), {}),
    ("gpt_neox", _cfg("gpt_neox", hidden_size=64, intermediate_size=256, num_hidden_layers=4,
                      num_attention_heads=4), {}),
    ("gpt2", _cfg("gpt2", n_embd=64, n_layer=4, n_head=4, n_positions=256, tie_word_embeddings=True), {}),
    # hybrids: Mamba (torch fallbacks, no mamba_ssm / causal_conv1d kernels) + attention (+ MoE)
    ("jamba", _cfg("jamba", **_ATTN, num_hidden_layers=8, attn_layer_period=4, attn_layer_offset=2,
                   expert_layer_period=2, expert_layer_offset=1, num_experts=4, num_experts_per_tok=2,
                   mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8, use_mamba_kernels=False),
     {"dtype": "bf16"}),
    ("bamba", _cfg("bamba", **_ATTN, num_hidden_layers=4, attn_layer_indices=[1, 3], mamba_n_heads=8,
                   mamba_d_head=16, mamba_n_groups=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
                   mamba_chunk_size=8), {"dtype": "bf16"}),
    ("falcon_h1", _cfg("falcon_h1", **_ATTN, num_hidden_layers=4, head_dim=16, mamba_d_ssm=128,
                       mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=16, mamba_d_conv=4,
                       mamba_expand=2, mamba_chunk_size=8), {"dtype": "bf16"}),
    # Nemotron-H layout (M = Mamba-2, * = attention, - = MLP) and a Nemotron-3-Nano-like one (E = MoE)
    ("nemotron_h", _cfg("nemotron_h", **_ATTN, hybrid_override_pattern="M-M*-M-*-", head_dim=16,
                        ssm_state_size=16, mamba_num_heads=8, mamba_head_dim=16, n_groups=2, conv_kernel=4,
                        expand=2, chunk_size=8), {"dtype": "bf16"}),
    ("nemotron_h-moe", _cfg("nemotron_h", **_ATTN, hybrid_override_pattern="MEM*EME", head_dim=16,
                            ssm_state_size=16, mamba_num_heads=8, mamba_head_dim=16, n_groups=2, conv_kernel=4,
                            expand=2, chunk_size=8, n_routed_experts=8, num_experts_per_tok=2,
                            n_shared_experts=1, moe_intermediate_size=32,
                            moe_shared_expert_intermediate_size=64), {"dtype": "bf16"}),
    # multimodal nested config: Gemma 3 (text + SigLIP vision tower), Gemma3ForConditionalGeneration
    ("gemma3-multimodal", {
        "model_type": "gemma3", "tie_word_embeddings": True, "mm_tokens_per_image": 4,
        "boi_token_index": 253, "eoi_token_index": 254, "image_token_index": 255,
        "text_config": _cfg("gemma3_text", **_ATTN, num_hidden_layers=8, head_dim=16, query_pre_attn_scalar=16,
                            sliding_window=16, tie_word_embeddings=True),
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                          "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 56, "patch_size": 14,
                          "vision_use_head": False},
    }, {}),
]
QUICK = ("llama", "gemma2", "deepseek_v3", "llama4_text", "nemotron_h-moe")

# Config attributes worth recording as transformers resolved them (when the config has them).
RESOLVED_ATTRS = (
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
    "layer_types", "layers_block_type", "sliding_window", "use_sliding_window", "max_window_layers",
    "_sliding_window_pattern", "sliding_window_pattern", "attention_chunk_size", "no_rope_layers",
    "no_rope_layer_interval", "attention_bias", "mlp_bias", "qkv_bias",
    # falcon
    "multi_query", "new_decoder_architecture", "num_kv_heads", "parallel_attn", "alibi", "bias",
    # gpt2 / gpt-neox
    "n_inner", "rotary_pct", "use_parallel_residual",
    # MoE
    "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
    "moe_intermediate_size", "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
    "intermediate_size_mlp", "decoder_sparse_step", "mlp_only_layers", "moe_layers",
    "interleave_moe_layer_step", "first_k_dense_replace", "num_nextn_predict_layers", "n_group", "topk_group",
    "topk_method",
    "expert_layer_period", "expert_layer_offset", "moe_latent_size",
    # MLA
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "qk_head_dim", "v_head_dim",
    # Mamba / hybrids
    "attn_layer_period", "attn_layer_offset", "attn_layer_indices",
    "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank", "mamba_n_heads", "mamba_d_head",
    "mamba_n_groups", "mamba_d_ssm", "mamba_chunk_size", "ssm_state_size", "mamba_num_heads",
    "mamba_head_dim", "n_groups", "conv_kernel", "expand", "chunk_size", "mamba_ssm_cache_dtype",
    "use_mamba_kernels",
    # multimodal / vision
    "mm_tokens_per_image", "image_size", "patch_size", "vision_use_head",
)

# A decoder block lives at "<prefix>.<layers|h>.<index>.<rest>" (the first such match in the name).
LAYER_RE = re.compile(r"^(?:(.*?)\.)?(layers|h)\.(\d+)\.(.+)$")
# Sub-modules of a multimodal model, by attribute name.
COMPONENTS = {"language_model": "language_model", "text_model": "language_model",
              "vision_tower": "vision_tower", "vision_model": "vision_tower", "visual": "vision_tower",
              "multi_modal_projector": "multi_modal_projector"}

# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def jsonable(v):
    """A JSON-safe copy: tuples to lists, non-finite floats and dtypes to strings."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def error_text(e: BaseException) -> str:
    """The exception and the innermost frame that raised it (file relative to transformers / torch)."""
    tb = traceback.extract_tb(e.__traceback__)
    where = ""
    if tb:
        f = tb[-1]
        fn = re.sub(r"^.*?/site-packages/", "", f.filename)
        where = f" (at {fn}:{f.lineno} in {f.name})"
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg[:400]}{where}"


def build_config(hf_config: dict):
    cfg = copy.deepcopy(hf_config)  # AutoConfig.for_model fills nested dicts (rope_scaling) in place
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg)


def resolved_attrs(config) -> dict:
    out = {}
    for attr in RESOLVED_ATTRS:
        try:
            if hasattr(config, attr):
                out[attr] = jsonable(getattr(config, attr))
        except Exception:  # a property that raises
            continue
    return out


def resolved(config) -> dict:
    """Resolved attributes of the config (of its text and vision sub-configs for a nested config)."""
    text = config.get_text_config(decoder=True)
    if text is config:
        return resolved_attrs(config)
    out = {"model_type": config.model_type, "text_config": dict(model_type=text.model_type, **resolved_attrs(text))}
    vision = getattr(config, "vision_config", None)
    if vision is not None:
        out["vision_config"] = dict(model_type=vision.model_type, **resolved_attrs(vision))
    for k, v in resolved_attrs(config).items():
        out.setdefault(k, v)
    return out


def window_of(config) -> int | None:
    """The sliding window (or attention chunk) transformers gives the text model's windowed layers, if any."""
    text = config.get_text_config(decoder=True)
    types = getattr(text, "layer_types", None) or []
    w = None
    if any(t == "sliding_attention" for t in types) or (not types and getattr(text, "sliding_window", None)):
        w = getattr(text, "sliding_window", None)
    if w is None and (any(t == "chunked_attention" for t in types) or not types):
        w = getattr(text, "attention_chunk_size", None)
    return w if isinstance(w, int) and w > 0 else None

# --------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------


def _component_prefixes(model) -> dict[str, str]:
    """{component: module path} for the sub-models of a multimodal model (shortest path per component)."""
    found: dict[str, str] = {}
    for name, _ in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        comp = COMPONENTS.get(last)
        if comp and (comp not in found or len(name) < len(found[comp])):
            found[comp] = name
    return found if "language_model" in found else {}


def _layer_children(model, layer_prefix: str, idx: int) -> tuple[str, dict]:
    try:
        layer = model.get_submodule(f"{layer_prefix}.{idx}")
    except AttributeError:
        return "", {}
    return type(layer).__name__, {n: type(c).__name__ for n, c in layer.named_children()}


def breakdown(model, named: list[tuple[str, torch.nn.Parameter]], emb_ids: set, lm_head_ids: set) -> dict:
    """Total, embedding, lm_head, other and per-layer parameters of ``named`` (names relative to the model)."""
    total = embedding = lm_head = 0
    emb_names, other = {}, {}
    layers: dict[int, dict] = {}
    layer_prefix = None
    for name, p in named:
        n = p.numel()
        total += n
        if id(p) in emb_ids:
            embedding += n
            emb_names[name] = n
        elif id(p) in lm_head_ids:
            lm_head += n
        else:
            m = LAYER_RE.match(name)
            if m:
                layer_prefix = layer_prefix or (f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2))
                idx = int(m.group(3))
                entry = layers.setdefault(idx, {"index": idx, "total": 0, "params": {}})
                entry["total"] += n
                entry["params"][m.group(4)] = n
            else:
                other[name] = n
    rows = []
    for idx in sorted(layers):
        entry = layers[idx]
        cls, children = _layer_children(model, layer_prefix, idx) if layer_prefix else ("", {})
        rows.append({"index": idx, "class": cls, "children": children, "total": entry["total"],
                     "params": entry["params"]})
    layers_total = sum(e["total"] for e in rows)
    assert total == embedding + lm_head + layers_total + sum(other.values())
    return {"total": total, "embedding": embedding, "embedding_params": emb_names, "lm_head": lm_head,
            "other": sum(other.values()), "other_params": other, "n_layers": len(rows),
            "layers_prefix": layer_prefix, "layers_total": layers_total, "layers": rows}


def count_params(model) -> dict:
    emb_in = model.get_input_embeddings()
    emb_out = model.get_output_embeddings()
    tied = emb_out is not None and emb_out.weight is emb_in.weight
    emb_ids = {id(emb_in.weight)}
    for module in model.modules():  # other embedding tables (GPT-2's positions) count as embedding too
        if isinstance(module, torch.nn.Embedding):
            emb_ids.add(id(module.weight))
    lm_head_ids = {id(p) for p in emb_out.parameters()} if (emb_out is not None and not tied) else set()
    named = list(model.named_parameters())  # shared tensors are yielded once
    total = sum(p.numel() for _, p in named)
    assert total == sum(p.numel() for p in model.parameters())
    by_dtype: dict[str, int] = {}
    for _, p in named:
        by_dtype[jsonable(p.dtype)] = by_dtype.get(jsonable(p.dtype), 0) + p.numel()
    out = {"total": total, "tied_embeddings": tied, "model_class": type(model).__name__,
           "numel_by_dtype": dict(sorted(by_dtype.items()))}
    comps = _component_prefixes(model)
    if not comps:
        out.update(breakdown(model, named, emb_ids, lm_head_ids))
        out.pop("total")
        out = {"total": total, **out}
        return out
    # multimodal: one breakdown per component; the lm_head (if untied) goes with the language model
    groups: dict[str, list] = {c: [] for c in comps}
    groups["other"] = []
    for name, p in named:
        comp = next((c for c, pre in comps.items() if name.startswith(pre + ".")), None)
        if comp is None and id(p) in lm_head_ids:
            comp = "language_model"
        groups[comp or "other"].append((name, p))
    out["components"] = {}
    for comp, items in groups.items():
        pre = comps.get(comp)
        rel = [(n[len(pre) + 1:] if pre and n.startswith(pre + ".") else n, p) for n, p in items]
        sub = model.get_submodule(pre) if pre else model
        b = breakdown(sub, rel, emb_ids, lm_head_ids) if items else {"total": 0}
        b["module"] = pre
        b["class"] = type(sub).__name__ if pre else None
        out["components"][comp] = b
    assert total == sum(c["total"] for c in out["components"].values())
    return out


def active_params(model, total: int) -> dict:
    """Total minus, per MoE layer, the routed-expert parameters a token does not use."""
    moe = []
    inactive = 0
    seen: set[int] = set()
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] != "experts":
            continue
        parent_name = name.rsplit(".", 1)[0]
        parent = model.get_submodule(parent_name)
        params = [(n, p) for n, p in module.named_parameters() if id(p) not in seen]
        if not params:
            continue
        seen.update(id(p) for _, p in params)
        if isinstance(module, torch.nn.ModuleList):
            n_exp, n_from = len(module), f"len({name})"
        elif hasattr(module, "num_experts"):
            n_exp, n_from = int(module.num_experts), f"{name}.num_experts"
        else:
            n_exp, n_from = int(params[0][1].shape[0]), f"{name}.{params[0][0]}.shape[0]"
        top_k, k_from = None, None
        for cand_name, cand in [(parent_name, parent)] + [(f"{parent_name}.{cn}", c) for cn, c in
                                                          parent.named_children() if cn != "experts"]:
            for attr in ("top_k", "num_experts_per_tok", "topk"):
                v = getattr(cand, attr, None)
                if isinstance(v, int):
                    top_k, k_from = v, f"{cand_name}.{attr}"
                    break
            if top_k is not None:
                break
        if top_k is None:
            text = model.config.get_text_config(decoder=True)
            top_k, k_from = int(text.num_experts_per_tok), "config.num_experts_per_tok"
        routed = sum(p.numel() for _, p in params)
        bias = sum(p.numel() for n, p in params if "bias" in n)
        assert routed % n_exp == 0, (name, routed, n_exp)
        off = routed // n_exp * (n_exp - top_k)
        inactive += off
        m = LAYER_RE.match(name + ".x")
        moe.append({"layer": int(m.group(3)) if m else None, "module": name, "class": type(module).__name__,
                    "router": {cn: type(c).__name__ for cn, c in parent.named_children() if cn != "experts"},
                    "n_experts": n_exp, "n_experts_from": n_from, "top_k": top_k, "top_k_from": k_from,
                    "routed_params": routed, "routed_param_names": {n: p.numel() for n, p in params},
                    "routed_bias_params": bias, "per_expert": routed // n_exp, "not_touched": off})
    return {"total": total, "active": total - inactive, "not_touched": inactive, "moe_layers": len(moe),
            "method": ("routed experts = the parameters of every module named 'experts' (fused 3-D tensors or a "
                       "ModuleList; per-expert biases included, counted in routed_bias_params); n_experts from "
                       "its num_experts (or length / leading dim), top_k from the MoE block or its router/gate "
                       "(top_k attribute); not touched = routed / n_experts x (n_experts - top_k). Shared "
                       "experts, routers, gates, embeddings and lm_head are counted as touched."),
            "moe": moe}

# --------------------------------------------------------------------------------------------------
# caches
# --------------------------------------------------------------------------------------------------


def _tensor(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "dtype": jsonable(t.dtype), "bytes": t.numel() * t.element_size()}


def _storage(t: torch.Tensor, storages: dict) -> None:
    if t.device.type != "meta":
        st = t.untyped_storage()
        storages[(st.data_ptr(), st.nbytes())] = st.nbytes()


def walk_layer(layer) -> tuple[dict, dict]:
    """One cache layer: class, its tensors by kind, and the distinct storages behind them."""
    e: dict = {"class": type(layer).__name__}
    storages: dict = {}
    kv = conv = rec = other = 0
    for attr in ("sliding_window", "cumulative_length", "number_of_states"):
        v = getattr(layer, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            e[attr] = v
        elif isinstance(v, torch.Tensor) and v.numel() == 1 and v.device.type != "meta":
            e[attr] = int(v.item())
    try:
        e["seq_length"] = int(layer.get_seq_length())
    except Exception:
        pass
    handled = {"keys", "values", "conv_states", "recurrent_states"}
    for attr in ("keys", "values"):
        t = getattr(layer, attr, None)
        if isinstance(t, torch.Tensor):
            e[attr] = _tensor(t)
            kv += e[attr]["bytes"]
            _storage(t, storages)
        else:
            e[attr] = None
    for attr in ("conv_states", "recurrent_states"):
        d = getattr(layer, attr, None)
        if isinstance(d, dict):
            e[attr] = {}
            for k, t in d.items():
                if isinstance(t, torch.Tensor):
                    e[attr][str(k)] = _tensor(t)
                    if attr == "conv_states":
                        conv += e[attr][str(k)]["bytes"]
                    else:
                        rec += e[attr][str(k)]["bytes"]
                    _storage(t, storages)
                else:
                    e[attr][str(k)] = None
    extra = {}
    for attr, v in sorted(vars(layer).items()):
        if attr in handled:
            continue
        items = v.items() if isinstance(v, dict) else [(None, v)]
        for k, t in items:
            if isinstance(t, torch.Tensor):
                key = attr if k is None else f"{attr}[{k}]"
                extra[key] = _tensor(t)
                other += extra[key]["bytes"]
    if extra:
        e["other_tensors"] = extra
    e.update(kv_bytes=kv, conv_bytes=conv, recurrent_bytes=rec, other_bytes=other)
    if storages:
        e["storage_bytes"] = sum(storages.values())
    return e, storages


def walk_cache(cache) -> dict:
    layers, all_storages = [], {}
    for i, layer in enumerate(cache.layers):
        e, st = walk_layer(layer)
        layers.append({"index": i, **e})
        all_storages.update(st)
    totals = {k: sum(l[k] for l in layers) for k in ("kv_bytes", "conv_bytes", "recurrent_bytes", "other_bytes")}
    totals["state_bytes"] = totals["kv_bytes"] + totals["conv_bytes"] + totals["recurrent_bytes"]
    if all_storages:
        totals["storage_bytes"] = sum(all_storages.values())
    cache_tensors = {a: _tensor(t) for a, t in sorted(vars(cache).items()) if isinstance(t, torch.Tensor)}
    classes: dict[str, int] = {}
    for l in layers:
        classes[l["class"]] = classes.get(l["class"], 0) + 1
    out = {"class": type(cache).__name__, "n_layers": len(layers), "layer_classes": classes, "totals": totals,
           "layers": layers}
    if cache_tensors:
        out["cache_tensors"] = cache_tensors
    return out


# transformers 5.x renamed the forward argument past_key_values to cache (the old name still works)
_CACHE_KW = "cache" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (5, 20) else "past_key_values"


def _cache_of(res):
    c = getattr(res, "cache", None)
    return c if c is not None else res.past_key_values


def run_cache(model, vocab: int, batch: int, prefill: int, decode: int, device: str) -> list[dict]:
    """Prefill ``prefill`` random tokens, then ``decode`` one-token steps fed the returned cache; walk it after each."""
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, vocab, (batch, prefill), generator=g).to(device)
    steps = []
    with torch.no_grad():
        res = model(input_ids=ids, use_cache=True)
        cache = _cache_of(res)
        steps.append({"step": "prefill", "tokens": prefill, **walk_cache(cache)})
        for i in range(decode):
            nxt = torch.randint(0, vocab, (batch, 1), generator=g).to(device)
            res = model(input_ids=nxt, use_cache=True, **{_CACHE_KW: cache})
            cache = _cache_of(res)
            steps.append({"step": f"decode {i + 1}", "tokens": prefill + i + 1, **walk_cache(cache)})
    return steps

# --------------------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------------------


def cache_runs(row: dict, model, vocab: int, lengths: list[int], how: tuple, failed: str) -> list[dict]:
    """One prefill (then ``how`` = (batch, decode steps, device)) per length; a failure is recorded in the run and
    marks the row ``failed``."""
    batch, steps, device = how
    runs = []
    for n in lengths:
        try:
            runs.append({"prefill": n, "steps": run_cache(model, vocab, batch, n, steps, device)})
        except Exception as e:
            runs.append({"prefill": n, "error": error_text(e)})
            row["status"] = failed
            row.setdefault("error", error_text(e))
    return runs


def count_into(row: dict, model) -> None:
    """A row's parameters and active parameters."""
    row["params"] = count_params(model)
    row["active"] = active_params(model, row["params"]["total"])


def measure_tiny(name: str, hf_config: dict, opts: dict) -> dict:
    dtype = opts.get("dtype", "fp32")
    attn = opts.get("attn_implementation", "eager")
    row: dict = {"id": f"tiny/{name}", "case": name, "model_type": hf_config["model_type"], "status": "ok",
                 "hf_config": jsonable(hf_config),
                 "build": {"device": "cpu", "dtype": dtype, "attn_implementation": attn, "seed": SEED,
                           "builder": "AutoModelForCausalLM.from_config(AutoConfig.for_model(**hf_config))"}}
    try:
        config = build_config(hf_config)
        row["config_class"] = type(config).__name__
        row["resolved"] = resolved(config)
        torch.default_generator.manual_seed(SEED)  # = torch.manual_seed on the CPU, without its CUDA hook
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype], attn_implementation=attn).eval()
    except Exception as e:
        row.update(status="build_failed", error=error_text(e))
        return row
    count_into(row, model)
    w = window_of(config)
    ref = w or DEFAULT_WINDOW
    lengths = [5, ref, 3 * ref + 1]
    row["cache_run"] = {"batch": BATCH, "window": w, "prefill_lengths": lengths, "decode_steps": DECODE_STEPS,
                        "ids": f"torch.randint(0, vocab, (batch, n), generator=manual_seed({SEED}))",
                        "forward": f"model(input_ids=..., use_cache=True), then {_CACHE_KW}=returned cache"}
    text = config.get_text_config(decoder=True)
    row["cache"] = cache_runs(row, model, text.vocab_size, lengths, (BATCH, DECODE_STEPS, "cpu"), "run_failed")
    return row


def _meta_safe_window(config) -> int | None:
    w = window_of(config)
    return w if (w is not None and w + 3 <= 1 << 17) else None


def measure_full(path: Path) -> dict:
    raw = json.loads(path.read_text())
    return measure_full_config(raw, source=str(path))


def clean_config(raw: dict) -> tuple[dict, list[str]]:
    """The dict given to AutoConfig.for_model: config.json less bookkeeping keys (and quantization, remote code)."""
    dropped = [k for k in raw if k.startswith("_") or k in ("architectures", "transformers_version",
                                                             "quantization_config", "auto_map")]
    return {k: v for k, v in raw.items() if k not in dropped}, sorted(dropped)


def model_type_fallback(raw: dict) -> dict | None:
    """For a model_type transformers does not know (remote code), the model_type of the config class of the
    transformers class its ``architectures`` names, if transformers has that class (e.g. Kimi-K2's kimi_k2 ->
    DeepseekV3ForCausalLM -> deepseek_v3)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    mt = raw.get("model_type")
    if mt in CONFIG_MAPPING:
        return None
    for arch in raw.get("architectures") or []:
        cls = getattr(transformers, arch, None)
        config_class = getattr(cls, "config_class", None)
        if config_class is not None and getattr(config_class, "model_type", None) in CONFIG_MAPPING:
            return {"from": mt, "to": config_class.model_type, "via": f"architectures: {arch}"}
    return None


def measure_full_config(raw: dict, source: str | None = None, key: str | None = None) -> dict:
    hf_config, dropped = clean_config(raw)
    fallback = model_type_fallback(raw)
    if fallback:
        hf_config["model_type"] = fallback["to"]
    key = key or (Path(source).stem if source else hf_config.get("model_type", "config"))
    row: dict = {"id": f"full/{key}", "case": key, "source": source, "model_type": hf_config.get("model_type"),
                 "status": "ok", "hf_config": jsonable(hf_config), "dropped_keys": dropped,
                 "model_type_fallback": fallback, "config_source": raw.get("_source"),
                 "build": {"device": "meta", "dtype": "bf16", "attn_implementation": "eager",
                           "builder": "AutoModelForCausalLM.from_config(AutoConfig.for_model(**hf_config))"},
                 "torch": torch.__version__, "transformers": transformers.__version__}
    try:
        config = build_config(hf_config)
        row["config_class"] = type(config).__name__
        row["resolved"] = resolved(config)
        if type(config) not in AutoModelForCausalLM._model_mapping:  # an image-text model with no causal-LM class
            config = config.get_text_config(decoder=True)  # (Mistral-3): its language model, which vramlib counts
            row["build"]["built"] = f"the text model only ({type(config).__name__}): no causal-LM class for the whole"
        model = _meta_model(config)
    except Exception as e:
        row.update(status="build_failed", error=error_text(e))
        return row
    count_into(row, model)
    w = _meta_safe_window(config)
    lengths = [FULL_TOKENS] + ([w + 3] if w else [])
    row["cache_run"] = {"batch": FULL_BATCH, "window": window_of(config), "prefill_lengths": lengths,
                        "decode_steps": 0, "device": "meta"}
    text = config.get_text_config(decoder=True)
    if meta_safe_rope(text):
        row["cache_run"]["rope"] = "default (the config's longrope cannot run on the meta device)"
        model = _meta_model(config)
    row["cache"] = cache_runs(row, model, text.vocab_size, lengths, (FULL_BATCH, 0, "meta"), "cache_failed")
    return row


def _meta_model(config):
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="eager")
    return model.eval()

# --------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------


def summary(row: dict) -> str:
    if row["status"] == "build_failed":
        return f"{row['status']}: {row['error']}"
    p, a = row["params"], row["active"]
    parts = [f"params {p['total']:,d}", f"active {a['active']:,d}"]
    for run in row.get("cache", []):
        if "steps" in run:
            st = run["steps"][-1]
            parts.append(f"{st['tokens']}t:{st['totals']['state_bytes']:,d}B")
        else:
            parts.append(f"{run['prefill']}t: {run['error'][:80]}")
    return f"{row['status']}  " + "  ".join(parts)


def diff(a, b, path="") -> list[str]:
    """Paths where two JSON values differ (first few)."""
    if type(a) is not type(b):
        return [f"{path}: {a!r} != {b!r}"[:300]]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'stored' if k in a else 'measured'}")
            else:
                out.extend(diff(a[k], b[k], f"{path}.{k}"))
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: stored {a!r}, measured {b!r}"[:300]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="re-measure; exit 1 on any difference from the stored JSON; write nothing")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)} (< 30 s); print only")
    parser.add_argument("--only", action="append", metavar="CASE", help="measure only this tiny case (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--config", action="append", metavar="PATH", type=Path,
                        help="measure this config.json at full size on the meta device (repeatable)")
    parser.add_argument("--output", type=Path, help="with --config: store under its full_size key (else print)")
    parser.add_argument("--verbose", action="store_true", help="print the measured rows as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    names = [c[0] for c in CASES]
    if args.list:
        print("\n".join(names))
        return 0

    if args.config:
        rows = {}
        for path in args.config:
            t0 = time.perf_counter()
            row = measure_full(path)
            rows[row["case"]] = row
            print(f"{row['case']:32s} {summary(row)}  ({time.perf_counter() - t0:.1f} s)", flush=True)
        if args.output is None:
            print(json.dumps(rows, indent=1))
            return 0
        out_path = args.output if args.output.is_absolute() else Path.cwd() / args.output
        data = json.loads(out_path.read_text()) if out_path.exists() else {
            "command": COMMAND, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}
        full = dict(data.get("full_size", {}))
        full.update(rows)
        data["full_size"] = {k: full[k] for k in sorted(full)}
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {out_path} (full_size: {', '.join(rows)})", file=sys.stderr)
        return 0

    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"unknown case(s) {unknown}; known: {', '.join(names)}")
    selected = [c for c in CASES if (c[0] in args.only if args.only else (c[0] in QUICK if args.quick else True))]
    start = time.perf_counter()
    rows = []
    for name, hf_config, opts in selected:
        t0 = time.perf_counter()
        row = measure_tiny(name, hf_config, opts)
        rows.append(row)
        print(f"{name:20s} {summary(row)}  ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"measured {len(rows)} case(s) in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.verbose:
        print(json.dumps(rows, indent=1))
    if args.quick:
        return 0

    stored = json.loads(OUTPUT.read_text()) if OUTPUT.exists() else None
    if args.check:
        if stored is None:
            print(f"CHECK FAILED: {OUTPUT} does not exist", file=sys.stderr)
            return 1
        failures = []
        old = {r["id"]: r for r in stored.get("rows", [])}
        for r in rows:
            if r["id"] not in old:
                failures.append(f"{r['id']}: not in the stored JSON")
                continue
            d = diff(old[r["id"]], jsonable(r))
            failures.extend(f"{r['id']}{x}" for x in d[:5])
        if not args.only:
            failures.extend(f"{i}: stored, but no such case" for i in old if i not in {r["id"] for r in rows})
            for key, srow in stored.get("full_size", {}).items():
                t0 = time.perf_counter()
                raw = dict(srow["hf_config"])
                new = measure_full_config(raw, source=srow.get("source"), key=key)
                new["dropped_keys"] = srow.get("dropped_keys", [])
                new["model_type_fallback"] = srow.get("model_type_fallback")
                new["config_source"] = srow.get("config_source")
                d = [x for x in diff(srow, new) if not x.startswith((".torch", ".transformers"))]
                failures.extend(f"full/{key}{x}" for x in d[:5])
                print(f"full/{key:27s} re-measured ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        for k in ("torch", "transformers", "python"):
            now = {"torch": torch.__version__, "transformers": transformers.__version__,
                   "python": platform.python_version()}[k]
            if stored.get(k) != now:
                print(f"warning: stored {k} {stored.get(k)}, running {now}", file=sys.stderr)
        for line in failures:
            print("CHECK FAILED: " + line, file=sys.stderr)
        if not failures:
            print(f"check ok: {len(rows)} case(s) match {OUTPUT.relative_to(ROOT)}", file=sys.stderr)
        return 1 if failures else 0

    if args.only and stored:
        merged = {r["id"]: r for r in stored.get("rows", [])}
        merged.update({r["id"]: r for r in rows})
        rows = [merged[f"tiny/{n}"] for n in names if f"tiny/{n}" in merged]
    out = {
        **header(COMMAND, "cpu (tiny rows), meta (full_size)", note=(
                 "Ground truth only, no predictions. Each row: hf_config (the dict given to AutoConfig.for_model), "
                 "resolved (config attributes transformers derived), params (sum of numel over "
                 "model.parameters(), shared tensors once; embedding, lm_head (0 when tied), other, per layer "
                 "with names relative to the layer; multimodal: per component), active (total minus "
                 "(n_experts - top_k) / n_experts of each MoE layer's routed 'experts' parameters), cache "
                 "(prefill of each length at batch 2 with use_cache=True, then 2 one-token decode steps; per "
                 "cache layer the class and the shape, dtype and numel x element_size bytes of keys, values, "
                 "conv_states, recurrent_states and other tensors; storage_bytes = distinct storages behind "
                 "them). full_size rows: real config.json files on the meta device, batch 1, prefill only.")),
        "rows": [jsonable(r) for r in rows],
    }
    if stored and "full_size" in stored:
        out["full_size"] = stored["full_size"]
    write_json(OUTPUT, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
