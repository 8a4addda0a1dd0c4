"""Chapter 10 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ...memory.activations import activation_bytes
from ..exercises import register
from ...solve.training_feasibility import linear_until, scaling_ratio
from ...core.units import gb

register("ch10-1", "By the source's own rule (activations b s h L x 40, 12 bytes per parameter, no reserve), what is "
         "the 7B/1B training-memory ratio of the source's shapes at 8,192 tokens?",
         lambda: scaling_ratio("source-7b", "source-1b", 8192, "source", convention="source-12", reserve=0),
         "(ratio)", "(84 GB + 8192 x 4096 x 32 x 40 B) / (12 GB + 8192 x 2048 x 16 x 40 B).")
register("ch10-2", "With the measured (hf) accounting and full gradient checkpointing, up to how many tokens does the "
         "7B/1B memory ratio of the source's shapes stay within 10% of 7 (12 bytes per parameter, no reserve)?",
         lambda: linear_until("source-7b", "source-1b", recompute="full", convention="source-12", reserve=0),
         "tokens", "the checkpoints cost 2 h L bytes per token: 262,144 for the 7B, 65,536 for the 1B, plus the "
         "loss head's fp32 logits, 4 V bytes per token for both.")
register("ch10-3", "Megatron's accounting with selective recomputation: how many GB (10^9) of activations for the "
         "source's 1B shape at 2,048 tokens, batch 1 (embeddings, final norm and logits included)?",
         lambda: gb(activation_bytes("source-1b", 2048, style="megatron", recompute="selective", scope="model")),
         "GB", "34 s b h per layer, 16 layers, plus 5 s b h and 4 s b V outside the layers.")
