"""The peak of one training step on one GPU: the largest of its phases, each with the tensors alive then (issue 13).

A training step's tensors are not all alive at once, so its peak is not the sum of weights, gradients, optimizer
states and activations. Measured at full size on the fake CUDA device (``tools/measure/step_peaks.py``: MemTracker
under FakeTensorMode, the steady-state step of a real loop, ``vramlib/data/measured/step_peaks.json``), PyTorch's
allocations follow four phases, which this module writes as expressions:

* **loss backward** -- the forward is over, every saved activation is alive (``M_act``: what the forward saved,
  including cross-entropy's fp32 log-softmax, 4 T V), no gradient exists yet (``set_to_none``), and the loss's
  backward holds two more fp32 T x V tensors: nll_loss's gradient and log-softmax's (``LOSS_GRADIENT_BYTES``,
  8 T V). With a 152K vocabulary this phase is the peak of every step measured.
* **backward** -- at its start the log-softmax output is freed and the logits' gradient, cast back to the compute
  dtype (b_a T V), meets the LM head's weight gradient; at its end every gradient exists (``M_grad``) and, with full
  recomputation, one re-run layer's activations (``M_rerun``). The larger of the two ends.
* **optimizer step** -- gradients and states, and the step's own temporaries (``M_temp``), which depend on the
  implementation: ``torch.optim``'s ``foreach`` AdamW allocates a parameter-sized tensor for all parameters at once
  (``_foreach_sqrt`` of the second moments), ``fused`` none, the ``for-loop`` two of the largest tensor
  (``exp_avg_sq.sqrt() / bias_correction2_sqrt``); transformers' Adafactor four fp32 copies of the largest tensor.

The phases' bytes are held by ``M_held``: what stays allocated across the step (weights or frozen base, master copy,
optimizer states) -- the *steady state* after ``zero_grad``.

The saved activations are the hf accounting's (:mod:`vramlib.memory.activations`) with two measured variants, both
exact at full size: fp32 weights under CUDA autocast (``fp32-autocast``: bf16 weight casts saved by every linear,
an fp32 residual stream, :data:`~vramlib.memory.activations.HF_AUTOCAST_EXTRA`), and LoRA on a frozen bf16 base
(frozen layers save less, peft's fp32 adapters copy their inputs,
:data:`~vramlib.memory.activations.HF_LORA_LAYER_DELTA`; ``lora_dtype``). QLoRA is that LoRA step with the base
priced as stored: bitsandbytes' 4-bit kernels need real data, so it is not measured (named in the result).

What the expressions leave out, measured: inside the backward, a layer's own gradients and working tensors add
0.1-0.5 GB on a 7B model above "all gradients" (the backward phase is under by up to 1.4%; it sets the peak only
with fused or state-free optimizers); the rotary buffers and scalar step counters (kilobytes). Refused in one line:
recomputation under autocast, autocast on shapes beyond the measured dense decoders (experts,
fused projections, q/k norms). Priced as a sum of parts, with a note saying why: bitsandbytes' paged and 32-bit
optimizers, the megatron accounting, LoRA on other targets or with selective recomputation.

Owned here: the expressions, the implementations' temporaries, and the portable rules that apply them
(``step_problem``: where the phases are modelled; ``step_parts``: the phases, the peak and the tensors alive then),
which :func:`vramlib.memory.training.training_memory` (with ``peak="step"``) and the static calculators call.
This module imports no training code: ``training_memory`` assembles the states and activations and calls it.

Used in: chapters 2, 4, 9, 10, 15 (through ``training_memory``) and 16.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ..catalog.models import ModelSpec, get_model
from ..core.errors import check_choice
from ..core.portable import ev, portable, q_ceil, raise_problem, share, shared
from ..core.symbols import V, b, b_a, s

# --- symbols of this module ----------------------------------------------------------------------------------
_nn = dict(integer=True, nonnegative=True)
M_held = sp.Symbol("M_held", **_nn)    # bytes alive through the whole step (weights, master, optimizer states)
M_grad = sp.Symbol("M_grad", **_nn)    # every gradient
M_act = sp.Symbol("M_act", **_nn)      # what the forward saved for backward, when it ends
M_head = sp.Symbol("M_head", **_nn)    # the LM head's weight gradient
M_rerun = sp.Symbol("M_rerun", **_nn)  # one re-run layer's activations (recomputation)
M_temp = sp.Symbol("M_temp", **_nn)    # the optimizer step's temporaries
N_t = sp.Symbol("N_t", **_nn)          # trainable parameters
P_max = sp.Symbol("P_max", **_nn)      # elements of the largest trainable tensor
w = sp.Symbol("w", integer=True, positive=True)  # bytes per element of the parameters the optimizer updates

_T = b * s

LOG_SOFTMAX_BYTES = 4 * _T * V
"""Cross-entropy's fp32 log-softmax, saved for backward (part of ``M_act``)."""

