"""Every number QUESTIONS.md lists for question 4 (4 x V100 32 GB: training a 7B model), and the audited values of
chapter 4."""
import pytest

import vramlib as vl
from vramlib import recommend as R
from vramlib import training_feasibility as TF

GB = 10**9
V100 = vl.get_gpu("v100-32gb")
S7 = vl.get_model("source-7b")
ZERO3 = dict(dp=4, zero=3, precision="fp16")


def test_shape():
    assert (S7.hidden, S7.n_layers, S7.weight_params) == (4096, 32, 7 * 10**9)


def test_weights_gradients_and_adam():
    bd = vl.training_memory(S7, precision="fp16", convention="source-12", reserve=0)
    assert bd["weights"] == 14 * GB and bd["gradients"] == 14 * GB              # "14 GB + 14 GB"
    assert bd["optimizer states"] == 56 * GB                                    # not the source's "28 GB"
    assert vl.optimizer_state_bytes(S7, "adamw") == 8 * S7.weight_params
    # the source's 28 GB is 4 bytes per parameter; its "three items 56 GB" is Adam alone
    assert TF.size_ratio(vl.parse_memory("28GB"), S7.weight_params) == 4.0
    assert 14 * GB + 14 * GB + 28 * GB == 56 * GB == bd["optimizer states"]
    assert TF.model_states_bytes(S7.weight_params, "source-12") == 84 * GB       # "12N = 84 GB"


def test_zero3_21_gb_per_gpu():
    assert vl.zero_model_states(S7.weight_params, dp=4, stage=3, convention="source-12").total == 21 * GB
    assert vl.zero_model_states(S7.weight_params, dp=4, stage=3, convention="mixed-fp32-master").total == 28 * GB
    assert vl.zero_model_states(S7.weight_params, dp=4, stage=3, convention="deepspeed").total == 31_500_000_000


def test_source_activations_and_totals():
    a2k, a1k, a4k = (TF.source_activation_bytes(S7, s) for s in (2048, 1024, 4096))
    assert a2k == 2048 * 4096 * 32 * 40 == 10_737_418_240 and round(a2k / GB, 1) == 10.7     # "10.7 GB"
    assert round((21 * GB + a2k) / GB, 1) == 31.7                                             # "31.7 GB"
    assert a1k == 5_368_709_120 and int(a1k / GB * 10) / 10 == 5.3                            # "5.3 GB" (truncated)
    assert round(a1k / GB, 2) == 5.37 and round((21 * GB + a1k) / GB, 2) == 26.37             # "26.3 GB"
    assert round(a4k / GB, 1) == 21.5


def test_qlora_and_lora_model_memory():
    assert vl.weights_bytes(S7, "int4") == 3_500_000_000                      # "QLoRA base 3.5 GB"
    assert round(vl.weights_bytes(S7, "nf4-dq") / GB, 2) == 3.61
    bd = vl.training_memory(S7, method="lora", seq=4096, precision="fp16", recompute="full")
    states = sum(v for k, v in bd.items() if k not in ("activations", "reserve (CUDA context, framework)"))
    assert round(states / GB, 2) == 14.64 and states < 16 * GB                # "14 GB + 1-2 GB = 16 GB"
    assert vl.lora_params(S7, 16) == 39_976_960


def test_audit_lora_at_4096_reuses_the_2048_activations():
    src = 16 * GB + TF.source_activation_bytes(S7, 2048) + 1 * GB
    assert round(src / GB, 1) == 27.7                                         # the source's total
    rule = 16 * GB + TF.source_activation_bytes(S7, 4096) + 1 * GB
    assert round(rule / GB, 1) == 38.5 and rule > V100.memory_bytes           # its own rule at 4096
    kw = dict(method="lora", seq=4096, precision="fp16")
    assert round(vl.training_memory(S7, **kw).total / GB, 1) == 40.2          # measured, SDPA, no recompute
    assert round(vl.training_memory(S7, attention="eager", **kw).total / GB, 1) == 143.3
    ckpt = vl.training_memory(S7, recompute="full", **kw)
    assert round(ckpt.total / GB, 1) == 17.0 and ckpt.fits(V100)
    assert vl.max_seq_for_training(S7, V100, method="lora", precision="fp16", recompute="full") == 42790


