"""Chapter 8 alternate scenario: Mistral-7B on an H100 and an L4, FP8 KV cache, other vLLM knobs, 8-way TP."""
from __future__ import annotations

import vramlib as vl
from vramlib import serving as S

STEM = "ch08-vllm-vs-nvidia-smi"
PARAMS = dict(model="qwen2.5-7b", gpu="h100-sxm-80gb", small_gpu="l4", kv_dtype="fp8", utilization=0.85,
              block_size=32, max_num_batched_tokens=4096, max_num_seqs=1024, request_tokens=4096,
              tp_model="qwen2.5-72b", tp_gpu="h200", tp=8, lora_slots=2, lora_rank=64, shared_prefix=512,
              draft_model="qwen2.5-7b", spec_tokens=2)      # a drafter must share the target's vocabulary


def expected(p: dict) -> dict:
    knobs = dict(gpu_memory_utilization=p["utilization"], block_size=p["block_size"],
                 max_num_batched_tokens=p["max_num_batched_tokens"], max_num_seqs=p["max_num_seqs"],
                 weights=p["weights"], kv_dtype=p["kv_dtype"], request_tokens=p["request_tokens"])
    card, small = vl.get_gpu(p["gpu"]), vl.get_gpu(p["small_gpu"])
    cap = vl.serving_kv_capacity(p["model"], card, **knobs)
    cap_small = vl.serving_kv_capacity(p["model"], small, **knobs)
    tp_cap = vl.serving_kv_capacity(p["tp_model"], p["tp_gpu"], tp=p["tp"], **knobs)
    checks = S.published_profile_check()
    return {
        "q8_card_mib": vl.units.mib(card.memory_bytes),
        "q8_cuda_total_gib": vl.gib(cap.cuda_total_bytes),
        "q8_drv_mib": vl.units.mib(cap.driver_reserved_bytes),
        "q8_util": p["utilization"],
        "q8_requested_gib": vl.gib(cap.requested_bytes),
        "q8_w_gib": vl.gib(cap.weights_bytes),
        "q8_act_gib": vl.gib(cap.activation_peak_bytes),
        "q8_avail_gib": vl.gib(cap.available_kv_bytes),
        "q8_kv_gib": vl.gib(cap.kv_cache_bytes),
        "q8_blocks": cap.num_blocks,
        "q8_block_bytes": cap.block_bytes,
        "q8_kv_tokens": cap.kv_tokens,
        "q8_conc": cap.max_concurrency,
        "q8_proc_gib": vl.gib(cap.process_bytes),
        "q8_free_gib": vl.gib(cap.free_bytes),
        "q8_headroom_gib": vl.gib(cap.headroom_bytes),
        "q8_small_kv_tokens": cap_small.kv_tokens,
        "q8_small_kv_gib": vl.gib(cap_small.kv_cache_bytes),
        "q8_max_len": cap_small.max_model_len,
        "q8_kv_per_token": vl.kv_bytes_per_token(p["model"], cap.kv_dtype),
        "q8_pub1_est": checks[1]["estimated GiB"],
        "q8_default_seqs_card": vl.vllm_default_batch(card)[1],
        "q8_tp_tokens": tp_cap.kv_tokens,
        "q8_tp_kv_gib": vl.gib(tp_cap.kv_cache_bytes),
        "q8_extra_lora_conc": vl.serving_kv_capacity(p["model"], card, max_loras=p["lora_slots"],
                                                     max_lora_rank=p["lora_rank"], **knobs).max_concurrency,
        "q8_extra_prefix_conc": vl.serving_kv_capacity(p["model"], card, shared_prefix_tokens=p["shared_prefix"],
                                                       **knobs).max_concurrency,
        "q8_extra_draft_conc": vl.serving_kv_capacity(p["model"], card, draft_model=p["draft_model"],
                                                      num_speculative_tokens=p["spec_tokens"], **knobs).max_concurrency,
    }
