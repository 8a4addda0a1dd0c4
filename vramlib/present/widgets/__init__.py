"""Jupyter panels (ipywidgets): the panel framework in :mod:`.base`, one submodule per chapter family
(``inference``: chapters 1, 5, 7; ``training``: 2, 10, 15; ``finetune``: 3, 4; ``parallel``: 11, 12;
``recommend``: 9; ``serving``: 6, 8; ``design``: 13; ``bookshelf``: 14; ``validation``: 16).

This package only re-exports; the submodules import :mod:`.base`, never this file, so there is no cycle.
"""
from __future__ import annotations

from .base import (  # noqa: F401
    Computed, bounded_int, calculator_name, control_spec, dropdown, evaluate_panel, int_box, model_controls,
    model_with_heads, panel, panel_plan, range_problem, render, static_html, with_static_view,
)
from .inference import inference_compute, inference_panel  # noqa: F401  (chapters 1, 5, 7)
from .validation import published_panel  # noqa: F401  (chapter 16)

__all__ = [
    "Computed", "bounded_int", "calculator_name", "control_spec", "dropdown", "evaluate_panel", "inference_compute",
    "inference_panel", "int_box", "model_controls", "model_with_heads", "panel", "panel_plan", "published_panel",
    "range_problem", "render", "static_html", "with_static_view",
]


def __getattr__(name: str):
    if name == "Panel":  # built on first use so that `import vramlib` does not import ipywidgets
        from .base import _panel_class

        return _panel_class()
    raise AttributeError(f"module 'vramlib.present.widgets' has no attribute {name!r}")
