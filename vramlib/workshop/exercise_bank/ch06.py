"""Chapter 6 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...serve.serving import crossover_batch, roofline, serving_kv_capacity
from ...core.units import gib

register("ch06-1", "Llama-2-70B as AWQ 4-bit on one A100 80GB, batch 32, 2,048-token sequences, default MFU/MBU: "
         "USD per million output tokens?",
         lambda: roofline("llama-2-70b", "a100-80gb", weights="awq-4bit-g128", batch=32,
                          context=2048).cost_per_million_output_tokens_usd,
         "USD", "tokens/s = 32 / step time, the step reading the 4-bit weights and 32 KV caches at 70% of 2,039 GB/s; "
         "then price per hour / (3,600 x tokens/s) x 10^6.")
register("ch06-2", "Llama-2-70B in FP16 over 2 x A100 80GB (tensor parallel), utilization 0.9: GiB of KV cache per GPU?",
         lambda: gib(serving_kv_capacity("llama-2-70b", "a100-80gb", tp=2, weights="fp16").kv_cache_bytes),
         "GiB", "0.9 x CUDA's total minus half the FP16 weights, the activation peak, non-torch memory and CUDA graphs.")
register("ch06-3", "Llama-2-70B in FP16 over 4 x A100 80GB, 512-token sequences: the batch where decoding turns "
         "compute-bound?",
         lambda: crossover_batch("llama-2-70b", "a100-80gb", weights="fp16", context=512, tp=4),
         "sequences", "memory time = (W + B T k_kv) / (0.7 BW), compute time = 2 N B / (0.5 F); solve for B, round up.")
