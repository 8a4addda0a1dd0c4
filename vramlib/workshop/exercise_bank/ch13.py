"""Chapter 13 exercises (design levers): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ...explain.design import billions, equal_params_shape, evaluate_design, gqa_shape
from ..exercises import register


def _max_trainable_b() -> float:
    from ...solve.planning import max_params_model_states  # imported on use: planning is a larger module

    return billions(max_params_model_states("a100-80gb", dp=8, stage=3))


register("ch13-1", "The source's 13B shape with 8 KV heads, bf16 weights and KV cache: the longest single context on "
         "one H100 SXM 80GB, prefill in chunks of 2,048 tokens, 0.5 GB reserved?",
         lambda: evaluate_design(gqa_shape("source-13b", 8), "h100-sxm-80gb", 131072).max_context, "tokens",
         "memory minus weights, reserve and one chunk's workspace, over 2 x 40 x 8 x 128 x 2 bytes per token.")
register("ch13-2", "At the parameter count of the source's 13B shape (13,015,864,320), how many layers does hidden "
         "size 6,144 give (48 heads of 128, multi-head attention, FFN 16,640), rounded to a whole layer?",
         lambda: equal_params_shape("source-13b", hidden=6144).n_layers, "layers",
         "subtract the embeddings and LM head (2 x 32,000 x 6,144) and the final norm, divide by one layer's "
         "parameters.", rel_tol=0.0)
register("ch13-3", "Eight A100 80GB: how many billion parameters can they train at most with fp32 master weights and "
         "AdamW (16 bytes per parameter, sharded evenly, activations ignored)?",
         _max_trainable_b, "billion parameters",
         "an '80 GB' A100 holds 80 GiB = 85.9 GB; 8 of them over 16 bytes per parameter.")
