"""The ``vramlib`` command line: will this model fit on this hardware, how long a context, which parallel plan,
and the workshop's feasibility reports.

    vramlib fit --model llama-2-13b --gpu rtx-4090 --weights int4
    vramlib fit --model llama-2-7b --gpu 24GiB --task train --method qlora --seq 2048
    vramlib fit --model Qwen/Qwen3-8B --gpu rtx-4090 --weights q4_k_m   (a Hub id: its config.json only)
    vramlib max-context --model llama-3.1-8b --gpu 2x80GB
    vramlib plan --model llama-2-70b --gpu 8xa100-80gb
    vramlib llamacpp --model llama-3.1-8b --gpu rtx-4090 --weights q4_k_m --n-ctx 32768
    vramlib offload --model llama-3.1-70b --gpu rtx-4090 --host ddr5-5600-2ch --ram 64GB
    vramlib report --gpu rtx-4090 --model llama-3.1-8b --model mistral-7b --out me.html
    vramlib report --participants people.csv --out-dir reports/
    vramlib models | vramlib gpus | vramlib exercises list

Exit codes: 0 fits (or done), 1 does not fit (or a wrong exercise answer), 2 bad input, with a
one-line message on stderr. Used in: the workshop (book/workshop.md) and the README.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.errors import InvalidValueError, VramlibError, check_number

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(VramlibError):
    """A command-line mistake (argparse's, or options that do not go together); printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage mistake as one line (its default prints the usage block first)."""

    def error(self, message: str):  # noqa: D102  (argparse's hook)
        raise UsageError(f"{self.prog}: {' '.join(str(message).split())} (see '{self.prog} --help')")


# --- option types: a bad value is one line naming the option ('argument --tokens: got 0; ...') ----------------
def _int_type(minimum: int = 1, maximum: int | None = None, what: str | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number in [minimum, maximum] (NaN, inf, '1e3', '2.5' and bools are refused)."""
    allowed = what or ("a positive integer" if minimum == 1 and maximum is None else
                       f"an integer >= {minimum}" + (f" and <= {maximum:,}" if maximum is not None else ""))

    def int_value(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}; give {allowed}") from None
        try:
            return check_number("", value, minimum=minimum, maximum=maximum, integer=True, allowed=allowed)
        except InvalidValueError:
            raise argparse.ArgumentTypeError(f"got {value}; must be {allowed}") from None

    return int_value


def _float_type(allowed: str, **bounds) -> Callable[[str], float]:
    """An argparse type: a finite number within ``bounds`` (check_number's); 'nan', 'inf', '1e999' are refused."""

    def float_value(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid number: {text!r}; {allowed}") from None
        try:
            return float(check_number("", value, allowed=allowed, **bounds))
        except InvalidValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}; {allowed}") from None

    return float_value


def _int_list_type(minimum: int, maximum: int | None, example: str, what: str) -> Callable[[str], list[int]]:
    """An argparse type: integers separated by commas, each in [minimum, maximum]; empty items are refused."""

    def int_list(text: str) -> list[int]:
        items = [x.strip() for x in text.replace(";", ",").split(",")]
        try:
            values = [int(x) for x in items]
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}; give {what} separated by commas, e.g. '{example}'") from None
        bad = [v for v in values if v < minimum or (maximum is not None and v > maximum)]
        if bad:
            raise argparse.ArgumentTypeError(f"got {bad[0]} in {text!r}; give {what} separated by commas, "
                                             f"e.g. '{example}'")
        return values

    return int_list


def _name_list_type(example: str) -> Callable[[str], list[str]]:
    """An argparse type: names separated by commas (checked against the catalogue later); empty items refused."""

    def name_list(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError(f"got {text!r}; give names separated by commas, e.g. '{example}'")
        return items

    return name_list


def _memory_type(field: str) -> Callable[[str], str]:
    """An argparse type: a size with a unit ('0.5GB', '512MiB'); kept as typed for the report's settings."""
    from ..core.units import parse_memory

    def memory(text: str) -> str:
        try:
            parse_memory(text, field=field)
        except VramlibError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None
        return text

    return memory


def _text(text: str) -> str:
    """An argparse type: any text that is not blank (a path, a name)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"got {text!r}; give a non-empty value")
    return text


_POSITIVE = _int_type(1)
_HEADROOM = _float_type("must be a fraction in [0, 1), e.g. 0.1 for 10%", minimum=0, maximum=1, max_inclusive=False)
_MFU = _float_type("must be a fraction in (0, 1], e.g. 0.4 for 40%", minimum=0, min_inclusive=False, maximum=1)
_REL_TOL = _float_type("must be a number >= 0 (0.01 = 1%)", minimum=0)


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


# --- helpers -------------------------------------------------------------------------------------------------
def _attention(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in ("none", "kv-only", "kv") else value


def _model(args):
    from .report import _is_path, load_model

    try:
        return load_model(args.model, heads=args.heads, kv_heads=args.kv_heads)
    except VramlibError as e:
        if _is_path(args.model):  # the library names the file ('config.json: path: ...'); say which option
            raise VramlibError(f"--model {args.model!r}: {e}") from None
        raise


def _gguf_weights(args):
    """``--weights``, or with ``--model file.gguf`` and no ``--weights`` the file itself (priced tensor by tensor)."""
    if args.weights is None:
        if isinstance(args.model, str) and args.model.lower().endswith(".gguf"):
            from ..catalog.models import read_gguf

            return read_gguf(args.model)
        return "q4_k_m"
    return args.weights


def _emit(text: str) -> None:
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `vramlib models | head`
        sys.stdout = None  # type: ignore[assignment]


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return "" if v is None else str(v)


def _table(rows: list[dict[str, Any]], caption: str = "") -> str:
    """Aligned plain text: numbers right-aligned, text left-aligned, a rule under the header."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cells = [[_cell(r.get(c, "")) for c in cols] for r in rows]
    numeric = [all(isinstance(r.get(c), (int, float)) or r.get(c) in ("", None) for r in rows) for c in cols]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]

    def line(vals: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = ([caption] if caption else []) + [line(cols), "-" * len(line(cols))] + [line(r) for r in cells]
    return "\n".join(out)


# --- commands ------------------------------------------------------------------------------------------------
_TRAIN_ONLY = {"precision": "bf16", "optimizer": "adamw", "convention": "mixed-fp32-master", "recompute": "none",
               "activation_style": "hf"}
_LORA_ONLY = {"lora_rank": 16, "lora_targets": "all-linear"}
_INFERENCE_ONLY = {"kv_dtype": "fp16", "prefill_chunk": None}


def _given(args, names) -> list[str]:
    return [_option(n) for n in names if getattr(args, n) is not None]


def cmd_fit(args) -> int:
    from .report import fit_inference, fit_training

    task, method = args.task, args.method
    if task in ("full", "lora", "qlora"):
        if method is not None and method != task:
            raise UsageError(f"vramlib fit: --task {task} and --method {method} disagree; give one of them")
        task, method = "train", task
    if task == "inference":
        if method is not None:
            raise UsageError("vramlib fit: --method is for --task train (inference has no method)")
        wrong = _given(args, [*_TRAIN_ONLY, *_LORA_ONLY])
        if wrong:
            raise UsageError(f"vramlib fit: {wrong[0]} is for --task train; inference takes --weights, --kv-dtype, "
                             "--tokens, --batch, --attention, --reserve, --prefill-chunk")
    else:
        method = method or "full"
        wrong = _given(args, _INFERENCE_ONLY) + (_given(args, _LORA_ONLY) if method == "full" else [])
        if wrong:
            what = "--task lora or qlora" if wrong[0] in map(_option, _LORA_ONLY) else "inference"
            raise UsageError(f"vramlib fit: {wrong[0]} is for {what}, not {method} training")
        if args.weights is not None and method == "full":
            raise UsageError("vramlib fit: --weights sets the frozen base weights of lora/qlora; full training "
                             "keeps its weights in --precision")
        if _attention(args.attention) is None:
            raise UsageError("vramlib fit: --attention none (KV cache only) is for inference; training takes "
                             "eager, sdpa or flash")
    for name, default in {**_TRAIN_ONLY, **_LORA_ONLY, **_INFERENCE_ONLY}.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    m = _model(args)
    if task == "inference":
        ft = fit_inference(m, args.gpu, "fp16" if args.weights is None else args.weights, args.kv_dtype,
                           4096 if args.tokens is None else args.tokens, args.batch, _attention(args.attention),
                           args.reserve, args.prefill_chunk)
    else:
        ft = fit_training(m, args.gpu, method, 2048 if args.tokens is None else args.tokens, args.batch,
                          args.precision, args.optimizer, args.convention, args.recompute, args.attention,
                          args.lora_rank, args.lora_targets, args.weights, args.activation_style, args.reserve)
    _emit(json.dumps(ft.to_dict(), indent=2) if args.json else ft.text())
    return EXIT_FITS if ft.fits else EXIT_DOES_NOT_FIT


def cmd_max_context(args) -> int:
    from .report import attention_text, breakdown_text, fit_inference

    m = _model(args)
    attention = _attention(args.attention)
    probe = fit_inference(m, args.gpu, args.weights, args.kv_dtype, 1, args.batch, attention, args.reserve,
                          args.prefill_chunk)
    longest = probe.max_context
    ft = fit_inference(m, probe.hardware, args.weights, args.kv_dtype, max(longest, 1), args.batch, attention,
                       args.reserve, args.prefill_chunk) if longest else probe
    ok = longest >= (1 if args.tokens is None else args.tokens)
    if args.json:
        out = ft.to_dict()
        out["target_tokens"] = args.tokens
        out["fits"] = ok
        _emit(json.dumps(out, indent=2))
        return EXIT_FITS if ok else EXIT_DOES_NOT_FIT
    lines = [f"{m.name} on {ft.hardware.describe()}",
             f"inference: {args.weights} weights, {args.kv_dtype} KV cache, batch {args.batch}, "
             f"{attention_text(attention)}, reserve {args.reserve}"]
    if longest:
        trained = f" (the model was trained for {m.max_context:,})" if longest > m.max_context else ""
        lines.append(f"Longest context: {longest:,} tokens per sequence{trained}. Memory at that length:")
    else:
        lines.append(f"Not one token fits: at 1 token the total is short by {-ft.free_bytes:,} bytes per GPU.")
    lines += ["", breakdown_text(ft.breakdown, ft.capacity, per_gpu=ft.hardware.count > 1)]
    if args.tokens is not None:
        lines += ["", f"Target {args.tokens:,} tokens: " + ("fits." if ok else "does not fit.")]
    lines += [f"Note: {n}" for n in ft.notes]
    _emit("\n".join(lines))
    return EXIT_FITS if ok else EXIT_DOES_NOT_FIT


def cmd_llamacpp(args) -> int:
    """llama.cpp's buffers for a model on one catalogue GPU (every layer offloaded) and the longest context."""
    from ..catalog.hardware import get_gpu
    from ..serve.llamacpp import (GPU_BUFFERS, LlamaCppConfig, gpu_budget, llamacpp_max_ctx, llamacpp_memory,
                                  weights_label)
    from .report import breakdown_text

    m, card, weights = _model(args), get_gpu(args.gpu), _gguf_weights(args)
    kw = _llamacpp_settings(args)
    bd = llamacpp_memory(m, weights, **kw)
    budget, where = gpu_budget(card)
    on_gpu = sum(bd[x] for x in GPU_BUFFERS)
    longest = llamacpp_max_ctx(m, card, weights, **{k: v for k, v in kw.items() if k != "n_ctx"})
    ok = on_gpu <= budget
    if args.json:
        _emit(json.dumps({"model": m.name, "gpu": card.key, "weights": weights_label(weights),
                          "settings": dataclasses.asdict(LlamaCppConfig(**kw)),
                          "buffers": dict(bd), "on_gpu_bytes": on_gpu, "gpu_budget_bytes": budget,
                          "fits": ok, "longest_n_ctx": longest, "notes": list(bd.notes)}, indent=2))
        return EXIT_FITS if ok else EXIT_DOES_NOT_FIT
    lines = [bd.title, breakdown_text(bd), "",
             f"On the GPU: {on_gpu:,} bytes of {budget:,} ({where}): " + ("fits." if ok else "does not fit."),
             f"Longest context with these settings: {longest:,} tokens."]
    lines += [f"Note: {n}" for n in bd.notes]
    _emit("\n".join(lines))
    return EXIT_FITS if ok else EXIT_DOES_NOT_FIT


def cmd_offload(args) -> int:
    """A model split between a GPU and host memory as llama.cpp splits it (-ngl), and the decode roofline."""
    from ..catalog.hardware import get_gpu
    from ..serve.llamacpp import LlamaCppConfig, weights_label
    from ..serve.offload import OffloadConfig, offload_plan
    from .report import breakdown_text

    m, card = _model(args), get_gpu(args.gpu)
    ctx = LlamaCppConfig(**_llamacpp_settings(args))
    weights = _gguf_weights(args)
    where = {k: v for k, v in (("host", args.host), ("host_ram", args.ram)) if v is not None}
    c = OffloadConfig(n_gpu_layers=args.n_gpu_layers, cpu_moe=args.cpu_moe, llamacpp=ctx, **where)
    p = offload_plan(m, card, weights, c)
    ok = p.fits_gpu and p.fits_host
    if args.json:
        _emit(json.dumps({"model": m.name, "gpu": card.key, "weights": weights_label(weights), "host": c.host,
                          "n_gpu_layers": p.n_gpu_layers, "layers_on_gpu": p.layers_on_gpu,
                          "output_on_gpu": p.output_on_gpu, "gpu_buffers": dict(p.gpu), "host_buffers": dict(p.host),
                          "gpu_budget_bytes": p.gpu_budget, "host_budget_bytes": p.host_budget, "fits": ok,
                          "read_gpu_bytes": p.read_gpu, "read_host_bytes": p.read_host,
                          "tokens_per_s": p.tokens_per_s, "notes": list(p.notes)}, indent=2))
        return EXIT_FITS if ok else EXIT_DOES_NOT_FIT
    lines = [p.gpu.title.rsplit(", -ngl", 1)[0] + f" ({c.host_ram:,} B of RAM): -ngl {p.n_gpu_layers}, "
             f"{p.layers_on_gpu} of {m.n_layers} blocks" + (" and the output layer" if p.output_on_gpu else "") +
             " on the GPU", "", "GPU:", breakdown_text(p.gpu), f"  budget {p.gpu_budget:,} bytes", "",
             "Host:", breakdown_text(p.host), f"  budget {p.host_budget:,} bytes", ""]
    for t in p.decode_terms():
        lines.append(f"Decode, {t['read from']}: {t['GB per token']:.2f} GB per token"
                     + (f" at {t['GB/s']:g} GB/s" if t["GB/s"] else "") + f" = {t['ms']:.1f} ms")
    lines += [f"At most {p.tokens_per_s:.1f} tokens/s (a bandwidth roofline). " +
              ("Fits." if ok else "Does not fit: " + ("GPU" if not p.fits_gpu else "host memory") + ".")]
    lines += [f"Note: {n}" for n in p.notes]
    _emit("\n".join(lines))
    return EXIT_FITS if ok else EXIT_DOES_NOT_FIT


def cmd_plan(args) -> int:
    from ..solve.planning import search_plans

    from .report import parse_hardware
    from ..core.units import gb, gib

    m, hw = _model(args), parse_hardware(args.gpu)
    if hw.gpu is None:
        raise UsageError(f"vramlib plan: --gpu {args.gpu!r}: give a catalogue GPU with a count (e.g. 8xa100-80gb); "
                         "the ranking uses the card's TFLOP/s and links")
    kw: dict[str, Any] = dict(seq=args.seq, global_batch=args.global_batch, convention=args.convention,
                              precision=args.precision, optimizer=args.optimizer, headroom=args.headroom,
                              mfu=args.mfu, gpus_per_node=args.gpus_per_node, reserve=args.reserve, top=args.top)
    for key, value in (("zero_stages", args.zero), ("micro_batches", args.micro_batches),
                       ("recompute", args.recompute)):
        if value is not None:
            kw[key] = value
    from ..solve.planning import PlanSpace

    search = search_plans(m, hw.gpu, hw.count, space=PlanSpace(**kw))
    rows = [{"plan": r.plan.label(), "GB per GPU": round(gb(r.peak_bytes), 2), "GiB per GPU": round(gib(r.peak_bytes), 2),
             "tokens/s": round(r.tokens_per_s), "step (s)": round(r.step_s, 2), "bubble": f"{r.bubble:.1%}",
             "MFU": f"{r.mfu:.1%}"} for r in search.plans]
    limit = hw.per_gpu_bytes * (1 - args.headroom)
    head = (f"{m.name} on {hw.describe()}: full training, seq {args.seq:,}, global batch {args.global_batch:,} "
            f"sequences; {search.n_fitting:,} of {search.n_candidates:,} plans fit under {1 - args.headroom:.0%} of "
            f"the card ({gb(limit):,.2f} GB = {gib(limit):,.2f} GiB); ranked by modelled tokens/s")
    if args.json:
        _emit(json.dumps({"model": m.name, "hardware": hw.to_dict(), "seq": args.seq, "global_batch": args.global_batch,
                          "n_candidates": search.n_candidates, "n_fitting": search.n_fitting,
                          "plans": [dict(row, peak_bytes=r.peak_bytes) for row, r in zip(rows, search.plans)]}, indent=2))
    else:
        _emit(head + "\n\n" + (_table(rows) if rows else "No plan fits: try more GPUs, ZeRO-3, recompute or a "
                                                            "shorter sequence."))
    return EXIT_FITS if search.plans else EXIT_DOES_NOT_FIT


def cmd_report(args) -> int:
    try:
        import nbconvert  # noqa: F401
        import papermill  # noqa: F401
    except ImportError as e:
        raise UsageError(f"vramlib report: needs papermill and nbconvert ({e.name} is missing): "
                         "pip install papermill nbconvert") from None
    from .report import ReportSpec, _slug, read_participant_rows, run_batch, run_report

    knobs = {k: v for k, v in dict(tokens=args.tokens, seq=args.seq, batch=args.batch, kv_dtype=args.kv_dtype,
                                    recompute=args.recompute, lora_rank=args.lora_rank,
                                    weight_formats=args.weights).items() if v is not None}
    if args.participants is not None:
        single = [o for o, v in (("--gpu", args.gpu), ("--model", args.model), ("--name", args.name),
                                 ("--out", args.out), ("--notebook", args.notebook)) if v is not None]
        if single:
            raise UsageError(f"vramlib report: give either --participants (one report per row, into --out-dir) or "
                             f"--gpu/--model (one report), not both: {single[0]} is for one report")
        defaults = knobs | ({"tasks": args.task} if args.task else {})
        _check_batch_options(defaults)
        rows = read_participant_rows(args.participants, defaults=defaults)
        out_dir = "reports" if args.out_dir is None else args.out_dir
        batch = run_batch(rows, out_dir, progress=not args.quiet, timeout=args.timeout)
        _emit("\n".join([*(str(p) for p in batch.reports), str(batch.summary_html), str(batch.summary_csv)]))
        if batch.failed:
            more = f" (and {len(batch.failed) - 1} more)" if len(batch.failed) > 1 else ""
            raise UsageError(f"vramlib report: {len(batch.failed)} of {len(rows)} participants have no report, "
                             f"the reasons are in {batch.summary_csv.name}: {batch.failed[0].error}{more}")
        return EXIT_FITS
    if args.out_dir is not None:
        raise UsageError("vramlib report: --out-dir is for --participants; give --out FILE.html for one report")
    if args.gpu is None or not args.model:
        raise UsageError("vramlib report: give --gpu and at least one --model (or --participants people.csv)")
    spec = ReportSpec(name="participant" if args.name is None else args.name, gpu=args.gpu, models=tuple(args.model),
                      **({"tasks": tuple(args.task)} if args.task else {}), **knobs)
    out = Path(args.out) if args.out is not None else Path(f"report-{_slug(spec.name)}.html")
    _emit(str(run_report(spec, out, notebook=args.notebook, timeout=args.timeout)))
    return EXIT_FITS


def _check_batch_options(defaults: dict[str, Any]) -> None:
    """Options that apply to every row of a batch are checked once, before any row: a bad --task or --weights is
    one line, not the same failure on every participant."""
    from ..memory.activations import RECOMPUTE
    from ..core.errors import check_choice
    from ..catalog.precision import get_precision
    from .report import ReportSpec

    spec = ReportSpec(name="options", gpu="1GB", models=("gpt2",), **defaults)  # tasks and numbers
    for w in spec.weight_formats:
        get_precision(w, field="--weights")
    get_precision(spec.kv_dtype, field="--kv-dtype")
    check_choice("--recompute", spec.recompute, RECOMPUTE)


def _emit_rows(rows: list[dict], as_json: bool, caption: str) -> int:
    """Print catalogue rows as JSON or as a captioned table; a listing always succeeds."""
    _emit(json.dumps(rows, indent=2) if as_json else _table(rows, caption=caption))
    return EXIT_FITS


def cmd_models(args) -> int:
    from ..memory.inference import weights_bytes
    from ..catalog.models import catalogue
    from ..core.units import gb, gib

    rows = []
    for key, m in sorted(catalogue().items()):
        if args.filter and args.filter.lower() not in key:
            continue
        w = weights_bytes(m, "fp16")
        rows.append({"model": key, "family": m.family, "parameters": m.weight_params,
                     "active": m.n_active_params if m.is_moe else "", "layers": m.n_layers, "hidden": m.hidden,
                     "heads": m.n_heads, "KV heads": m.n_kv_heads, "head dim": m.head_dim,
                     "context": m.max_context, "fp16 weights (GB)": round(gb(w), 2),
                     "fp16 weights (GiB)": round(gib(w), 2),
                     "note": "nominal size (the source's shape)" if m.nominal_params is not None else ""})
    if not rows:
        raise VramlibError(f"model: no catalogue name contains {args.filter!r}")
    return _emit_rows(rows, args.json, "Catalogue models (GB = 10^9 bytes, GiB = 2^30 bytes; 'active': parameters "
                                       "per token of a mixture of experts)")


def cmd_gpus(args) -> int:
    from ..catalog.hardware import list_gpus
    from ..core.units import gb, gib, mib

    rows = [{"gpu": g.key, "name": g.name, "memory (MiB)": round(mib(g.memory_bytes)),
             "memory (GB)": round(gb(g.memory_bytes), 2), "memory (GiB)": round(gib(g.memory_bytes), 2),
             "bandwidth (GB/s)": round(g.bandwidth_gb_s), "bf16 TFLOP/s": g.bf16_tflops or "",
             "USD/hour": g.price_per_hour_usd or "", "price date": g.price_date}
            for g in list_gpus()]
    return _emit_rows(rows, args.json, "Catalogue GPUs: memory as the card reports it (nvidia-smi MiB); GB = 10^9 "
                                       "bytes, GiB = 2^30 bytes; dense tensor TFLOP/s; indicative on-demand prices")


def cmd_exercises(args) -> int:
    from . import exercises as ex

    only = {"list": ("chapter",), "check": ("rel_tol", "who", "log"), "summary": ()}
    wrong = [_option(n) for n in ("chapter", "rel_tol", "who", "log") if getattr(args, n) is not None
             and n not in only[args.action]] + (["--csv"] if args.csv and args.action != "summary" else [])
    if wrong:
        raise UsageError(f"vramlib exercises {args.action}: {wrong[0]} is not an option of '{args.action}' "
                         "(list --chapter; check --rel-tol --who --log; summary --csv)")
    if args.action == "list":
        if args.rest:
            raise UsageError(f"vramlib exercises list: takes no KEY or ANSWER (got {args.rest[0]!r}); "
                             "use --chapter chNN")
        table = ex.list_exercises(args.chapter)
        _emit(_table(table.rows, caption=table.caption))
        return EXIT_FITS
    if args.action == "check":
        if len(args.rest) != 2:
            raise UsageError("vramlib exercises check: give KEY ANSWER, e.g. 'vramlib exercises check ch01-1 31000'")
        key, text = args.rest
        try:
            value = float(text.replace(",", "").replace("_", ""))
        except ValueError:
            raise UsageError(f"vramlib exercises check: answer {text!r} is not a number") from None
        res = ex.check(key, int(value) if value.is_integer() else value, rel_tol=args.rel_tol, who=args.who,
                       record=args.log)
        _emit(str(res))
        return EXIT_FITS if res.correct else EXIT_DOES_NOT_FIT
    if not args.rest:
        raise UsageError("vramlib exercises summary: give one or more JSONL logs")
    for log in args.rest:
        path = Path(log)
        if path.is_dir():
            raise InvalidValueError("log", log, "is a folder; give the JSONL file that 'exercises check --log' writes")
        if path.is_file():
            try:
                path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidValueError("log", log, "is not a UTF-8 JSONL log (the file 'exercises check --log' "
                                                    "writes)") from None
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        table = ex.summarize(args.rest)
    skipped = [w for w in skipped if issubclass(w.category, UserWarning)]
    if skipped and not table.rows:
        raise InvalidValueError("log", ", ".join(args.rest), f"holds no check records ({len(skipped)} lines are not "
                                "records); give the JSONL file that 'exercises check --log' writes")
    for w in skipped:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if args.csv:
        import csv
        import io

        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=table.columns)
        w.writeheader()
        w.writerows(table.rows)
        _emit(buf.getvalue().rstrip("\n"))
    else:
        _emit(_table(table.rows, caption=table.caption))
    return EXIT_FITS


# --- the parser ----------------------------------------------------------------------------------------------
_LLAMACPP_FLAGS = {"n_ctx": "n_ctx", "no_flash_attn": "flash_attn", "type_k": "type_k", "type_v": "type_v",
                   "n_batch": "n_batch", "n_ubatch": "n_ubatch", "parallel": "n_seq"}
"""CLI option -> LlamaCppConfig field; an option left out takes the field's default (LlamaCppConfig owns them)."""


def _llamacpp_args(p: argparse.ArgumentParser) -> None:
    """The options of a llama.cpp context that ``llamacpp`` and ``offload`` share (defaults: LlamaCppConfig's)."""
    p.add_argument("--gpu", required=True, help="a catalogue GPU (see 'vramlib gpus')")
    p.add_argument("--weights", default=None, help="the GGUF file's format (default q4_k_m; with --model file.gguf, "
                                                   "the file's own tensors)")
    p.add_argument("--n-ctx", type=_POSITIVE, help="-c: context")
    p.add_argument("--no-flash-attn", action="store_true", help="-fa off (the f32 attention scores are kept)")
    p.add_argument("--type-k", help="-ctk: K cache type (f16, q8_0, q4_0 ...)")
    p.add_argument("--type-v", help="-ctv: V cache type (quantized needs flash attention)")
    p.add_argument("--json", action="store_true", help="print JSON (bytes as integers)")


def _llamacpp_settings(args) -> dict:
    """The LlamaCppConfig fields the command line set (the others keep the class's defaults)."""
    out = {}
    for opt, name in _LLAMACPP_FLAGS.items():
        value = getattr(args, opt, None)
        if opt == "no_flash_attn":
            if value:
                out[name] = False
        elif value is not None:
            out[name] = value
    return out


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="catalogue name (see 'vramlib models'), a config.json path, or a "
                                                  "Hub id such as Qwen/Qwen3-8B (its config.json only)")
    p.add_argument("--heads", type=_POSITIVE,
                   help="attention heads (head dim = hidden / heads), as the chapters' panels")
    p.add_argument("--kv-heads", type=_POSITIVE, help="KV heads (GQA/MQA); must divide the heads")


def _gpu_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--gpu", required=required,
                   help="catalogue name or memory with a count: rtx-4090, 4xa100-80gb, 2x80GB, 24GiB")


