"""Widget panels: controls -> a compute function -> a Breakdown table, an SVG bar and a verdict.

Bad combinations show a one-line message in place (never a traceback). Each update is pure
vramlib arithmetic plus HTML, well under 50 ms (``tools/bench.py``). Used in: every chapter.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .breakdown import Breakdown
from .errors import VramlibError
from .units import gb, gib
from .viz import breakdown_svg

Computed = tuple[Breakdown, int | None, str]
"""What a panel's compute function returns: the breakdown, the capacity in bytes (or None), a verdict line."""


def render(result: Computed | Exception) -> str:
    """HTML for a computed result, or the one-line error message of a VramlibError."""
    if isinstance(result, Exception):
        return f"<div class='vramlib-error' style='color:#b00020'>&#9888; {result}</div>"
    bd, cap, verdict = result
    head = f"<p><b>{verdict}</b></p>" if verdict else ""
    capline = f" of {gb(cap):,.2f} GB ({gib(cap):,.2f} GiB)" if cap else ""
    return (head + breakdown_svg(bd, cap) + bd._repr_html_()
            + f"<p><small>total {gb(bd.total):,.2f} GB ({gib(bd.total):,.2f} GiB){capline}</small></p>")


def evaluate_panel(compute: Callable[..., Computed], values: Mapping[str, Any]) -> str:
    """Run ``compute(**values)`` and render it; VramlibError becomes an in-place message."""
    try:
        return render(compute(**values))
    except VramlibError as e:
        return render(e)


def panel(compute: Callable[..., Computed], controls: Mapping[str, Any]):
    """An ipywidgets VBox: ``controls`` (name -> widget) drive ``compute(**values)``; output is an HTML widget."""
    import ipywidgets as w

    out = w.HTML()

    def update(_=None) -> None:
        out.value = evaluate_panel(compute, {k: c.value for k, c in controls.items()})

    for c in controls.values():
        c.observe(update, names="value")
    update()
    return w.VBox([w.HBox(list(controls.values())[i:i + 3]) for i in range(0, len(controls), 3)] + [out])


def model_controls(model, gpu_names: list[str] | None = None, precisions: list[str] | None = None,
                   **extra) -> dict[str, Any]:
    """The standard knobs every chapter offers: heads, KV heads, precision (plus chapter-specific ``extra``)."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    ctl: dict[str, Any] = {
        "n_heads": w.BoundedIntText(value=model.n_heads, min=1, max=256, description="heads", style=style),
        "n_kv_heads": w.BoundedIntText(value=model.n_kv_heads, min=1, max=256, description="KV heads", style=style),
    }
    if precisions:
        ctl["weights"] = w.Dropdown(options=precisions, value=precisions[0], description="weights", style=style)
    if gpu_names:
        ctl["gpu"] = w.Dropdown(options=gpu_names, value=gpu_names[0], description="GPU", style=style)
    ctl.update(extra)
    return ctl


def inference_compute(model, n_heads: int, n_kv_heads: int, weights: str, kv_dtype: str, tokens: int, gpu: str,
                      attention: str = "sdpa", batch: int = 1, reserve: str = "0.5GB") -> Computed:
    """One update of an inference panel (chapters 1, 5, 7): breakdown, GPU capacity, verdict with max context."""
    from .feasibility import max_tokens
    from .hardware import get_gpu
    from .inference import inference_memory
    from .models import get_model
    from .units import fmt_bytes

    m = get_model(model).with_heads(n_heads, n_kv_heads)
    card = get_gpu(gpu)
    bd = inference_memory(m, weights, kv_dtype, tokens, batch, attention, reserve)
    longest = max_tokens(m, card.memory_bytes, weights, kv_dtype, batch, reserve, attention=attention)
    if bd.total <= card.memory_bytes:
        verdict = f"Fits on {card.key}: {fmt_bytes(card.memory_bytes - bd.total)} free."
    else:
        verdict = f"Does not fit on {card.key}: short by {fmt_bytes(bd.total - card.memory_bytes)}."
    verdict += f" Longest context at batch {batch}: {longest:,} tokens" + (
        f" (the model was trained for {m.max_context:,})." if longest > m.max_context else ".")
    return bd, card.memory_bytes, verdict


def inference_panel(model, gpu: str = "rtx-4090", weights: str = "int4", kv_dtype: str = "fp16", tokens: int = 4096,
                    attention: str = "sdpa", batch: int = 1):
    """Controls: heads, KV heads, weight format, KV format, context, batch, attention, GPU (chapters 1, 5, 7)."""
    import ipywidgets as w

    from .hardware import GPUS
    from .models import get_model
    from .precision import precision_names

    m = get_model(model)
    style = {"description_width": "initial"}
    kv_formats = ["fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4"]
    controls = {
        "n_heads": w.BoundedIntText(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": w.BoundedIntText(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "weights": w.Dropdown(options=precision_names(), value=weights, description="weights", style=style),
        "kv_dtype": w.Dropdown(options=kv_formats, value=kv_dtype, description="KV cache", style=style),
        "tokens": w.BoundedIntText(value=tokens, min=1, max=10**7, step=1024, description="context (tokens)", style=style),
        "batch": w.BoundedIntText(value=batch, min=1, max=4096, description="batch", style=style),
        "attention": w.Dropdown(options=["sdpa", "flash", "eager"], value=attention, description="attention", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
    }
    return panel(lambda **v: inference_compute(m, **v), controls)
