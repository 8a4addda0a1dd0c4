"""One model, one card, one runtime: one answer in every chapter (issue 14).

A chapter that states "model M on card G under runtime R gives X" records it as a *fact* (:func:`fact`): the runtime,
the quantity, the model, the card, the weights, the settings that change the answer (those equal to the runtime's
defaults are dropped, so a chapter that spells out a default and one that does not state the same fact) and the value
the chapter shows. :func:`recompute` asks the runtime's own function for the value (:data:`RUNTIMES`), and
:func:`problems` lists every fact the chapters state differently from it or from each other. Chapters 1, 5, 6, 7, 8
and 17 glue their facts (``q<N>_facts``); ``tests/test_consistency.py`` reads them from the stored notebooks.

Used in: chapters 1, 5, 6, 7, 8, 17 and their test.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from ..catalog.hardware import get_gpu
from ..catalog.models import get_model
from ..core.errors import InvalidValueError, check_choice
from ..core.units import parse_memory
from ..memory.inference import DEFAULT_RESERVE
from ..serve.llamacpp import LlamaCppConfig, llamacpp_max_ctx
from ..serve.offload import OffloadConfig, offload_plan
from ..serve.serving import ServingConfig, serving_kv_capacity
from ..serve.ollama import OllamaConfig, ollama_estimate
from ..serve.sglang import SGLangConfig, sglang_max_tokens
from ..solve.feasibility import max_tokens

_ACCOUNTING = {"kv_dtype": "fp16", "batch": 1, "reserve": parse_memory(DEFAULT_RESERVE), "attention": None,
               "prefill_chunk": None}
_IGNORED = {"vllm serve": ("request_tokens",)}
"""Settings that change what a chapter prints beside the fact, never the fact (vLLM's request length sets the
concurrency, not the KV tokens)."""


def _defaults(cls) -> dict[str, Any]:
    return {f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
            for f in dataclasses.fields(cls)}


def _offload(f: dict) -> Any:
    s = dict(f["settings"])
    ctx = LlamaCppConfig(**{k: s.pop(k) for k in list(s) if k in _defaults(LlamaCppConfig)})
    return offload_plan(f["model"], f["gpu"], f["weights"], llamacpp=ctx, **s)


RUNTIMES: dict[tuple[str, str], tuple[dict[str, Any], Callable[[dict], Any]]] = {
    ("vramlib accounting", "longest context"):
        (_ACCOUNTING, lambda f: max_tokens(f["model"], f["gpu"], f["weights"], **f["settings"])),
    ("vllm serve", "kv tokens"):
        (_defaults(ServingConfig), lambda f: serving_kv_capacity(f["model"], f["gpu"], weights=f["weights"],
                                                                 **f["settings"]).kv_tokens),
    ("sglang", "kv tokens"):
        (_defaults(SGLangConfig), lambda f: sglang_max_tokens(f["model"], f["gpu"], f["weights"], **f["settings"])),
    ("llama.cpp", "longest context"):
        (_defaults(LlamaCppConfig), lambda f: llamacpp_max_ctx(f["model"], f["gpu"], f["weights"], **f["settings"])),
    ("ollama", "n_gpu_layers"):
        (_defaults(OllamaConfig), lambda f: ollama_estimate(f["model"], f["gpu"], f["weights"],
                                                             **f["settings"]).n_gpu_layers),
    ("llama.cpp offload", "n_gpu_layers"):
        ({**_defaults(OffloadConfig), **_defaults(LlamaCppConfig)}, lambda f: _offload(f).n_gpu_layers),
    ("llama.cpp offload", "tokens/s"):
        ({**_defaults(OffloadConfig), **_defaults(LlamaCppConfig)}, lambda f: _offload(f).tokens_per_s),
}
"""(runtime, quantity) -> (its settings' defaults, the function that answers): vramlib's weights + KV (+ prefill)
accounting (:func:`vramlib.solve.feasibility.max_tokens`), ``vllm serve``'s KV cache (``serving_kv_capacity``),
SGLang's token pool (``sglang_max_tokens``), Ollama's layer estimate (``ollama_estimate``),
llama.cpp's longest context with every layer on the GPU (``llamacpp_max_ctx``) and its partial offload
(``offload_plan``)."""


def _is_size(default: Any) -> bool:
    """A setting whose default is a size (bytes, or text such as "4GiB"): given as text, it is compared in bytes."""
    return (isinstance(default, int) and not isinstance(default, bool)) or (
        isinstance(default, str) and default[:1].isdigit())


def _normal(value: Any, default: Any) -> Any:
    if isinstance(value, str) and _is_size(default) and value[:1].isdigit():
        return parse_memory(value)          # "0.5GB" and 500000000 are one reserve
    return value


def fact(runtime: str, quantity: str, value: Any, model: str, gpu: str, weights: str, **settings) -> dict:
    """One stated fact as plain data (glued by the chapters): settings at the runtime's default are dropped, sizes
    given as text become bytes; an unknown runtime / quantity or setting is a one-line error."""
    key = (check_choice("runtime", runtime, sorted({r for r, _ in RUNTIMES})), quantity)
    if key not in RUNTIMES:
        raise InvalidValueError("quantity", quantity, f"{runtime} states: " +
                                ", ".join(q for r, q in RUNTIMES if r == runtime))
    defaults = RUNTIMES[key][0]
    kept = {}
    for name, v in settings.items():
        if name in _IGNORED.get(runtime, ()):
            continue
        if name not in defaults:
            raise InvalidValueError(name, v, f"not a setting of {runtime}; allowed: {', '.join(sorted(defaults))}")
        v = _normal(v, defaults[name])
        if v != _normal(defaults[name], defaults[name]):
            kept[name] = v
    return {"runtime": runtime, "quantity": quantity, "model": get_model(model).name, "gpu": get_gpu(gpu).key,
            "weights": weights, "settings": dict(sorted(kept.items())), "value": value}


def fact_key(f: dict) -> str:
    """What makes two facts the same question: everything but the value."""
    return json.dumps({k: f[k] for k in ("runtime", "quantity", "model", "gpu", "weights", "settings")},
                      sort_keys=True)


def recompute(f: dict) -> Any:
    """The runtime's own answer to a fact's question."""
    return RUNTIMES[(f["runtime"], f["quantity"])][1](f)


def problems(facts_by_chapter: dict[str, list[dict]]) -> list[str]:
    """Every disagreement, one line each: a fact whose value is not the runtime's answer, or a question two chapters
    answer differently."""
    out, seen = [], {}
    for chapter, facts in facts_by_chapter.items():
        for f in facts:
            got = recompute(f)
            if got != f["value"]:
                out.append(f"{chapter}: {fact_key(f)} states {f['value']!r}, the runtime gives {got!r}")
            k = fact_key(f)
            if k in seen and seen[k][1] != f["value"]:
                out.append(f"{chapter} and {seen[k][0]} disagree on {k}: {f['value']!r} vs {seen[k][1]!r}")
            seen.setdefault(k, (chapter, f["value"]))
    return out


def shared_questions(facts_by_chapter: dict[str, list[dict]]) -> dict[str, list[str]]:
    """Questions (fact keys) that two or more chapters answer, with those chapters."""
    where: dict[str, list[str]] = {}
    for chapter, facts in facts_by_chapter.items():
        for f in facts:
            where.setdefault(fact_key(f), [])
            if chapter not in where[fact_key(f)]:
                where[fact_key(f)].append(chapter)
    return {k: v for k, v in where.items() if len(v) > 1}


__all__ = ["RUNTIMES", "fact", "fact_key", "problems", "recompute", "shared_questions"]