def _plan_space_args(p: argparse.ArgumentParser) -> None:
    """``vramlib plan``'s options: the fields of solve.planning.PlanSpace, with its defaults (never retyped here)."""
    import dataclasses

    from ..solve.planning import PlanSpace

    d = {f.name: f.default for f in dataclasses.fields(PlanSpace)}
    join = ",".join
    p.add_argument("--seq", type=_POSITIVE, default=d["seq"], help=f"sequence length (default {d['seq']})")
    p.add_argument("--global-batch", type=_POSITIVE, default=d["global_batch"],
                   help=f"sequences per optimizer step (default {d['global_batch']})")
    p.add_argument("--precision", default=d["precision"], help=f"{d['precision']} (default), fp16, fp32")
    p.add_argument("--optimizer", default=d["optimizer"], help=f"{d['optimizer']} (default), adamw-8bit, ...")
    p.add_argument("--convention", default=d["convention"],
                   help=f"{d['convention']} (default), source-12, deepspeed")
    p.add_argument("--zero", type=_int_list_type(0, 3, "1,3", "ZeRO stages from 0, 1, 2, 3"),
                   help=f"ZeRO stages to try, e.g. '1,3' (default {join(map(str, d['zero_stages']))})")
    p.add_argument("--recompute", type=_name_list_type("none,full"),
                   help=f"recompute levels to try, e.g. 'none,full' (default {join(d['recompute'])})")
    p.add_argument("--micro-batches", type=_int_list_type(1, None, "1,2,4", "positive integers"),
                   help=f"micro-batch sizes to try (default {join(map(str, d['micro_batches']))})")
    p.add_argument("--headroom", type=_HEADROOM, default=d["headroom"],
                   help=f"fraction of each GPU kept free (default {d['headroom']})")
    p.add_argument("--mfu", type=_MFU, default=d["mfu"], help=f"model FLOPs utilisation for the ranking (default {d['mfu']})")
    p.add_argument("--gpus-per-node", type=_POSITIVE, default=d["gpus_per_node"],
                   help=f"GPUs per node (default {d['gpus_per_node']})")
    _reserve_arg(p)
    p.add_argument("--top", type=_POSITIVE, default=d["top"], help=f"plans to show (default {d['top']})")
    p.add_argument("--json", action="store_true", help="print JSON")


