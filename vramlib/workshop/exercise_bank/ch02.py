"""Chapter 2 exercises: self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...memory.training import lora_params
from ...solve.training_feasibility import max_seq_for_training

register("ch02-1", "LoRA at rank 64 on all linear layers of LLaMA-1 33B: how many adapter parameters?",
         lambda: lora_params("llama-33b", 64), "parameters",
         "r (in + out) for each of q, k, v, o, gate, up, down, times 60 layers; four times rank 16.")
register("ch02-2", "QLoRA on LLaMA-1 33B (NF4 + double quantization, rank 16 on all linear layers, fp32 adapters, "
         "SDPA, full gradient checkpointing, 0.5 GB reserve) on an L40S: the longest sequence at micro-batch 1?",
         lambda: max_seq_for_training("llama-33b", "l40s", method="qlora", recompute="full"), "tokens",
         "the L40S reports 46,068 MiB; each token costs its layer checkpoints, one re-run layer and fp32 logits.")
register("ch02-3", "The same QLoRA step on an RTX A6000 with full checkpointing at micro-batch 4: how many tokens "
         "per sequence?",
         lambda: max_seq_for_training("llama-33b", "rtx-a6000", method="qlora", recompute="full", micro_batch=4),
         "tokens", "the activations scale with micro-batch x sequence: about a quarter of the micro-batch-1 answer.")
