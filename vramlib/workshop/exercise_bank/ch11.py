"""Chapter 11 exercises (pipeline balance): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...plans.parallel import ParallelPlan, in_flight
from ...solve.planning import balance_pipeline

_PLAN = ParallelPlan(tp=8, pp=4, n_micro=8, sequence_parallel=True)

register("ch11-1", "Under 1F1B with p = 8 stages and m = 16 micro-batches, how many micro-batches' activations does "
         "stage 3 (counting from 0) hold at its peak?",
         lambda: int(in_flight(8, 3, 16)), "micro-batches",
         "stage i holds min(p - i, m) micro-batches; the first stage is i = 0.", rel_tol=0)
register("ch11-2", "Llama-2-70B on 32 A100 80GB (TP 8, PP 4, 4,096 tokens, 8 micro-batches, sequence parallelism, no "
         "recomputation, 16 bytes per parameter): how many layers does the balanced split give the first stage?",
         lambda: balance_pipeline("llama-2-70b", _PLAN, 4096, gpu="a100-80gb").layers[0], "layers",
         "the first stage holds 4 micro-batches of activations, the last 1: move layers from the first stage to the "
         "last until the peaks meet.", rel_tol=0)
register("ch11-3", "The same plan with selective recomputation: the even split's spread (max - min) / max, in percent?",
         lambda: float(balance_pipeline("llama-2-70b", _PLAN.with_(recompute="selective"), 4096,
                                        gpu="a100-80gb").even_spread) * 100, "%",
         "compare the first stage (4 micro-batches in flight) with the last (1 micro-batch, plus the head's logits).")
