"""The peak of a training step (vramlib.memory.step) against the full-size fake-CUDA measurements of
tools/measure/step_peaks.py (vramlib/data/measured/step_peaks.json), and the pure-bf16 convention."""
from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path

import pytest

import vramlib as vl
from vramlib import validation as V
from vramlib.core.errors import VramlibError
from vramlib.memory import step as S
from measure_tool import tool

step = functools.partial(vl.training_memory, peak="step")
"""training_memory priced by its phases (its default is the sum of parts)."""

ROOT = Path(__file__).resolve().parents[1]
ROWS = V.load_measured("step_peaks")["rows"]


def test_the_stored_cases_are_the_harness_cases():
    step_peaks = tool("step_peaks")
    assert [r["id"] for r in ROWS] == [i for i in step_peaks.CASES if i in {r["id"] for r in ROWS}]
    assert len(ROWS) >= 30
    data = json.loads((ROOT / "vramlib" / "data" / "measured" / "step_peaks.json").read_text())
    assert data["command"] == "python tools/measure/step_peaks.py" and data["torch"] and data["transformers"]


def test_training_peaks_within_the_issue_bounds():
    rows = V.step_peak_rows()
    assert len(rows) >= 12
    errors = [abs(r.error) for r in rows]
    assert statistics.median(errors) <= 0.03 and max(errors) <= 0.06
    assert all(r.predicted <= r.measured * 1.06 for r in rows)


def test_every_modelled_peak_is_in_the_measured_phase():
    for r in V.step_peak_rows():
        assert "predicted" not in r.note, (r.id, r.note)


def test_inference_peaks_on_fake_cuda_within_bounds():
    rows = V.step_inference_rows()
    assert len(rows) >= 6
    errors = [abs(r.error) for r in rows]
    assert statistics.median(errors) <= 0.01 and max(errors) <= 0.03


def test_fake_cuda_equals_fake_cpu_but_for_bytes():
    check = V.fake_cuda_cpu_check()
    assert abs(check["difference"]) < 4096 < check["fake cpu"]


def test_every_unmodelled_case_says_why():
    gaps = [V.step_peak_gap(r) for r in ROWS if r["kind"] == "train"]
    assert any(g is None for g in gaps)
    for g in gaps:
        assert g is None or ("\n" not in g and len(g) < 400)
    table = V.step_peak_table()
    assert len(table) == sum(1 for r in ROWS if r["kind"] == "train")
    assert all(t["predicted GB"] is not None or t["note"] for t in table)


# --- the model's structure ------------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["foreach", "fused", "for-loop"])
def test_the_peak_is_the_largest_phase_and_the_components_sum_to_it(impl):
    bd = step("llama-2-7b", convention="pure-bf16", optimizer_impl=impl)
    assert bd.total == max(bd.phases.values()) == bd.phases[bd.peak_phase]
    assert bd.steady < bd.total and bd.steady == bd["weights"] + bd["optimizer states"] + \
        bd["reserve (CUDA context, framework)"]


def test_foreach_adamw_adds_one_parameter_sized_tensor():
    m = vl.get_model("llama-2-7b")
    foreach = step(m, convention="pure-bf16", reserve=0)
    fused = step(m, convention="pure-bf16", optimizer_impl="fused", reserve=0)
    assert foreach.peak_phase == "optimizer step"
    assert foreach["optimizer step temporaries (foreach)"] == 2 * m.weight_params
    assert foreach.phases["optimizer step"] - fused.phases["optimizer step"] == 2 * m.weight_params
    assert foreach.total == 10 * m.weight_params     # weights, gradients, two bf16 moments, the sqrt


def test_a_large_vocabulary_peaks_at_the_loss():
    bd = step("qwen2.5-0.5b", convention="pure-bf16", micro_batch=8, reserve=0)
    assert bd.peak_phase == "loss backward"
    m = vl.get_model("qwen2.5-0.5b")
    assert bd["loss gradients (fp32 T x V)"] == 8 * 8 * 2048 * m.vocab
    assert "gradients" not in bd                      # none exist yet at that moment


def test_recomputation_lowers_the_loss_phase_not_the_step():
    none = step("llama-2-7b", convention="pure-bf16")
    full = step("llama-2-7b", convention="pure-bf16", recompute="full")
    assert full.phases["loss backward"] < none.phases["loss backward"]
    assert full.phases["optimizer step"] == none.phases["optimizer step"] == full.total


def test_largest_tensor():
    assert S.largest_tensor_elements("llama-2-7b") == 32000 * 4096
    m = vl.get_model("qwen3-30b-a3b")
    assert S.largest_tensor_elements(m) == m.n_experts * 2 * m.ffn * m.hidden or \
        S.largest_tensor_elements(m) >= m.vocab * m.hidden


def test_autocast_keeps_fp32_states_and_bf16_weight_casts():
    m = vl.get_model("llama-2-7b")
    pure = step(m, convention="pure-bf16", optimizer_impl="fused", reserve=0)
    amp = step(m, convention="fp32-autocast", optimizer_impl="fused", reserve=0)
    assert amp["weights"] == 4 * m.weight_params and amp.peak_phase == "loss backward"
    # the casts of every linear weight and the LM head are saved for backward: at least 2 B each
    assert amp["activations"] - vl.activation_bytes(m, 2048, scope="end-of-forward") > 2 * S.autocast_cast_elements(m)
    assert S.autocast_cast_elements(m) == m.weight_params - m.vocab * m.hidden - m.param_groups()["norm"]
    assert amp.total > pure.total


