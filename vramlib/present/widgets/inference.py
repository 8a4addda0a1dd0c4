"""Inference panels: model, heads, KV heads, weight and KV formats, context, batch, attention, GPU (chapters 1, 5, 7).

The model control offers every catalogue model (the 2025 per-layer stacks too: their weights and KV cache are
per-layer portable code); the chapter's model is its first choice. A new model brings its own heads and KV heads
(:func:`inference_linked`, the static calculator's ``linked`` in ``vramlib/web/js/inference.js``).
"""
from __future__ import annotations

from ...solve.feasibility import max_tokens
from ...catalog.hardware import GPUS, get_gpu
from ...core.errors import VramlibError
from ...memory.inference import DEFAULT_RESERVE, inference_memory
from ...catalog.models import ModelSpec, get_model, model_names
from ...catalog.precision import precision_names
from ...core.units import bytes_text
from ...core.portable import fmt_fixed, portable
from .base import Computed, bounded_int, panel


def panel_model(model, own_model: ModelSpec | None = None) -> ModelSpec:
    """The inference panel's model: ``own_model`` (the spec the panel was opened with, which may differ from or be
    missing in the catalogue) when ``model`` is its name; else a catalogue key or a ModelSpec (:func:`get_model`)."""
    if own_model is not None and isinstance(model, str) and model == own_model.name:
        return own_model
    return get_model(model)


def inference_compute(model, n_heads: int, n_kv_heads: int, weights: str, kv_dtype: str, tokens: int, gpu: str,
                      attention: str = "sdpa", batch: int = 1, reserve: str = DEFAULT_RESERVE,
                      own_model: ModelSpec | None = None) -> Computed:
    """One update of an inference panel (chapters 1, 5, 7): breakdown, GPU capacity, verdict with max context.

    ``model``: the model control's key (a catalogue name, or ``own_model``'s name: :func:`panel_model`) or a
    ModelSpec; ``n_heads`` / ``n_kv_heads`` change its heads (``ModelSpec.as_heads``; a shape that refuses the change
    raises its one-line VramlibError)."""
    m = panel_model(model, own_model).as_heads(n_heads, n_kv_heads)
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


def inference_models(own: ModelSpec) -> list[str]:
    """The model control's keys: the panel's own model first, then every other catalogue model (``model_names``)."""
    return [own.name] + [n for n in model_names() if n != own.name]


def inference_linked(name: str, values: dict) -> dict:
    """After control ``name`` changed, the controls it sets first: a new model brings its own heads and KV heads.
    A key that names no model sets nothing (the update then shows its one-line error)."""
    if name != "model":
        return {}
    try:
        m = panel_model(values["model"], values.get("own_model"))
    except VramlibError:
        return {}
    return {"n_heads": m.n_heads, "n_kv_heads": m.n_kv_heads}


def inference_panel(model, gpu: str = "rtx-4090", weights: str = "int4", kv_dtype: str = "fp16", tokens: int = 4096,
                    attention: str = "sdpa", batch: int = 1):
    """Controls: model (any catalogue model; ``model`` first), heads, KV heads, weight format, KV format, context,
    batch, attention, GPU (chapters 1, 5, 7)."""
    import ipywidgets as w

    m = get_model(model)
    style = {"description_width": "initial"}
    kv_formats = ["fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4"]
    controls = {
        "model": w.Dropdown(options=inference_models(m), value=m.name, description="model", style=style),
        "n_heads": bounded_int(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "weights": w.Dropdown(options=precision_names(), value=weights, description="weights", style=style),
        "kv_dtype": w.Dropdown(options=kv_formats, value=kv_dtype, description="KV cache", style=style),
        "tokens": bounded_int(value=tokens, min=1, max=10**7, step=1024, description="context (tokens)", style=style),
        "batch": bounded_int(value=batch, min=1, max=4096, description="batch", style=style),
        "attention": w.Dropdown(options=["sdpa", "flash", "eager"], value=attention, description="attention", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
    }
    return panel(inference_compute, controls, fixed={"own_model": m}, linked=inference_linked)