def _reserve_arg(p: argparse.ArgumentParser) -> None:
    from ..memory.inference import DEFAULT_RESERVE

    p.add_argument("--reserve", default=DEFAULT_RESERVE, type=_memory_type("reserve"),
                   help=f"CUDA context and framework per GPU (default {DEFAULT_RESERVE})")


def _inference_args(p: argparse.ArgumentParser, weights_default: str | None, kv_default: str | None) -> None:
    p.add_argument("--kv-dtype", default=kv_default, help="KV cache format (default fp16; fp8-e4m3, int8 ...)")
    p.add_argument("--attention", default="sdpa",
                   help="eager | sdpa | flash, or none = weights + KV cache + reserve only (default sdpa)")
    _reserve_arg(p)
    p.add_argument("--prefill-chunk", type=_POSITIVE, help="tokens per prefill step (chunked prefill)")
    if weights_default:
        p.add_argument("--weights", default=weights_default,
                       help=f"weight format (default {weights_default}; int8, int4, nf4, awq-4bit-g128, q4_k_m ...)")


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of ``vramlib`` (one-line errors). Every number is range-checked as it is parsed."""
    from .. import __version__
    from .report import MAX_TIMEOUT

    top = _Parser(prog="vramlib", description="Will it fit? GPU memory for LLM inference and training, computed.",
                  epilog="Exit codes: 0 fits / done, 1 does not fit, 2 bad input (one line on stderr). "
                         "GB = 10^9 bytes, GiB = 2^30 bytes.")
    top.add_argument("--version", action="version", version=f"vramlib {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("fit", help="model x GPU x task -> memory breakdown per GPU and verdict",
                       description="Memory per GPU for inference or one training step, and whether it fits. "
                                   "Several GPUs: tensor parallel for inference, data parallel for training.")
    _model_args(p)
    _gpu_arg(p)
    p.add_argument("--task", default="inference", choices=["inference", "train", "full", "lora", "qlora"],
                   help="inference (default) or train; full/lora/qlora = train with that method")
    p.add_argument("--method", choices=["full", "lora", "qlora"], help="training method (default full)")
    p.add_argument("--tokens", "--seq", dest="tokens", type=_POSITIVE,
                   help="context length (inference, default 4096) or sequence length (train, default 2048)")
    p.add_argument("--batch", type=_POSITIVE, default=1,
                   help="sequences (inference) or micro-batch (train); default 1")
    p.add_argument("--weights", help="inference: weight format (default fp16); lora/qlora: base weights "
                                     "(default the precision / nf4-dq)")
    p.add_argument("--precision", help="training compute precision: bf16 (default), fp16, fp32")
    p.add_argument("--optimizer", help="training: adamw (default), adamw-8bit, paged-adamw-8bit, sgd, adafactor")
    p.add_argument("--convention",
                   help="training bytes per parameter: mixed-fp32-master (16, default), source-12, deepspeed (18)")
    p.add_argument("--recompute", help="training activation recomputation: none (default), selective, full")
    p.add_argument("--lora-rank", type=_POSITIVE, help="lora/qlora: LoRA rank (default 16)")
    p.add_argument("--lora-targets", help="lora/qlora: all-linear (default), attention, qv")
    p.add_argument("--activation-style", help="training activation accounting: hf (default) or megatron")
    _inference_args(p, None, None)
    p.add_argument("--json", action="store_true", help="print JSON (bytes as integers)")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("max-context", help="longest context that fits (inference)",
                       description="Longest context per sequence on the hardware, and the memory at that length.")
    _model_args(p)
    _gpu_arg(p)
    p.add_argument("--batch", type=_POSITIVE, default=1, help="sequences held at once (default 1)")
    p.add_argument("--tokens", type=_POSITIVE, help="a target: exit 1 when the longest context is shorter")
    _inference_args(p, "fp16", "fp16")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_max_context)

    p = sub.add_parser("llamacpp", help="llama.cpp's buffers (model, KV cache, compute, output) on one GPU",
                       description="The buffers a llama.cpp context allocates with every layer on the GPU, in exact "
                                   "bytes (vl.llamacpp_memory), whether they fit the card, and the longest context.")
    _model_args(p)
    _llamacpp_args(p)
    p.add_argument("--n-batch", type=_POSITIVE, help="-b: logical batch")
    p.add_argument("--n-ubatch", type=_POSITIVE, help="-ub: micro-batch")
    p.add_argument("--parallel", type=_POSITIVE, help="-np: parallel sequences")
    p.set_defaults(func=cmd_llamacpp)

    p = sub.add_parser("offload", help="a model split between the GPU and host memory (llama.cpp -ngl), decode speed",
                       description="Where llama.cpp puts each layer with -ngl (the most that fit by default), the "
                                   "memory on each side and a bandwidth roofline of decode tokens/s "
                                   "(vl.offload_plan; the book's chapter on offload, ch17).")
    _model_args(p)
    _llamacpp_args(p)
    p.add_argument("--host", help="host memory (a key of vramlib.catalog.hosts.HOSTS, e.g. ddr5-5600-2ch)")
    p.add_argument("--ram", help="installed RAM, e.g. 64GB")
    p.add_argument("--n-gpu-layers", type=int, default=None, help="-ngl (default: the most that fit; -1: all)")
    p.add_argument("--cpu-moe", action="store_true", help="--cpu-moe: routed experts in host memory")
    p.set_defaults(func=cmd_offload)

    p = sub.add_parser("plan", help="search parallel plans (TP x PP x DP x ZeRO) for full training",
                       description="Enumerate the ways to split a full training run over the GPUs (tensor, pipeline "
                                   "and data parallelism, ZeRO stage, recompute, micro-batch), keep those whose "
                                   "fullest GPU fits and rank them by a throughput model (the book's ch12).")
    _model_args(p)
    _gpu_arg(p)
    _plan_space_args(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("report", help="HTML feasibility report(s) through papermill, one per participant",
                       description="Run the report notebook for a participant's GPU, models and tasks and write "
                                   "a standalone HTML file; --participants makes one per CSV row plus a summary "
                                   "(a bad row gets no report but a line in the summaries; exit 2 at the end).")
    p.add_argument("--participants", type=_text,
                   help="CSV with columns name, gpu, models (';'-separated), optional tasks")
    p.add_argument("--name", help="whose report (default 'participant')")
    _gpu_arg(p, required=False)
    p.add_argument("--model", action="append", help="a model (repeat for several)")
    p.add_argument("--task", action="append", help="inference, full, lora, qlora (repeat; default inference, qlora)")
    p.add_argument("--weights", action="append", help="inference weight formats (repeat; default fp16, int8, "
                                                      "awq-4bit-g128)")
    p.add_argument("--kv-dtype", help="KV cache format (default fp16)")
    p.add_argument("--tokens", type=_POSITIVE, help="inference context (default 4096)")
    p.add_argument("--batch", type=_POSITIVE, help="inference batch (default 1)")
    p.add_argument("--seq", type=_POSITIVE, help="training sequence length (default 2048)")
    p.add_argument("--recompute", help="training recompute: none (default), selective, full")
    p.add_argument("--lora-rank", type=_POSITIVE, help="LoRA rank (default 16)")
    p.add_argument("--out", type=_text, help="HTML file (default report-<name>.html)")
    p.add_argument("--out-dir", type=_text, help="folder for --participants (default reports/)")
    p.add_argument("--notebook", type=_text, help="also keep the executed notebook at this path")
    p.add_argument("--timeout", type=_int_type(1, MAX_TIMEOUT), default=300,
                   help="seconds per notebook cell (default 300)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("models", help="list the model catalogue")
    p.add_argument("--filter", help="only names containing this text")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("gpus", help="list the GPU catalogue")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_gpus)

    p = sub.add_parser("exercises", help="list, check or summarise the book's exercises",
                       description="list [--chapter chNN]; check KEY ANSWER [--who NAME --log FILE]; "
                                   "summary LOG.jsonl ... [--csv]")
    p.add_argument("action", choices=["list", "check", "summary"])
    p.add_argument("rest", nargs="*", help="check: KEY ANSWER; summary: JSONL logs")
    p.add_argument("--chapter", help="list: only this chapter (ch01, ch07 ...)")
    p.add_argument("--rel-tol", type=_REL_TOL, help="check: relative tolerance (default the exercise's)")
    p.add_argument("--who", help="check: participant name for the log")
    p.add_argument("--log", type=_text,
                   help="check: append the result to this JSONL file (default $VRAMLIB_EXERCISE_LOG)")
    p.add_argument("--csv", action="store_true", help="summary: print CSV")
    p.set_defaults(func=cmd_exercises)
    return top


def _warning_line(caught: list) -> str | None:
    """One line for the UserWarnings a command raised (library notes such as 'result not recorded')."""
    msgs = list(dict.fromkeys(" ".join(str(w.message).split()) for w in caught if issubclass(w.category, UserWarning)))
    if not msgs:
        return None
    more = f" (and {len(msgs) - 1} more like it)" if len(msgs) > 1 else ""
    return f"vramlib: warning: {msgs[0]}{more}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``vramlib`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    Only the project's errors (VramlibError, UsageError among them) become exit 2 with one line on stderr;
    anything else is a bug and propagates with its traceback.
    """
    parser = build_parser()
    command = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            args, extra = parser.parse_known_args(argv)
            command = getattr(args, "command", None)
            if extra and command == "exercises" and not any(x.startswith("-") for x in extra):
                args.rest = [*args.rest, *extra]  # 'exercises check --who ann KEY ANSWER': positionals after options
            elif extra:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
            if getattr(args, "func", None) is None:
                raise UsageError("vramlib: choose a command: fit, max-context, plan, report, models, gpus, exercises "
                                 "(see 'vramlib --help')")
            rc = args.func(args)
        except VramlibError as e:
            text = " ".join(str(e).split())
            prefix = "" if isinstance(e, UsageError) else f"vramlib {command}: " if command else "vramlib: "
            _flush_stdout()
            print(prefix + text, file=sys.stderr)
            return EXIT_BAD_INPUT
    line = _warning_line(caught)
    if line:
        print(line, file=sys.stderr)
    return rc


def _flush_stdout() -> None:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:  # `vramlib report ... | head`
        sys.stdout = None  # type: ignore[assignment]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
