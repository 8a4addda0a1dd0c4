"""Feasibility reports: "what fits on my hardware", per GPU, as text, JSON, a notebook and a standalone HTML page.

The pieces the command line (:mod:`vramlib.workshop.cli`) and the report notebook (``data/report_template.ipynb``)
share: reading a hardware spec such as ``"2x80GB"`` or ``"4xa100-80gb"``, the per-GPU inference memory
when the model is split by tensor parallelism, a :class:`Fit` (breakdown + verdict) for inference and
training, the plain-text table, and the papermill + nbconvert pipeline behind ``vramlib report``.

Used in: the workshop (``book/workshop.md``) and ``vramlib fit``, ``max-context``, ``report``.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import re
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from ..core import formulas as F
from ..memory.breakdown import Breakdown
from ..core.errors import (InvalidValueError, UnknownNameError, VramlibError, check_choice, check_number,
                     check_positive_int)
from ..solve.feasibility import longest_context, max_tokens
from ..catalog.hardware import GPU, get_gpu
from ..memory.inference import (
    ATTENTION, DEFAULT_RESERVE, TP_SHARD_BYTES, inference_memory, kv_cache_bytes, weights_detail_tp,
)
from ..memory.inference import kv_heads_per_gpu as _kv_heads_rule
from ..catalog.hub import is_hub_id
from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import get_precision
from ..core.symbols import V, f, n_gpu, n_h
from ..memory.training import METHODS, training_memory
from ..core.units import fmt_bytes, gb, gib, parse_memory

__all__ = [
    "Batch", "Fit", "Hardware", "MAX_GPUS", "PREFILL_WORKSPACE_TP_BYTES", "Participant", "ReportSpec", "TASKS",
    "TP_SHARD_BYTES", "attention_text", "breakdown_text", "by_model", "capacity_figure", "context_curve_figure",
    "figure_html", "fit_inference", "fit_training", "inference_memory_tp", "kv_heads_per_gpu", "load_model",
    "max_context", "md_escape", "model_bars_figure", "parse_hardware", "read_participant_rows", "read_participants",
    "render_html", "report_fits", "run_batch", "run_report", "show_model", "show_summary", "SUMMARY_COLUMNS",
    "summary_html", "summary_rows", "template_path"
]

# --- formulas (written once; the CLI and the report evaluate them) ---------------------------------------------
# TP_SHARD_BYTES (weights per GPU) and the KV-heads rule live in vramlib.memory.inference, written once.

PREFILL_WORKSPACE_TP_BYTES = F.PREFILL_WORKSPACE_BYTES.subs({f: f / n_gpu, n_h: n_h / n_gpu, V: V / n_gpu})
"""Prefill workspace per GPU under tensor parallelism: the MLP intermediates (f), the eager attention scores
(heads) and the vocabulary-parallel logits (V) are split over n GPUs; the hidden states (h) are replicated.
With n = 1 it is formulas.PREFILL_WORKSPACE_BYTES."""

TASKS = ("inference",) + METHODS
"""Report tasks: inference, and fine-tuning by method (full, lora, qlora); ``train`` means ``full``."""

_COUNT_RE = re.compile(r"^\s*(\d+)\s*[x×*]\s*(\S.*?)\s*$", re.IGNORECASE)
_UNIT_WORDS = ("b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib")
MAX_GPUS = 1_000_000
"""The largest GPU count a hardware spec may name (the plan search enumerates the divisors of the count)."""
_HW_HELP = "give a GPU name (e.g. 'rtx-4090', '4xa100-80gb') or a memory size with an optional count (e.g. '24GiB', '2x80GB')"


# --- hardware and models --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hardware:
    """``count`` GPUs of ``per_gpu_bytes`` each; ``gpu`` is the catalogue entry when a name was given."""

    spec: str
    per_gpu_bytes: int
    count: int = 1
    gpu: GPU | None = None
    memory_text: str = ""

    @property
    def label(self) -> str:
        """``'2 x a100-80gb'`` or ``'1 x 24GiB'`` (a memory size as typed)."""
        what = self.gpu.key if self.gpu else (self.memory_text or f"{self.per_gpu_bytes:,}B")
        return f"{self.count} x {what}"

    def describe(self) -> str:
        """One line: the label, the card's full name and the per-GPU memory in GB and GiB."""
        name = f"{self.gpu.name}, " if self.gpu else ""
        return f"{self.label} ({name}{gb(self.per_gpu_bytes):,.2f} GB = {gib(self.per_gpu_bytes):,.2f} GiB per GPU)"

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "gpu": self.gpu.key if self.gpu else None, "count": self.count,
                "per_gpu_bytes": self.per_gpu_bytes, "per_gpu_gb": gb(self.per_gpu_bytes),
                "per_gpu_gib": gib(self.per_gpu_bytes)}


def parse_hardware(spec: str | GPU | Hardware) -> Hardware:
    """Read ``"rtx-4090"``, ``"4xA100-80GB"``, ``"2x80GB"``, ``"24GiB"`` or ``"8 x h100"``: a count (default 1)
    and either a catalogue GPU or a memory size per GPU. Raises a one-line VramlibError naming ``gpu``."""
    if isinstance(spec, Hardware):
        return spec
    if isinstance(spec, GPU):
        return Hardware(spec.key, spec.memory_bytes, 1, spec)
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidValueError("gpu", spec, _HW_HELP)
    text, count = spec.strip(), 1
    m = _COUNT_RE.match(text)
    if m and m.group(2).lower() in _UNIT_WORDS:  # "80XB" is a mistyped size, not 80 x "B"
        raise InvalidValueError("gpu", spec, _HW_HELP)
    if m:
        count = int(m.group(1))
        if not 1 <= count <= MAX_GPUS:
            raise InvalidValueError("gpu", spec, f"the GPU count must be at least 1 and at most {MAX_GPUS:,}")
        text = m.group(2)
    if text[:1].isdigit() or text[:1] == ".":
        if re.fullmatch(r"[0-9.]+", text):
            s = spec.strip()
            raise InvalidValueError("gpu", spec, f"a memory size needs a unit: did you mean '{s}GB' (10^9 bytes) or "
                                                 f"'{s}GiB' (2^30), or a GPU name such as 'rtx-4090'?")
        try:
            size = parse_memory(text, field="gpu")
        except VramlibError:
            raise InvalidValueError("gpu", spec, _HW_HELP) from None
        if size <= 0:
            raise InvalidValueError("gpu", spec, "the memory per GPU must be positive")
        return Hardware(spec.strip(), size, count, None, re.sub(r"\s+", "", text))
    card = get_gpu(text)
    return Hardware(spec.strip(), card.memory_bytes, count, card)