def test_audit_v100_has_no_bf16_and_no_flash_attention_2():
    assert V100.compute_capability == "7.0"
    assert not V100.supports_bf16 and not V100.supports_flash_attention_2
    assert V100.bf16_tflops is None
    # fp16 with loss scaling stores the same bytes as bf16
    fp16 = vl.plan_memory(S7, seq=2048, **ZERO3)
    bf16 = vl.plan_memory(S7, seq=2048, **(ZERO3 | dict(precision="bf16")))
    assert fp16.total == bf16.total
    # eager attention (no FlashAttention-2) against SDPA's memory-efficient kernel
    eager = vl.plan_memory(S7, seq=2048, attention="eager", **ZERO3)
    sdpa = vl.plan_memory(S7, seq=2048, attention="sdpa", **ZERO3)
    assert round(eager.peak["activations"] / GB, 1) == 38.3 and round(sdpa.peak["activations"] / GB, 1) == 12.6


def test_audit_a_32gb_v100_reports_32768_mib():
    assert V100.memory_bytes == 32768 * 2**20 and round(V100.memory_bytes / GB, 2) == 34.36
    margin = V100.memory_bytes - (21 * GB + TF.source_activation_bytes(S7, 2048))
    assert round(margin / GB, 1) == 2.6


def test_the_real_step_on_4_v100():
    got = {(att, rc): vl.plan_memory(S7, seq=2048, attention=att, recompute=rc, **ZERO3)
           for att in ("eager", "sdpa") for rc in ("none", "full")}
    assert round(got[("eager", "none")].total / GB, 1) == 67.9 and not got[("eager", "none")].fits(V100)
    assert round(got[("sdpa", "none")].total / GB, 1) == 42.2 and not got[("sdpa", "none")].fits(V100)
    assert round(got[("eager", "full")].total / GB, 1) == 31.3 and got[("eager", "full")].fits(V100)
    assert round(got[("sdpa", "full")].total / GB, 1) == 30.5
    # the longest sequence of the ZeRO-3 plan
    kw = dict(dp=4, zero=3, precision="fp16")
    assert R.max_seq_for_plan(S7, V100, attention="eager", convention="source-12", **kw) == 972   # "<= 1024"
    assert R.max_seq_for_plan(S7, V100, attention="eager", recompute="full", **kw) == 3945
    assert R.max_seq_for_plan(S7, V100, attention="sdpa", recompute="full", **kw) == 10596
    assert R.max_seq_for_plan(S7, V100, attention="eager", recompute="full", optimizer="adamw-8bit", **kw) == 7806


def test_planner_on_v100():
    kw = dict(zero=3, precision="fp16", attention="eager")
    assert vl.min_gpus_for_training(S7, V100, 2048, recompute="full", **kw).n_gpus == 4
    assert vl.min_gpus_for_training(S7, V100, 2048, recompute="full", convention="source-12", **kw).n_gpus == 3
    assert vl.min_gpus_for_training(S7, V100, 2048, recompute="none", **kw).n_gpus == 0
    res = vl.search_plans(S7, V100, 4, 2048, 64, precision="fp16")
    assert res.n_candidates == 288 and res.n_fitting == 24
    assert res.best.plan.label() == "TP4 PP1 DP1 ZeRO-0 SP mb1x64 selective recompute"


def test_optimisation_ladder():
    base = dict(seq=2048, attention="sdpa", recompute="full", **ZERO3)
    eight = vl.plan_memory(S7, optimizer="adamw-8bit", **base)
    off = vl.plan_memory(S7, offload_optimizer="cpu", **base)
    assert round(eight.total / GB, 2) == 20.07 and round(off.total / GB, 2) == 6.02
    assert off.host[0].total == 14 * S7.weight_params // 4        # master + Adam + 16-bit gradient shards
    qlora = vl.training_memory(S7, method="qlora", seq=4096, precision="fp16", recompute="full")
    assert round(qlora.total / GB, 1) == 6.6


@pytest.mark.parametrize("key,value", [("ch04-1", 3945), ("ch04-3", 4789)])
def test_exercises(key, value):
    assert vl.exercises.answer(key) == value
