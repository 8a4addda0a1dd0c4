"""Chapters 1, 5, 6, 7, 8 and 17 agree: every model + card + runtime fact a chapter glues (``q<N>_facts``) is the
runtime's own answer (explain.consistency.recompute), and a question two chapters answer gets one answer."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import vramlib as vl
from vramlib.explain import consistency as C
from test_chapters import glued

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = {"ch01-13b-on-24gb": "q1", "ch05-quantized-on-rtx4090": "q5", "ch06-cloud-gpu-choice": "q6",
            "ch07-100k-context": "q7", "ch08-vllm-vs-nvidia-smi": "q8", "ch17-offload-unified-cpu": "q17"}


@pytest.fixture(scope="module")
def facts() -> dict[str, list[dict]]:
    out = {}
    for stem, prefix in CHAPTERS.items():
        got = glued(json.loads((BOOK / f"{stem}.ipynb").read_text()))
        assert f"{prefix}_facts" in got, f"{stem} glues no {prefix}_facts"
        out[stem] = got[f"{prefix}_facts"]
    return out


def test_every_chapter_states_its_runtime_facts(facts):
    runtimes = {f["runtime"] for fs in facts.values() for f in fs}
    assert runtimes == {r for r, _ in C.RUNTIMES}        # every runtime the book prices is stated somewhere
    assert all(len(fs) >= 2 for fs in facts.values())


def test_the_chapters_agree_with_the_runtimes_and_each_other(facts):
    assert C.problems(facts) == []


def test_the_chapters_share_questions_across_runtimes(facts):
    """The agreement is tested where it matters: questions that several chapters answer, in each runtime."""
    shared = C.shared_questions(facts)
    runtimes = {json.loads(k)["runtime"] for k in shared}
    assert {"vramlib accounting", "llama.cpp", "vllm serve"} <= runtimes, shared
    assert any({"ch07-100k-context", "ch08-vllm-vs-nvidia-smi"} <= set(v) for v in shared.values())
    assert any({"ch01-13b-on-24gb", "ch07-100k-context"} <= set(v) for v in shared.values())
    assert any({"ch05-quantized-on-rtx4090", "ch07-100k-context"} <= set(v) for v in shared.values())


def test_a_changed_fact_is_caught(facts):
    """The check can fail: a chapter that states another number, or two chapters that differ, are named."""
    some = dict(facts)
    first = dict(some["ch07-100k-context"][0])
    first["value"] = first["value"] + 1
    some["ch07-100k-context"] = [first] + some["ch07-100k-context"][1:]
    found = C.problems(some)
    assert found and "ch07-100k-context" in found[0] and "the runtime gives" in found[0]


def test_a_setting_at_its_default_is_the_same_question():
    a = C.fact("vllm serve", "kv tokens", 1, "llama-3.1-8b", "rtx-4090", "bf16", gpu_memory_utilization=0.9,
               block_size=16, request_tokens=4096)
    b = C.fact("vllm serve", "kv tokens", 1, "llama-3.1-8b", "rtx-4090", "bf16")
    assert C.fact_key(a) == C.fact_key(b)
    c = C.fact("vramlib accounting", "longest context", 1, "llama-2-13b", "rtx-4090", "fp16", reserve="0.5GB")
    assert c["settings"] == {}
    with pytest.raises(vl.VramlibError, match="not a setting of llama.cpp"):
        C.fact("llama.cpp", "longest context", 1, "llama-3.1-8b", "rtx-4090", "q4_k_m", block_size=16)
    with pytest.raises(vl.VramlibError, match="quantity"):
        C.fact("vllm serve", "tokens/s", 1, "llama-3.1-8b", "rtx-4090", "bf16")