def _is_path(spec: object) -> bool:
    """Whether a --model value names a config.json (or its folder) rather than a catalogue entry."""
    return isinstance(spec, str) and bool(spec.strip()) and (
        spec.lower().endswith(".json") or "/" in spec or "\\" in spec or Path(spec).is_dir())


def load_model(spec: str | ModelSpec, heads: int | None = None, kv_heads: int | None = None) -> ModelSpec:
    """A catalogue name (``"llama-2-13b"``), a path to a Hugging Face ``config.json`` (or its folder), a GGUF file
    (``*.gguf``: :meth:`ModelSpec.from_gguf`), or a Hub id (``"Qwen/Qwen3-8B"``, when no such path exists:
    :meth:`ModelSpec.from_pretrained`); ``heads``/``kv_heads`` change the attention heads as the chapters' panels do."""
    if isinstance(spec, ModelSpec):
        m = spec
    elif isinstance(spec, str) and spec.lower().endswith(".gguf"):
        m = ModelSpec.from_gguf(spec)
    elif is_hub_id(spec) and not Path(spec).exists():  # Org/Name: its config.json from the Hub (or the cache)
        m = ModelSpec.from_pretrained(spec)
    elif _is_path(spec):
        path = Path(spec)
        name = (path.parent.name if path.name == "config.json" else path.stem) if path.suffix else path.name
        m = ModelSpec.from_hf_config(path, name=name or None)
    else:
        m = get_model(spec)
    if heads is not None:
        m = m.as_heads(heads, kv_heads if kv_heads is not None else min(m.n_kv_heads, heads))
    elif kv_heads is not None:
        m = m.with_(n_kv_heads=check_positive_int("kv_heads", kv_heads))
    return m


# --- per-GPU inference memory with tensor parallelism --------------------------------------------------------
def kv_heads_per_gpu(model: ModelSpec | str, n_gpus: int) -> int:
    """KV heads each GPU holds under tensor parallelism over ``n_gpus``: :func:`vramlib.memory.inference.kv_heads_per_gpu`
    (the one rule: whole heads, replicated when n_gpus exceeds them), its errors naming the GPU count."""
    return _kv_heads_rule(get_model(model), n_gpus, field="gpu count")


def inference_memory_tp(model: ModelSpec | str, n_gpus: int = 1, weights: str = "fp16", kv_dtype: str = "fp16",
                        tokens: int = 4096, batch: int = 1, attention: str | None = "sdpa",
                        reserve: int | str = DEFAULT_RESERVE, activation_dtype: str | None = None,
                        prefill_chunk: int | None = None) -> Breakdown:
    """Peak inference memory of one GPU when the model is split over ``n_gpus`` by tensor parallelism.

    Weights: TP_SHARD_BYTES (all tensors split; in fact norms are replicated, and the K/V projections too when
    n_gpus exceeds the KV heads: a small underestimate). KV cache: the GPU's
    KV heads (:func:`kv_heads_per_gpu`). Prefill workspace: PREFILL_WORKSPACE_TP_BYTES. Reserve: on every GPU.
    ``attention=None`` leaves out the prefill workspace (weights + KV cache + reserve: the source's method).
    With ``n_gpus=1`` and an attention kernel this equals :func:`vramlib.memory.inference.inference_memory`.
    """
    m = get_model(model)
    n = check_positive_int("gpus", n_gpus)
    tokens, batch = check_positive_int("tokens", tokens), check_positive_int("batch", batch)
    kv_heads = kv_heads_per_gpu(m, n)
    parts = weights_detail_tp(m, weights, n)
    parts["kv cache"] = kv_cache_bytes(m.with_(n_kv_heads=kv_heads), tokens, batch, kv_dtype)
    if attention is not None:
        attention = check_choice("attention", attention, ATTENTION)
        act = activation_dtype or (weights if get_precision(weights, field="weights").is_float else "fp16")
        b_a = get_precision(act, field="activation_dtype")
        if not b_a.is_float:
            b_a = get_precision("fp16")
        t = tokens if prefill_chunk is None else min(tokens, check_positive_int("prefill_chunk", prefill_chunk))
        parts["prefill workspace"] = F.to_int_bytes(F.evaluate(
            PREFILL_WORKSPACE_TP_BYTES, B=batch, T=t, h=m.hidden, f=m.ffn, b_a=b_a.bytes_per_element,
            e_att=int(attention == "eager"), n_h=m.n_heads, V=m.vocab, n=n))
    parts["reserve (CUDA context, framework)"] = parse_memory(reserve, field="reserve")
    split = f", tensor parallel over {n} GPUs, per GPU" if n > 1 else ""
    att = attention or "no prefill workspace"
    return Breakdown(parts, title=f"{m.name}: {weights} weights, {kv_dtype} KV, {batch} x {tokens:,} tokens, {att}{split}")


def max_context(model: ModelSpec | str, hardware: str | Hardware | GPU, weights: str = "fp16",
                kv_dtype: str = "fp16", batch: int = 1, attention: str | None = "sdpa",
                reserve: int | str = DEFAULT_RESERVE, prefill_chunk: int | None = None) -> int:
    """Longest context (tokens per sequence for ``batch`` sequences) on the hardware; 0 if not one token fits.

    One GPU: :func:`vramlib.solve.feasibility.max_tokens`. Several: the largest T whose :func:`inference_memory_tp`
    fits one GPU (bisection; every answer fits and answer + 1 does not), or, as max_tokens, the model's
    ``max_context`` when its cache stops growing (sliding-window, chunked or Mamba layers only) and fits.
    """
    hw = parse_hardware(hardware)
    m = get_model(model)
    if hw.count == 1:
        return max_tokens(m, hw.per_gpu_bytes, weights, kv_dtype, batch, reserve, attention=attention,
                          prefill_chunk=prefill_chunk)

    def fits(t: int) -> bool:
        return inference_memory_tp(m, hw.count, weights, kv_dtype, t, batch, attention, reserve,
                                   prefill_chunk=prefill_chunk).total <= hw.per_gpu_bytes

    return longest_context(m, fits, attention is None or prefill_chunk is not None)


