"""Chapter 17 alternate scenario: Llama-3.1-70B in Q3_K_M on an RTX 3090 with 128 GB of DDR4-3200 and a 16K
context; Qwen3-30B-A3B's experts in 32 GB; an 8-channel DDR5 server for the CPU alone."""
from __future__ import annotations

import vramlib as vl

STEM = "ch17-offload-unified-cpu"
PARAMS = dict(weights="q3_k_m", gpu="rtx-3090", host="ddr4-3200-2ch", host_ram="128GB", n_ctx=16384,
              moe_model="qwen3-30b-a3b", moe_weights="q4_k_m", moe_ram="32GB", cpu_host="ddr5-4800-8ch",
              cpu_ram="128GB")


def expected(p: dict) -> dict:
    ctx = vl.LlamaCppConfig(n_ctx=p["n_ctx"])
    plan = vl.offload_plan(p["model"], p["gpu"], p["weights"], host=p["host"], host_ram=p["host_ram"], llamacpp=ctx)
    moe = vl.offload_plan(p["moe_model"], p["gpu"], p["moe_weights"], host=p["host"], host_ram=p["moe_ram"],
                          llamacpp=ctx, cpu_moe=True, n_gpu_layers=-1)
    cpu = vl.device_plan(p["model"], p["cpu_host"], p["weights"], host_ram=p["cpu_ram"], llamacpp=ctx)
    return {"q17_ngl": plan.n_gpu_layers, "q17_blocks": plan.layers_on_gpu, "q17_tps": plan.tokens_per_s,
            "q17_gpu_gb": vl.gb(plan.gpu.total), "q17_host_gb": vl.gb(plan.host.total),
            "q17_read_host_gb": vl.gb(plan.read_host), "q17_moe_cpu_tps": moe.tokens_per_s,
            "q17_cpu_tps": cpu.tokens_per_s}