LOSS_GRADIENT_BYTES = 8 * _T * V
"""The loss backward's two fp32 T x V tensors: nll_loss's gradient and log-softmax's (measured at
``aten._log_softmax_backward_data``, the peak of every 152K-vocabulary step)."""

LOGIT_GRADIENT_BYTES = b_a * _T * V
"""The logits' gradient cast back to the compute dtype, which the LM head's backward reads."""

BACKWARD_START = M_held + M_act - LOG_SOFTMAX_BYTES + LOGIT_GRADIENT_BYTES + M_head
"""The backward's start: the log-softmax output freed, the logits' gradient and the LM head's weight gradient alive."""

BACKWARD_END = M_held + M_grad + M_rerun
"""The backward's end: every gradient, and one re-run layer with recomputation."""

PHASES = {
    "loss backward": M_held + M_act + LOSS_GRADIENT_BYTES,
    "backward": sp.Max(BACKWARD_START, BACKWARD_END),
    "optimizer step": M_held + M_grad + M_temp,
}
"""Bytes alive at each phase's largest moment (see the module doc)."""

STEP_PEAK = sp.Max(*PHASES.values())
"""The peak of the step: the largest phase."""


@dataclass(frozen=True)
class StepImplementation:
    """The temporaries one optimizer implementation allocates in ``step()`` (bytes, as an expression in the trainable
    parameters ``N_t``, the largest trainable tensor's elements ``P_max`` and the parameters' width ``w``)."""

    temporaries: sp.Expr
    source: str


OPTIMIZER_IMPLS: dict[str, dict[str, StepImplementation]] = {
    "adamw": {
        "foreach": StepImplementation(w * N_t, "torch.optim.adamw._multi_tensor_adamw: exp_avg_sq_sqrt = "
                                               "_foreach_sqrt(exp_avg_sqs), one tensor per parameter, all at once"),
        "fused": StepImplementation(sp.Integer(0), "torch._fused_adamw_: updates in place"),
        "for-loop": StepImplementation(2 * w * P_max, "torch.optim.adamw._single_tensor_adamw: "
                                                      "(exp_avg_sq.sqrt() / bias_correction2_sqrt), per parameter"),
    },
    "sgd": {impl: StepImplementation(sp.Integer(0), "torch.optim.sgd: momentum updated in place")
            for impl in ("foreach", "fused", "for-loop")},
    "adamw-8bit": {
        "fused": StepImplementation(sp.Integer(0), "bitsandbytes' 8-bit blockwise kernel (optimizer_update_8bit_"
                                                   "blockwise): updates the parameter and its uint8 states in place "
                                                   "(measured on fake CUDA: no temporary)"),
    },
    "adafactor": {
        "for-loop": StepImplementation(16 * P_max, "transformers.optimization.Adafactor: fp32 copies of the gradient "
                                                   "and the parameter, the squared gradient and the update, per "
                                                   "parameter (measured: four fp32 copies of the largest tensor)"),
    },
}
"""The implementations each optimizer has, with their step temporaries; the first is its default (torch.optim's
``foreach``, PyTorch's default on CUDA; transformers' Adafactor has only its loop). Optimizers not listed (bitsandbytes'
paged ones, whose states live in CUDA unified memory outside PyTorch's allocator, and its 32-bit AdamW) are not
measured and refuse in one line."""


AUTOCAST = "fp32-autocast"
"""The step convention of fp32 parameters under CUDA autocast to the compute dtype (PyTorch's AMP recipe; Hugging
Face Trainer's ``bf16=True`` on an fp32 model): fp32 weights, gradients and optimizer states (16 B/param with AdamW)
and the autocast activations (:data:`vramlib.memory.activations.HF_AUTOCAST_EXTRA`). ``training_memory`` takes it
besides ``vramlib.memory.training.CONVENTIONS``."""

AUTOCAST_EXTRA_CASTS = 3
"""``c_in`` of :data:`~vramlib.memory.activations.HF_AUTOCAST_EXTRA` for the measured families: autocast casts the
input norm's output once each for q, k and v, and the post-attention norm's for gate and up (3 casts beyond one per
norm)."""

