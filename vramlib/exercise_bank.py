"""The chapters' exercises, each answered by a vramlib call (registered into :mod:`vramlib.exercises`)."""
from __future__ import annotations

from .exercises import register
from .feasibility import max_batch, max_tokens
from .inference import kv_cache_bytes, weights_bytes
from .models import get_model
from .units import gb

# chapter 1
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

# chapter 7
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
