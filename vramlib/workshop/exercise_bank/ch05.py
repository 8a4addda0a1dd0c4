"""Chapter 5 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...solve.feasibility import max_params, max_tokens
from ...serve.serving import bits_per_weight
from ...core.units import gb

register("ch05-1", "Mixtral 8x7B as GPTQ 4-bit (g128) on the RTX 4090, 0.5 GB reserve, FP16 KV cache: how many "
         "tokens of context fit (KV cache only)?",
         lambda: max_tokens("mixtral-8x7b", "rtx-4090", "gptq-4bit-g128", reserve="0.5GB"),
         "tokens", "card - GPTQ weights - 0.5 GB, over 2 x 32 layers x 8 KV heads x 128 x 2 bytes per token.")
register("ch05-2", "Bits per weight of CodeLlama-34B in llama.cpp's Q4_K_M?",
         lambda: float(bits_per_weight("codellama-34b", "q4_k_m")),
         "bits", "8 x file bytes / parameters: Q4_K (4.5 bits) with Q6_K for some attn_v and ffn_down tensors.",
         rel_tol=0.005)
register("ch05-3", "At 8 bits per parameter (INT8, no scales), how many billion parameters fit on the RTX 4090 "
         "with a 4 GB reserve?",
         lambda: gb(max_params("rtx-4090", "int8", reserve="4GB")),
         "billion", "(card bytes - 4e9) / 1 byte per parameter; the card has 24,564 MiB.")
