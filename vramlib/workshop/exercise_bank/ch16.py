"""Chapter 16 exercises (validation): self-checking questions whose answers vramlib computes (registered with workshop.exercises)."""
from __future__ import annotations

from ..exercises import register
from ...memory.inference import kv_cache_bytes
from ...core.units import gb, gib, mib


def _real_bf16_states() -> float:
    from ...explain.validation import real_setup_bytes
    return gb(real_setup_bytes("llama-3.1-8b", "bf16").total)


def _deepspeed_t0() -> float:
    from ...plans.parallel import deepspeed_zero3_estimate
    return gib(deepspeed_zero3_estimate(2_783_959_040, 65_798_144, cpu_offload=False, cpu_offload_params=False,
                                        zero_init=True).gpu_bytes)


register("ch16-1", "llama.cpp printed 'memory_size = 256.00 MB' for LLaMA-7B at n_ctx 512 with a 16-bit KV cache: "
         "the cache in MiB?", lambda: mib(kv_cache_bytes("llama-7b", 512, dtype="fp16")), "MiB",
         "2 x 32 layers x 32 KV heads x 128 x 2 bytes x 512 tokens, divided by 2^20.")
register("ch16-2", "Llama-3.1-8B trained with torch.optim.AdamW on bf16 parameters: weights + gradients + optimizer "
         "states in GB (10^9 bytes)?", _real_bf16_states, "GB",
         "AdamW's moments follow the parameters' dtype: 2 + 2 + 2 x 2 = 8 bytes per parameter.")
register("ch16-3", "DeepSpeed's ZeRO-3 estimator, 2,783,959,040 parameters, largest layer 65,798,144, one GPU, no "
         "offload: how many GiB?", _deepspeed_t0, "GiB",
         "18 bytes per parameter plus 4 bytes per parameter of the largest layer, divided by 2^30.")
