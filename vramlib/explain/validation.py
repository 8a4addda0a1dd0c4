"""Validation: vramlib's predictions against measured and published memory.

Measurements live in ``data/measured/*.json`` (each with the command that reproduces it and the library
versions; the scripts are in ``tools/measure/``); published figures with their sources in
``data/published_measurements.json``. This module loads them, recomputes every prediction with the current
vramlib (so a drifting formula shows up here, not only when the measurements are re-run), and summarises
the errors. The relative error of a row is (predicted - measured) / measured: positive when vramlib
over-estimates.

The real optimizer's bytes per parameter come from ``optimizer.json`` (what ``torch.optim`` allocated) and
are evaluated with :data:`vramlib.core.formulas.MODEL_STATES_BYTES`, the same expression the conventions use.

Used in: chapter 16 (validation).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path

import sympy as sp

from ..core import formulas as F
from ..memory.activations import activation_bytes
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, UnknownNameError, VramlibError, check_choice
from ..solve.feasibility import kv_budget_bytes
from ..catalog.hardware import get_gpu
from ..memory.inference import (inference_memory, kv_bytes_per_token, kv_cache_bytes, prefill_workspace_bytes,
                                weights_bytes)
from ..catalog.models import ModelSpec, get_model, model_names
from ..plans.parallel import deepspeed_zero3_estimate, plan_memory, zero_model_states
from ..serve.llamacpp import llamacpp_memory
from ..catalog.precision import get_precision
from ..core.symbols import E as S_E, b_a as S_ba
from ..memory.training import CONVENTIONS, adamw_bytes_per_param, lora_params, optimizer_state_bytes, \
    training_memory
from ..memory.step import OPTIMIZER_IMPLS
from ..core.units import GB, GiB, bytes_text, gb

MEASUREMENTS = ("param_counts", "saved_bytes", "kv_cache", "architectures", "peaks", "step_peaks", "fsdp_peaks", "lora",
                "optimizer", "llamacpp_buffers", "cuda_memory")
"""The measurement files in ``data/measured/`` (``cuda_memory`` exists only after a run on a GPU)."""

COMPONENTS = ("parameters", "KV cache", "KV per token (config)", "activations (hf)", "activations (megatron)",
              "LoRA parameters", "optimizer state", "inference peak (fake CPU)", "inference peak (fake CUDA)",
              "training step peak (fake CUDA)", "data-parallel rank peak (FSDP2, fake CUDA)")
"""Components compared with measurements, in the order the chapter shows them."""

PUBLISHED_KINDS = ("measurement", "tool-estimate", "paper-estimate", "documented", "bound")
"""Kinds of published figure: a log or profiler reading, an estimator's output, a paper's computed figure,
a documented constant, and a capacity a workload ran within (a verdict, no error)."""

UNIT_BYTES = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": GiB, "MB": 10**6, "GB": GB, "TB": 10**12,
              "B/param": 1, "G-params": 10**9}
"""Units of the published values (the unit the number really is in, whatever the source printed)."""


P_pred, M_meas = sp.symbols("P M", positive=True)
RELATIVE_ERROR = (P_pred - M_meas) / M_meas
"""Relative error of a prediction P against a measurement M; positive when vramlib over-estimates. Chapter 16."""


def relative_error(predicted: int, measured: int) -> float:
    """Evaluates :data:`RELATIVE_ERROR` exactly, returned as a float."""
    return float(F.evaluate(RELATIVE_ERROR, P=Fraction(predicted), M=Fraction(measured)))


def _data_dir() -> Path:
    return Path(str(resources.files("vramlib") / "data"))


# --- loading ---------------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def load_measured(name: str) -> dict:
    """One measurement file (``data/measured/<name>.json``) as stored."""
    name = check_choice("measurement", name, MEASUREMENTS)
    path = _data_dir() / "measured" / f"{name}.json"
    if not path.exists():
        raise InvalidValueError("measurement", name, f"not measured yet: run {_command(name)}")
    return json.loads(path.read_text())


def _command(name: str) -> str:
    script = {"saved_bytes": "saved_tensors"}.get(name, name)
    return f"python tools/measure/{script}.py"


def available_measurements() -> list[str]:
    """The measurement files present (``cuda_memory`` only after a GPU run)."""
    return [n for n in MEASUREMENTS if (_data_dir() / "measured" / f"{n}.json").exists()]


def provenance() -> list[dict]:
    """For each measurement file: the command that reproduces it, library versions, device, row count."""
    out = []
    for name in available_measurements():
        d = load_measured(name)
        rows = d.get("rows", d.get("models", {}))
        out.append({"file": f"{name}.json", "command": d.get("command", ""), "torch": d.get("torch", ""),
                    "transformers": d.get("transformers", ""), "peft": d.get("peft", ""),
                    "device": d.get("gpu", d.get("device", "")), "rows": len(rows)})
    return out


# --- rows and errors -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One comparison: a measured number of bytes (or parameters) and vramlib's prediction for it."""

    component: str
    id: str
    measured: int
    predicted: int
    note: str = ""

    @property
    def error(self) -> float:
        """Relative error (predicted - measured) / measured; positive when vramlib over-estimates."""
        return relative_error(self.predicted, self.measured)

    @property
    def exact(self) -> bool:
        return self.predicted == self.measured

    def to_dict(self) -> dict:
        return {"component": self.component, "id": self.id, "measured": self.measured, "predicted": self.predicted,
                "error %": 100 * self.error, "note": self.note}


def error_stats(rows: list[Row]) -> dict:
    """n, exact count, median and maximum of ``|relative error|``, mean signed error (fractions, not %)."""
    if not rows:
        raise InvalidValueError("rows", "[]", "need at least one row")
    abs_err = [abs(r.error) for r in rows]
    return {"n": len(rows), "exact": sum(r.exact for r in rows), "median": statistics.median(abs_err),
            "max": max(abs_err), "mean_signed": statistics.fmean(r.error for r in rows)}


def param_rows() -> list[Row]:
    """Every catalogue model: transformers' parameter count (meta device) against ``ModelSpec.n_params``."""
    d = load_measured("param_counts")
    return [Row("parameters", k, v["n_params"], get_model(k).n_params) for k, v in sorted(d["models"].items())]


def active_param_rows() -> list[Row]:
    """Every catalogue MoE model: the parameters one token touches in transformers' model (routed experts x top_k /
    E, everything else whole) against ``ModelSpec.n_active_params``."""
    d = load_measured("param_counts")
    return [Row("active parameters", k, v["n_active_params"], get_model(k).n_active_params)
            for k, v in sorted(d["models"].items()) if "n_active_params" in v]


def _tiny_spec(row: dict) -> ModelSpec:
    return ModelSpec.from_hf_config(row["hf_config"], name=row["model"])


def kv_rows(parts: tuple[str, ...] = ("catalogue", "tiny")) -> list[Row]:
    """Bytes held by transformers' DynamicCache against ``kv_cache_bytes`` (catalogue: meta device, real shapes)."""
    rows = []
    for r in load_measured("kv_cache")["rows"]:
        if r["part"] not in parts or r["part"] not in ("catalogue", "tiny"):
            continue
        model = r["model"] if r["part"] == "catalogue" else _tiny_spec(r)
        pred = kv_cache_bytes(model, tokens=r["tokens"], batch=r["batch"], dtype=r["dtype"])
        rows.append(Row("KV cache", r["id"], r["bytes"], pred, r["step"]))
    return rows


