"""Widget panels: controls -> a compute function -> a Breakdown table, an SVG bar and a verdict.

Bad combinations show a one-line message in place (never a traceback). Each update is pure
vramlib arithmetic plus HTML, well under 50 ms (``tools/bench.py``). Used in: every chapter.

Chapter-specific panels live in submodules by concept: ``widgets.inference`` (chapters 1, 5, 7).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..breakdown import Breakdown
from ..errors import VramlibError
from ..units import gb, gib
from ..viz import breakdown_svg

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
    except Exception as e:  # a bug, not a bad input: still one line in place, never a traceback
        return render(VramlibError(f"internal error ({type(e).__name__}): {e}; please report it"))


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

from .inference import inference_compute, inference_panel  # noqa: E402,F401  (chapters 1, 5, 7)