LORA_DTYPES = ("fp32", "bf16")
"""The adapters' dtype: fp32 (peft's default, ``autocast_adapter_dtype=True``) or the compute dtype ("bf16")."""

AUTOCAST_FAMILIES = ("llama", "mistral", "qwen2", "yi")
"""Where the autocast expression is measured: Llama-form RMSNorm decoders with separate q, k, v and gate, up
projections and a dense MLP."""


def check_impl(optimizer: str, impl: str | None) -> str | None:
    """``impl`` checked against the optimizer's implementations (one line naming them); None stays None (the
    optimizer's default, or no phase model where the optimizer has none)."""
    if impl is None:
        return None
    raise_problem(impl_problem(optimizer, impl))
    return check_choice("optimizer_impl", impl, OPTIMIZER_IMPLS[optimizer])


@portable
def resolve_impl(optimizer, impl):
    """The optimizer implementation a step runs: ``impl`` when given, else the optimizer's default (the first of
    :data:`OPTIMIZER_IMPLS`, torch.optim's ``foreach``); None for an optimizer without measured steps."""
    if impl is None and optimizer in shared("STEP_OPTIMIZERS"):
        return shared("STEP_IMPLS")[optimizer][0]
    return impl


@portable
def impl_problem(optimizer, impl):
    """[field, value, why] when an implementation is named for an optimizer whose step is not modelled."""
    if optimizer in shared("STEP_OPTIMIZERS"):
        return None
    return ["optimizer_impl", impl, optimizer + "'s step is not modelled (" + ", ".join(shared("STEP_OPTIMIZERS")) +
            " are); omit optimizer_impl"]


PEAKS = ("step", "sum")
"""How a training estimate combines its parts: ``step`` (the largest phase, :data:`PHASES`: what PyTorch allocates,
measured) or ``sum`` (every tensor alive at once: the source document's and most calculators' arithmetic)."""

PHASE_NAMES = tuple(PHASES)
share(STEP_PHASES=PHASES, STEP_BACKWARD_START=BACKWARD_START, STEP_LOSS_GRADIENT=LOSS_GRADIENT_BYTES,
      STEP_LOGIT_GRADIENT=LOGIT_GRADIENT_BYTES, STEP_LOG_SOFTMAX=LOG_SOFTMAX_BYTES,
      STEP_TEMPORARIES={f"{o}|{i}": impl.temporaries for o, d in OPTIMIZER_IMPLS.items() for i, impl in d.items()},
      STEP_IMPLS={o: list(d) for o, d in OPTIMIZER_IMPLS.items()}, STEP_OPTIMIZERS=list(OPTIMIZER_IMPLS),
      STEP_PHASE_NAMES=list(PHASE_NAMES), AUTOCAST_FAMILIES=list(AUTOCAST_FAMILIES),
      AUTOCAST_EXTRA_CASTS=AUTOCAST_EXTRA_CASTS,
      LINEAR_GROUPS=[g for g in shared("CLASSIC_GROUP_NAMES") if g not in ("norm", "bias")])


@portable
def dense_problem(spec, field, value):
    """None, or [field, value, why] when the autocast and LoRA expressions do not cover a shape (measured on dense
    Llama-form decoders with separate projections)."""
    if (not (spec["family"] in shared("AUTOCAST_FAMILIES")) or spec["n_experts"] or spec["fused_qkv"]
            or spec["fused_gate_up"] or spec["qk_norm"] != "none"):
        return [field, value, "measured for dense " + ", ".join(shared("AUTOCAST_FAMILIES")) + " decoders with "
                "separate projections; " + spec["name"] + " (" + spec["family"] + ") is not modelled"]
    return None


@portable
def autocast_problem(spec, st):
    """None, or [field, value, why]: what fp32 weights under autocast (``st["autocast"]``) refuse -- an fp32 compute
    dtype, LoRA, a shape the expression does not cover, recomputation (measured, not modelled)."""
    if not st["autocast"]:
        return None
    if st["dtype"] == "fp32":
        return ["precision", st["precision"], "fp32-autocast computes in bf16 or fp16 (autocast's dtype)"]
    if st["method"] != "full":
        return ["convention", "fp32-autocast", "fp32-autocast is full fine-tuning; LoRA keeps its base in the compute "
                "dtype (lora_dtype sets the adapters')"]
    got = dense_problem(spec, "convention", "fp32-autocast")
    if got:
        return got
    if st["recompute"] != "none":
        return ["recompute", st["recompute"], "fp32-autocast with recomputation is measured but not modelled yet (the "
                "re-run layer re-casts its weights); use recompute='none'"]
    if st["style"] != "hf":
        return ["activation_style", st["style"], "fp32-autocast's activations follow the hf accounting"]
    return None


