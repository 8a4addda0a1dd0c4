"""Chapter 5 alternate scenario: a 48 GB RTX A6000, an 8 GB reserve, Qwen2.5-32B, Q5_K_M / Q4_K_M, FP8 KV cache."""
from __future__ import annotations

import vramlib as vl
from vramlib import serving as S

STEM = "ch05-quantized-on-rtx4090"
PARAMS = dict(memory="48GB", gpu="rtx-a6000", kv_reserve="8GB", real_quant="q5_k_m", low_quant="q4_k_m",
              model_34b="qwen2.5-32b", kv_dtype="fp8-e4m3", prefill_chunk=1024, mha_7b="llama-2-13b",
              moe_models={"qwen3-30b-a3b": "q5_k_m", "gpt-oss-20b": "mxfp4-moe"})


def expected(p: dict) -> dict:
    card = vl.get_gpu(p["gpu"])
    yi, mix, cl = vl.get_model(p["model_34b"]), vl.get_model(p["moe"]), vl.get_model(p["code_34b"])
    kv_only = dict(kv_dtype=p["kv_dtype"], reserve=p["reserve"])
    rows = vl.fit_map(p["fit_models"], [card.key], p["fit_formats"], kv_dtype=p["kv_dtype"], reserve=p["reserve"])
    largest = max((r for r in rows if r["fits"] and r["usable context"] >= 4096),
                  key=lambda r: vl.get_model(r["model"]).n_params)
    return {
        "q5_card_gib": card.memory_gib,
        "q5_max_src_b": vl.gb(vl.max_params(p["memory"], p["quant"])),
        "q5_max_src_res_b": vl.gb(vl.max_params(p["memory"], p["quant"], reserve=p["kv_reserve"])),
        "q5_max_card_b": vl.gb(vl.max_params(card.key, p["quant"])),
        "q5_max_real_b": vl.gb(vl.max_params(card.key, S.effective_precision(yi, p["real_quant"]), reserve=p["kv_reserve"])),
        "q5_bits_q4km": float(S.bits_per_weight(yi, p["real_quant"])),
        "q5_src34_gb": vl.gb(vl.weights_bytes(yi.with_(nominal_params=p["nominal_34b"]), p["quant"])),
        "q5_src7_left_gb": vl.gb(vl.kv_budget_bytes("source-7b", p["memory"], "fp16", reserve=0)),
        "q5_srcmix_gb": vl.gb(vl.weights_bytes(mix, p["quant"])),
        "q5_yi_gb": vl.gb(vl.weights_bytes(yi, p["real_quant"])),
        "q5_yi_ctx": vl.max_tokens(yi, card.key, p["real_quant"], **kv_only),
        "q5_yi_ctx_sdpa": vl.max_tokens(yi, card.key, p["real_quant"], attention="sdpa", **kv_only),
        "q5_cl_ctx_chunk": vl.max_tokens(cl, card.key, p["real_quant"], attention="sdpa",
                                         prefill_chunk=p["prefill_chunk"], **kv_only),
        "q5_mix_q3_ctx": vl.max_tokens(mix, card.key, p["low_quant"], **kv_only),
        "q5_mix_q4km_gb": vl.gb(vl.weights_bytes(mix, p["real_quant"])),
        "q5_mha7_ctx": vl.max_tokens(p["mha_7b"], card.key, "fp16", **kv_only),
        "q5_largest_4k_params": vl.get_model(largest["model"]).n_params,
        "q5_qwen_gb": vl.gb(vl.weights_bytes("qwen3-30b-a3b", "q5_k_m")),
        "q5_qwen_active_b": vl.gb(vl.get_model("qwen3-30b-a3b").n_active_params),
        "q5_qwen_ctx": vl.max_tokens("qwen3-30b-a3b", card.key, "q5_k_m", attention="sdpa",
                                     prefill_chunk=p["prefill_chunk"], **kv_only),
        "q5_oss_ctx": vl.max_tokens("gpt-oss-20b", card.key, "mxfp4-moe", attention="sdpa",
                                    prefill_chunk=p["prefill_chunk"], **kv_only),
    }
