"""Chapter 17 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...catalog.hosts import mac_working_set
from ...core.units import gb
from ...serve.llamacpp import LlamaCppConfig
from ...serve.offload import device_plan, offload_plan

register("ch17-1", "Llama-3.1-8B in Q4_K_M on a T4 with 32 GB of DDR4-3200 and -c 32768: what -ngl does llama.cpp "
         "fit (the output layer counts as one)?",
         lambda: offload_plan("llama-3.1-8b", "t4", "q4_k_m", host="ddr4-3200-2ch", host_ram="32GB",
                              llamacpp=LlamaCppConfig(n_ctx=32768)).n_gpu_layers,
         "-ngl", "the output layer first, then blocks from the last, while weights + KV + compute buffer fit the "
         "card's CUDA total less the CUDA context.")
register("ch17-2", "Llama-3.1-70B in Q4_K_M on the CPU alone, dual-channel DDR5-5600 (64 GB, -c 8192): at most how "
         "many tokens per second?",
         lambda: device_plan("llama-3.1-70b", "ddr5-5600-2ch", "q4_k_m", host_ram="64GB").tokens_per_s,
         "tokens/s", "bytes one token reads (every weight but the embeddings' other rows, plus the full context's "
         "K and V) over 89.6 GB/s.", rel_tol=0.01)
register("ch17-3", "How many GB (10^9 bytes) may Metal keep resident by default on a 64 GB Mac?",
         lambda: gb(mac_working_set(64 * 2**30)),
         "GB", "three quarters of 64 GiB above 36 GiB (two thirds at or below).", rel_tol=0.005)
