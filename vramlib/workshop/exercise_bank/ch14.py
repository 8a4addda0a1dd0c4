"""Chapter 14 exercises (the bookshelf): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ...explain.bookshelf import shelf_layout
from ..exercises import register
from ...solve.feasibility import max_tokens
from ...memory.inference import kv_cache_bytes
from ...memory.training import training_memory
from ...core.units import gb

register("ch14-1", "How many GB (10^9) of sticky notes (KV cache, bf16) does Llama-3.1-8B need for 8 conversations "
         "of 4,096 tokens each?",
         lambda: gb(kv_cache_bytes("llama-3.1-8b", 4096, batch=8, dtype="bf16")), "GB",
         "each token writes 2 x 32 layers x 8 KV heads x 128 x 2 bytes; every conversation keeps its own notes.")
register("ch14-2", "How many times the length of an RTX 4090's shelf is the pile for fully training Llama-3.1-8B "
         "(bf16, AdamW, fp32 master weights, 2,048-token texts, micro-batch 1)?",
         lambda: shelf_layout(training_memory("llama-3.1-8b", seq=2048), "rtx-4090").shelves_needed, "shelves",
         "16 bytes per number for books, scratch paper, ledgers and calculators, plus the notebooks; over 24 GiB.")
register("ch14-3", "With Q4_K_M books and bf16 notes, the longest single conversation Llama-3.1-8B can hold on an "
         "RTX 4090, the question read in chunks of 2,048 tokens, 0.5 GB reserved?",
         lambda: max_tokens("llama-3.1-8b", "rtx-4090", "q4_k_m", "bf16", attention="sdpa", prefill_chunk=2048),
         "tokens", "the shelf minus the books and the reserve, over 131,072 bytes of notes per token (less the "
         "reading space).")
