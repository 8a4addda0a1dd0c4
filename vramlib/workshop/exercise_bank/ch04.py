"""Chapter 4 exercises (4 x V100 32 GB: training a 7B model): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...plans.parallel import plan_memory
from ...solve.recommend import max_seq_for_plan
from ...solve.training_feasibility import max_seq_for_training
from ...core.units import gb

register("ch04-1", "Full fine-tuning of the source's 7B with ZeRO-3 over 4 x V100 32 GB, fp16, 16 bytes per parameter, "
         "eager attention and full gradient checkpointing, micro-batch 1: the longest sequence that fits?",
         lambda: max_seq_for_plan("source-7b", "v100-32gb", dp=4, zero=3, precision="fp16", attention="eager",
                                  recompute="full"),
         "tokens", "28 GB of states per GPU; the re-run layer still builds eager attention's n_h x s^2 softmax.")
register("ch04-2", "The same step (ZeRO-3 over 4 x V100 32 GB, fp16, eager, full checkpointing) at 2,048 tokens with "
         "bitsandbytes 8-bit AdamW: how many GB (10^9) on each GPU?",
         lambda: gb(plan_memory("source-7b", seq=2048, dp=4, zero=3, precision="fp16", attention="eager",
                                recompute="full", optimizer="adamw-8bit").total),
         "GB", "Adam's 8 bytes per parameter become 2 x (1 + 4/256) = 2.03; the master copy stays 4 bytes.")
register("ch04-3", "QLoRA (rank 16 on all linear layers, NF4 + double quantization) of Llama-2-7B on one V100 32 GB, "
         "fp16, SDPA, no gradient checkpointing, micro-batch 1: the longest sequence?",
         lambda: max_seq_for_training("llama-2-7b", "v100-32gb", method="qlora", precision="fp16"),
         "tokens", "the base is under 4 GB; every token then costs about 6 MB of activations and fp32 logits.")
