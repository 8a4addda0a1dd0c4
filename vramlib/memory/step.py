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
recomputation under autocast, LoRA with selective recomputation or on other target sets, shapes beyond the measured dense decoders (experts,
fused projections, q/k norms), bitsandbytes' optimizers, the megatron accounting, several GPUs (plans).

Used in: chapter 16 (and the training chapters as they move to it).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import FP32_BYTES
from ..core import formulas as F
from ..core.errors import InvalidValueError, check_choice, check_positive_int, checked_call
from ..core.portable import ev
from ..core.signatures import arg, field_args, keywords_through, signature
from ..core.symbols import V, b, b_a, s
from .activations import RECOMPUTE, activation_bytes
from .breakdown import Breakdown
from .inference import weights_detail
from .training import Workload, _model_state_parts, as_workload, check_lora_settings, resolve_activation_style

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
and the autocast activations (:data:`vramlib.memory.activations.HF_AUTOCAST_EXTRA`). ``training_peak`` takes it
besides ``vramlib.memory.training.CONVENTIONS``."""

AUTOCAST_EXTRA_CASTS = 3
"""``c_in`` of :data:`~vramlib.memory.activations.HF_AUTOCAST_EXTRA` for the measured families: autocast casts the
input norm's output once each for q, k and v, and the post-attention norm's for gate and up (3 casts beyond one per
norm)."""

AUTOCAST_FAMILIES = ("llama", "mistral", "qwen2", "yi")
"""Where the autocast expression is measured: Llama-form RMSNorm decoders with separate q, k, v and gate, up
projections and a dense MLP."""


def default_impl(optimizer: str) -> str:
    """The implementation an optimizer uses when none is named (the first of ``OPTIMIZER_IMPLS[optimizer]``)."""
    return next(iter(OPTIMIZER_IMPLS[optimizer]))


def largest_tensor_elements(model: ModelSpec | str) -> int:
    """Elements of the largest parameter tensor as transformers 5 stores it: the embedding or LM head (V x h), a
    linear module (its ``LORA_SHAPES`` in x out, fused q|k|v and gate|up included), or a layer's routed experts,
    which transformers keeps as one (E, 2 f, h) ``gate_up_proj`` tensor."""
    from .training import LORA_IN, LORA_OUT

    m = get_model(model)
    sym = m.symbols()
    linear = [F.to_int_bytes(ev("LORA_IN", x, sym)) * F.to_int_bytes(ev("LORA_OUT", x, sym)) for x in m.linear_modules()
              if x in LORA_IN and x in LORA_OUT]
    experts = sym["E"] * 2 * F.to_int_bytes(ev("LORA_IN", "gate_proj", sym) * ev("LORA_OUT", "gate_proj", sym)) \
        if m.n_experts else 0
    return max([m.vocab * m.hidden, experts] + linear)


def _largest_adapter_elements(m: ModelSpec, rank: int, mods: list[str]) -> int:
    """Elements of the largest LoRA adapter matrix: r x the widest in- or out-features of the adapted modules."""
    sym = m.symbols()
    return rank * max(max(F.to_int_bytes(ev("LORA_IN", x, sym)), F.to_int_bytes(ev("LORA_OUT", x, sym))) for x in mods)


def _check_impl(optimizer: str, impl: str | None) -> str:
    if optimizer not in OPTIMIZER_IMPLS:
        raise InvalidValueError("optimizer", optimizer, "the step's peak is measured for " +
                                ", ".join(OPTIMIZER_IMPLS) + "; bitsandbytes' paged and 32-bit ones are not")
    return default_impl(optimizer) if impl is None else check_choice("optimizer_impl", impl, OPTIMIZER_IMPLS[optimizer])


_PEAK_SIGNATURE = signature(
    arg("model", annotation="ModelSpec | str"), field_args(Workload, ("method", "seq")),
    arg("micro_batch", 1, "int"), field_args(Workload, ("precision", "optimizer", "convention")),
    arg("recompute", "none", "str"), field_args(Workload, ("attention", "lora_rank", "lora_targets", "base_weights",
                                                           "reserve")),
    arg("optimizer_impl", None, "str | None", keyword_only=True), arg("lora_dtype", "fp32", "str", keyword_only=True),
    arg("workload", None, "Workload | None", keyword_only=True))

LORA_DTYPES = ("fp32", "bf16")
"""The adapters' dtype: fp32 (peft's default, ``autocast_adapter_dtype=True``) or the compute dtype ("bf16")."""


@checked_call
@keywords_through(_PEAK_SIGNATURE)
def training_peak(model: ModelSpec | str, workload: Workload | None = None, micro_batch: int = 1,
                  recompute: str = "none", optimizer_impl: str | None = None, lora_dtype: str = "fp32",
                  **settings) -> Breakdown:
    """The peak of one steady-state training step on one GPU, as PyTorch allocates it: the largest of the phases
    (:data:`PHASES`), with the tensors alive then as components, every phase in ``.phases``, the one that sets the
    peak in ``.peak_phase`` and what stays allocated between steps in ``.steady`` (each with the reserve).

    Arguments as :func:`vramlib.memory.training.training_memory` (a :class:`~vramlib.memory.training.Workload` and/or
    its fields), plus
    ``optimizer_impl``: foreach | fused | for-loop (:data:`OPTIMIZER_IMPLS`; None: the optimizer's default,
    torch.optim's ``foreach``) and ``lora_dtype``: fp32 | bf16 (the adapters' dtype, :data:`LORA_DTYPES`).
    ``convention`` also takes ``fp32-autocast`` (:data:`AUTOCAST`). The hf accounting; the measured setups are
    pure-bf16 and fp32-autocast full fine-tuning and LoRA on a bf16 base (chapter 16 compares them); QLoRA is that
    LoRA step with its base priced as stored (named in the notes)."""
    st = _setup(model, workload, settings, micro_batch, recompute, optimizer_impl, lora_dtype)
    vals = _phase_values(st)
    reserve = st.w.reserve_bytes
    phases = {k: F.to_int_bytes(F.evaluate(e, **vals)) + reserve for k, e in PHASES.items()}
    peak_phase = max(phases, key=phases.get)
    parts = dict(st.states)
    parts.update(_alive(peak_phase, vals, phases, reserve, st.impl))
    parts["reserve (CUDA context, framework)"] = reserve
    what = "full fine-tuning" if st.w.method == "full" else f"{st.w.method} r={st.w.lora_rank} ({lora_dtype} adapters)"
    title = (f"{st.m.name}: {what} step, {st.w.precision}, {st.w.optimizer} ({st.impl}), {st.convention}, seq "
             f"{st.w.seq:,} x {st.batch}, recompute {st.recompute}: peak in the {peak_phase}")
    return Breakdown(parts, title=title, notes=st.notes, phases=phases, peak_phase=peak_phase,
                     steady=sum(st.states.values()) + reserve)


@dataclass(frozen=True)
class _Step:
    m: ModelSpec
    w: Workload
    convention: str
    batch: int
    recompute: str
    impl: str
    lora_dtype: str
    states: dict
    grad: int
    notes: tuple = ()


def _setup(model, workload, settings, micro_batch, recompute, optimizer_impl, lora_dtype) -> _Step:
    """Checked arguments and the held states / gradients of one step."""
    autocast = settings.get("convention") == AUTOCAST      # a step convention, not a Workload one (see AUTOCAST)
    if autocast:
        settings = {**settings, "convention": "mixed-fp32-master"}     # its states are the fp32 ones, set below
    w_ = as_workload(workload, settings)
    m = get_model(model)
    check_lora_settings(m, w_)
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    micro_batch = check_positive_int("micro_batch", micro_batch)
    lora_dtype = check_choice("lora_dtype", lora_dtype, LORA_DTYPES)
    impl = _check_impl(w_.optimizer, optimizer_impl)
    if w_.activation_style not in ("hf", "auto"):
        raise InvalidValueError("activation_style", w_.activation_style, "the step's phases follow the hf accounting")
    resolve_activation_style(m, "hf")
    if autocast:
        _check_autocast(m, w_, recompute)
    if w_.method != "full":
        _check_lora(m, w_, recompute)
        states, grad = _lora_states(m, w_, lora_dtype)
    else:
        states = _model_state_parts(m, w_.with_(precision="fp32") if autocast else w_)
        grad = states.pop("gradients")
    notes = () if w_.method != "qlora" else (
        "QLoRA: the LoRA step measured on a bf16 base, with the base priced as stored (" + w_.base_format() + "); "
        "bitsandbytes' dequantisation buffers (one layer's weight in bf16 at a time) are not included",)
    return _Step(m, w_, AUTOCAST if autocast else w_.convention, micro_batch, recompute, impl, lora_dtype, states,
                 grad, notes)


def _check_autocast(m: ModelSpec, w_: Workload, recompute: str) -> None:
    if w_.dtype == "fp32":
        raise InvalidValueError("precision", w_.precision, "fp32-autocast computes in bf16 or fp16 (autocast's dtype)")
    if w_.method != "full":
        raise InvalidValueError("convention", AUTOCAST, "fp32-autocast is full fine-tuning; LoRA keeps its base in "
                                "the compute dtype (lora_dtype sets the adapters')")
    _check_dense(m, "convention", AUTOCAST)
    if recompute != "none":
        raise InvalidValueError("recompute", recompute, "fp32-autocast with recomputation is measured but not "
                                "modelled yet (the re-run layer re-casts its weights); use recompute='none'")


def _check_dense(m: ModelSpec, field: str, value) -> None:
    if m.family not in AUTOCAST_FAMILIES or m.n_experts or m.fused_qkv or m.fused_gate_up or m.qk_norm != "none":
        raise InvalidValueError(field, value, f"measured for dense {', '.join(AUTOCAST_FAMILIES)} decoders with "
                                f"separate projections; {m.name} ({m.family}) is not modelled")


def _check_lora(m: ModelSpec, w_: Workload, recompute: str) -> None:
    if w_.lora_targets != "all-linear":
        raise InvalidValueError("lora_targets", w_.lora_targets, "the LoRA step is measured with every linear "
                                "adapted ('all-linear'); other target sets are not modelled yet")
    _check_dense(m, "method", w_.method)
    if recompute == "selective":
        raise InvalidValueError("recompute", recompute, "LoRA is measured with recompute 'none' or 'full' (HF "
                                "gradient checkpointing); 'selective' is not modelled")
    if w_.dtype == "fp32":
        raise InvalidValueError("precision", w_.precision, "the LoRA step is measured on a bf16 base")


def _adapter_width(lora_dtype: str, w_: Workload) -> int:
    """Bytes per adapter parameter: fp32, or the compute dtype's."""
    from .activations import _activation_dtype_bytes

    return FP32_BYTES if lora_dtype == "fp32" else _activation_dtype_bytes(w_.dtype)


