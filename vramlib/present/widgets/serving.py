"""Serving panel: vLLM's KV-cache budget for a model on a GPU (chapters 6 and 8).

Knobs: heads, KV heads, weight and KV formats, GPU, tensor parallelism, gpu_memory_utilization,
block size, max_num_batched_tokens and the request length. The table and bar show one GPU's memory
as nvidia-smi counts it; the verdict gives KV blocks, tokens and concurrency, or why vLLM would not start.
"""
from __future__ import annotations

from ...core.portable import Fields, fmt_fixed, portable

from ...catalog.hardware import GPUS, get_gpu
from ...catalog.models import get_model
from ...catalog.precision import precision_names
from ...serve.serving import serving_verdict, ServingConfig, serving_kv_capacity, vllm_default_batch
from ...core.errors import check_positive_int
from .base import Computed, bounded_int, panel

KV_FORMATS = ["auto", "fp8", "fp8_e5m2", "fp16", "bf16", "fp32"]


def serving_compute(model, n_heads: int, n_kv_heads: int, weights: str, kv_dtype: str, gpu: str, tp: int,
                    gpu_memory_utilization: float, block_size: int, max_num_batched_tokens: int,
                    request_tokens: int, max_num_seqs: int | None = None) -> Computed:
    """One update of the serving panel: (Breakdown per GPU, the card's memory, verdict with blocks / concurrency)."""
    m = get_model(model).as_heads(n_heads, n_kv_heads)
    card = get_gpu(gpu)
    config = ServingConfig(gpu_memory_utilization=gpu_memory_utilization, tp=tp, block_size=block_size,
                           max_num_batched_tokens=check_positive_int("max_num_batched_tokens", max_num_batched_tokens),
                           weights=weights, kv_dtype=kv_dtype,
                           request_tokens=request_tokens, max_num_seqs=max_num_seqs,
                           max_model_len=check_positive_int("request tokens", request_tokens))
    cap = serving_kv_capacity(m, card, config)
    return cap.breakdown, card.memory_bytes, serving_panel_verdict(Fields(cap), request_tokens)


@portable
def serving_panel_verdict(c, request_tokens):
    """The serving panel's verdict: the budget's line and, when vLLM starts, the requests it holds at once."""
    verdict = serving_verdict(c)
    if c["starts"]:
        verdict += (" At most " + fmt_fixed(c["max_concurrent_requests"], 0, True) + " requests of " +
                    fmt_fixed(request_tokens, 0, True) + " tokens at once.")
    return verdict


def serving_panel(model, gpu: str = "a100-80gb", weights: str = "bf16", kv_dtype: str = "auto", tp: int = 1,
                  gpu_memory_utilization: float = 0.9, block_size: int = 16, max_num_batched_tokens: int | None = None,
                  request_tokens: int = 8192):
    """Controls: heads, KV heads, weights, KV cache dtype, GPU, tp, utilization, block size, batched tokens, request
    length. ``max_num_batched_tokens`` None: what ``vllm serve`` picks on ``gpu`` (``vllm_default_batch``)."""
    import ipywidgets as w

    m = get_model(model)
    if max_num_batched_tokens is None:
        max_num_batched_tokens = vllm_default_batch(gpu)[0]
    style = {"description_width": "initial"}
    controls = {
        "n_heads": bounded_int(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "weights": w.Dropdown(options=precision_names(), value=weights, description="weights", style=style),
        "kv_dtype": w.Dropdown(options=KV_FORMATS, value=kv_dtype, description="--kv-cache-dtype", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
        "tp": w.Dropdown(options=[1, 2, 4, 8, 16], value=tp, description="tensor parallel", style=style),
        "gpu_memory_utilization": w.BoundedFloatText(value=gpu_memory_utilization, min=0.05, max=1.0, step=0.01,
                                                     description="gpu_memory_utilization", style=style),
        "block_size": w.Dropdown(options=[8, 16, 32, 64, 128], value=block_size, description="block size", style=style),
        "max_num_batched_tokens": bounded_int(value=max_num_batched_tokens, min=1, max=2**20, step=1024,
                                                   description="max_num_batched_tokens", style=style),
        "request_tokens": bounded_int(value=request_tokens, min=1, max=2**21, step=1024,
                                           description="request (tokens)", style=style),
    }
    return panel(serving_compute, controls, fixed={"model": m})