# --- a fit: breakdown per GPU, capacity, verdict --------------------------------------------------------------
@dataclass(frozen=True)
class Fit:
    """One scenario on one piece of hardware: the per-GPU breakdown, the capacity and the verdict."""

    model: ModelSpec
    hardware: Hardware
    task: str
    settings: dict[str, Any]
    breakdown: Breakdown
    max_context: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def capacity(self) -> int:
        return self.hardware.per_gpu_bytes

    @property
    def fits(self) -> bool:
        return self.breakdown.total <= self.capacity

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.breakdown.total

    @property
    def setting(self) -> str:
        """A short label: ``'inference, awq-4bit-g128'`` or ``'qlora, seq 2,048'``."""
        s = self.settings
        if self.task == "inference":
            return f"inference, {s['weights']}"
        return f"{s['method']}, seq {s['seq']:,}"

    def describe(self) -> str:
        """The scenario in one line."""
        s = self.settings
        if self.task == "inference":
            return (f"inference: {s['weights']} weights, {s['kv_dtype']} KV cache, batch {s['batch']} x "
                    f"{s['tokens']:,} tokens, {attention_text(s['attention'])}, reserve {s['reserve']}")
        lora = f", LoRA rank {s['lora_rank']} on {s['lora_targets']}" if s["method"] != "full" else ""
        base = f", base weights {s['base_weights']}" if s["method"] != "full" else ""
        return (f"training ({s['method']}{lora}{base}): {s['precision']}, {s['optimizer']}, convention "
                f"{s['convention']}, seq {s['seq']:,} x micro-batch {s['micro_batch']}, recompute {s['recompute']}, "
                f"{s['attention']} attention, reserve {s['reserve']}")

    def verdict(self) -> str:
        """``'Fits: ... free per GPU.'`` or ``'Does not fit: short by ... per GPU.'`` (+ the longest context)."""
        per = " per GPU" if self.hardware.count > 1 else ""
        if self.fits:
            out = f"Fits: {fmt_bytes(self.free_bytes, 2)} free{per}."
        else:
            out = f"Does not fit: short by {fmt_bytes(-self.free_bytes, 2)}{per}."
        if self.max_context == 0:
            out += f" Not one token fits at batch {self.settings['batch']}."
        elif self.max_context is not None:
            trained = self.model.max_context
            out += (f" Longest context at batch {self.settings['batch']}: {self.max_context:,} tokens"
                    + (f" (the model was trained for {trained:,})." if self.max_context > trained else "."))
        return out

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values (bytes as ints, GB and GiB as floats)."""
        bd = self.breakdown
        return {
            "model": self.model.name, "task": self.task, "hardware": self.hardware.to_dict(),
            "settings": dict(self.settings),
            "per_gpu_bytes": bd.to_dict(), "total_bytes": bd.total, "total_gb": gb(bd.total), "total_gib": gib(bd.total),
            "capacity_bytes": self.capacity, "fits": self.fits, "free_bytes": self.free_bytes,
            "max_context_tokens": self.max_context, "verdict": self.verdict(), "notes": list(self.notes),
        }

    def text(self) -> str:
        """The plain-text report of ``vramlib fit``."""
        return "\n".join([f"{self.model.name} on {self.hardware.describe()}", self.describe(), "",
                          breakdown_text(self.breakdown, self.capacity, per_gpu=self.hardware.count > 1), "",
                          self.verdict()] + [f"Note: {n}" for n in self.notes])


def attention_text(attention: str | None) -> str:
    """``'sdpa attention'``, or for ``None`` the source's method: no prefill workspace."""
    return f"{attention} attention" if attention else "weights + KV cache + reserve only (no prefill workspace)"


def breakdown_text(bd: Breakdown, capacity: int | None = None, per_gpu: bool = False) -> str:
    """An aligned plain-text table: component, bytes, GB (10^9), GiB (2^30), share; total and capacity rows."""
    total = bd.total or 1
    rows = [(k, f"{v:,}", f"{gb(v):,.2f}", f"{gib(v):,.2f}", f"{100 * v / total:.1f}%") for k, v in bd.items()]
    suffix = " (per GPU)" if per_gpu else ""
    foot = [(f"total{suffix}", f"{bd.total:,}", f"{gb(bd.total):,.2f}", f"{gib(bd.total):,.2f}", "")]
    if capacity is not None:
        foot.append((f"GPU memory{suffix}", f"{capacity:,}", f"{gb(capacity):,.2f}", f"{gib(capacity):,.2f}", ""))
    head = ("component", "bytes", "GB", "GiB", "share")
    widths = [max(len(r[i]) for r in [head, *rows, *foot]) for i in range(5)]

    def line(r) -> str:
        return "  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()

    rule = "-" * len(line(head))
    return "\n".join([line(head), rule, *map(line, rows), rule, *map(line, foot)])


def fit_inference(model: ModelSpec | str, hardware: str | Hardware | GPU, weights: str = "fp16",
                  kv_dtype: str = "fp16", tokens: int = 4096, batch: int = 1, attention: str | None = "sdpa",
                  reserve: int | str = DEFAULT_RESERVE, prefill_chunk: int | None = None) -> Fit:
    """Serve ``batch`` x ``tokens`` on the hardware (tensor parallel when it has several GPUs)."""
    m, hw = get_model(model), parse_hardware(hardware)
    if hw.count == 1 and attention is not None:
        bd = inference_memory(m, weights, kv_dtype, tokens, batch, attention, reserve, prefill_chunk=prefill_chunk)
    else:
        bd = inference_memory_tp(m, hw.count, weights, kv_dtype, tokens, batch, attention, reserve,
                                 prefill_chunk=prefill_chunk)
    longest = max_context(m, hw, weights, kv_dtype, batch, attention, reserve, prefill_chunk)
    notes = []
    if hw.count > 1:
        notes.append(f"tensor parallel over {hw.count} GPUs: weights split, {kv_heads_per_gpu(m, hw.count)} of "
                     f"{m.n_kv_heads} KV heads per GPU, reserve on every GPU.")
    settings = dict(weights=weights, kv_dtype=kv_dtype, tokens=tokens, batch=batch, attention=attention,
                    reserve=str(reserve), prefill_chunk=prefill_chunk)
    return Fit(m, hw, "inference", settings, bd, longest, tuple(notes))


