"""Chapter 3 exercises (8 x A100 80 GB: the largest model for full fine-tuning): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...plans.parallel import plan_memory
from ...solve.planning import largest_trainable_model
from ...core.units import gb

register("ch03-1", "With the FP32 master copy (16 bytes per parameter), ZeRO-3 over 8 x A100 80 GB, HF activations "
         "with full gradient checkpointing, micro-batch 1 and 4,096 tokens: the largest llama-width model, in "
         "billions of parameters?",
         lambda: largest_trainable_model("a100-80gb", 8, 4096, convention="mixed-fp32-master",
                                         recompute="full").n_params / 1e9,
         "billion parameters", "2 bytes per parameter per GPU of states, plus one layer input per layer and one "
         "re-run layer; bisect over the family's k.")
register("ch03-2", "Llama-2-13B with ZeRO-2 over 8 x A100 80 GB (16 bytes per parameter, 2,048 tokens, micro-batch 1, "
         "full gradient checkpointing, DeepSpeed buckets, 0.5 GB reserve): how many GB (10^9) on each GPU?",
         lambda: gb(plan_memory("llama-2-13b", seq=2048, dp=8, zero=2, recompute="full").total),
         "GB", "ZeRO-2 shards gradients, master weights and Adam states (14 bytes / 8) but keeps all 2-byte weights.")
register("ch03-3", "Llama-65B with ZeRO-3 over 8 GPUs and the optimizer offloaded to the CPU (16 bytes per parameter, "
         "full recompute): how many GB (10^9) of host memory does one node of 8 GPUs need?",
         lambda: gb(plan_memory("llama-65b", seq=2048, dp=8, zero=3, offload_optimizer="cpu",
                                recompute="full").host_bytes_per_node(8)),
         "GB", "the host keeps the FP32 master weights, both Adam moments and the 16-bit gradient shards: 14 bytes "
         "per parameter.")
