"""Chapter 1 alternate scenario: a 48 GB card, the 33B shape, INT8 and an FP8 KV cache."""
from __future__ import annotations

import vramlib as vl
from vramlib import audit

STEM = "ch01-13b-on-24gb"
PARAMS = dict(memory="48GB", gpu="rtx-a6000", model="source-33b", real_model="llama-33b", gqa_model="qwen3-32b",
              quant="int8", real_quant="awq-4bit-g128", kv_dtype="fp8-e4m3", reserve="1GB", gqa_kv_heads=4)


def expected(p: dict) -> dict:
    m = vl.get_model(p["model"])
    gqa = m.with_(n_kv_heads=p["gqa_kv_heads"])
    card = vl.get_gpu(p["gpu"])
    free = vl.kv_budget_bytes(m, p["memory"], p["quant"], p["reserve"])
    kv_tok = vl.kv_bytes_per_token(m, p["kv_dtype"])
    return {
        "q1_w_fp16_gb": vl.gb(vl.weights_bytes(m, "fp16")),
        "q1_w_int8_gb": vl.gb(vl.weights_bytes(m, "int8")),
        "q1_w_quant_gb": vl.gb(vl.weights_bytes(m, p["quant"])),
        "q1_card_gib": vl.gib(card.memory_bytes),
        "q1_kv_per_token": kv_tok,
        "q1_free_gb": vl.gb(free),
        "q1_max_tokens": vl.max_tokens(m, p["memory"], p["quant"], p["kv_dtype"], reserve=p["reserve"]),
        "q1_max_card": vl.max_tokens(m, card.memory_bytes, p["quant"], p["kv_dtype"], reserve=p["reserve"]),
        "q1_max_sdpa": vl.max_tokens(m, p["memory"], p["quant"], p["kv_dtype"], reserve=p["reserve"], attention="sdpa"),
        "q1_max_eager": vl.max_tokens(m, p["memory"], p["quant"], p["kv_dtype"], reserve=p["reserve"], attention="eager"),
        "q1_gqa_max": vl.max_tokens(gqa, p["memory"], p["quant"], p["kv_dtype"], reserve=p["reserve"]),
        "q1_src_tokens": audit.tokens_mixed_units(free, kv_tok),
        "q1_real_gptq_gb": vl.gb(vl.weights_bytes(p["real_model"], p["real_quant"])),
        "q1_real_ctx": vl.get_model(p["real_model"]).max_context,
    }
