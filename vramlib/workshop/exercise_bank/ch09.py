"""Chapter 9 exercises (choosing a GPU configuration for fine-tuning): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...solve.recommend import recommend_gpus
from ...memory.training import OPTIMIZERS
from ...solve.training_feasibility import max_seq_for_training

register("ch09-1", "bitsandbytes 8-bit AdamW: how many bytes per parameter do the optimizer states of a large tensor "
         "take (two 1-byte moments, one fp32 absmax per block of 256 values)?",
         lambda: float(OPTIMIZERS["adamw-8bit"].bytes_per_param),
         "bytes per parameter", "2 x (1 + 4/256): a quarter of AdamW's 8 bytes, not half.")
register("ch09-2", "Full fine-tuning of Llama-2-13B at 2,048 tokens (bf16, AdamW with the fp32 master copy, full "
         "gradient checkpointing, micro-batch 1, 10% headroom, 1/2/4/8 GPUs with ZeRO-3): the hourly cost of the "
         "cheapest catalogue configuration, in dollars?",
         lambda: recommend_gpus("llama-2-13b", "full", 2048, recompute="full")[0].cost_per_hour_usd,
         "$/h", "16 bytes x 13B = 208 GB of states: find the cheapest cards x count whose shard plus activations "
         "fits under 90%.")
register("ch09-3", "QLoRA (NF4 + double quantization, rank 16 on all linear layers) of Llama-2-70B on one RTX A6000, "
         "bf16, SDPA, full gradient checkpointing, micro-batch 1: the longest sequence?",
         lambda: max_seq_for_training("llama-2-70b", "rtx-a6000", method="qlora", recompute="full"),
         "tokens", "about 39 GB of NF4 base and constants; each token then costs 80 layer checkpoints, one re-run "
         "layer and the fp32 logits.")
