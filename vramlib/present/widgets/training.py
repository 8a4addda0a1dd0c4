"""Training panels: heads, KV heads, precision, method (full / LoRA / QLoRA), LoRA rank and adapter dtype, optimizer,
convention (fp32-autocast too), recompute, attention kernel, activation accounting, sequence, micro-batch, GPU, and
the peak (the sum of the parts, or the step's largest phase) (chapters 2, 3, 4, 9, 10, 15).

The verdict names the longest sequence that fits the card (:func:`vramlib.solve.training_feasibility.max_seq_for_training`).
The panel passes ``training_compute`` with ``fixed={"model", "reserve"}``, so a static-page calculator named
``training`` can take it over (see :mod:`vramlib.present.widgets`).
"""
from __future__ import annotations

from ...memory.activations import ACTIVATION_STYLES, ATTENTION, RECOMPUTE
from ...memory.inference import DEFAULT_RESERVE
from ...core.errors import check_positive_int
from ...catalog.hardware import GPUS, get_gpu
from ...catalog.models import get_model
from ...memory.step import AUTOCAST, LORA_DTYPES, PEAKS
from ...memory.training import CONVENTIONS, METHODS, OPTIMIZERS, TRAINING_PRECISIONS, training_memory
from ...solve.training_feasibility import max_seq_for_training
from ...core.units import bytes_text
from ...core.portable import fmt_fixed, portable
from .base import Computed, dropdown, int_box, panel



def training_compute(model, n_heads: int, n_kv_heads: int, precision: str, method: str, lora_rank: int,
                     optimizer: str, convention: str, recompute: str, attention: str, seq: int, micro_batch: int,
                     gpu: str, activation_style: str = "hf", reserve: int | str = DEFAULT_RESERVE,
                     lora_targets: str = "all-linear", peak: str = "sum", lora_dtype: str = "fp32",
                     optimizer_impl: str | None = None) -> Computed:
    """One update of a training panel: the step's Breakdown, the GPU's memory, and a verdict with the longest
    sequence that fits (chapters 2, 3, 4, 9, 10, 15). ``peak``: sum (of the parts) or step (its largest phase, as
    PyTorch allocates it; the title names the phase)."""
    m = get_model(model).as_heads(n_heads, n_kv_heads)
    card = get_gpu(gpu)
    seq = check_positive_int("seq", seq)
    kw = dict(method=method, precision=precision, optimizer=optimizer, convention=convention, recompute=recompute,
              attention=attention, lora_rank=lora_rank, lora_targets=lora_targets, micro_batch=micro_batch,
              activation_style=activation_style, reserve=reserve, peak=peak, lora_dtype=lora_dtype,
              optimizer_impl=optimizer_impl)
    bd = training_memory(m, seq=seq, **kw)
    longest = max_seq_for_training(m, card.memory_bytes, **kw)
    return bd, card.memory_bytes, training_verdict(card.key, bd.free_bytes(card), micro_batch, longest, m.max_context)


@portable
def training_verdict(card, free, micro_batch, longest, max_context):
    """The training panels' verdict: fits with so much free or short by so much, and the longest sequence (or that
    not one token fits)."""
    head = ("Fits on " + card + ": " + bytes_text(free, 1) + " free." if free >= 0 else
            "Does not fit on " + card + ": short by " + bytes_text(-free, 1) + ".")
    if longest == 0:
        return head + " Not even one token fits at micro-batch " + str(micro_batch) + ": the states alone are too large."
    return (head + " Longest sequence at micro-batch " + str(micro_batch) + ": " + fmt_fixed(longest, 0, True) +
            " tokens" + (" (the model was trained for " + fmt_fixed(max_context, 0, True) + ")." if longest > max_context
                         else "."))


def training_panel(model, gpu: str = "rtx-a6000", method: str = "qlora", precision: str = "bf16", lora_rank: int = 16,
                   optimizer: str = "adamw", convention: str = "mixed-fp32-master", recompute: str = "full",
                   attention: str = "sdpa", seq: int = 2048, micro_batch: int = 1, activation_style: str = "hf",
                   reserve: int | str = DEFAULT_RESERVE, peak: str = "sum", lora_dtype: str = "fp32"):
    """Controls: heads, KV heads, precision, method, LoRA rank, adapter dtype, optimizer, convention, recompute,
    attention, activation accounting, sequence, micro-batch, GPU, and how the parts combine (sum, or the step's
    largest phase) (chapters 2, 3, 4, 9, 10, 15)."""

    m = get_model(model)
    drop = dropdown

    controls = {
        "n_heads": int_box(m.n_heads, 1, 512, "heads"),
        "n_kv_heads": int_box(m.n_kv_heads, 1, 512, "KV heads"),
        "precision": drop(TRAINING_PRECISIONS, precision, "precision"),
        "method": drop(METHODS, method, "method"),
        "lora_rank": int_box(lora_rank, 1, 4096, "LoRA rank"),
        "lora_dtype": drop(LORA_DTYPES, lora_dtype, "adapter dtype"),
        "optimizer": drop(OPTIMIZERS, optimizer, "optimizer"),
        "convention": drop(list(CONVENTIONS) + [AUTOCAST], convention, "convention"),
        "recompute": drop(RECOMPUTE, recompute, "recompute"),
        "attention": drop(ATTENTION, attention, "attention"),
        "activation_style": drop(ACTIVATION_STYLES, activation_style, "activations"),
        "seq": int_box(seq, 1, 10**7, "sequence (tokens)", step=512),
        "micro_batch": int_box(micro_batch, 1, 4096, "micro-batch"),
        "gpu": drop(sorted(GPUS), gpu, "GPU"),
        "peak": drop(PEAKS, peak, "peak"),
    }
    return panel(training_compute, controls, fixed={"model": m, "reserve": reserve})