def kv_config_rows() -> list[Row]:
    """2 x L x n_kv x head_dim x 2 bytes read from transformers' config object against ``kv_bytes_per_token``."""
    return [Row("KV per token (config)", r["id"], r["bytes"], kv_bytes_per_token(r["model"], "fp16"))
            for r in load_measured("kv_cache")["rows"] if r["part"] == "config"]


def kv_sliding_rows() -> list[dict]:
    """Sliding-window layers past the window: measured, vramlib (transformers' rule: the window on sliding layers)
    and what a runtime that ignores the window would hold (``runtime="every-token"``)."""
    out = []
    for r in load_measured("kv_cache")["rows"]:
        if r["part"] != "sliding":
            continue
        model = r["model"] if r["id"].startswith("sliding/") else _tiny_spec(r)
        pred = kv_cache_bytes(model, tokens=r["tokens"], batch=r["batch"], dtype=r["dtype"])
        every = kv_cache_bytes(model, tokens=r["tokens"], batch=r["batch"], dtype=r["dtype"], runtime="every-token")
        out.append({"id": r["id"], "tokens": r["tokens"], "window": r["sliding_window"],
                    "sliding layers": r["sliding_layers"], "measured": r["bytes"], "vramlib": pred,
                    "every token kept": every, "storage held": r.get("storage_bytes"),
                    "vramlib error %": 100 * relative_error(pred, r["bytes"])})
    return out


# --- every architecture family against transformers (architectures.json) ------------------------------------------

_DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def architecture_cases() -> list[dict]:
    """The rows of ``architectures.json``: tiny random models of every family (window shrunk below the sequence,
    a forward pass on the CPU), then the real configs at full size (meta device)."""
    d = load_measured("architectures")
    return [*d["rows"], *d["full_size"].values()]


def architecture_spec(row: dict) -> ModelSpec:
    """The ModelSpec ``from_hf_config`` reads from a row's config (a shipped config whose model type the measuring
    tool replaced, Kimi-K2's, is read with its own type and architecture)."""
    cfg, fallback = row["hf_config"], row.get("model_type_fallback")
    if fallback:
        cfg = dict(cfg, model_type=fallback["from"], architectures=[fallback["via"].split(": ")[1]])
    return ModelSpec.from_hf_config(cfg, name=row["id"])


def architecture_cache_steps(row: dict) -> list[tuple[int, int, str, int]]:
    """(tokens, batch, dtype, bytes held) after every prefill and decode step of a row: keys, values and Mamba
    states as transformers' cache object holds them."""
    out = []
    for run in row.get("cache") or []:
        for st in run["steps"]:
            dtypes = {L[k]["dtype"] for L in st["layers"] for k in ("keys", "values") if L.get(k)}
            dtypes |= {t["dtype"] for L in st["layers"] for t in (L.get("conv_states") or {}).values()}
            if len(dtypes) != 1:
                raise InvalidValueError("architectures.json", row["id"], f"a cache step mixes dtypes {sorted(dtypes)}")
            out.append((st["tokens"], row["cache_run"]["batch"], _DTYPE_NAMES[dtypes.pop()],
                        st["totals"]["state_bytes"]))
    return out


def _language_params(row: dict, key: str) -> int:
    """A row's measured parameter count (``key``: total or active) without a vision tower and projector."""
    parts = row["params"].get("components", {})
    other = sum(parts[k]["total"] for k in ("vision_tower", "multi_modal_projector") if k in parts)
    return (row["params"]["total"] if key == "total" else row["active"]["active"]) - other


def architecture_table() -> list[dict]:
    """One line per measured case: the family, vramlib's layer stack, parameters and active parameters (transformers
    against vramlib), and the cache steps compared (the token range, the local window, how many equal the bytes
    transformers holds). A family vramlib refuses shows its one-line error instead."""
    out = []
    for row in architecture_cases():
        line = {"case": row["id"], "model_type": row["model_type"]}
        try:
            m = architecture_spec(row)
        except VramlibError as e:
            out.append({**line, "layers": "refused: " + str(e)})
            continue
        steps = architecture_cache_steps(row)
        held = [kv_cache_bytes(m, t, b, dt) == got for t, b, dt, got in steps]
        span = max(m.sliding_window, m.attention_chunk)
        out.append({**line, "layers": m.layer_summary(), "params (transformers)": _language_params(row, "total"),
                    "params (vramlib)": m.n_params, "active (transformers)": _language_params(row, "active"),
                    "active (vramlib)": m.n_active_params,
                    "tokens": f"{min(s[0] for s in steps)}-{max(s[0] for s in steps)}" if steps else "",
                    "window / chunk": span or "",
                    "past it": ("yes" if max(s[0] for s in steps) > span else "no") if span and steps else "",
                    "cache steps": len(steps), "cache exact": sum(held)})
    return out


def architecture_summary() -> dict:
    """Counts over :func:`architecture_table`: families and cases compared, cases exact on parameters, active
    parameters and every cache step, cache steps, cases whose sequence runs past a window or chunk, and the refused
    families."""
    table = architecture_table()
    ok = [r for r in table if "params (vramlib)" in r]
    exact = [r for r in ok if r["params (vramlib)"] == r["params (transformers)"] and
             r["active (vramlib)"] == r["active (transformers)"] and r["cache exact"] == r["cache steps"]]
    return {"families": len({r["model_type"] for r in ok}), "cases": len(ok), "exact": len(exact),
            "cache_steps": sum(r["cache steps"] for r in ok),
            "past_window_cases": sum(1 for r in ok if r["past it"] == "yes"),
            "refused": sorted({r["model_type"] for r in table if r not in ok})}


def peak_rows(logits: str | None = None) -> list[Row]:
    """Inference prefill at full size: the peak MemTracker tracked on the fake CPU device (``peaks.json``) against
    ``inference_memory`` without its reserve, with the same ``logits`` kept ("last": generation; "all": every token's,
    an evaluation loop); None: both."""
    if logits is not None:
        logits = check_choice("logits", logits, ("last", "all"))
    out = []
    for r in load_measured("peaks")["rows"]:
        if r["phase"] != "prefill" or logits not in (None, r["logits"]):
            continue
        pred = inference_memory(r["model"], r["dtype"], r["dtype"], r["tokens"], r["batch"], r["attention"], 0,
                                logits=r["logits"]).total
        out.append(Row("inference peak (fake CPU)", r["id"], r["peak_bytes"], pred,
                       f"{r['tokens']:,} tokens, {r['logits']} logits"))
    return out


def peak_exact_but_buffers(logits: str | None = None) -> int:
    """How many :func:`peak_rows` equal the tracked peak once the model's buffers are added (the rotary
    embedding's frequency tables, a few hundred bytes MemTracker counts and ``inference_memory`` leaves out)."""
    buffers = {r["id"]: r["by_category"].get("Buffer", 0) for r in load_measured("peaks")["rows"]}
    return sum(1 for r in peak_rows(logits) if r.predicted + buffers[r.id] == r.measured)


def peak_last_logits_shortfall() -> float:
    """How far under its tracked peak the every-token-logits case furthest off would be priced as generation prices
    it (``logits="last"``): the gap ``logits="all"`` closes, as a positive fraction."""
    return max(-relative_error(inference_memory(r["model"], r["dtype"], r["dtype"], r["tokens"], r["batch"],
                                                r["attention"], 0).total, r["peak_bytes"])
               for r in load_measured("peaks")["rows"] if r["phase"] == "prefill" and r["logits"] == "all")


