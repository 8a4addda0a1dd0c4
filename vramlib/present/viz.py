"""Plots: stacked breakdown bars (matplotlib for figures, SVG for fast widget updates), memory curves.

Used in: every chapter's figures and widget panels; chapter 14 adds bookshelves.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

from ..memory.breakdown import Breakdown
from ..core.palette import COMPONENT_COLOURS, PALETTE, component_colour  # noqa: F401 (vl.viz.PALETTE)
from ..core.table import Table  # noqa: F401 (vl.viz.Table, the chapters' tables)
from ..core.units import gb

def stacked_bars(breakdowns: Sequence[Breakdown], labels: Sequence[str] | None = None, ax=None,
                 capacity: int | None = None, capacity_label: str = "GPU memory", horizontal: bool = False,
                 more_capacities: dict[str, int] | None = None):
    """Stacked bars in GB, one per Breakdown, with a dashed capacity line (and dotted ``more_capacities``)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    labels = list(labels or [b.title for b in breakdowns])
    seen: set[str] = set()
    for i, bd in enumerate(breakdowns):
        base = 0.0
        for name, v in bd.items():
            if not v:
                continue
            kw = dict(color=component_colour(name), label=None if name in seen else name, edgecolor="white")
            if horizontal:
                ax.barh(i, gb(v), left=base, **kw)
            else:
                ax.bar(i, gb(v), bottom=base, **kw)
            seen.add(name)
            base += gb(v)
    if horizontal:
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlabel("memory (GB = 10^9 bytes)")
    else:
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylabel("memory (GB = 10^9 bytes)")
    if capacity is not None:
        line = ax.axvline if horizontal else ax.axhline
        line(gb(capacity), color="black", linestyle="--", linewidth=1)
        (ax.text(gb(capacity), len(labels) - 0.5, f" {capacity_label}", va="top") if horizontal else
         ax.text(len(labels) - 0.5, gb(capacity), f"{capacity_label} ", ha="right", va="bottom"))
    for name, cap in (more_capacities or {}).items():
        (ax.axvline if horizontal else ax.axhline)(gb(cap), color="grey", linestyle=":", linewidth=1)
        (ax.text(gb(cap), len(labels) - 0.5, f" {name}", va="top") if horizontal else
         ax.text(len(labels) - 0.5, gb(cap), f"{name} ", ha="right", va="bottom"))
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.figure.tight_layout()
    return ax


def breakdown_svg(bd: Breakdown, capacity: int | None = None, width: int = 560, height: int = 44) -> str:
    """A horizontal stacked bar as inline SVG (fast enough for every widget update, no matplotlib)."""
    total = bd.total
    scale_max = max(total, capacity or 0) or 1
    x, rects, legend = 0.0, [], []
    for name, v in bd.items():
        if not v:
            continue
        w = width * v / scale_max
        colour = component_colour(name)
        rects.append(f"<rect x='{x:.1f}' y='4' width='{w:.1f}' height='{height - 8}' fill='{colour}'>"
                     f"<title>{html.escape(name)}: {gb(v):.2f} GB</title></rect>")
        legend.append(f"<span style='color:{colour}'>&#9632;</span> {html.escape(name)} {gb(v):.2f} GB")
        x += w
    if capacity is not None:
        cx = width * capacity / scale_max
        rects.append(f"<line x1='{cx:.1f}' x2='{cx:.1f}' y1='0' y2='{height}' stroke='black' stroke-dasharray='4 3'/>")
    fill = "fits" if capacity is None or total <= capacity else "does not fit"
    aria = f"stacked bar: total {gb(total):.2f} GB" + (f", capacity {gb(capacity):.2f} GB, {fill}" if capacity else "")
    return (f"<svg role='img' aria-label='{aria}' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}'>{''.join(rects)}</svg><div style='font-size:85%'>"
            + " &nbsp; ".join(legend) + "</div>")


def memory_curve(xs: Sequence[float], series: dict[str, Sequence[int]], ax=None, capacity: int | None = None,
                 xlabel: str = "context length (tokens)", capacity_label: str = "GPU memory", logx: bool = True):
    """Lines of memory (GB) against ``xs`` for several scenarios, with an optional capacity line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, ys in series.items():
        ax.plot(xs, [gb(y) for y in ys], label=name, marker=".")
    if capacity is not None:
        ax.axhline(gb(capacity), color="black", linestyle="--", linewidth=1, label=capacity_label)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("memory (GB = 10^9 bytes)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    ax.figure.tight_layout()
    return ax
