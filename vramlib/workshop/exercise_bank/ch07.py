"""Chapter 7 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...solve.feasibility import max_batch, max_tokens
from ...memory.inference import kv_cache_bytes
from ...core.units import gb

register("ch07-1", "Llama-3.1-8B (8 KV heads) with an fp16 KV cache: how many GB (10^9) for one 100,000-token document?",
         lambda: gb(kv_cache_bytes("llama-3.1-8b", tokens=100_000)), "GB",
         "2 x 32 layers x 8 KV heads x 128 x 2 bytes per token.")
register("ch07-2", "How many 100,000-token documents can Mistral-7B (fp16 weights, fp16 KV) keep in the KV cache of "
         "an 80 GB (10^9) card, after weights and 0.5 GB reserve?",
         lambda: max_batch("mistral-7b", "80GB", tokens=100_000, reserve="0.5GB", attention=None),
         "documents", "divide what is left after the weights by one document's KV cache, round down.")
register("ch07-3", "Llama-3.1-70B in AWQ 4-bit on one H100 80 GB with an FP8 KV cache (1 byte per element): the "
         "longest context, KV cache only, 0.5 GB reserved?",
         lambda: max_tokens("llama-3.1-70b", "h100-sxm-80gb", "awq-4bit-g128", kv_dtype="fp8-e4m3", reserve="0.5GB"),
         "tokens", "memory left after the 4-bit weights and the reserve, over 2 x 80 layers x 8 KV heads x 128 x 1 byte.")
