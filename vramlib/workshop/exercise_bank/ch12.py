"""Chapter 12 exercises (designing TP / PP / DP): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...plans.parallel import ParallelPlan, zero_model_states
from ...solve.planning import largest_trainable_model
from ...core.units import gb

register("ch12-1", "At the source's 12 bytes per parameter, how many GB (10^9 bytes) of model states does each GPU "
         "hold for a 70B model split evenly over TP 8 x PP 2?",
         lambda: gb(zero_model_states(70 * 10**9, convention="source-12", tp=8, pp=2).total), "GB",
         "12 bytes x 70e9 parameters over 16 GPUs.")
register("ch12-2", "What share of a step is the pipeline bubble with p = 8 stages and m = 32 micro-batches, without "
         "interleaving, in percent?",
         lambda: float(ParallelPlan(pp=8, n_micro=32).bubble_fraction) * 100, "%",
         "(p - 1) / (m + p - 1).")
register("ch12-3", "The largest Llama-shaped model (family 'llama-width') that 8 A100 80GB cards train in full with "
         "ZeRO-3, full recomputation, 2,048 tokens and 12 bytes per parameter: how many billion parameters?",
         lambda: largest_trainable_model("a100-80gb", 8, 2048, zero=3, convention="source-12",
                                         recompute="full").n_params / 1e9, "billion parameters",
         "ZeRO-3 shards 12 bytes per parameter over 8 GPUs; full recomputation keeps only each layer's input.")