def step_peak_gap(row: dict) -> str | None:
    """Why a measured training step (``step_peaks.json``) has no prediction yet, in one line, or None when
    :func:`vramlib.memory.training.training_memory` prices it by its phases."""
    if "not_measured" in row:
        return "not measured: " + row["not_measured"]
    if row["method"] != "full" and get_model(row["model"]).n_experts:
        return "LoRA on routed experts (transformers' fused expert tensors): measured, not modelled yet"
    if row["precision"] == "autocast" and row["recompute"] != "none":
        return "fp32 weights under autocast with recomputation: the re-run layer re-casts its weights -- not modelled yet"
    if row["optimizer"] not in OPTIMIZER_IMPLS:
        return f"{row['optimizer']}: its step is not modelled yet"
    return None


def _step_convention(row: dict) -> str:
    """The convention a measured step ran: pure-bf16, or fp32 weights under autocast (``fp32-autocast``)."""
    return "fp32-autocast" if row["precision"] == "autocast" else "pure-bf16"


def step_peak_rows() -> list[Row]:
    """Full-size training steps tracked by MemTracker on the fake CUDA device (``step_peaks.json``: the steady-state
    step of a real loop) against :func:`vramlib.memory.training.training_memory` (its phases) without its reserve, for every case it
    models; the note names the phase each sets its peak in (measured / predicted)."""
    out = []
    for r in load_measured("step_peaks")["rows"]:
        if r["kind"] != "train" or step_peak_gap(r):
            continue
        bd = training_memory(r["model"], method=r["method"], seq=r["seq"], micro_batch=r["batch"],
                             convention=_step_convention(r), optimizer=r["optimizer"], optimizer_impl=r["impl"],
                             recompute=r["recompute"], lora_rank=r["lora_rank"], lora_dtype=r["lora_dtype"],
                             reserve=0, peak="step")
        where = r["where"]["phase"] if r["where"]["phase"] == bd.peak_phase else \
            f"{r['where']['phase']} (predicted: {bd.peak_phase})"
        out.append(Row("training step peak (fake CUDA)", r["id"], r["peak_bytes"], bd.total, where))
    return out


def step_peak_table() -> list[dict]:
    """Every measured training step (``step_peaks.json``): the case, what sets its peak (phase, module, operator),
    the tracked peak and the steady state, and ``training_memory``'s prediction and error -- or why it has none."""
    pred = {r.id: r for r in step_peak_rows()}
    out = []
    for r in load_measured("step_peaks")["rows"]:
        if r["kind"] != "train":
            continue
        gap = step_peak_gap(r)
        p = pred.get(r["id"])
        where = r.get("where") or {}
        out.append({"case": r["id"].split("/", 1)[1], "peak GB": None if gap and "not measured" in gap else
                    gb(r["peak_bytes"]), "phase": where.get("phase"), "module": where.get("module"),
                    "steady GB": gb(r["steady"]["Total"]) if "steady" in r else None,
                    "predicted GB": gb(p.predicted) if p else None, "error %": 100 * p.error if p else None,
                    "note": gap or ""})
    return out


def step_sum_rows() -> list[Row]:
    """The same measured steps as :func:`step_peak_rows`, priced as a sum of parts (``training_memory`` with the
    pure-bf16 convention, no reserve): what counting every tensor as alive at once gets wrong."""
    out = []
    for r in load_measured("step_peaks")["rows"]:
        if r["kind"] != "train" or step_peak_gap(r) or r["precision"] == "autocast" or r["method"] != "full":
            continue
        bd = training_memory(r["model"], seq=r["seq"], micro_batch=r["batch"], convention="pure-bf16",
                             optimizer=r["optimizer"], recompute=r["recompute"], reserve=0, peak="sum")
        out.append(Row("training step, sum of parts", r["id"], r["peak_bytes"], bd.total, r["where"]["phase"]))
    return out


def lora_sum_error() -> float:
    """The error, on the measured LoRA step furthest off, of ``training_memory``'s sum of parts (full fine-tuning's
    activations, bf16 adapters) against the tracked peak: what the LoRA expressions of the step correct."""
    errs = [relative_error(training_memory(r["model"], method="lora", seq=r["seq"], micro_batch=r["batch"],
                                           lora_rank=r["lora_rank"], reserve=0, lora_dtype="bf16",
                                           peak="sum").total, r["peak_bytes"])
            for r in load_measured("step_peaks")["rows"]
            if r["kind"] == "train" and r["method"] == "lora" and not step_peak_gap(r)]
    return max(errs, key=abs)


def bnb8_state_row() -> Row:
    """bitsandbytes' AdamW8bit state on the fake CUDA device (``step_peaks.json``: what stays allocated between
    steps, minus the parameters) against ``optimizer_state_bytes(model, "adamw-8bit")``."""
    r = next(r for r in load_measured("step_peaks")["rows"] if r["optimizer"] == "adamw-8bit" and "steady" in r)
    return Row("optimizer state", r["id"], r["steady"]["Optstate"], optimizer_state_bytes(r["model"], "adamw-8bit"),
               "bitsandbytes AdamW8bit on the fake CUDA device")


def step_peak_summary() -> dict:
    """What chapter 16 says of the measured steps: the modelled ones' error statistics, the sum of parts' error range
    on them, the LoRA sum's worst error, the steps not modelled yet, and the fake-CUDA prefills' statistics."""
    sums = [r.error for r in step_sum_rows()]
    return {"model": error_stats(step_peak_rows()), "sum_min": min(sums), "sum_max": max(sums),
            "lora_sum": lora_sum_error(), "gaps": sum(1 for t in step_peak_table() if t["note"]),
            "inference": error_stats(step_inference_rows())}


def fake_cuda_cpu_check() -> dict:
    """The one case measured on both fake devices (Llama-2-7B, 2,048-token prefill, last-token logits): the two
    tracked peaks and their difference in bytes -- the check that the fake CUDA device changes nothing but the
    kernels' device."""
    cpu = {r["id"]: r["peak_bytes"] for r in load_measured("peaks")["rows"]}["prefill/llama-2-7b/2048/last"]
    cuda = {r["id"]: r.get("peak_bytes") for r in load_measured("step_peaks")["rows"]}["prefill/llama-2-7b/2048x1/last"]
    return {"fake cpu": cpu, "fake cuda": cuda, "difference": cuda - cpu}


def step_inference_rows() -> list[Row]:
    """Inference prefills tracked on the fake CUDA device (``step_peaks.json``) against ``inference_memory``
    without its reserve -- the fake-CPU rows (:func:`peak_rows`) rerun on the device the book prices."""
    out = []
    for r in load_measured("step_peaks")["rows"]:
        if r["kind"] != "prefill" or "not_measured" in r:
            continue
        pred = inference_memory(r["model"], "bf16", "bf16", r["seq"], r["batch"], "sdpa", 0, logits=r["logits"]).total
        out.append(Row("inference peak (fake CUDA)", r["id"], r["peak_bytes"], pred,
                       f"{r['seq']:,} tokens, {r['logits']} logits"))
    return out


def fsdp_gap(row: dict) -> str | None:
    """Why a measured FSDP2 rank (``fsdp_peaks.json``) has no plan to compare with, in one line, or None."""
    if "not_measured" in row:
        return "not measured: " + row["not_measured"]
    if row["precision"] != "pure-bf16":
        return "fp32 shards under FSDP2's bf16 mixed precision: no plan convention describes them yet"
    return None


