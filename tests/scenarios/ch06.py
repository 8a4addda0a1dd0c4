"""Chapter 6 alternate scenario: Llama-3.1-70B on H100s (1 x GPTQ, 2 and 8 x FP16), 4K requests, other utilisations."""
from __future__ import annotations

import vramlib as vl

STEM = "ch06-cloud-gpu-choice"
PARAMS = dict(context=4096, max_batch=256, big_model="llama-3.1-70b", big_gpu="h100-sxm-80gb",
              real_quant="gptq-4bit-g128", utilization=0.92, mfu=0.4, mbu=0.8, tp_overhead=0.1,
              option_counts=[1, 2, 8], cost_model="qwen2.5-7b", old_model="llama-2-7b")


def expected(p: dict) -> dict:
    serve = dict(gpu_memory_utilization=p["utilization"], request_tokens=p["context"], max_model_len=p["context"],
                 max_num_seqs=p["max_batch"])
    speed = dict(context=p["context"], mfu=p["mfu"], mbu=p["mbu"], tp_overhead=p["tp_overhead"])
    out = {"q6_context": p["context"], "q6_mfu": p["mfu"], "q6_mbu": p["mbu"], "q6_sigma": p["tp_overhead"]}
    for i, (n, w) in enumerate(zip(p["option_counts"], [p["real_quant"], p["fp16"], p["fp16"]]), start=1):
        c = vl.serving_kv_capacity(p["big_model"], p["big_gpu"], tp=n, weights=w, **serve)
        batch = max(1, min(p["max_batch"], c.max_concurrent_requests))
        r = vl.roofline(p["big_model"], p["big_gpu"], weights=w, tp=n, batch=batch, **speed)
        out |= {f"q6_opt{i}_kv_gib": vl.gib(c.kv_cache_bytes), f"q6_opt{i}_conc": c.max_concurrency,
                f"q6_opt{i}_batch": batch, f"q6_opt{i}_tps": r.decode_tokens_per_s,
                f"q6_opt{i}_cost": r.cost_per_million_output_tokens_usd, f"q6_opt{i}_cross": r.crossover_batch or 0}
    m = vl.get_model(p["big_model"])
    out["q6_awq_gb"] = vl.gb(vl.weights_bytes(m, p["real_quant"]))
    out["q6_w70_fp16_gb"] = vl.gb(vl.weights_bytes(m, p["fp16"]))
    out["q6_src_int4_gb"] = vl.gb(vl.weights_bytes(m.with_(nominal_params=70_000_000_000), p["quant"]))
    for key, g in (("a100", p["new_gpu"]), ("v100", p["old_gpu"])):
        c = vl.serving_kv_capacity(p["old_model"], g, weights=p["fp16"], **serve)
        r = vl.roofline(p["old_model"], g, weights=p["fp16"], batch=max(1, min(p["max_batch"], c.max_concurrent_requests)),
                        **speed)
        out[f"q6_{key}_cost13"] = r.cost_per_million_output_tokens_usd
        out[f"q6_{key}_conc13"] = c.max_concurrent_requests
    return out
