"""The peak of one data-parallel rank's training step under ZeRO-3 as PyTorch's FSDP2 runs it (issue 13: the plans'
phases).

``fully_shard`` on every decoder layer and on the root model keeps each rank's shard of every parameter, gradient
and optimizer state, all-gathers a layer's parameters before its forward and again before its backward (resharding
after forward), prefetches the next layer's while one computes, and reduce-scatters a layer's gradients as soon as
its backward ends; the root's parameters (embeddings, final norm, LM head) stay gathered from forward to the end of
backward. Measured at full size on one rank over ``torch.distributed``'s fake process group
(``tools/measure/fsdp_peaks.py`` -> ``vramlib/data/measured/fsdp_peaks.json``), the rank's allocations follow these
moments, written here as expressions:

* **forward end** -- the loss is computed: every saved activation (``M_act``), the caller's ``b_a`` logits and their
  fp32 upcast ((b_a + 4) T V), the gathered root (``M_root``) and one gathered layer (``P_u``).
* **loss backward** -- the logits are gone, the loss's two fp32 T x V gradients (8 T V, as on one GPU) are alive, the
  last layer is being gathered for its backward (``P_u``).
* **backward** -- inside a layer's MLP backward after k layers are done (k = 0, 1, L - 2, L - 1: the expression is
  linear in k between them): the layer gathered, the next one prefetched (not for the first layer), the previous
  layer's reduce-scatter buffer (``G_l``, from k = 1), k layers' gradient shards (``G_l / N_d`` each), the root's
  unsharded LM-head gradient (``M_head``), the saved activations less the loss and head tensors (``A_head``) and
  less what each finished layer frees (``A_done``), a re-run layer with recomputation (``M_rerun``), and the layer
  backward's working set (``W_bwd``: :data:`LAYER_BACKWARD_WORK`, measured in the gated MLP's backward).
* **backward end** -- the root's gradients unsharded (``M_rg``: the LM head's and the embedding's), the first
  layer's reduce-scatter buffer and every layer's gradient shard. The root's reduce-scatter input takes the place of
  its unsharded gradients (one copy is counted: a second would put this moment above the measured peak of a
  checkpointed Llama-3.1-8B rank, where it is largest).
* **optimizer step** -- the held shards, every gradient shard and the optimizer's temporaries on the shard.

``M_held`` is what stays allocated across the step: the rank's parameter and optimizer-state shards -- the steady
state. What is left out, measured: FSDP2's padding of a tensor's first dimension to a multiple of N_d (bytes), the
rotary tables a re-run layer shares (1 MiB on a 7B model); which layer's MLP sets the peak inside it, measured on
Llama-form gated MLPs only. Not modelled, named by :func:`fsdp_problem` (the plan is then priced as a sum of parts,
with a note): other ZeRO stages and runtimes (DeepSpeed's buckets), fp32 parameter shards under FSDP2's mixed
precision (measured, the fp32-master case), tensor/pipeline/expert parallelism, LoRA, gradient accumulation.

Owned here: the expressions and the portable :func:`fsdp_parts` that evaluates them from a rank's numbers;
:func:`vramlib.plans.parallel.plan_memory` (with ``peak="step"``) assembles those numbers and calls it, and so
does the static plan calculator.

Used in: chapters 3 and 16 (through ``plan_memory``).
"""
from __future__ import annotations

import sympy as sp

from ..core.portable import ev, portable, q_ceil, share, shared
from ..core.symbols import L, V, b, b_a, b_g, f, h, s
from .step import LOSS_GRADIENT_BYTES, dense_problem, M_act, M_head, M_held, M_rerun, M_temp

_nn = dict(integer=True, nonnegative=True)
M_root = sp.Symbol("M_root", **_nn)    # the root's parameters, gathered (embeddings, final norm, LM head)
P_u = sp.Symbol("P_u", **_nn)          # one decoder layer's parameters, gathered
G_l = sp.Symbol("G_l", **_nn)          # one layer's unsharded gradients (its reduce-scatter buffer)
M_rg = sp.Symbol("M_rg", **_nn)        # the root's gradients, unsharded
A_head = sp.Symbol("A_head", **_nn)    # the loss and LM-head tensors the forward saved (freed first in backward)
A_done = sp.Symbol("A_done", **_nn)    # what one finished layer's backward frees
W_bwd = sp.Symbol("W_bwd", **_nn)      # a layer backward's working set beyond what it saved
N_d = sp.Symbol("N_d", integer=True, positive=True)
k = sp.Symbol("k", **_nn)              # layers whose backward is done

_T = b * s

LAYER_BACKWARD_WORK = 4 * b_a * _T * f + 2 * b_g * h * f + 2 * b_a * _T * h
"""A gated MLP's backward at its largest moment (in ``up_proj``'s backward), beyond what the layer saved: seven b_a
T x f gradients and products less the three saved T x f tensors already read, the two h x f weight gradients
computed so far, two b_a T x h input gradients (measured on Llama-2-7B under FSDP2, with and without
recomputation)."""