def fit_training(model: ModelSpec | str, hardware: str | Hardware | GPU, method: str = "full", seq: int = 2048,
                 micro_batch: int = 1, precision: str = "bf16", optimizer: str = "adamw",
                 convention: str = "mixed-fp32-master", recompute: str = "none", attention: str = "sdpa",
                 lora_rank: int = 16, lora_targets: str = "all-linear", base_weights: str | None = None,
                 activation_style: str = "hf", reserve: int | str = DEFAULT_RESERVE) -> Fit:
    """One training step per GPU (:func:`vramlib.memory.training.training_memory`); several GPUs = plain data
    parallelism, every GPU holding everything (``vramlib plan`` searches ZeRO/TP/PP)."""
    m, hw = get_model(model), parse_hardware(hardware)
    method = "full" if isinstance(method, str) and method.strip().lower() == "train" else method
    method = check_choice("method", method, METHODS)
    bd = training_memory(m, method, seq, micro_batch, precision, optimizer, convention, recompute, attention,
                         lora_rank, lora_targets, base_weights, activation_style, reserve)
    base = base_weights or ("nf4-dq" if method == "qlora" else precision)
    settings = dict(method=method, seq=seq, micro_batch=micro_batch, precision=precision, optimizer=optimizer,
                    convention=convention, recompute=recompute, attention=attention, lora_rank=lora_rank,
                    lora_targets=lora_targets, base_weights=base, activation_style=activation_style,
                    reserve=str(reserve))
    notes = []
    if hw.count > 1:
        notes.append(f"{hw.count} GPUs as plain data parallelism: every GPU holds all of this; "
                     "`vramlib plan` searches ZeRO, tensor and pipeline splits.")
    return Fit(m, hw, "train", settings, bd, None, tuple(notes))


# --- reports ------------------------------------------------------------------------------------------------
def _split_list(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [x for x in re.split(r"[;|,\s]+", value.strip()) if x]
    return [str(x).strip() for x in value if str(x).strip()]


def _task(name: str) -> str:
    key = str(name).strip().lower()
    return "full" if key == "train" else check_choice("task", key, TASKS)


_MAX_NAME = 200


@dataclass(frozen=True)
class ReportSpec:
    """What one participant's report covers: their hardware, models and tasks, and the scenario knobs."""

    name: str
    gpu: str
    models: tuple[str, ...]
    tasks: tuple[str, ...] = ("inference", "qlora")
    weight_formats: tuple[str, ...] = ("fp16", "int8", "awq-4bit-g128")
    kv_dtype: str = "fp16"
    tokens: int = 4096
    batch: int = 1
    seq: int = 2048
    micro_batch: int = 1
    recompute: str = "none"
    lora_rank: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidValueError("name", self.name, "give the participant's name (any text on one line)")
        if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in self.name) or len(self.name) > _MAX_NAME:
            raise InvalidValueError("name", self.name, f"a name is one line of at most {_MAX_NAME} characters "
                                                       "without control characters")
        object.__setattr__(self, "name", " ".join(self.name.split()))
        for key in ("tokens", "batch", "seq", "micro_batch", "lora_rank"):
            object.__setattr__(self, key, check_positive_int(key, getattr(self, key)))
        for key in ("gpu", "kv_dtype", "recompute"):
            if not isinstance(getattr(self, key), str):
                raise InvalidValueError(key, getattr(self, key), "must be text")
        # config.json paths become absolute: the report notebook runs in a temporary folder
        models = [str(Path(x).resolve()) if _is_path(x) else x for x in _split_list(self.models)]
        object.__setattr__(self, "models", tuple(models))
        object.__setattr__(self, "tasks", tuple(dict.fromkeys(_task(t) for t in _split_list(self.tasks))))
        object.__setattr__(self, "weight_formats", tuple(_split_list(self.weight_formats)))
        if not self.models:
            raise InvalidValueError("models", self.models, "name at least one model")
        if not self.tasks:
            raise InvalidValueError("tasks", self.tasks, f"name at least one of {', '.join(TASKS)}")
        if "inference" in self.tasks and not self.weight_formats:
            raise InvalidValueError("weight_formats", self.weight_formats, "name at least one weight format")

    def validate(self) -> None:
        """Raise the first bad input (hardware, a model, a format) as a one-line VramlibError."""
        report_fits(self)

    def parameters(self) -> dict[str, Any]:
        """The report notebook's papermill parameters."""
        return {"participant": self.name, "gpu": self.gpu, "models": list(self.models), "tasks": list(self.tasks),
                "weight_formats": list(self.weight_formats), "kv_dtype": self.kv_dtype, "tokens": self.tokens,
                "batch": self.batch, "seq": self.seq, "micro_batch": self.micro_batch, "recompute": self.recompute,
                "lora_rank": self.lora_rank}


def report_fits(spec: ReportSpec) -> list[Fit]:
    """Every scenario of a report: per model, inference in each weight format, then each training method."""
    hw = parse_hardware(spec.gpu)
    out: list[Fit] = []
    for name in spec.models:
        m = load_model(name)
        for task in spec.tasks:
            if task == "inference":
                out += [fit_inference(m, hw, w, spec.kv_dtype, spec.tokens, spec.batch) for w in spec.weight_formats]
            else:
                out.append(fit_training(m, hw, task, spec.seq, spec.micro_batch, recompute=spec.recompute,
                                        lora_rank=spec.lora_rank))
    return out