@portable
def step_problem(spec, st):
    """None when the phases (:data:`PHASES`) model a step, else the reason in one line: only the hf accounting's
    one-device steps are measured, with the optimizers of :data:`OPTIMIZER_IMPLS` and LoRA on every linear of a dense
    decoder (no selective recomputation) over a 16-bit base. ``st``: the step's settings (``step_settings``)."""
    if st["style"] != "hf":
        return "the " + st["style"] + " accounting's steps are not measured phase by phase"
    if not (st["optimizer"] in shared("STEP_OPTIMIZERS")):
        return st["optimizer"] + "'s step is not measured (" + ", ".join(shared("STEP_OPTIMIZERS")) + " are)"
    if st["method"] == "full":
        return None
    if st["lora_targets"] != "all-linear":
        return "LoRA is measured with every linear adapted; these targets' activations are not"
    if dense_problem(spec, "method", st["method"]):
        return "LoRA is measured on dense " + ", ".join(shared("AUTOCAST_FAMILIES")) + " decoders only"
    if st["recompute"] == "selective":
        return "LoRA is measured with recompute none or full, not selective"
    if st["dtype"] == "fp32":
        return "LoRA is measured on a 16-bit base"
    return None


@portable
def largest_tensor(m):
    """Elements of the largest parameter tensor as transformers 5 stores it: the embedding or LM head (V x h), a
    linear module (in x out, fused q|k|v and gate|up included), or a layer's routed experts, which transformers
    keeps as one (E, 2 f, h) ``gate_up_proj`` tensor."""
    best = m["spec"]["vocab"] * m["spec"]["hidden"]
    for x in m["linear_modules"]:
        best = max(best, q_ceil(ev("LORA_IN", x, m["sym"])) * q_ceil(ev("LORA_OUT", x, m["sym"])))
    if m["spec"]["n_experts"]:
        best = max(best, m["sym"]["E"] * 2 * q_ceil(ev("LORA_IN", "gate_proj", m["sym"])) *
                   q_ceil(ev("LORA_OUT", "gate_proj", m["sym"])))
    return best


@portable
def head_params(groups):
    """Parameters of the LM head's weight (the embedding matrix when tied)."""
    return groups["lm_head"] or groups["embed"]


@portable
def cast_elements(groups):
    """Weight elements CUDA autocast casts and the backward keeps (``N_c``): every linear weight and the LM head
    (the embedding matrix itself when tied), not the input embedding, norms or biases."""
    n = head_params(groups)
    for k in shared("LINEAR_GROUPS"):
        n += groups[k]
    return n


@portable
def step_symbols(m, seq, batch, b_a):
    """The model's symbol values with the step's batch, sequence and activation width (a fresh dict)."""
    sym = dict(m["sym"])
    sym["b"] = batch
    sym["s"] = seq
    sym["b_a"] = b_a
    return sym


@portable
def autocast_extra(m, groups, seq, batch, b_a):
    """What fp32 weights under autocast save beyond the same step in ``b_a`` (``HF_AUTOCAST_EXTRA``)."""
    sym = step_symbols(m, seq, batch, b_a)
    sym["c_in"] = shared("AUTOCAST_EXTRA_CASTS")
    sym["N_c"] = cast_elements(groups)
    return q_ceil(ev("HF_AUTOCAST_EXTRA", None, sym))