def _fsdp_plan(row: dict, peak: str = "step"):
    """plan_memory for a measured FSDP2 rank: ZeRO-3 (or, for FSDP2 without resharding after forward, ZeRO-2),
    the pure-bf16 convention, the hf accounting, the default buckets, no reserve, the case's AdamW implementation;
    ``peak``: the step's phases (ZeRO-3 as FSDP2, :mod:`vramlib.memory.fsdp`) or the sum of parts."""
    return plan_memory(row["model"], dp=row["dp"], zero=3 if row["reshard"] == "zero3" else 2, seq=row["seq"],
                       micro_batch=row["batch"], convention="pure-bf16", recompute=row["recompute"],
                       activation_style="hf", reserve=0, peak=peak, optimizer_impl=row["impl"])


def fsdp_rows(peak: str = "step") -> list[Row]:
    """One rank of FSDP2 data parallelism at full size on the fake CUDA device (``fsdp_peaks.json``) against
    ``plan_memory`` -- by the step's phases (``peak="step"``; a plan they do not model is its sum of parts, said in
    the note) or as the sum of parts (``peak="sum"``)."""
    out = []
    for r in load_measured("fsdp_peaks")["rows"]:
        if fsdp_gap(r):
            continue
        bd = _fsdp_plan(r, peak).peak
        note = f"peak in the {r['phase']}" + (f"; predicted in the {bd.peak_phase}" if bd.peak_phase else "") + \
            ("; FSDP2 without resharding after forward, priced as ZeRO-2 (a sum of parts)" if r["reshard"] == "zero2"
             else "")
        out.append(Row(f"data-parallel step, plan_memory peak={peak!r} (FSDP2, fake CUDA)", r["id"], r["peak_bytes"],
                       bd.total, note))
    return out


def llamacpp_spec(model: dict) -> ModelSpec:
    """The ModelSpec of a tiny GGUF the llama.cpp harness wrote (its hyperparameters as stored)."""
    swa = model.get("n_swa") or 0
    gemma = model["arch"] == "gemma2"
    return ModelSpec(f"gguf-{model['arch']}-{model['n_embd']}", model["n_layer"], model["n_embd"], model["n_head"],
                     model["n_head_kv"], model["head_dim"], model["n_ff"], model["n_vocab"],
                     tied_embeddings=model["tied_embeddings"], sliding_window=swa,
                     norms_per_layer=4 if gemma else 2, family="gemma2" if gemma else "llama",
                     layer_types=tuple("sliding" if swa and i % 2 == 0 else "full" for i in range(model["n_layer"]))
                     if swa else ())


LLAMACPP_WEIGHTS = {"f16": "fp16", "f32": "fp32", "q8_0": "q8_0", "q4_0": "q4_0"}
"""The vramlib format of each weight type the llama.cpp harness wrote."""


def llamacpp_flash_attn(r: dict) -> bool:
    """Whether a measured llama.cpp context ran with flash attention: logged as enabled, or "auto" that llama.cpp
    resolved to enabled (its log says so)."""
    return r["parsed"].get("flash_attn") == "enabled" or (r["settings"]["flash_attn"] == -1 and
                                                          "enabled" in " ".join(r["log_lines"]))


def _llamacpp_call(r: dict):
    s = r["settings"]
    return llamacpp_memory(llamacpp_spec(r["model"]), LLAMACPP_WEIGHTS[r["model"]["weight_type"]], n_ctx=s["n_ctx"],
                           n_batch=s["n_batch"], n_ubatch=s["n_ubatch"], flash_attn=llamacpp_flash_attn(r),
                           type_k=s["type_k"], type_v=s["type_v"], n_seq=s["n_seq_max"], kv_unified=s["kv_unified"],
                           swa_full=s["swa_full"])


def llamacpp_rows(buffer: str = "kv cache") -> list[Row]:
    """llama.cpp's own buffer sizes on tiny GGUFs (``llamacpp_buffers.json``: ``llama_get_memory_breakdown``'s
    exact bytes, summed over buffer types) against :func:`vramlib.serve.llamacpp.llamacpp_memory`: ``buffer`` is
    "kv cache" or "compute buffer" (each context that ran), or "model buffer" (each model once, against
    ``llama_model_size``, the tensors' bytes; the Q4_0 file is left out: it quantizes its LM head to Q4_0, where
    llama-quantize, which vramlib's format follows, keeps Q6_K)."""
    check_choice("buffer", buffer, ("kv cache", "compute buffer", "model buffer"))
    key = {"kv cache": "context", "compute buffer": "compute"}.get(buffer)
    out, seen = [], set()
    for r in load_measured("llamacpp_buffers")["rows"]:
        if not r["exact"].get("memory_breakdown") or (key is None and (r["model_id"] in seen or
                                                                        r["model"]["weight_type"] == "q4_0")):
            continue
        seen.add(r["model_id"])
        got = sum(b[key] for b in r["exact"]["memory_breakdown"]) if key else r["exact"]["llama_model_size"]
        bd = _llamacpp_call(r)
        out.append(Row(f"llama.cpp {buffer}", r["id"], got, bd[buffer], "; ".join(bd.notes[2:])))
    return out


def llamacpp_table() -> list[dict]:
    """llama.cpp's buffers against ``llamacpp_memory``, one line per buffer (and the compute buffer with and without
    flash attention): contexts (or models) compared, how many exactly, the largest error and its sign."""
    fa = {r["id"] for r in load_measured("llamacpp_buffers")["rows"] if llamacpp_flash_attn(r)}
    groups = {"model buffer": llamacpp_rows("model buffer"), "kv cache": llamacpp_rows("kv cache")}
    compute = llamacpp_rows("compute buffer")
    groups["compute buffer, no flash attention"] = [r for r in compute if r.id not in fa]
    groups["compute buffer, flash attention"] = [r for r in compute if r.id in fa]
    out = []
    for name, rows in groups.items():
        worst = max(rows, key=lambda r: abs(r.error))
        out.append({"buffer": name, "compared": len(rows), "exact": sum(r.error == 0 for r in rows),
                    "largest error %": 100 * worst.error})
    return out


def fsdp_phase_rows(peak: str = "step") -> list[Row]:
    """The ZeRO-3 FSDP2 ranks (``fsdp_rows(peak)`` without the no-reshard case, which the plans price as a ZeRO-2
    sum of parts): by the step's phases, or (``peak="sum"``) the same ranks as sums of parts."""
    rows = {r["id"]: r for r in load_measured("fsdp_peaks")["rows"]}
    return [r for r in fsdp_rows(peak) if rows[r.id]["reshard"] == "zero3"]


def fsdp_summary() -> dict:
    """What chapter 16 says of the FSDP2 ranks: the ZeRO-3 ranks priced by the step's phases (``n``, median and max
    absolute error), the cases measured after the phases were written (``held_out``, their max error), the sum of
    parts on the same ranks (``sum_median``, ``sum_max``, the model of the furthest, ``sum_worst``)."""
    rows = {r["id"]: r for r in load_measured("fsdp_peaks")["rows"]}
    step, total = fsdp_phase_rows("step"), fsdp_phase_rows("sum")
    held = [r for r in step if rows[r.id].get("held_out")]
    st, su = error_stats(step), error_stats(total)
    return {"n": st["n"], "median": st["median"], "max": st["max"], "held_out": len(held),
            "held_out_max": max(abs(r.error) for r in held), "sum_median": su["median"], "sum_max": su["max"],
            "sum_worst": max(total, key=lambda r: abs(r.error)).id.split("/")[1]}