def summary_rows(fits: Sequence[Fit], name: str | None = None) -> list[dict[str, Any]]:
    """One row per scenario: who, GPU, model, task, setting, per-GPU total (GB and GiB), capacity, fits, longest context."""
    rows = []
    for ft in fits:
        row = {"name": name} if name is not None else {}
        row.update({
            "gpu": ft.hardware.label, "model": ft.model.name, "task": ft.task if ft.task == "inference" else ft.settings["method"],
            "setting": ft.setting, "per-GPU total (GB)": round(gb(ft.breakdown.total), 2),
            "per-GPU total (GiB)": round(gib(ft.breakdown.total), 2),
            "GPU memory (GB)": round(gb(ft.capacity), 2), "GPU memory (GiB)": round(gib(ft.capacity), 2),
            "fits": "yes" if ft.fits else "no",
            "longest context (tokens)": "" if ft.max_context is None else ft.max_context,
        })
        rows.append(row)
    return rows


def figure_html(fig, alt: str, width: int | None = None) -> str:
    """A matplotlib figure as an ``<img>`` with an embedded PNG and alt text (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    w = f" width='{width}'" if width else ""
    return f"<img src='data:image/png;base64,{data}' alt='{html.escape(alt, quote=True)}'{w}>"


def capacity_figure(ft: Fit):
    """The bookshelf picture of a fit (``vramlib.explain.bookshelf.draw_bookshelf``; chapter 14) when that module is
    installed, else a stacked bar against the GPU's memory. Returns ``(figure, alt_text, kind)`` with kind
    ``'bookshelf'`` or ``'stacked bar'``."""
    title = f"{ft.model.name}, {ft.setting} on {ft.hardware.label}" + (" (per GPU)" if ft.hardware.count > 1 else "")
    try:
        from ..explain import bookshelf
    except ImportError:
        bookshelf = None
    if bookshelf is not None and hasattr(bookshelf, "draw_bookshelf"):
        ax = bookshelf.draw_bookshelf(ft.breakdown, ft.capacity, title=title)
        alt = bookshelf.alt_text(ft.breakdown, ft.capacity) if hasattr(bookshelf, "alt_text") else title
        return ax.figure, alt, "bookshelf"
    from ..present.viz import stacked_bars

    ax = stacked_bars([ft.breakdown], labels=[ft.setting], capacity=ft.capacity,
                      capacity_label=f"GPU memory ({gib(ft.capacity):,.1f} GiB)")
    ax.set_title(title)
    alt = (f"A stacked bar of {gb(ft.breakdown.total):,.1f} GB against a dashed line at the GPU's "
           f"{gb(ft.capacity):,.1f} GB: {'it fits' if ft.fits else 'it does not fit'}.")
    return ax.figure, alt, "stacked bar"


def _picture_fits(fits: Sequence[Fit]) -> list[Fit]:
    """The scenarios a report pictures: per task, the first inference format that fits (else the smallest),
    and every training method."""
    inf = [ft for ft in fits if ft.task == "inference"]
    out = [next((ft for ft in inf if ft.fits), min(inf, key=lambda ft: ft.breakdown.total))] if inf else []
    return out + [ft for ft in fits if ft.task != "inference"]


def by_model(fits: Sequence[Fit]) -> list[list[Fit]]:
    """The fits grouped by model, in the order the models first appear."""
    groups: dict[str, list[Fit]] = {}
    for ft in fits:
        groups.setdefault(ft.model.name, []).append(ft)
    return list(groups.values())


def md_escape(text: object) -> str:
    """``text`` as literal Markdown: HTML special characters become entities and Markdown punctuation is
    backslash-escaped, so a participant's name such as ``<script>`` or ``[x](javascript:...)`` shows as typed
    and never becomes markup in the report (nbconvert passes raw HTML in Markdown through)."""
    return html.escape(re.sub(r"([\\`*_\[\]{}()#+!|~$])", r"\\\1", str(text)), quote=False)


def show_summary(fits: Sequence[Fit]) -> None:
    """Display the summary table of a report (in a notebook)."""
    from IPython.display import display

    from ..present.viz import Table

    display(Table(summary_rows(fits), caption="Every scenario, memory per GPU (GB = 10^9 bytes, GiB = 2^30 bytes)"))


def show_model(fits: Sequence[Fit]) -> None:
    """Display one model's section of a report: verdicts, bar chart, context curve, bookshelf pictures and
    breakdown tables (figures as embedded PNG with alt text)."""
    from IPython.display import HTML, Markdown, display

    e = md_escape  # model names come from config.json paths, settings from the user: never markup
    m, hw = fits[0].model, fits[0].hardware
    nominal = (f" (stored as the nominal {m.nominal_params:,} the source assumes)"
               if m.nominal_params is not None else "")
    display(Markdown(f"## {e(m.name)}\n\n{m.n_params:,} parameters{nominal}, {m.n_layers} layers, {m.n_heads} heads, "
                     f"{m.n_kv_heads} KV heads, trained context {m.max_context:,} tokens."))
    display(Markdown("\n".join(f"- **{e(ft.setting)}**: {e(ft.verdict())}" for ft in fits)))
    bars = model_bars_figure(fits)
    display(HTML(figure_html(bars, f"Stacked bars of the memory per GPU of {m.name} in each scenario against the "
                                   f"GPU memory, {gb(hw.per_gpu_bytes):,.1f} GB.")))
    if any(ft.task == "inference" for ft in fits):
        curve = context_curve_figure(fits)
        display(HTML(figure_html(curve, f"Inference memory per GPU of {m.name} against the context length for each "
                                        "weight format, with the GPU memory as a dashed line.")))
    for ft in _picture_fits(fits):
        fig, alt, kind = capacity_figure(ft)
        display(Markdown(f"**{e(ft.setting)}** ({kind}): {e(ft.verdict())}"))
        display(HTML(figure_html(fig, alt)))
    for ft in fits:
        display(Markdown(f"**{e(ft.setting)}**: {e(ft.describe())}" + "".join(f" {e(n)}" for n in ft.notes)))
        display(ft.breakdown)


def model_bars_figure(fits: Sequence[Fit]):
    """Stacked bars of one model's scenarios (per GPU, GB) with the GPU memory as a dashed line."""
    import matplotlib.pyplot as plt

    from ..present.viz import stacked_bars

    _, ax = plt.subplots(figsize=(8.5, 1.6 + 0.45 * len(fits)))
    top_down = list(reversed(fits))  # barh draws the first bar at the bottom
    ax = stacked_bars([ft.breakdown for ft in top_down], labels=[ft.setting for ft in top_down], ax=ax,
                      horizontal=True, capacity=fits[0].capacity,
                      capacity_label=f"GPU memory ({gib(fits[0].capacity):,.1f} GiB)")
    ax.set_title(f"{fits[0].model.name} on {fits[0].hardware.label}: memory per GPU")
    return ax.figure