def _lora_states(m: ModelSpec, w_: Workload, lora_dtype: str) -> tuple[dict, int]:
    """(held states, adapter gradient bytes) of a LoRA/QLoRA step: the frozen base as stored, the adapters, their
    gradients and optimizer states in the adapters' dtype (torch.optim follows it)."""
    from .training import lora_params, optimizer_state_bytes

    width = _adapter_width(lora_dtype, w_)
    n_t = lora_params(m, w_.lora_rank, w_.lora_targets)
    states = {("base weights (" + w_.base_format() + ")" if k == "weights" else k): v
              for k, v in weights_detail(m, w_.base_format()).items()}
    states[f"LoRA adapters ({lora_dtype})"] = width * n_t
    states["optimizer states"] = optimizer_state_bytes(m, w_.optimizer, lora_rank=w_.lora_rank,
                                                       lora_targets=w_.lora_targets, state_bytes=width)
    return states, width * n_t


def _phase_values(st: _Step) -> dict:
    """The byte symbols of :data:`PHASES` (and the T, V, b_a they read) for one step."""
    from .activations import HF_AUTOCAST_EXTRA, HF_LORA_FINAL_NORM_DELTA, HF_LORA_LAYER_DELTA, \
        HF_LORA_OUTSIDE_DELTA, _activation_dtype_bytes
    from .training import lora_modules, lora_params

    m, w_, batch = st.m, st.w, st.batch
    b_act = _activation_dtype_bytes(w_.dtype)
    act = {scope: activation_bytes(m, w_.seq, batch, w_.dtype, w_.attention, st.recompute, "hf", scope)
           for scope in ("end-of-forward", "rerun")}
    sym = m.symbols()
    base = dict(L=m.n_layers, b=batch, s=w_.seq, h=m.hidden, f=m.ffn, d_head=sym["d_head"], b_a=b_act)

    def bytes_of(expr, **more) -> int:
        return F.to_int_bytes(F.evaluate(expr, **base, **more))

    if st.convention == AUTOCAST:
        act["end-of-forward"] += bytes_of(HF_AUTOCAST_EXTRA, c_in=AUTOCAST_EXTRA_CASTS, N_c=autocast_cast_elements(m))
    if w_.method == "full":
        n_t, p_max = m.weight_params, largest_tensor_elements(m)
        width = FP32_BYTES if st.convention == AUTOCAST else w_.state_bytes
        head = st.grad // m.weight_params * _head_params(m)
    else:
        mods = lora_modules(m, w_.lora_targets)
        lora = dict(r=w_.lora_rank, I_in=sum(F.to_int_bytes(ev("LORA_IN", x, sym)) for x in mods), n_ad=len(mods),
                    z_fp=1 if st.lora_dtype == "fp32" else 0)
        if st.recompute == "none":
            act["end-of-forward"] += bytes_of(m.n_layers * HF_LORA_LAYER_DELTA + HF_LORA_OUTSIDE_DELTA, **lora)
        else:       # checkpointed layers save their input only: the LoRA difference is the re-run layer's
            act["end-of-forward"] += bytes_of(HF_LORA_FINAL_NORM_DELTA)
            act["rerun"] += bytes_of(HF_LORA_LAYER_DELTA, **lora)
        n_t, width, head = lora_params(m, w_.lora_rank, w_.lora_targets), _adapter_width(st.lora_dtype, w_), 0
        p_max = _largest_adapter_elements(m, w_.lora_rank, mods)
    temp = F.to_int_bytes(F.evaluate(OPTIMIZER_IMPLS[w_.optimizer][st.impl].temporaries, N_t=n_t, P_max=p_max,
                                     w=width))
    return {"M_held": sum(st.states.values()), "M_grad": st.grad, "M_act": act["end-of-forward"],
            "M_rerun": act["rerun"], "M_temp": temp, "M_head": head, "b": batch, "s": w_.seq, "V": m.vocab,
            "b_a": b_act}


