"""Each chapter's alternate papermill scenario and how to recompute its glued numbers through vramlib.

A scenario is (alternate parameters, function of the parameters -> {glue name: expected value}).
tests/test_chapters.py runs the chapter with the alternate parameters and compares.
"""
from __future__ import annotations

import vramlib as vl
from vramlib import audit


def ch01(p: dict) -> dict:
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


SCENARIOS = {
    "ch01-13b-on-24gb": (
        dict(memory="48GB", gpu="rtx-a6000", model="source-33b", real_model="llama-33b", gqa_model="qwen2.5-32b",
             quant="int8", real_quant="awq-4bit-g128", kv_dtype="fp8-e4m3", reserve="1GB", gqa_kv_heads=4),
        ch01,
    ),
}


def ch07(p: dict) -> dict:
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
    }


SCENARIOS["ch07-100k-context"] = (
    dict(tokens=32768, kv_dtype="fp8-e4m3", model_13b="source-33b", gpu="l40s", big_gpu="a100-80gb",
         gqa_real="qwen2.5-14b", weights_4bit="nf4", real_quant="awq-4bit-g128", prefill_chunk=4096),
    ch07,
)
