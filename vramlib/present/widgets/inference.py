"""Inference panels: heads, KV heads, weight and KV formats, context, batch, attention, GPU (chapters 1, 5, 7)."""
from __future__ import annotations

from ...solve.feasibility import max_tokens
from ...catalog.hardware import GPUS, get_gpu
from ...memory.inference import DEFAULT_RESERVE, inference_memory
from ...catalog.models import get_model
from ...catalog.precision import precision_names
from ...core.units import bytes_text
from ...core.portable import fmt_fixed, portable
from .base import Computed, bounded_int, panel


def inference_compute(model, n_heads: int, n_kv_heads: int, weights: str, kv_dtype: str, tokens: int, gpu: str,
                      attention: str = "sdpa", batch: int = 1, reserve: str = DEFAULT_RESERVE) -> Computed:
    """One update of an inference panel (chapters 1, 5, 7): breakdown, GPU capacity, verdict with max context."""
    m = get_model(model).as_heads(n_heads, n_kv_heads)
    card = get_gpu(gpu)
    bd = inference_memory(m, weights, kv_dtype, tokens, batch, attention, reserve)
    longest = max_tokens(m, card.memory_bytes, weights, kv_dtype, batch, reserve, attention=attention)
    return bd, card.memory_bytes, inference_verdict(card.key, bd.free_bytes(card), batch, longest, m.max_context)


@portable
def inference_verdict(card, free, batch, longest, max_context):
    """The inference panels' verdict: fits with so much free or short by so much, and the longest context."""
    head = ("Fits on " + card + ": " + bytes_text(free, 1) + " free." if free >= 0 else
            "Does not fit on " + card + ": short by " + bytes_text(-free, 1) + ".")
    return (head + " Longest context at batch " + str(batch) + ": " + fmt_fixed(longest, 0, True) + " tokens" +
            (" (the model was trained for " + fmt_fixed(max_context, 0, True) + ")." if longest > max_context else "."))


def inference_panel(model, gpu: str = "rtx-4090", weights: str = "int4", kv_dtype: str = "fp16", tokens: int = 4096,
                    attention: str = "sdpa", batch: int = 1):
    """Controls: heads, KV heads, weight format, KV format, context, batch, attention, GPU (chapters 1, 5, 7)."""
    import ipywidgets as w

    m = get_model(model)
    style = {"description_width": "initial"}
    kv_formats = ["fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4"]
    controls = {
        "n_heads": bounded_int(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "weights": w.Dropdown(options=precision_names(), value=weights, description="weights", style=style),
        "kv_dtype": w.Dropdown(options=kv_formats, value=kv_dtype, description="KV cache", style=style),
        "tokens": bounded_int(value=tokens, min=1, max=10**7, step=1024, description="context (tokens)", style=style),
        "batch": bounded_int(value=batch, min=1, max=4096, description="batch", style=style),
        "attention": w.Dropdown(options=["sdpa", "flash", "eager"], value=attention, description="attention", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
    }
    return panel(inference_compute, controls, fixed={"model": m})
