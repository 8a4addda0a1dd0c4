"""Measure what bitsandbytes' LLM.int8 (transformers' ``load_in_8bit``) holds: tiny random models of several dense
families, saved in fp16, loaded with ``BitsAndBytesConfig(load_in_8bit=True)`` on the CPU; per model the bytes of
every parameter (int8 weights, 16-bit embeddings, LM head, norms and biases) plus each Int8Params' fp32 row scales
(``SCB``), and the bytes of the checkpoint ``save_pretrained`` writes (which adds a 1-byte ``weight_format`` per
quantized Linear).

Ground truth only: ``tests/test_precision_inference.py`` compares ``weights_detail(spec, "llm-int8")`` with it.
Needs ``bitsandbytes`` (CPU backend, >= 0.46; not a dependency of vramlib):

    pip install bitsandbytes
    python tools/measure/bnb_int8.py            # writes vramlib/data/measured/bnb_int8.json
    python tools/measure/bnb_int8.py --check    # recompute, exit 1 on any difference
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _offline import ROOT, header, write_json

OUT = ROOT / "vramlib" / "data" / "measured" / "bnb_int8.json"
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=160, num_attention_heads=4, num_key_value_heads=2,
            num_hidden_layers=2, max_position_embeddings=256, pad_token_id=None, bos_token_id=None,
            eos_token_id=None)
CASES = {
    "llama": dict(model_type="llama", tie_word_embeddings=False),
    "mistral": dict(model_type="mistral", tie_word_embeddings=False, sliding_window=None),
    "qwen2": dict(model_type="qwen2", tie_word_embeddings=False),                     # q/k/v biases
    "qwen3": dict(model_type="qwen3", tie_word_embeddings=True, head_dim=32),          # q/k norms, tied, wide heads
    "gemma": dict(model_type="gemma", head_dim=16),                                   # tied, GeGLU
    "phi3": dict(model_type="phi3", tie_word_embeddings=False, num_key_value_heads=4),  # fused qkv and gate_up
    "olmo2": dict(model_type="olmo2", tie_word_embeddings=False),                     # full-width q/k norms
}


def measure(case: str, overrides: dict) -> dict:
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM, BitsAndBytesConfig

    cfg_dict = {**TINY, **overrides}
    cfg = dict(cfg_dict)
    cfg = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float16)
    with tempfile.TemporaryDirectory() as d16, tempfile.TemporaryDirectory() as d8:
        model.save_pretrained(d16)
        q = AutoModelForCausalLM.from_pretrained(d16, quantization_config=BitsAndBytesConfig(load_in_8bit=True),
                                                 device_map="cpu", dtype=torch.float16)
        by_dtype: dict[str, int] = {}
        scales = 0
        n_int8 = 0
        for p in q.parameters():
            by_dtype[str(p.dtype)] = by_dtype.get(str(p.dtype), 0) + p.numel() * p.element_size()
            scb = getattr(p, "SCB", None)
            if scb is not None:
                scales += scb.numel() * scb.element_size()
                n_int8 += 1
        q.save_pretrained(d8)
        saved = 0
        for name in os.listdir(d8):
            if name.endswith(".safetensors"):
                with safe_open(os.path.join(d8, name), "pt") as f:
                    for k in f.keys():
                        t = f.get_tensor(k)
                        saved += t.numel() * t.element_size()
    import bitsandbytes

    return {"case": case, "hf_config": cfg_dict, "bitsandbytes": bitsandbytes.__version__,
            "parameter_bytes": by_dtype, "row_scale_bytes": scales, "quantized_linears": n_int8,
            "memory_bytes": sum(by_dtype.values()) + scales, "saved_bytes": saved}


def run() -> dict:
    data = header("python tools/measure/bnb_int8.py", "cpu",
                  "Ground truth only. memory_bytes = the parameters' bytes (int8 weights; 16-bit embeddings, LM head, "
                  "norms, biases) + each Int8Params' fp32 SCB (one scale per output row); saved_bytes = the "
                  "tensors of save_pretrained's safetensors (adds a 1-byte weight_format per quantized Linear).")
    data["rows"] = [measure(k, v) for k, v in CASES.items()]
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="recompute and compare with the stored file")
    args = parser.parse_args(argv)
    data = run()
    if args.check:
        stored = json.loads(args.output.read_text())
        diff = [r["case"] for r, s in zip(data["rows"], stored["rows"]) if
                (r["memory_bytes"], r["saved_bytes"]) != (s["memory_bytes"], s["saved_bytes"])]
        print("bnb_int8: " + ("differs: " + ", ".join(diff) if diff else f"{len(data['rows'])} rows reproduce"))
        return 1 if diff or len(data["rows"]) != len(stored["rows"]) else 0
    write_json(args.output, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