def test_lora_adapters_in_their_dtype():
    m = vl.get_model("llama-2-7b")
    fp32 = step(m, method="lora", reserve=0)
    bf16 = step(m, method="lora", lora_dtype="bf16", reserve=0)
    n = vl.lora_params(m, 16)
    assert fp32["LoRA adapters"] == 4 * n and bf16["LoRA adapters"] == 2 * n
    assert "master weights (fp32)" not in fp32 and fp32["optimizer states"] == 8 * n     # fp32 adapters need none
    assert fp32["activations"] > bf16["activations"]           # peft's fp32 copies of every adapter's input
    q = step(m, method="qlora", reserve=0)
    assert q["base weights (nf4-dq)"] < fp32["base weights (bf16)"] and "QLoRA" in q.notes[0]


@pytest.mark.parametrize("kw,field", [
    ({"convention": "fp32-autocast", "recompute": "full"}, "recompute"), ({"lora_dtype": "fp16"}, "lora_dtype"),
    ({"optimizer_impl": "foreachh"}, "optimizer_impl"), ({"optimizer": "adafactor", "optimizer_impl": "foreach"},
                                                         "optimizer_impl"),
    ({"optimizer": "paged-adamw", "optimizer_impl": "fused"}, "optimizer_impl"), ({"peak": "max"}, "peak"),
({"convention": "fp32-autocast", "method": "lora"},
                                                               "convention")])
def test_what_is_not_modelled_refuses_in_one_line(kw, field):
    with pytest.raises(VramlibError) as e:
        step("llama-2-7b", **kw)
    assert field in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("model,kw,why", [
    ("llama-2-7b", {"method": "lora", "lora_targets": "qv"}, "every linear adapted"),
    ("llama-2-7b", {"method": "lora", "recompute": "selective"}, "not selective"),
    ("llama-2-7b", {"optimizer": "paged-adamw-8bit"}, "paged-adamw-8bit's step is not measured"),
    ("llama-2-7b", {"activation_style": "megatron"}, "megatron accounting"),
    ("phi-3-mini", {"method": "lora"}, "dense"), ("qwen3-8b", {"method": "lora"}, "dense")])
def test_steps_without_phases_are_a_named_sum_of_parts(model, kw, why):
    bd = step(model, **kw)
    assert bd.peak_phase is None and bd.title.endswith("(sum of parts)")
    assert bd == vl.training_memory(model, **kw)            # the default: the sum of parts
    assert any(n.startswith("peak: sum of parts") and why in n and "\n" not in n for n in bd.notes), bd.notes


@pytest.mark.parametrize("model", ["mixtral-8x7b", "phi-3-mini", "qwen3-8b"])
def test_unmeasured_shapes_refuse_autocast(model):
    with pytest.raises(VramlibError) as e:
        step(model, convention="fp32-autocast")
    assert "measured for dense" in str(e.value) and model in str(e.value) and "\n" not in str(e.value)


def test_the_sum_of_parts_is_what_it_always_was():
    """peak="sum" keeps the source document's arithmetic: states + activations (model scope) + reserve."""
    m = vl.get_model("llama-2-7b")
    bd = vl.training_memory(m, lora_dtype="bf16", method="lora")
    states = bd.total - bd["activations"] - bd["reserve (CUDA context, framework)"]
    assert bd["activations"] == vl.activation_bytes(m, 2048, scope="model")
    assert states == bd["base weights (bf16)"] + 16 * vl.lora_params(m, 16)


def test_pure_bf16_states_follow_the_parameters():
    m = vl.get_model("llama-2-7b")
    bd = step(m, convention="pure-bf16")
    assert bd["weights"] == bd["gradients"] == 2 * m.weight_params
    assert bd["optimizer states"] == 4 * m.weight_params and "master weights (fp32)" not in bd
    assert step(m, convention="pure-bf16", optimizer="sgd")["optimizer states"] == 2 * m.weight_params
    assert step(m, convention="pure-bf16", optimizer="adamw-8bit")["optimizer states"] == \
        vl.training_memory(m, optimizer="adamw-8bit")["optimizer states"]         # bitsandbytes keeps its own
    assert step(m, convention="pure-bf16", precision="fp32")["optimizer states"] == 8 * m.weight_params
    with pytest.raises(VramlibError, match="state_bytes"):
        vl.optimizer_state_bytes(m, state_bytes=3)


def test_plans_price_pure_bf16_as_one_gpu_does():
    m = vl.get_model("llama-2-7b")
    one = step(m, convention="pure-bf16")
    plan = vl.plan_memory(m, convention="pure-bf16", buckets="none").peak
    assert plan["optimizer states"] == one["optimizer states"]


def test_the_prefill_bounds_every_decode_step():
    decodes = [r for r in ROWS if r["kind"] == "decode" and "peak_bytes" in r]
    assert len(decodes) >= 3
    for r in decodes:
        assert r["where"]["phase"] == "decode" and r["phase_peaks"]["decode"] < r["phase_peaks"]["prefill"]
        assert r["peak_bytes"] <= vl.inference_memory(r["model"], "bf16", "bf16", r["seq"], 1, "sdpa", 0).total


def test_bitsandbytes_8bit_state_measured_on_fake_cuda():
    row = V.bnb8_state_row()
    assert abs(row.error) < 1e-5           # the documented layout with the 4,096-element rule (small_state_params)