def _head_params(m: ModelSpec) -> int:
    """Parameters of the LM head's weight (the embedding matrix when tied)."""
    g = m.param_groups()
    return g["lm_head"] or g["embed"]


def autocast_cast_elements(model: ModelSpec | str) -> int:
    """Weight elements CUDA autocast casts and the backward keeps (``N_c``): every linear weight and the LM head
    (the embedding matrix itself when tied), not the input embedding, norms or biases."""
    m = get_model(model)
    g = m.param_groups()
    return sum(g[k] for k in ("attn_q", "attn_k", "attn_v", "attn_o", "mlp_gate", "mlp_up", "mlp_down", "router")) + \
        _head_params(m)


def _alive(phase: str, vals: dict, phases: dict, reserve: int, impl: str) -> dict[str, int]:
    """The components alive at ``phase``'s peak beyond the held states (which the caller lists first)."""
    def of(expr) -> int:
        return F.to_int_bytes(F.evaluate(expr, **vals))

    if phase == "loss backward":
        return {"activations": vals["M_act"], "loss gradients (fp32 T x V)": of(LOSS_GRADIENT_BYTES)}
    if phase == "optimizer step":
        return {"gradients": vals["M_grad"], f"optimizer step temporaries ({impl})": vals["M_temp"]}
    if phases[phase] == of(BACKWARD_START) + reserve:
        return {"activations": vals["M_act"] - of(LOG_SOFTMAX_BYTES), "logit gradient": of(LOGIT_GRADIENT_BYTES),
                "LM head gradient": vals["M_head"]}
    return {"gradients": vals["M_grad"], "re-run layer": vals["M_rerun"]}


__all__ = ["AUTOCAST", "AUTOCAST_EXTRA_CASTS", "AUTOCAST_FAMILIES", "BACKWARD_END", "BACKWARD_START",
           "LOGIT_GRADIENT_BYTES", "LOG_SOFTMAX_BYTES", "LOSS_GRADIENT_BYTES", "LORA_DTYPES", "OPTIMIZER_IMPLS", "PHASES",
           "STEP_PEAK", "autocast_cast_elements", "largest_tensor_elements", "training_peak"]
