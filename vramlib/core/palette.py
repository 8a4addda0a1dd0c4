"""The breakdown colours: one per component family, stable across chapters, the same in Jupyter (viz) and in
the static book (exported by web.jsgen). Used in: every chapter with a breakdown bar.
"""
from __future__ import annotations

from collections.abc import Sequence

# one colour per component family, stable across chapters (colour-blind-safe Okabe-Ito palette)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999", "#000000")


COMPONENT_COLOURS = {"weights": 0, "base weights": 0, "kv cache": 1, "activations": 2, "prefill workspace": 2,
                     "gradients": 3, "optimizer states": 5, "master weights": 4, "quantization constants": 6,
                     "unquantized tensors": 7, "reserve": 8, "lora adapters": 4, "zero-3 gather buffer": 6,
                     "communication buckets": 7, "16-bit gradients": 3}
"""Component name prefix (lower case, before " (") -> PALETTE index; the first match wins (the static book's
calculators read it from the exported data)."""


def component_colour(name: str, order: Sequence[str] = ()) -> str:
    """A stable colour for a component name."""
    key = name.split(" (")[0].lower()
    for k, i in COMPONENT_COLOURS.items():
        if key.startswith(k):
            return PALETTE[i]
    return PALETTE[(list(order).index(name) if name in order else len(key)) % len(PALETTE)]
