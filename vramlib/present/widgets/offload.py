"""Offload panel: a model split between a GPU and host memory as llama.cpp splits it, and its decode roofline
(chapter 17).

Knobs: model, heads, KV heads, GGUF weights, GPU, host memory (DRAM kind), installed RAM, context, -ngl ("auto": the
most layers that fit), --cpu-moe, flash attention, K cache type. The bar shows the GPU's buffers against what the
card leaves after the CUDA context; the verdict gives where the layers are, both sides' memory and the tokens per
second the two bandwidths allow (:func:`vramlib.serve.offload.offload_verdict`).
"""
from __future__ import annotations

from ...catalog.hardware import GPUS, get_gpu
from ...catalog.hosts import HOSTS
from ...catalog.models import ModelSpec, get_model, model_names
from ...catalog.precision import GGUF_MIXES
from ...core.errors import check_positive_int
from ...serve.llamacpp import KV_TYPES, LlamaCppConfig
from ...serve.offload import offload_plan, offload_verdict
from ...core.portable import portable
from .base import Computed, bounded_int, panel
from .inference import inference_linked, panel_model

AUTO = "auto"
"""The -ngl choice that asks for the most layers that fit."""


@portable
def panel_type_v(type_k, flash_attn):
    """The panel's one cache-type control sets V too, where llama.cpp allows it: a quantized V needs flash
    attention, so without it V stays f16."""
    return type_k if flash_attn else "f16"


def offload_compute(model, n_heads: int, n_kv_heads: int, weights: str, gpu: str, host: str, host_ram: str,
                    n_ctx: int, n_gpu_layers, cpu_moe: bool = False, flash_attn: bool = True,
                    type_k: str = "f16", own_model: ModelSpec | None = None) -> Computed:
    """One update of the offload panel: (the GPU's Breakdown, its budget, the verdict line). ``model``: the model
    control's key, or ``own_model``'s name (``inference.panel_model``)."""
    m = panel_model(model, own_model).as_heads(n_heads, n_kv_heads)
    card = get_gpu(gpu)
    ctx = LlamaCppConfig(n_ctx=n_ctx, flash_attn=flash_attn, type_k=type_k, type_v=panel_type_v(type_k, flash_attn))
    ngl = None if n_gpu_layers == AUTO else check_positive_int("n_gpu_layers", n_gpu_layers, allow_zero=True)
    p = offload_plan(m, card, weights, host=host, host_ram=host_ram, cpu_moe=cpu_moe, llamacpp=ctx, n_gpu_layers=ngl)
    x = {"gpu": list(p.gpu.items()), "host": list(p.host.items()), "layers_on_gpu": p.layers_on_gpu,
         "output_on_gpu": p.output_on_gpu, "ngl": p.n_gpu_layers, "read": [p.read_gpu, p.read_host],
         "rate": [p.seconds_per_token, p.tokens_per_s]}
    return p.gpu, p.gpu_budget, offload_verdict(x, m.n_layers, p.gpu_budget, p.host_budget)


def offload_panel(model, gpu: str = "rtx-4090", weights: str = "q4_k_m", host: str = "ddr5-5600-2ch",
                  host_ram: str = "64GB", n_ctx: int = 8192):
    """Controls: model, heads, KV heads, GGUF weights, GPU, host memory, RAM, context, -ngl, --cpu-moe, flash
    attention, K cache type (chapter 17)."""
    import ipywidgets as w

    m = get_model(model)
    style = {"description_width": "initial"}
    controls = {
        "model": w.Dropdown(options=[m.name] + [n for n in model_names() if n != m.name], value=m.name,
                            description="model", style=style),
        "n_heads": bounded_int(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "weights": w.Dropdown(options=list(GGUF_MIXES), value=weights, description="weights (GGUF)", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
        "host": w.Dropdown(options=list(HOSTS), value=host, description="host memory", style=style),
        "host_ram": w.Dropdown(options=["16GB", "32GB", "64GB", "96GB", "128GB", "192GB", "256GB", "512GB"],
                               value=host_ram, description="RAM", style=style),
        "n_ctx": bounded_int(value=n_ctx, min=256, max=2**20, step=1024, description="context (-c)", style=style),
        "n_gpu_layers": w.Dropdown(options=[AUTO] + list(range(0, 257)), value=AUTO, description="-ngl", style=style),
        "cpu_moe": w.Checkbox(value=False, description="--cpu-moe"),
        "flash_attn": w.Checkbox(value=True, description="flash attention (-fa)"),
        "type_k": w.Dropdown(options=list(KV_TYPES), value="f16", description="KV cache type (-ctk/-ctv)",
                             style=style),
    }
    return panel(offload_compute, controls, fixed={"own_model": m}, linked=inference_linked)