def fsdp_table() -> list[dict]:
    """Every measured FSDP2 rank: the case, the peak and its phase, the steady state, plan_memory by the step's phases
    (with the phase it predicts) and as a sum of parts, with their errors -- or why there is none."""
    out = []
    for r in load_measured("fsdp_peaks")["rows"]:
        gap = fsdp_gap(r)
        step, total = (None, None) if gap else (_fsdp_plan(r).peak, _fsdp_plan(r, "sum").peak)
        err = (lambda bd: 100 * (bd.total - r["peak_bytes"]) / r["peak_bytes"] if bd else None)
        out.append({"case": r["id"].split("/", 1)[1] + (" (held out)" if r.get("held_out") else ""),
                    "peak GB": None if "not_measured" in r else gb(r["peak_bytes"]),
                    "phase": r.get("phase"), "steady GB": gb(r["steady"]["Total"]) if "steady" in r else None,
                    "step GB": gb(step.total) if step else None,
                    "predicted phase": (step.peak_phase or "") if step else "", "error %": err(step),
                    "sum of parts GB": gb(total.total) if total else None, "sum error %": err(total),
                    "note": gap or ("priced as ZeRO-2, a sum of parts (no phases)" if r["reshard"] == "zero2" else "")})
    return out


def saved_spec(cfg: dict, name: str) -> ModelSpec:
    """The ModelSpec of a saved-tensor measurement shape (the one reading: tools/measure/saved_tensors.py and the
    tests use it)."""
    fam = cfg["family"]
    return ModelSpec(name, cfg["layers"], cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ffn"],
                     cfg["vocab"], qkv_bias=fam == "qwen2", tied_embeddings=fam == "gemma2",
                     norms_per_layer=4 if fam == "gemma2" else 2, n_experts=cfg.get("experts", 0),
                     experts_per_token=cfg.get("top_k", 0), fused_qkv=fam == "phi3", fused_gate_up=fam == "phi3",
                     family=fam, qk_norm="head" if fam in ("qwen3", "qwen3_moe") else "none",
                     router_renorm=fam == "qwen3_moe")


def activation_rows(style: str = "hf", scope: str | None = None, sixteen_bit_only: bool = False) -> list[Row]:
    """Bytes saved for backward (saved_bytes.json) against ``activation_bytes(style=...)``.

    ``style="megatron"`` (Korthikanti et al.) assumes 16-bit activations; ``sixteen_bit_only`` keeps those rows.
    """
    rows = []
    for r in load_measured("saved_bytes")["rows"]:
        cfg = r["config"]
        if (scope and r["scope"] != scope) or (sixteen_bit_only and cfg["dtype"] == "fp32"):
            continue
        pred = activation_bytes(saved_spec(cfg, r["shape"]), seq=cfg["seq"], batch=cfg["batch"], dtype=cfg["dtype"],
                                attention=cfg["attention"], recompute=cfg["recompute"], style=style,
                                scope=r["scope"])
        rows.append(Row(f"activations ({style})", r["id"], r["bytes"], pred))
    return rows


def activation_configs() -> int:
    """Distinct measured configurations (shape, dtype, attention, recompute) behind the activation rows."""
    return len({r["id"].rsplit("/", 1)[0] for r in load_measured("saved_bytes")["rows"]})


def lora_param_rows(part: str | None = None) -> list[Row]:
    """peft's trainable parameters (tiny models: r 8/16/64, three target sets; catalogue: r 16 all-linear)."""
    rows = []
    for r in load_measured("lora")["rows"]:
        if r["part"] not in ("params", "catalogue") or "params" not in r or (part and r["part"] != part):
            continue
        model = r["model"] if r["part"] == "catalogue" else _tiny_spec(r)
        rows.append(Row("LoRA parameters", r["id"], r["params"], lora_params(model, r["rank"], r["targets"], allow_wide_rank=True),
                        ", ".join(r["modules"])))
    return rows


def lora_saved_rows(adapters: str | None = "base", targets: str | None = None, scope: str | None = None) -> list[Row]:
    """Bytes a LoRA step saves for backward (measured) against ``activation_bytes`` (which models full fine-tuning).

    ``adapters``: "base" (adapters in the base dtype), "fp32" (peft's default for a 16-bit base), "fp32-autocast".
    """
    rows = []
    for r in load_measured("lora")["rows"]:
        if r["part"] != "saved":
            continue
        cfg = r["config"]
        if (adapters and cfg["adapters"] != adapters) or (targets and cfg["targets"] != targets) or \
                (scope and r["scope"] != scope):
            continue
        pred = activation_bytes(saved_spec(cfg, r["shape"]), seq=cfg["seq"], batch=cfg["batch"], dtype=cfg["dtype"],
                                attention=cfg["attention"], recompute=cfg["recompute"], scope=r["scope"])
        rows.append(Row("LoRA activations (full-FT formula)", r["id"], r["bytes"], pred,
                        f"{cfg['targets']}, adapters {cfg['adapters']}"))
    return rows


def lora_saved_table(scope: str = "layer") -> list[dict]:
    """Per shape and setup: full fine-tuning measured, the LoRA step measured, and LoRA / full in %."""
    out = []
    for r in load_measured("lora")["rows"]:
        if r["part"] != "saved" or r["scope"] != scope:
            continue
        c = r["config"]
        full = r["full_finetune_measured"] or r["full_finetune_predicted"]
        out.append({"shape": r["shape"], "dtype": c["dtype"], "attention": c["attention"],
                    "recompute": c["recompute"], "targets": c["targets"], "adapters": c["adapters"],
                    "full fine-tuning": full, "LoRA": r["bytes"], "LoRA / full %": 100 * float(Fraction(r["bytes"], full)),
                    "error of activation_bytes %": 100 * relative_error(r["full_finetune_predicted"], r["bytes"])})
    return out


def lora_saved_summary(scope: str = "layer") -> dict:
    """LoRA / full fine-tuning saved bytes (fractions), min and max over the dense shapes, per adapter setup and
    targets, without recomputation; the MoE shape (peft's adapters on fused experts) under its own key "moe/...". """
    out: dict[str, dict] = {}
    for r in lora_saved_table(scope):
        if r["recompute"] != "none":
            continue
        key = ("moe/" if r["shape"].startswith("mixtral") else "") + f"{r['adapters']}/{r['targets']}"
        ratio = r["LoRA / full %"] / 100
        cur = out.setdefault(key, {"min": ratio, "max": ratio, "n": 0})
        cur["min"], cur["max"], cur["n"] = min(cur["min"], ratio), max(cur["max"], ratio), cur["n"] + 1
    return out


MOE_LORA_MERGED_BYTES = S_E * F.MLP_PARAMS * S_ba
"""Bytes per MoE layer that a peft LoRA step on fused experts (transformers 5, peft's target_parameters) saves on
top of the activations: W + BA of every expert, merged in the forward pass and saved by the grouped matrix product
(measured on the tiny Mixtral in ``lora.json``; independent of the tokens). Chapter 16."""


def moe_lora_merged_bytes(model: ModelSpec | str, dtype: str = "bf16", scope: str = "layer") -> int:
    """:data:`MOE_LORA_MERGED_BYTES` for one layer (``scope="layer"``) or all layers (``"model"``) of an MoE model;
    0 for a dense model."""
    m = get_model(model)
    scope = check_choice("scope", scope, ("layer", "model"))
    if not m.is_moe:
        return 0
    vals = m.symbols()
    per_layer = F.evaluate(MOE_LORA_MERGED_BYTES, E=vals["E"], g=vals["g"], h=vals["h"], f=vals["f"],
                           b_a=get_precision(dtype, field="dtype").bytes_per_element)
    return F.to_int_bytes(per_layer * (m.n_layers if scope == "model" else 1))


