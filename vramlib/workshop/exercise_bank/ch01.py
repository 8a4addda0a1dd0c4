"""Chapter 1 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...solve.feasibility import max_tokens
from ...memory.inference import weights_bytes
from ...catalog.models import get_model
from ...core.units import gb

register("ch01-1", "The source's 13B shape with INT8 weights and 8 KV heads: how many tokens fit in 24 GB "
         "(10^9 bytes) with 0.5 GB reserved, KV cache only?",
         lambda: max_tokens(get_model("source-13b").with_(n_kv_heads=8), "24GB", "int8", reserve="0.5GB"),
         "tokens", "free memory = 24 GB - 13 GB - 0.5 GB; one token costs 2 x 40 x 8 x 128 x 2 bytes.")
register("ch01-2", "Llama-2-13B stored as GPTQ 4-bit with group size 128: how many GB (10^9) of weights, "
         "scales, zeros and 16-bit embeddings?",
         lambda: gb(weights_bytes("llama-2-13b", "gptq-4bit-g128")),
         "GB", "4 + (16 + 4)/128 bits for each linear weight; embeddings, LM head and norms stay at 16 bits.")
register("ch01-3", "With an FP8 KV cache (1 byte per element), how many tokens of the source's 13B MHA shape fit "
         "next to INT4 weights in 24 GB with 0.5 GB reserved?",
         lambda: max_tokens("source-13b", "24GB", "int4", kv_dtype="fp8-e4m3", reserve="0.5GB"),
         "tokens", "halving the bytes per element doubles the tokens.")