def context_curve_figure(fits: Sequence[Fit], points: int = 12):
    """Inference memory per GPU against context length (tokens, 2^k) for each weight format of one model."""
    from ..present.viz import memory_curve

    inf = [ft for ft in fits if ft.task == "inference"]
    top = max(ft.model.max_context for ft in inf)
    xs = [2**k for k in range(8, 40) if 2**k <= top][-points:]
    series = {}
    for ft in inf:
        s = ft.settings
        series[s["weights"]] = [inference_memory_tp(ft.model, ft.hardware.count, s["weights"], s["kv_dtype"], x,
                                                    s["batch"], s["attention"], s["reserve"]).total for x in xs]
    ax = memory_curve(xs, series, capacity=inf[0].capacity, capacity_label="GPU memory")
    ax.set_title(f"{inf[0].model.name}: inference memory per GPU, batch {inf[0].settings['batch']}")
    return ax.figure


def template_path() -> Path:
    """The report notebook papermill runs (shipped in the package)."""
    from importlib import resources

    return Path(str(resources.files("vramlib") / "data" / "report_template.ipynb"))


def render_html(notebook: str | Path, title: str) -> str:
    """A standalone HTML page of an executed notebook (nbconvert, lab template, code hidden, images embedded)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(notebook), as_version=4)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body


MAX_TIMEOUT = 86_400
"""The longest ``timeout`` (seconds per notebook cell) a report accepts: a day."""

_VRAMLIB_ERRORS = ("VramlibError", "UnknownNameError", "InvalidValueError", "ConfigError", "UsageError")


def _check_timeout(timeout: object) -> int:
    return check_number("timeout", timeout, minimum=1, maximum=MAX_TIMEOUT, integer=True,
                        allowed=f"must be a whole number of seconds from 1 to {MAX_TIMEOUT:,}")


def _writable(field: str, path: Path, *, folder: bool = False) -> Path:
    """Create the folder of an output file (or the folder itself): a path that cannot be written raises naming
    ``field`` before any notebook runs."""
    import os

    target = path if folder else path.parent
    if not folder and path.is_dir():
        raise InvalidValueError(field, str(path), "is a folder; give a file name")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidValueError(field, str(path), f"cannot create the folder {str(target)!r} ({e.strerror or e})") from None
    if not os.access(target, os.W_OK) or (path.exists() and not folder and not os.access(path, os.W_OK)):
        raise InvalidValueError(field, str(path), "is not writable")
    return path


def run_report(spec: ReportSpec, out_html: str | Path, notebook: str | Path | None = None,
               timeout: int = 300) -> Path:
    """Run the report notebook for ``spec`` through papermill and write a standalone HTML file.

    The spec, ``timeout`` and the output paths are checked first (bad input raises a one-line VramlibError
    before any kernel starts); ``notebook`` keeps the executed .ipynb at that path. A cell running past
    ``timeout`` seconds raises InvalidValueError naming ``timeout``; any other failure inside the notebook is a
    bug and is raised as papermill's PapermillExecutionError.
    """
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError
    from papermill.exceptions import PapermillExecutionError

    timeout = _check_timeout(timeout)
    spec.validate()
    out_html = _writable("out", Path(out_html))
    nb_out = _writable("notebook", Path(notebook)) if notebook else None
    with tempfile.TemporaryDirectory(prefix="vramlib-report-") as tmp:
        nb_path = nb_out or Path(tmp) / "report.ipynb"
        try:
            pm.execute_notebook(str(template_path()), str(nb_path), parameters=spec.parameters(),
                                kernel_name="python3", progress_bar=False, log_output=False,
                                execution_timeout=timeout, cwd=tmp,
                                extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no kernel banners on stderr
        except CellTimeoutError:
            raise InvalidValueError("timeout", timeout, "a report cell ran longer than that many seconds; give "
                                                        "more with --timeout") from None
        except PapermillExecutionError as e:
            if e.ename in _VRAMLIB_ERRORS:  # the kernel refused an input (a config.json changed since validate)
                raise VramlibError(str(e.evalue)) from None
            raise
        page = render_html(nb_path, f"vramlib report: {spec.name}")  # nbconvert escapes the <title>
        try:
            out_html.write_text(page, encoding="utf-8")
        except OSError as e:
            raise InvalidValueError("out", str(out_html), f"cannot write the file ({e.strerror or e})") from None
    return out_html


def _slug(text: str) -> str:
    """A file name stem from a name: ASCII letters and digits joined by '-' (accents dropped: 'José' -> 'jose')."""
    plain = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")[:80].strip("-") or "participant"


def _unique_slug(name: str, used: set[str]) -> str:
    base = _slug(name)
    stem, k = base, 2
    while stem in used:
        stem, k = f"{base}-{k}", k + 1
    used.add(stem)
    return stem


class Participant(NamedTuple):
    """One participant of a batch: where the row came from, the name and GPU as given, the spec (``None`` for a
    bad row) and the one-line reason it has no report (``None`` when it is fine)."""

    line: int
    name: str
    gpu: str
    spec: ReportSpec | None
    error: str | None = None
    source: str = ""

    @property
    def where(self) -> str:
        """``'people.csv line 3 (Bo Chen)'``, or the name for a spec given directly."""
        return f"{self.source} line {self.line} ({self.name})" if self.line else self.name


_COLUMNS = {"name": "name", "gpu": "gpu", "models": "models", "model": "models", "tasks": "tasks", "task": "tasks",
            "weight_formats": "weight_formats", "weights": "weight_formats", "kv_dtype": "kv_dtype",
            "tokens": "tokens", "seq": "seq", "batch": "batch", "micro_batch": "micro_batch",
            "recompute": "recompute", "lora_rank": "lora_rank"}
_TEXT_COLUMNS = ("tasks", "weight_formats", "kv_dtype", "recompute")
_INT_COLUMNS = ("tokens", "seq", "batch", "micro_batch", "lora_rank")
_HEADER_HINT = "the first line must be the header, e.g. name,gpu,models"


def _read_csv_text(path: Path) -> str:
    """The text of a participants file: UTF-8 (with or without a BOM), UTF-16 with a BOM, else Windows-1252 /
    latin-1 (what Excel saves as 'CSV' on many machines)."""
    if path.is_dir():
        raise InvalidValueError("participants", str(path), "is a folder; give a CSV file")
    if not path.exists():
        raise InvalidValueError("participants", str(path), "no such file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InvalidValueError("participants", str(path), f"cannot read the file ({e.strerror or e})") from None
    text = None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise InvalidValueError("participants", str(path), "is not valid UTF-16 text; save it as CSV (UTF-8)") from None
    else:
        for encoding in ("utf-8-sig", "cp1252", "latin-1"):  # latin-1 decodes any bytes
            try:
                text = data.decode(encoding)
                break
            except UnicodeDecodeError:
                continue
    if "\x00" in text:
        raise InvalidValueError("participants", str(path), "is not a text CSV (it holds NUL bytes); save it as CSV (UTF-8)")
    return text


def read_participant_rows(path: str | Path, defaults: dict[str, Any] | None = None) -> list[Participant]:
    """Read a participants CSV into one :class:`Participant` per row; a bad row (unknown model, GPU typo, bad
    number, duplicate name, more fields than columns) is kept with its one-line reason instead of stopping the
    others.

    Columns (any case; spaces or '-' for '_'): ``name``, ``gpu``, ``models`` (or ``model``; several separated
    by ``;``), optional ``tasks`` (or ``task``), ``weight_formats`` (or ``weights``), ``kv_dtype``, ``tokens``,
    ``seq``, ``batch``, ``micro_batch``, ``recompute``, ``lora_rank``; other columns (email, notes ...) are
    ignored, except one that looks like a misspelt known column, which is refused. Separators: ',' (or ';' or a
    tab when the header has no comma). Blank lines are skipped. A problem with the file itself (missing, empty,
    no header, a missing or misspelt column, broken quoting) raises a one-line VramlibError."""
    import difflib

    path = Path(path)
    text = _read_csv_text(path)
    if not text.strip():
        raise InvalidValueError("participants", str(path), f"the file is empty; {_HEADER_HINT}")
    first = next(line for line in text.splitlines() if line.strip())
    delimiter = "," if "," in first else "\t" if "\t" in first else ";" if ";" in first else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)

    def records():
        try:
            for cells in reader:
                if any(c.strip() for c in cells):
                    yield reader.line_num, cells
        except csv.Error as e:
            raise InvalidValueError(f"{path.name} line {reader.line_num}", "CSV", f"not valid CSV ({e})") from None

    rows_iter = records()
    first_record = next(rows_iter, None)
    if first_record is None:
        raise InvalidValueError("participants", str(path), f"the file has no header; {_HEADER_HINT}")
    raw_header = first_record[1]
    header = [re.sub(r"[\s\-]+", "_", c.strip().lower()) for c in raw_header]
    cols: dict[str, int] = {}
    for j, (raw, col) in enumerate(zip(raw_header, header)):
        if not col:
            continue
        if col in _COLUMNS:
            key = _COLUMNS[col]
            if key in cols:
                raise InvalidValueError(f"{path.name}: column", raw.strip(),
                                        f"names the same column as {raw_header[cols[key]].strip()!r}; keep one")
            cols[key] = j
        elif difflib.get_close_matches(col, list(_COLUMNS), n=1, cutoff=0.75):
            raise UnknownNameError(f"{path.name}: column", raw.strip(), _COLUMNS)
    missing = [c for c in ("name", "gpu", "models") if c not in cols]
    if missing:
        raise InvalidValueError("participants", str(path), f"the CSV needs columns name, gpu, models (missing: "
                                                           f"{', '.join(missing)}); {_HEADER_HINT}")
    named = {j for j, col in enumerate(header) if col}
    out: list[Participant] = []
    seen: dict[str, int] = {}
    for i, cells in rows_iter:
        def val(key: str) -> str:
            j = cols.get(key)
            return cells[j].strip() if j is not None and j < len(cells) else ""

        name, gpu = " ".join(val("name").split()), val("gpu")
        label = name or f"line {i}"
        where = f"{path.name} line {i} ({label})"
        try:
            stray = [c for j, c in enumerate(cells) if j not in named and c.strip()]
            if stray:
                raise VramlibError(f"row: {len(cells)} fields but the header names {len(named)} columns (first "
                                   f"extra: {stray[0].strip()!r}); separate several models with ';' or quote a field "
                                   "that holds a comma")
            key = name.casefold()
            if key and key in seen:
                raise InvalidValueError("name", name, f"line {seen[key]} has the same name; names must be unique")
            if key:
                seen[key] = i
            kw = dict(defaults or {})
            kw.update(name=label, gpu=gpu, models=val("models"))
            kw.update({k: val(k) for k in _TEXT_COLUMNS if val(k)})
            for k in _INT_COLUMNS:
                if val(k):
                    if not re.fullmatch(r"[0-9]+", val(k)):
                        raise InvalidValueError(k, val(k), "must be a positive integer")
                    kw[k] = int(val(k))
            spec = ReportSpec(**kw)
            spec.validate()
        except VramlibError as e:
            out.append(Participant(i, label, gpu, None, f"{where}: {e}", path.name))
            continue
        out.append(Participant(i, spec.name, gpu, spec, None, path.name))
    if not out:
        raise InvalidValueError("participants", str(path), "the CSV has no participant rows")
    return out


def read_participants(path: str | Path, defaults: dict[str, Any] | None = None) -> list[ReportSpec]:
    """The specs of a participants CSV (:func:`read_participant_rows`); the first bad row raises its one-line
    error naming the file, line and participant."""
    rows = read_participant_rows(path, defaults)
    for r in rows:
        if r.error:
            raise VramlibError(r.error)
    return [r.spec for r in rows]


_SUMMARY_CSS = ("body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.yes{background:#e0f3e0}"
                ".no{background:#fbe3e3}.failed{background:#fde8c8}caption{font-weight:bold;margin-bottom:.5em}")

SUMMARY_COLUMNS = ("name", "gpu", "model", "task", "setting", "per-GPU total (GB)", "per-GPU total (GiB)",
                   "GPU memory (GB)", "GPU memory (GiB)", "fits", "longest context (tokens)", "report", "error")
"""The columns of ``summary.csv``: :func:`summary_rows` plus the report's file and, for a participant without a
report, the one-line reason."""


def summary_html(rows: Sequence[dict[str, Any]], links: dict[str, str] | None = None,
                 failed: Sequence[Participant] = ()) -> str:
    """Who can run what: one row per participant, one column per model x setting, cells yes/no (GB per GPU);
    a participant without a report gets one cell with the reason. Every name and value is HTML-escaped."""
    esc = html.escape
    people = list(dict.fromkeys(r["name"] for r in rows))
    cols = list(dict.fromkeys((r["model"], r["setting"]) for r in rows))
    cell = {(r["name"], r["model"], r["setting"]): r for r in rows}
    head = "".join(f"<th>{esc(m)}<br><small>{esc(s)}</small></th>" for m, s in cols)
    body = []
    for p in people:
        gpu = next(r["gpu"] for r in rows if r["name"] == p)
        name = esc(p)
        if links and p in links:
            name = f"<a href='{esc(links[p], quote=True)}'>{name}</a>"
        tds = []
        for m, s in cols:
            r = cell.get((p, m, s))
            if r is None:
                tds.append("<td></td>")
                continue
            ctx = f", {r['longest context (tokens)']:,} tokens" if r["longest context (tokens)"] != "" else ""
            tds.append(f"<td class='{esc(str(r['fits']), quote=True)}'>{esc(str(r['fits']))} "
                       f"({r['per-GPU total (GB)']:,.1f} GB{ctx})</td>")
        body.append(f"<tr><td>{name}</td><td>{esc(gpu)}</td>{''.join(tds)}</tr>")
    for f in failed:
        body.append(f"<tr><td>{esc(f.name)}</td><td>{esc(f.gpu)}</td><td class='failed' colspan='{max(len(cols), 1)}'>"
                    f"no report: {esc(f.error or '')}</td></tr>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>vramlib: who can run what</title>"
            f"<style>{_SUMMARY_CSS}</style></head><body><table><caption>Who can run what (memory per GPU in GB = "
            f"10^9 bytes; 'tokens' is the longest context at batch 1)</caption><thead><tr><th>name</th><th>GPU</th>"
            f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></body></html>")


class Batch(NamedTuple):
    """What :func:`run_batch` wrote: the reports, the two summaries, and the participants without a report
    (each with its one-line reason in ``error``)."""

    reports: list[Path]
    summary_html: Path
    summary_csv: Path
    failed: list[Participant]


def _csv_safe(row: dict) -> dict:
    """A summary row whose text cells cannot run as spreadsheet formulas (OWASP CSV injection: a leading = + - @
    tab or CR is quoted with an apostrophe); numbers stay numbers."""
    return {k: "'" + v if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r") else v
            for k, v in row.items()}


def run_batch(participants: Sequence[ReportSpec | Participant], out_dir: str | Path, progress: bool = True,
              timeout: int = 300) -> Batch:
    """One HTML report per participant in ``out_dir`` (a tqdm progress bar on stderr), then ``summary.html``
    and ``summary.csv`` of who can run what.

    Nothing is lost: a participant whose row is bad (:func:`read_participant_rows`) or whose report fails on
    bad input gets no report but a row in both summaries with the reason, and the others are all written; see
    ``Batch.failed``. A failure inside the report notebook that is not bad input is a bug: the batch still
    finishes and writes the summaries, then raises the first such PapermillExecutionError.
    """
    from papermill.exceptions import PapermillExecutionError
    from tqdm.auto import tqdm

    timeout = _check_timeout(timeout)
    items = [p if isinstance(p, Participant) else Participant(0, p.name, p.gpu, p) for p in participants]
    if not items:
        raise InvalidValueError("participants", [], "give at least one participant")
    out_dir = _writable("out_dir", Path(out_dir), folder=True)
    reports, rows, links, failed, bugs = [], [], {}, [], []
    used, names = {"summary"}, set()
    for item in tqdm(items, desc="reports", unit="participant", disable=not progress):
        spec = item.spec
        if spec is not None and spec.name.casefold() in names:
            item = item._replace(spec=None, error=f"{item.where}: name: names must be unique")
        if item.spec is None:
            failed.append(item)
            continue
        names.add(spec.name.casefold())
        try:
            path = run_report(spec, out_dir / f"{_unique_slug(spec.name, used)}.html", timeout=timeout)
            fits = report_fits(spec)
        except VramlibError as e:
            failed.append(item._replace(error=f"{item.where}: {e}"))
            continue
        except PapermillExecutionError as e:  # a bug: the others still get their reports; raised at the end
            failed.append(item._replace(error=f"{item.where}: the report notebook failed ({e.ename}: "
                                              f"{' '.join(str(e.evalue).split())}); a bug in vramlib"))
            bugs.append(e)
            continue
        reports.append(path)
        links[spec.name] = path.name
        rows += summary_rows(fits, name=spec.name)
    csv_path, html_path = out_dir / "summary.csv", out_dir / "summary.html"
    try:
        with csv_path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(SUMMARY_COLUMNS))
            w.writeheader()
            for r in rows:
                w.writerow(_csv_safe({**r, "report": links[r["name"]], "error": ""}))
            for f in failed:
                w.writerow(_csv_safe({"name": f.name, "gpu": f.gpu, "error": f.error}))
        html_path.write_text(summary_html(rows, links, failed), encoding="utf-8")
    except OSError as e:
        raise InvalidValueError("out_dir", str(out_dir), f"cannot write the summaries ({e.strerror or e})") from None
    if bugs:
        raise bugs[0]
    return Batch(reports, html_path, csv_path, failed)