def activation_coefficient(model: ModelSpec | str, seq: int, batch: int = 1, dtype: str = "bf16",
                           attention: str = "sdpa", style: str = "hf") -> float:
    """Bytes one decoder layer saves per (batch x seq x hidden): the source's "34 to 40" coefficient, measured-exact
    for the hf style (chapter 16's "What the source says")."""
    m = get_model(model)
    per_layer = activation_bytes(m, seq, batch, dtype, attention=attention, style=style)
    return float(Fraction(per_layer, batch * seq * m.hidden))


def optimizer_rows() -> list[Row]:
    """``torch.optim`` state after one step (scalar step counters left out) against ``optimizer_state_bytes``."""
    d = load_measured("optimizer")
    spec = _optimizer_spec(d)
    name = {"fp32": "adamw", "bf16": "adamw", "autocast": "adamw", "bf16-master": "adamw", "sgd-fp32": "sgd",
            "sgd-bf16": "sgd", "adafactor-fp32": "adafactor", "adafactor-bf16": "adafactor"}
    return [Row("optimizer state", r["setup"], r["state_bytes"] - r["state_step_bytes"],
                optimizer_state_bytes(spec, name[r["setup"]], state_bytes=2 if r["param_dtype"] == "bfloat16" and
                                      r["setup"] != "bf16-master" else 4), f"{r['param_dtype']} parameters")
            for r in d["rows"]]


def _optimizer_spec(d: dict) -> ModelSpec:
    s = d["shape"]
    return ModelSpec("optimizer-probe", s["layers"], s["hidden"], s["heads"], s["kv_heads"], s["hidden"] // s["heads"],
                     s["ffn"], s["vocab"], family="llama")


def component_rows() -> dict[str, list[Row]]:
    """Every comparison by component (the chapter's tables, parity plot and error figure)."""
    return {"parameters": param_rows(), "KV cache": kv_rows(), "KV per token (config)": kv_config_rows(),
            "activations (hf)": activation_rows("hf"),
            "activations (megatron)": activation_rows("megatron", sixteen_bit_only=True),
            "LoRA parameters": lora_param_rows(), "optimizer state": optimizer_rows(),
            "inference peak (fake CPU)": peak_rows(), "inference peak (fake CUDA)": step_inference_rows(),
            "training step peak (fake CUDA)": step_peak_rows(),
            "data-parallel rank peak (FSDP2, fake CUDA)": fsdp_phase_rows()}


def component_summary() -> list[dict]:
    """One line per component: rows, exact rows, median and maximum ``|error|`` in %, mean signed error in %."""
    out = []
    for comp, rows in component_rows().items():
        s = error_stats(rows)
        out.append({"component": comp, "rows": s["n"], "exact": s["exact"], "median |error| %": 100 * s["median"],
                    "max |error| %": 100 * s["max"], "mean signed error %": 100 * s["mean_signed"]})
    return out


# --- honest margins: a fit verdict with the error its kind of estimate has shown ------------------------------

ESTIMATE_KINDS: dict[str, tuple[str, ...]] = {
    "inference": ("inference peak (fake CUDA)", "inference peak (fake CPU)"),
    "training step": ("training step peak (fake CUDA)",),
    "training sum of parts": ("training step, sum of parts",),
    "zero-3 rank": ("data-parallel rank peak (FSDP2, fake CUDA)",),
    "llama.cpp": ("llama.cpp kv cache", "llama.cpp compute buffer", "llama.cpp model buffer"),
}
"""A fit verdict's kind of estimate -> the validation rows (:func:`component_rows`, :func:`step_sum_rows`,
:func:`llamacpp_rows`) whose largest error is its band."""

DEFAULT_HEADROOM = 0.05
"""The share of the card a verdict recommends keeping free beyond the estimate, for what no estimate here counts
(the caching allocator's fragmentation, other processes, a driver update): a convention, stated with every margin."""


def _kind_rows(kind: str) -> list[Row]:
    rows = component_rows()
    out: list[Row] = []
    for name in ESTIMATE_KINDS[check_choice("kind", kind, ESTIMATE_KINDS)]:
        if name == "training step, sum of parts":
            out += step_sum_rows()
        elif name.startswith("llama.cpp "):
            out += llamacpp_rows(name[len("llama.cpp "):])
        else:
            out += rows.get(name, [])
    return out


def error_band(kind: str) -> float:
    """The largest ``|error|`` (a fraction) that estimates of ``kind`` (:data:`ESTIMATE_KINDS`) have shown against
    the stored measurements; at least one row is needed."""
    rows = _kind_rows(kind)
    if not rows:
        raise InvalidValueError("kind", kind, "has no measured rows to set its band")
    return float(max(abs(r.error) for r in rows))


@dataclass(frozen=True)
class Margin:
    """A fit verdict with its margin: the bytes to spare (negative: short), the band its kind of estimate has shown,
    whether the margin is within that band (``borderline``), the recommended headroom, and the sentence."""

    spare_bytes: int
    band: float
    borderline: bool
    headroom_bytes: int
    text: str


def fit_margin(total: int, capacity: int, kind: str, headroom: float = DEFAULT_HEADROOM) -> Margin:
    """The verdict for an estimate of ``total`` bytes on ``capacity`` bytes, honest about its error: "fits with 2.1 GB
    to spare; training step estimates have been within 0.27% of measurements", "borderline" when the margin is
    smaller than that band of the total, and the headroom to keep (``headroom`` of the card, DEFAULT_HEADROOM)."""
    band = error_band(kind)
    spare = int(capacity) - int(total)
    borderline = abs(spare) <= band * total
    keep = int(headroom * capacity)
    if borderline:
        head = (f"borderline: {bytes_text(abs(spare), 1)} {'to spare' if spare >= 0 else 'short'}, less than the "
                f"{100 * band:.2g}% that {kind} estimates have been off measurements")
    elif spare >= 0:
        head = (f"fits with {bytes_text(spare, 1)} to spare; {kind} estimates have been within {100 * band:.2g}% of "
                "measurements")
    else:
        head = (f"does not fit: short by {bytes_text(-spare, 1)}; {kind} estimates have been within "
                f"{100 * band:.2g}% of measurements")
    text = f"{head} (the validation chapter); keep about {bytes_text(keep, 1)} ({headroom:.0%} of the card) free " \
           "for what no estimate counts"
    return Margin(spare, band, borderline, keep, text)


# --- the real optimizer against the conventions -----------------------------------------------------------------

REAL_SETUPS = {
    "fp32": "fp32 parameters, torch.optim.AdamW",
    "bf16": "bf16 parameters (model.to(bfloat16)), torch.optim.AdamW: moments in bf16",
    "autocast": "fp32 parameters under torch.autocast(bf16): the parameters are the master copy",
    "bf16-master": "bf16 parameters + hand-made fp32 master copy and fp32 master gradients (Megatron/apex O2 style)",
}
"""The AdamW setups measured on the CPU (``optimizer.json``)."""

CONVENTION_SETUPS = {
    "source-12": "no PyTorch default: bf16 parameters and gradients with fp32 moments (bitsandbytes' 32-bit Adam "
                 "keeps fp32 state for bf16 parameters; QLoRA's LoRA adapters)",
    "mixed-fp32-master": "ZeRO's 2 + 2 + 12 (DeepSpeed ZeRO-1/2 with 16-bit gradients); the same 16 bytes as fp32 "
                         "parameters under torch.autocast, split differently (4 + 4 + 8)",
    "deepspeed": "bf16 parameters, fp32 gradients, fp32 master, Adam: Megatron's 18 and DeepSpeed's ZeRO-3 "
                 "estimator",
    "pure-bf16": "plain PyTorch on a bf16 model (transformers' default dtype for a bf16 checkpoint): torch.optim's "
                 "AdamW keeps its moments in bf16 too, 2 + 2 + 4",
}
"""Which real setup each of vramlib's conventions describes."""