@portable
def step_parts(m, groups, states, st):
    """[parts, phases, peak phase, steady] of one training step: ``states`` ([[component, bytes]], the gradients
    among them) and ``st`` -- the step's settings and measured quantities: ``act`` / ``rerun`` (the hf
    end-of-forward and re-run activations), ``batch``, ``seq``, ``b_a``, ``n_t`` (trainable parameters), ``width``
    (their bytes), ``optimizer`` / ``impl``, ``autocast``, ``lora`` (None or the LoRA values r, I_in, n_ad, z_fp),
    ``recompute``, ``reserve``. Phases and steady include the reserve; parts are the held states, then the tensors
    alive at the peak phase, then the reserve."""
    sym = step_symbols(m, st["seq"], st["batch"], st["b_a"])
    act = st["act"]
    rerun = st["rerun"]
    held = 0
    grad = 0
    kept = []
    for x in states:
        if x[0] == "gradients":
            grad = x[1]
        else:
            held += x[1]
            kept.append(x)
    p_max = largest_tensor(m)
    if st["autocast"]:
        act += autocast_extra(m, groups, st["seq"], st["batch"], st["b_a"])
    head = 0
    if st["lora"]:
        for k in ["r", "I_in", "n_ad", "z_fp"]:
            sym[k] = st["lora"][k]
        if st["recompute"] == "none":
            act += m["spec"]["n_layers"] * q_ceil(ev("HF_LORA_LAYER_DELTA", None, sym)) + \
                q_ceil(ev("HF_LORA_OUTSIDE_DELTA", None, sym))
        else:      # checkpointed layers save their input only: the LoRA difference is the re-run layer's
            act += q_ceil(ev("HF_LORA_FINAL_NORM_DELTA", None, sym))
            rerun += q_ceil(ev("HF_LORA_LAYER_DELTA", None, sym))
        p_max = st["lora"]["r"] * st["lora"]["widest"]
    else:
        head = (grad // st["n_t"]) * head_params(groups)
    temp = q_ceil(ev("STEP_TEMPORARIES", st["optimizer"] + "|" + st["impl"],
                     {"N_t": st["n_t"], "P_max": p_max, "w": st["width"]}))
    vals = {"M_held": held, "M_grad": grad, "M_act": act, "M_rerun": rerun, "M_temp": temp, "M_head": head,
            "b": st["batch"], "s": st["seq"], "V": m["spec"]["vocab"], "b_a": st["b_a"]}
    phases = []
    peak = None
    best = -1
    for k in shared("STEP_PHASE_NAMES"):
        v = q_ceil(ev("STEP_PHASES", k, vals)) + st["reserve"]
        phases.append([k, v])
        if v > best:
            best = v
            peak = k
    parts = [x for x in kept]
    for x in alive_at(peak, best - st["reserve"], vals, st["impl"]):
        parts.append(x)
    parts.append(["reserve (CUDA context, framework)", st["reserve"]])
    return [parts, phases, peak, held + st["reserve"]]


@portable
def alive_at(peak, total, vals, impl):
    """[[component, bytes]] alive at the peak of phase ``peak`` beyond the held states (``vals``: the byte values
    of :data:`PHASES`; ``total``: the phase's bytes without the reserve, which tells the backward's two ends apart)."""
    if peak == "loss backward":
        return [["activations", vals["M_act"]], ["loss gradients (fp32 T x V)", q_ceil(ev("STEP_LOSS_GRADIENT", None,
                                                                                         vals))]]
    if peak == "optimizer step":
        return [["gradients", vals["M_grad"]], ["optimizer step temporaries (" + impl + ")", vals["M_temp"]]]
    if total == q_ceil(ev("STEP_BACKWARD_START", None, vals)):
        return [["activations", vals["M_act"] - q_ceil(ev("STEP_LOG_SOFTMAX", None, vals))],
                ["logit gradient", q_ceil(ev("STEP_LOGIT_GRADIENT", None, vals))], ["LM head gradient", vals["M_head"]]]
    return [["gradients", vals["M_grad"]], ["re-run layer", vals["M_rerun"]]]


@portable
def lora_step_values(m, mods, rank, lora_dtype):
    """The LoRA values of the step's expressions: rank ``r``, the adapted linears' summed in-features ``I_in``,
    adapters per layer ``n_ad``, ``z_fp`` (1 for fp32 adapters) and the widest in- or out-features (the largest
    adapter matrix is r x that)."""
    i_in = 0
    widest = 0
    for x in mods:
        a = q_ceil(ev("LORA_IN", x, m["sym"]))
        widest = max(widest, max(a, q_ceil(ev("LORA_OUT", x, m["sym"]))))
        i_in += a
    return {"r": rank, "I_in": i_in, "n_ad": len(mods), "z_fp": 1 if lora_dtype == "fp32" else 0, "widest": widest}


def largest_tensor_elements(model: ModelSpec | str) -> int:
    """``largest_tensor`` of a model given by name or spec."""
    return largest_tensor(get_model(model).view())


def autocast_cast_elements(model: ModelSpec | str) -> int:
    """``cast_elements`` of a model given by name or spec."""
    return cast_elements(get_model(model).param_groups())


__all__ = ["AUTOCAST", "AUTOCAST_EXTRA_CASTS", "AUTOCAST_FAMILIES", "BACKWARD_END", "BACKWARD_START",
           "LOGIT_GRADIENT_BYTES", "LOG_SOFTMAX_BYTES", "LOSS_GRADIENT_BYTES", "LORA_DTYPES", "OPTIMIZER_IMPLS", "PEAKS",
           "PHASES", "STEP_PEAK", "autocast_cast_elements", "largest_tensor_elements"]
