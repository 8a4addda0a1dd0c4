"""Chapter 8 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...serve.serving import serving_kv_capacity
from ...core.units import gib

register("ch08-1", "Llama-3.1-8B in BF16 on one A100 80GB with --gpu-memory-utilization 0.95: how many KV blocks "
         "of 16 tokens does vLLM allocate?",
         lambda: serving_kv_capacity("llama-3.1-8b", "a100-80gb", gpu_memory_utilization=0.95).num_blocks,
         "blocks", "0.95 x (card - driver reserve) - weights - activation peak - non-torch - graphs, over "
         "2 x 16 x 8 x 128 x 2 x 32 bytes per block.")
register("ch08-2", "Llama-3.1-8B on one H100 80GB with an FP8 KV cache at utilization 0.9: vLLM's concurrency "
         "for 32,768-token requests?",
         lambda: serving_kv_capacity("llama-3.1-8b", "h100-sxm-80gb", kv_dtype="fp8", request_tokens=32768).max_concurrency,
         "requests", "an FP8 block is half the size of a BF16 one; divide the blocks by 32,768 / 16 = 2,048.")
register("ch08-3", "Llama-3.1-70B in BF16 over 4 x H100 80GB (tensor parallel): how many GiB of KV cache per GPU?",
         lambda: gib(serving_kv_capacity("llama-3.1-70b", "h100-sxm-80gb", tp=4).kv_cache_bytes),
         "GiB", "each GPU holds a quarter of the weights and 2 of the 8 KV heads, plus NCCL buffers.")
