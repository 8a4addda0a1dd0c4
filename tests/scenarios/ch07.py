"""Chapter 7 alternate scenario: 32K tokens, FP8 KV cache, the 33B shape, an L40S; Gemma-3-4B's windows and
Qwen3-32B as the full-attention model."""
from __future__ import annotations

import vramlib as vl
from vramlib import audit

STEM = "ch07-100k-context"
PARAMS = dict(tokens=32768, kv_dtype="fp8-e4m3", model_13b="source-33b", gpu="l40s", big_gpu="a100-80gb",
              gqa_real="qwen2.5-14b", weights_4bit="nf4", real_quant="awq-4bit-g128", prefill_chunk=4096,
              window_model="gemma-3-4b", full_model="qwen3-32b")


def expected(p: dict) -> dict:
    m13 = vl.get_model(p["model_13b"])
    gqa13 = m13.with_(n_kv_heads=p["gqa_kv_heads"])
    kv13 = vl.kv_cache_bytes(m13, p["tokens"], dtype=p["kv_dtype"])
    return {
        "q7_kv13_mha_gb": vl.gb(kv13),
        "q7_kv13_mha_gib": vl.gib(kv13),
        "q7_kv13_gqa_tok": vl.kv_bytes_per_token(gqa13, p["kv_dtype"]),
        "q7_tot13_4bit_gqa_gb": vl.gb(vl.weights_bytes(m13, p["weights_4bit"])
                                      + vl.kv_cache_bytes(gqa13, p["tokens"], dtype=p["kv_dtype"])),
        "q7_src_kv13_mha": audit.total_mixed_units(vl.kv_bytes_per_token(m13, p["kv_dtype"]), p["tokens"]),
        "q7_gqareal_max_card_chunk": vl.max_tokens(p["gqa_real"], p["gpu"], p["real_quant"], p["kv_dtype"],
                                                   reserve=p["real_reserve"], attention="sdpa",
                                                   prefill_chunk=p["prefill_chunk"]),
        "q7_kv13_g4_gb": vl.gb(vl.kv_cache_bytes(m13.with_group_size(p["group_size"]), p["tokens"], dtype=p["kv_dtype"])),
        "q7_window_kv_gb": vl.gb(vl.kv_cache_bytes(p["window_model"], p["tokens"], dtype=p["kv_dtype"])),
        "q7_window_every_gb": vl.gb(vl.kv_cache_bytes(p["window_model"], p["tokens"], dtype=p["kv_dtype"],
                                                      runtime="every-token")),
        "q7_window_max_card": vl.max_tokens(p["window_model"], p["gpu"], p["real_quant"], p["kv_dtype"],
                                            reserve=p["real_reserve"]),
        "q7_full_tok": vl.kv_bytes_per_token(p["full_model"], p["kv_dtype"]),
        "q7_mla_tok": vl.kv_bytes_per_token(p["mla_model"], p["kv_dtype"]),
    }