FORWARD_LOGITS_BYTES = (b_a + 4) * _T * V
"""At the loss: the model's b_a logits and cross-entropy's fp32 upcast of them (freed with the forward)."""

BACKWARD_AT = M_held + M_root + P_u + G_l + k * G_l / N_d + M_head + M_act - A_head - k * A_done + M_rerun + W_bwd
"""Alive inside a layer's MLP backward after k finished layers, with the previous layer's reduce-scatter buffer and
without the next layer's prefetch (they are added or removed at the ends: :data:`BACKWARD_MOMENTS`)."""

BACKWARD_MOMENTS = {
    "last layer": BACKWARD_AT.subs(k, 0) - G_l + P_u,
    "second-to-last layer": BACKWARD_AT.subs(k, 1) + P_u,
    "second layer": BACKWARD_AT.subs(k, L - 2) + P_u,
    "first layer": BACKWARD_AT.subs(k, L - 1),
}
"""The backward's candidate peaks (L >= 2): the last layer (its own gather and the next one's prefetch, no
reduce-scatter yet), the one before it, the second and the first layer (nothing left to prefetch)."""

FSDP_PHASES = {
    "forward end": M_held + M_root + P_u + M_act + FORWARD_LOGITS_BYTES,
    "loss backward": M_held + M_root + P_u + M_act + LOSS_GRADIENT_BYTES,
    "backward": sp.Max(*BACKWARD_MOMENTS.values()),
    "backward end": M_held + M_root + M_rg + G_l + L * G_l / N_d,
    "optimizer step": M_held + L * G_l / N_d + M_rg / N_d + M_temp,
}
"""Bytes alive at each phase's largest moment on one FSDP2 rank (see the module doc)."""

FSDP_PEAK = sp.Max(*FSDP_PHASES.values())
"""The peak of a rank's step: the largest phase."""

share(FSDP_PHASES=FSDP_PHASES, FSDP_BACKWARD_MOMENTS=BACKWARD_MOMENTS, FSDP_PHASE_NAMES=list(FSDP_PHASES),
      FSDP_MOMENT_NAMES=list(BACKWARD_MOMENTS), FSDP_LAYER_BACKWARD_WORK=LAYER_BACKWARD_WORK,
      FSDP_FORWARD_LOGITS=FORWARD_LOGITS_BYTES)


@portable
def fsdp_values(r):
    """The expressions' symbol values from a rank's numbers ``r`` (bytes unless said): held, root, layer, layer_grad,
    root_grad, head_grad, act, a_head, a_done, rerun, work, temp; dp, layers; batch, seq, vocab, b_a."""
    return {"M_held": r["held"], "M_root": r["root"], "P_u": r["layer"], "G_l": r["layer_grad"], "M_rg": r["root_grad"],
            "M_head": r["head_grad"], "M_act": r["act"], "A_head": r["a_head"], "A_done": r["a_done"],
            "M_rerun": r["rerun"], "W_bwd": r["work"], "M_temp": r["temp"], "N_d": r["dp"], "L": r["layers"],
            "b": r["batch"], "s": r["seq"], "V": r["vocab"], "b_a": r["b_a"]}


@portable
def fsdp_parts(r):
    """[phases, peak phase, alive] of one FSDP2 rank's step (:data:`FSDP_PHASES`) from its numbers ``r``
    (``fsdp_values``): every phase's bytes, the largest, and [[component, bytes]] alive then beyond the held
    shards (they sum to the peak less ``r["held"]``)."""
    vals = fsdp_values(r)
    phases = []
    peak = None
    best = -1
    for name in shared("FSDP_PHASE_NAMES"):
        v = q_ceil(ev("FSDP_PHASES", name, vals))
        phases.append([name, v])
        if v > best:
            best = v
            peak = name
    return [phases, peak, fsdp_alive(peak, best, r, vals)]