def _per_param(setup: str) -> dict:
    rows = {r["setup"]: r for r in load_measured("optimizer")["rows"]}
    if setup not in rows:
        raise UnknownNameError("setup", setup, rows)
    return rows[setup]["per_param"]


def real_setup_bytes(model: ModelSpec | str, setup: str = "bf16") -> Breakdown:
    """Model states of ``model`` with the bytes per parameter ``torch.optim.AdamW`` really allocated in ``setup``
    (measured on the CPU, ``optimizer.json``), evaluated with formulas.MODEL_STATES_BYTES."""
    m = get_model(model)
    setup = check_choice("setup", setup, REAL_SETUPS)
    pp = _per_param(setup)
    n = m.weight_params

    def part(**b) -> int:
        vals = dict(b_w=0, b_g=0, b_m=0, b_o=0)
        vals.update({k: Fraction(v).limit_denominator(1000) for k, v in b.items()})
        return F.to_int_bytes(F.evaluate(F.MODEL_STATES_BYTES, N_t=n, **vals))
    parts = {"weights": part(b_w=pp["weights"]), "gradients": part(b_g=pp["grads"])}
    if pp["master"]:
        parts["master weights (fp32)"] = part(b_m=pp["master"])
        parts["master gradients (fp32)"] = part(b_m=pp["master_grads"])
    parts["optimizer states"] = part(b_o=pp["optimizer"])
    return Breakdown(parts, title=f"{m.name}: torch.optim.AdamW, {setup}")


def model_states_comparison(model: ModelSpec | str) -> dict[str, Breakdown]:
    """Model states of ``model`` under each vramlib convention and each measured AdamW setup, by label."""
    m = get_model(model)
    out = {f"{c}\n(convention)": zero_model_states(m.weight_params, convention=c) for c in CONVENTIONS}
    out.update({f"{s}\n(measured)": real_setup_bytes(m, s) for s in REAL_SETUPS})
    return out


def convention_table() -> list[dict]:
    """vramlib's conventions (bytes per parameter) next to what torch.optim.AdamW measured, and what each matches."""
    rows = []
    for name, c in CONVENTIONS.items():
        per = zero_model_states(1, convention=name).total
        rows.append({"kind": "vramlib convention", "name": name, "weights": c.weight, "gradients": c.grad,
                     "master": c.master, "optimizer": int(adamw_bytes_per_param(name, "bf16")),
                     "bytes/param": per,
                     "what it is": CONVENTION_SETUPS[name]})
    for setup, text in REAL_SETUPS.items():
        pp = _per_param(setup)
        rows.append({"kind": "measured (torch.optim.AdamW)", "name": setup, "weights": pp["weights"],
                     "gradients": pp["grads"], "master": pp["master"] + pp["master_grads"],
                     "optimizer": pp["optimizer"],
                     "bytes/param": pp["weights"] + pp["grads"] + pp["master"] + pp["master_grads"] + pp["optimizer"],
                     "what it is": text})
    return rows


def autocast_weight_cast_bytes_per_param() -> float:
    """Transient bf16 copies of the weights autocast saves for backward, per parameter of the probe model."""
    return _per_param("autocast")["weight_casts_transient"]


# --- published measurements ---------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _published() -> dict:
    return json.loads((_data_dir() / "published_measurements.json").read_text())


def load_published() -> list[dict]:
    """The published figures with their sources, workloads and mappings to vramlib calls."""
    return list(_published()["entries"])


def published_entry(entry_id: str) -> dict:
    entries = {e["id"]: e for e in load_published()}
    if entry_id not in entries:
        raise UnknownNameError("published entry", entry_id, entries)
    return entries[entry_id]


def published_measured(entry: dict) -> int:
    """The published value in bytes (or parameters), exactly: value x unit."""
    unit = entry["measured"]["unit"]
    if unit not in UNIT_BYTES:
        raise UnknownNameError("unit", unit, UNIT_BYTES)
    return int(Fraction(entry["measured"]["value"]) * UNIT_BYTES[unit])


def _entry_model(entry: dict, args: dict):
    model = args.get("model")
    if model == "@spec":
        return ModelSpec.from_hf_config(entry["model_hf_config"], name=entry["id"])
    return model


def _n_params(args: dict) -> dict:
    """A catalogue model given instead of a parameter count: its parameters."""
    args = dict(args)
    if "model" in args:
        args["n_params"] = get_model(args.pop("model")).weight_params
    return args


def _kv_budget_after_prefill(model, memory, weights, tokens, reserve) -> Breakdown:
    budget = kv_budget_bytes(model, memory, weights, reserve)
    work = prefill_workspace_bytes(model, tokens, dtype=weights, attention="sdpa")
    return Breakdown({"kv cache budget": budget - work}, title="memory left for the KV cache")


_CALLS = {
    "weights_bytes": lambda a: weights_bytes(a["model"], a["dtype"]),
    "kv_cache_bytes": lambda a: kv_cache_bytes(a["model"], a["tokens"], a.get("batch", 1), a["dtype"]),
    "prefill_workspace_bytes": lambda a: prefill_workspace_bytes(a["model"], a["tokens"], a.get("batch", 1),
                                                                 a["dtype"], a.get("attention", "sdpa")),
    "n_params": lambda a: get_model(a["model"]).n_params,
    "zero_model_states": lambda a: zero_model_states(**_n_params(a)),
    "deepspeed_zero3_estimate": lambda a: Breakdown({"per-GPU model states (ZeRO-3 estimator)":
                                                     deepspeed_zero3_estimate(**a).gpu_bytes}),
    "training_memory": lambda a: training_memory(**a),
    "activation_bytes": lambda a: activation_bytes(**a),
    "kv_budget_after_prefill": lambda a: _kv_budget_after_prefill(**a),
}
"""The vramlib calls a published entry may map to (a fixed table: nothing is evaluated from text)."""


def published_prediction(entry: dict) -> Breakdown:
    """vramlib's prediction for a published workload, as a Breakdown (one part for single-number calls)."""
    spec = entry["vramlib"]
    call = check_choice("vramlib call", spec["call"], _CALLS)
    args = dict(spec["args"])
    if "model" in args:
        args["model"] = _entry_model(entry, args)
    value = _CALLS[call](args)
    if isinstance(value, Breakdown):
        return value
    return Breakdown({call.replace("_", " "): value}, title=entry["title"])


def published_rows() -> list[dict]:
    """Every published figure against vramlib: measured and predicted (bytes, or parameters), error or verdict."""
    out = []
    for e in load_published():
        pred = published_prediction(e).total
        if e["kind"] == "bound":
            cap = get_gpu(e["capacity_gpu"]).memory_bytes
            out.append({"id": e["id"], "source": e["source"], "kind": e["kind"], "measured": cap, "predicted": pred,
                        "unit": e["measured"]["unit"], "error": None,
                        "verdict": "fits" if pred <= cap else "does not fit", "why": e["why"]})
            continue
        meas = published_measured(e)
        err = relative_error(pred, meas)
        out.append({"id": e["id"], "source": e["source"], "kind": e["kind"], "measured": meas, "predicted": pred,
                    "unit": e["measured"]["unit"], "error": err, "verdict": _verdict(err), "why": e["why"]})
    return out


