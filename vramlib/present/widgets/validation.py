"""Chapter 16's panel: pick a published figure, see vramlib's breakdown against it (explain.validation computes it).
Used in: chapter 16.
"""
from __future__ import annotations

from ...explain.validation import load_published, published_compute, published_predictions


def published_panel(entry: str | None = None):
    """ipywidgets panel: pick a published figure, see vramlib's breakdown against it (chapter 16). The static book
    shows the same choice live (``vramlib/web/js/validation.js``) from :func:`published_predictions`."""
    import ipywidgets as w

    from .base import panel

    ids = [e["id"] for e in load_published()]
    ctl = {"entry": w.Dropdown(options=ids, value=entry or ids[0], description="published figure",
                               style={"description_width": "initial"}, layout=w.Layout(width="520px"))}
    return panel(published_compute, ctl, fixed={"predictions": published_predictions()})