@portable
def fsdp_alive(peak, total, r, vals):
    """[[component, bytes]] alive at phase ``peak`` (``total`` bytes) beyond the held shards; in the backward, at the
    moment of :data:`BACKWARD_MOMENTS` that reaches ``total``."""
    n = r["layers"]
    if peak == "forward end" or peak == "loss backward":
        loss = ["logits (b_a and fp32 copy)", q_ceil(ev("FSDP_FORWARD_LOGITS", None, vals))]
        if peak == "loss backward":
            loss = ["loss gradients (fp32 T x V)", q_ceil(ev("STEP_LOSS_GRADIENT", None, vals))]
        return [["gathered parameters (root + 1 layer)", r["root"] + r["layer"]], ["activations", r["act"]], loss]
    rest = total - r["held"]      # the gradient shards take what the other components leave (exact)
    if peak == "optimizer step":
        return [["gradients (shards)", rest - r["temp"]], ["optimizer step temporaries (" + r["impl"] + ")", r["temp"]]]
    if peak == "backward end":
        return [["gathered parameters (root)", r["root"]], ["root gradients (unsharded)", r["root_grad"]],
                ["reduce-scatter buffer (1 layer)", r["layer_grad"]],
                ["gradients (shards)", rest - r["root"] - r["root_grad"] - r["layer_grad"]]]
    done = [0, 1, n - 2, n - 1]
    names = shared("FSDP_MOMENT_NAMES")
    j = 0
    for i in range(4):
        if q_ceil(ev("FSDP_BACKWARD_MOMENTS", names[i], vals)) == total:
            j = i
            break
    kd = done[j]
    gathered = 1 if j == 3 else 2
    out = [["gathered parameters (root + " + str(gathered) + " layers)", r["root"] + gathered * r["layer"]],
           ["LM head gradient (unsharded)", r["head_grad"]],
           ["activations", r["act"] - r["a_head"] - kd * r["a_done"] + r["rerun"]],
           ["layer backward working set", r["work"]]]
    if kd > 0:
        out.append(["reduce-scatter buffer (1 layer)", r["layer_grad"]])
        used = 0
        for x in out:
            used += x[1]
        out.append(["gradients (shards of " + str(kd) + " layers)", rest - used])
    return out


__all__ = ["BACKWARD_AT", "BACKWARD_MOMENTS", "FORWARD_LOGITS_BYTES", "FSDP_PEAK", "FSDP_PHASES",
           "LAYER_BACKWARD_WORK"]


@portable
def fsdp_title(title, impl, peak):
    """A plan stage's title when FSDP2's phases price it: what the optimizer runs and the phase of the peak."""
    return title + ", ZeRO-3 as FSDP2 (" + impl + "): peak in the " + peak


FSDP_RECOMPUTE = ("none", "full")
"""The recomputation levels measured under FSDP2 (selective re-runs an attention core after the MLP's backward: not
measured)."""

share(FSDP_RECOMPUTE=list(FSDP_RECOMPUTE))


@portable
def fsdp_problem(spec, plan, st):
    """None when :data:`FSDP_PHASES` model a plan's step, else why not in one line: ZeRO-3 over data parallelism
    alone (tp = pp = ep = 1, no offload, one micro-batch per step), full fine-tuning with the hf accounting,
    FSDP2's own buffers (``buckets`` "auto" or "none", no ``gather_buffer``), no master copy and gradients in the
    parameters' width, an optimizer with measured steps, recompute none or full, a dense Llama-form decoder. ``st``:
    style, method, optimizer, recompute, buckets, gather_buffer, b_w, b_g, b_m."""
    if plan["zero"] != 3:
        return "ZeRO-" + str(plan["zero"]) + " steps are not measured phase by phase (ZeRO-3 as FSDP2 runs it is)"
    if plan["tp"] > 1 or plan["pp"] > 1 or plan["ep"] > 1:
        return "FSDP2 is measured over data parallelism alone (tp = pp = ep = 1)"
    if plan["offload_optimizer"] != "none" or plan["offload_params"] != "none":
        return "offloaded ZeRO-3 steps are not measured"
    if plan["n_micro"] > 1:
        return "gradient accumulation (n_micro > 1) is not measured under FSDP2"
    if st["style"] != "hf" or st["method"] != "full":
        return "FSDP2 is measured for full fine-tuning with the hf accounting"
    if st["buckets"] != "auto" and st["buckets"] != "none":
        return st["buckets"] + " communication buckets: DeepSpeed's ZeRO-3 step is not measured (FSDP2's per-layer " \
                               "buffers are, with buckets='auto')"
    if st["gather_buffer"] is not None:
        return "gather_buffer: FSDP2 gathers one layer at a time (leave gather_buffer=None)"
    if st["b_m"] or st["b_g"] != st["b_w"]:
        return "a master copy or wider gradients (FSDP2's fp32 shards under bf16 mixed precision are measured, " \
               "not modelled)"
    if not (st["optimizer"] in shared("STEP_OPTIMIZERS")):
        return st["optimizer"] + "'s step is not measured (" + ", ".join(shared("STEP_OPTIMIZERS")) + " are)"
    if not (st["recompute"] in shared("FSDP_RECOMPUTE")):
        return "FSDP2 steps are measured with recompute none or full"
    if spec["n_layers"] < 2:
        return "FSDP2's backward moments need at least two layers"
    if dense_problem(spec, "model", spec["name"]) or not spec["gated_mlp"]:
        return "FSDP2's layer backward is measured on dense " + ", ".join(shared("AUTOCAST_FAMILIES")) + \
               " decoders with separate projections"
    return None