def _verdict(err: float) -> str:
    """exact; agrees (under 0.5 %: the source's rounding); close (under 5 %); under or over."""
    a = abs(err)
    if a == 0:
        return "exact"
    return "agrees" if a < 0.005 else ("close" if a < 0.05 else ("under" if err < 0 else "over"))


def published_stats(kinds: tuple[str, ...] = ("measurement", "tool-estimate", "paper-estimate", "documented")) -> dict:
    """Error statistics over the published rows of the given kinds (bounds have verdicts, not errors)."""
    rows = [r for r in published_rows() if r["kind"] in kinds and r["error"] is not None]
    if not rows:
        raise InvalidValueError("kinds", kinds, f"choose from {', '.join(PUBLISHED_KINDS[:4])}")
    abs_err = [abs(r["error"]) for r in rows]
    return {"n": len(rows), "exact": sum(r["verdict"] == "exact" for r in rows),
            "agree": sum(r["verdict"] in ("exact", "agrees") for r in rows),
            "median": statistics.median(abs_err), "max": max(abs_err),
            "worst": max(rows, key=lambda r: abs(r["error"]))["id"]}


def published_table() -> list[dict]:
    """Rows for the chapter: measured and predicted in the unit the source uses, error in %."""
    out = []
    for r in published_rows():
        unit = UNIT_BYTES[r["unit"]]
        out.append({"figure": r["id"], "kind": r["kind"], "unit": r["unit"],
                    "published": float(Fraction(r["measured"], unit)), "vramlib": float(Fraction(r["predicted"], unit)),
                    "error %": None if r["error"] is None else 100 * r["error"], "verdict": r["verdict"]})
    return out


# --- figures ---------------------------------------------------------------------------------------------------


def parity_plot(groups: dict[str, list[Row]] | None = None, ax=None):
    """Predicted against measured on log-log axes, one marker per component, with the y = x line."""
    import matplotlib.pyplot as plt

    groups = groups if groups is not None else component_rows()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 5.2))
    markers = "osD^vP*Xhp<"
    lo, hi = None, None
    for i, (name, rows) in enumerate(groups.items()):
        xs, ys = [r.measured for r in rows], [r.predicted for r in rows]
        ax.scatter(xs, ys, s=14, marker=markers[i % len(markers)], alpha=0.7, label=f"{name} ({len(rows)})")
        lo = min([lo or min(xs)] + xs + ys)
        hi = max([hi or max(xs)] + xs + ys)
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (bytes, or parameters)")
    ax.set_ylabel("vramlib (same unit)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="x-small", loc="upper left")
    ax.figure.tight_layout()
    return ax


def error_bars(summary: list[dict] | None = None, ax=None):
    """Median and maximum ``|relative error|`` per component (%, symlog axis so that 0 shows)."""
    import matplotlib.pyplot as plt

    summary = summary if summary is not None else component_summary()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    names = [s["component"] for s in summary]
    ys = range(len(names))
    ax.barh([y + 0.2 for y in ys], [s["max |error| %"] for s in summary], height=0.4, label="maximum", color="#D55E00")
    ax.barh([y - 0.2 for y in ys], [s["median |error| %"] for s in summary], height=0.4, label="median",
            color="#0072B2")
    ax.set_yticks(list(ys), names)
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("|predicted - measured| / measured (%)")
    ax.axvline(5, color="grey", linestyle=":", linewidth=1)
    ax.axvline(10, color="grey", linestyle="--", linewidth=1)
    ax.invert_yaxis()
    ax.legend(fontsize="small")
    ax.figure.tight_layout()
    return ax


# --- widget panel ----------------------------------------------------------------------------------------------


def published_compute(entry: str, predictions: dict | None = None):
    """Panel compute: vramlib's Breakdown for a published workload, the published figure as the line, a verdict.

    ``predictions``: :func:`published_predictions`, this function's result for every entry, which the panel hands
    the static book (``vramlib/web/js/validation.js`` shows the selected one); ignored here, where it is computed."""
    e = published_entry(entry)
    bd = published_prediction(e)
    if e["kind"] == "bound":
        cap = get_gpu(e["capacity_gpu"]).memory_bytes
        verdict = (f"{e['title']}: vramlib {gb(bd.total):,.2f} GB against the {e['capacity_gpu']} "
                   f"({gb(cap):,.2f} GB): {'fits' if bd.total <= cap else 'does not fit'}")
        return bd, cap, verdict
    meas = published_measured(e)
    err = 100 * relative_error(bd.total, meas)
    unit = e["measured"]["unit"]
    scale = UNIT_BYTES[unit]
    verdict = (f"{e['title']}: published {e['measured']['value']} {unit}, vramlib "
               f"{float(Fraction(bd.total, scale)):,.4g} {unit} ({err:+.1f} %)")
    return bd, (meas if scale > 1 else None), verdict


def published_predictions() -> dict[str, dict]:
    """:func:`published_compute` for every published entry, as JSON data: ``{id: {"parts", "capacity", "verdict",
    "title"}}`` (or ``{"error": message}``). The control is a choice among these entries, so the static book's
    calculator shows this table, computed by vramlib, rather than re-deriving each workload in JavaScript."""
    from ..core.errors import VramlibError

    out: dict[str, dict] = {}
    for e in load_published():
        try:
            bd, cap, verdict = published_compute(e["id"])
        except VramlibError as err:
            out[e["id"]] = {"error": str(err)}
            continue
        out[e["id"]] = {"parts": [[k, v] for k, v in bd.items()], "capacity": cap, "verdict": verdict,
                        "title": bd.title}
    return out


def catalogue_exact() -> dict:
    """Catalogue coverage of the exact checks: models, parameter rows exact, KV rows exact (catalogue part)."""
    kv = kv_rows(("catalogue",))
    return {"models": len(model_names()), "param_rows": len(param_rows()),
            "param_exact": sum(r.exact for r in param_rows()), "kv_models": len({r.id.split("/")[1] for r in kv}),
            "kv_rows": len(kv), "kv_exact": sum(r.exact for r in kv)}


__all__ = [
    "COMPONENTS", "CONVENTION_SETUPS", "DEFAULT_HEADROOM", "ESTIMATE_KINDS", "Margin", "error_band", "fit_margin", "MEASUREMENTS", "PUBLISHED_KINDS", "REAL_SETUPS", "Row", "UNIT_BYTES",
    "RELATIVE_ERROR", "activation_coefficient", "activation_configs", "activation_rows", "lora_saved_summary", "lora_saved_table", "MOE_LORA_MERGED_BYTES", "moe_lora_merged_bytes",
    "relative_error", "autocast_weight_cast_bytes_per_param", "available_measurements",
    "catalogue_exact", "component_rows", "component_summary", "convention_table", "error_bars", "error_stats",
    "active_param_rows", "saved_spec", "kv_config_rows", "kv_rows", "kv_sliding_rows", "load_measured", "load_published", "lora_param_rows",
    "lora_saved_rows", "model_states_comparison", "optimizer_rows", "parity_plot", "provenance", "published_compute",
    "published_entry", "published_measured", "published_prediction", "published_predictions",
    "published_rows",
    "published_stats", "published_table", "real_setup_bytes", "fake_cuda_cpu_check", "step_inference_rows",
    "fsdp_gap", "fsdp_phase_rows", "llamacpp_flash_attn", "llamacpp_rows", "llamacpp_spec",
    "llamacpp_table", "fsdp_rows", "fsdp_summary", "fsdp_table",
    "step_peak_gap", "step_peak_rows", "step_peak_table", "step_sum_rows", "lora_sum_error", "bnb8_state_row",
    "step_peak_summary",
]
