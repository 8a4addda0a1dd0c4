"""Chapter 15 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...memory.inference import inference_memory
from ...memory.training import training_memory
from ...solve.training_feasibility import max_seq_for_training, size_ratio
from ...core.units import gb

register("ch15-1", "Llama-2-7B, full fine-tuning with 8-bit AdamW, an fp32 master copy (mixed-fp32-master), full "
         "gradient checkpointing, 2,048 tokens, bf16, 0.5 GB reserve: how many GB (10^9) for one step?",
         lambda: gb(training_memory("llama-2-7b", optimizer="adamw-8bit", recompute="full").total), "GB",
         "2 + 2 + 4 bytes per parameter plus about 2 bytes of 8-bit Adam state; checkpoints are 2 h L bytes per token.")
register("ch15-2", "Mistral-7B at 2,048 tokens, no reserve: one full fine-tuning step (AdamW, fp32 master copy, no "
         "checkpointing, fp16) divided by the fp16 inference peak (weights, KV cache, prefill workspace)?",
         lambda: size_ratio(training_memory("mistral-7b", precision="fp16", reserve=0),
                            inference_memory("mistral-7b", tokens=2048, reserve=0)),
         "(ratio)", "16 bytes per parameter plus activations, over 2 bytes per parameter plus a small KV cache.")
register("ch15-3", "With the source's 12 bytes per parameter (source-12) and full gradient checkpointing (fp16, SDPA, "
         "0.5 GB reserve), the longest training sequence for the source's 7B on one H100 SXM 80 GB?",
         lambda: max_seq_for_training("source-7b", "h100-sxm-80gb", convention="source-12", recompute="full",
                                      precision="fp16"),
         "tokens", "the card holds 85.5 GB; 84 GB of states and 0.5 GB of reserve leave about 1 GB for activations.")
