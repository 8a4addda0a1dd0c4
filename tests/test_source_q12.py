"""Question 12 (designing TP / PP / DP for a given memory): every number QUESTIONS.md lists for it, reproduced, and
the chapter's audits (the 8 x 80 GB start, the per-stage split, 16 and 18 bytes per parameter, the rule of thumb)."""
import pytest
import sympy as sp

import vramlib as vl
from vramlib import parallel as PL
from vramlib import planning as Q
from vramlib import training_feasibility as TF
from costs import count_calls, counting

GB = 10**9
A100 = vl.get_gpu("a100-80gb")
M = vl.get_model("source-175b")
N = 175 * 10**9
PLAN = vl.ParallelPlan(tp=8, pp=4, n_micro=8, sequence_parallel=True)


def gb1(x: int) -> float:
    return round(x / GB, 1)


def test_175b_model_states_2100_gb_and_65_6_per_gpu():
    assert M.nominal_params == N and M.n_params == 174_604_259_328          # GPT-3's shape, stored at 175e9
    assert vl.zero_model_states(N, convention="source-12").total == 2100 * GB                 # 12 x 175B
    per_gpu = vl.zero_model_states(N, convention="source-12", tp=8, pp=4).total
    assert per_gpu == 65_625_000_000 and round(per_gpu / GB, 1) == 65.6                       # (12 x 175B) / 32


def test_per_stage_states_and_the_fullest_gpu():
    states = [vl.zero_model_states(int(psi), convention="source-12").total for psi, _ in PL.stage_params(M, 8, 4)]
    assert [round(x / GB, 2) for x in states] == [66.65, 65.42, 65.42, 66.35]                  # embedding / head
    peaks = {rc: vl.plan_memory(M, PLAN.with_(recompute=rc), 2048, convention="source-12",
                                activation_style="megatron") for rc in A_LEVELS}
    assert {rc: gb1(pm.total) for rc, pm in peaks.items()} == {"none": 101.6, "selective": 77.4, "full": 72.0}
    assert not peaks["none"].fits(A100)                                                      # "may just fit": no
    assert peaks["selective"].fits(A100) and not peaks["selective"].fits(A100, 0.1)
    assert peaks["full"].fits(A100, 0.1)


A_LEVELS = ("none", "selective", "full")


def test_8_gpus_of_80_gb_cannot_train_175b():
    z3 = vl.zero_model_states(N, dp=8, stage=3, convention="source-12")
    assert z3.total == 262_500_000_000 and round(TF.size_ratio(z3.total, A100.memory_bytes), 1) == 3.1
    for conv in ("source-12", "mixed-fp32-master"):
        r = Q.search_plans(M, A100, 8, 2048, 64, convention=conv, headroom=0.0)
        assert r.n_candidates == 480 and r.n_fitting == 0 and r.best is None
    largest = vl.largest_trainable_model(A100, 8, 2048, zero=3, convention="source-12", recompute="full")
    assert round(largest.n_params / 1e9, 2) == 52.33 and largest.memory.fits(A100)
    off = vl.plan_memory(M, seq=2048, dp=8, zero=3, offload_optimizer="cpu", offload_params="cpu", recompute="full",
                         convention="source-12", activation_style="megatron")
    assert gb1(off.total) == 7.0 and off.host_bytes_per_node(8) == 2100 * GB


def test_search_on_32_gpus_finds_the_sources_layout(monkeypatch):
    Q.search_plans(M, A100, 32, 2048, 64, convention="source-12")                 # warm-up (lambdify)
    exact = count_calls(monkeypatch, Q, "plan_memory")
    with counting() as cost:                       # (its time, < 1 s, is tools/bench_plan.py's)
        res = Q.search_plans(M, A100, 32, 2048, 64, convention="source-12", top=12)
    assert (res.n_candidates, res.n_fitting) == (816, 32)
    assert cost.compiles == 0 and len(exact) == len(res.plans) == 12, cost  # exact memory for the 12 shown only
    best = res.best
    assert best.plan.label() == "TP8 PP4 DP1 ZeRO-0 SP mb1x64 full recompute"
    assert gb1(best.peak_bytes) == 72.0 and round(best.tokens_per_s) == 2518 and round(best.bubble, 3) == 0.045
    assert best.bubble == pytest.approx(3 / 67)                                               # (p - 1)/(m + p - 1)


def test_16_and_18_bytes_per_parameter():
    assert vl.zero_model_states(N, convention="mixed-fp32-master", tp=8, pp=4).total == 87_500_000_000
    assert vl.zero_model_states(N, convention="deepspeed", tp=8, pp=4).total == 98_437_500_000
    assert 87_500_000_000 > A100.memory_bytes                                                  # TP 8 x PP 4 cannot fit
    assert Q.search_plans(M, A100, 32, 2048, 64, convention="mixed-fp32-master").n_fitting == 0
    kw = dict(zero=1, tp=None, pp=None, recompute="full", sequence_parallel=True, n_micro=8, headroom=0.1)
    got = {c: vl.min_gpus_for_training(M, A100, 2048, convention=c, **kw)
           for c in ("source-12", "mixed-fp32-master", "deepspeed")}
    assert vl.min_gpus_for_training(M, A100, 2048, convention="pure-bf16", **kw).n_gpus < got["source-12"].n_gpus
    assert {c: r.n_gpus for c, r in got.items()} == {"source-12": 32, "mixed-fp32-master": 44, "deepspeed": 48}
    assert {c: (r.memory.plan.tp, r.memory.plan.pp) for c, r in got.items()} == \
        {"source-12": (8, 4), "mixed-fp32-master": (4, 11), "deepspeed": (8, 6)}


def test_rule_minimise_tp_pp_maximise_dp():
    big = Q.search_plans(M, A100, 64, 2048, 64, convention="source-12", top=1)
    rule = Q.search_plans(M, A100, 64, 2048, 64, convention="source-12", tp=[1], pp=[1], top=1)
    assert big.best.plan.label() == "TP8 PP8 DP1 ZeRO-0 SP mb1x64"
    assert rule.best.plan.label() == "TP1 PP1 DP64 ZeRO-3 mb1x1 full recompute" and gb1(rule.best.peak_bytes) == 39.8
    assert round(TF.size_ratio(rule.best.tokens_per_s, big.best.tokens_per_s), 3) == 0.316
    assert rule.best.dp_comm_s > big.best.step_s                                 # even fully overlapped, slower


def test_tp_and_pp_scaling_claims():
    kw = dict(style="megatron", scope="layer")
    one = vl.activation_bytes(M, 2048, **kw)
    assert round(TF.size_ratio(one, vl.activation_bytes(M, 2048, tp=8, **kw)), 2) == 4.96    # not linear without SP
    assert TF.size_ratio(one, vl.activation_bytes(M, 2048, tp=8, sequence_parallel=True, **kw)) == 8.0
    acts = [vl.plan_memory(M, PLAN.with_(pp=p, recompute="selective", n_micro=8), 2048, convention="source-12",
                           activation_style="megatron").stages[0]["activations"] for p in (1, 2, 4, 8)]
    assert [round(a / GB, 2) for a in acts] == [10.33, 10.27, 10.28, 10.29]   # 1F1B: all L layers on stage 0


def test_real_model_search():
    r = Q.search_plans("llama-2-70b", A100, 32, 4096, 64, convention="mixed-fp32-master", top=1)
    assert r.best.plan.label() == "TP8 PP1 DP4 ZeRO-2 SP mb1x16 selective recompute" and r.n_fitting == 192


def test_throughput_model_expressions():
    T_pipe, T_tp, T_dp, T_pp = sp.symbols("T_pipe T_TP T_DP T_PP")
    assert Q.T_STEP.subs({Q.T_PIPELINE: T_pipe, Q.T_TP: T_tp, Q.T_DP: T_dp, Q.T_PP: T_pp}) == T_pipe + T_tp + T_dp + T_pp
    assert sp.simplify(Q.T_PIPELINE * (1 - Q.BUBBLE) - Q.T_COMPUTE) == 0
    assert vl.ParallelPlan(pp=8, n_micro=32).bubble_fraction * 100 == pytest.approx(17.948717948)   # exercise ch12-2


def test_plan_panel_has_precision():
    from vramlib.present.widgets import parallel as W

    ctl = W.plan_controls(M, tp=8, pp=4, dp=1, zero=0)
    assert {"n_heads", "n_kv_heads", "precision", "tp", "pp", "dp", "zero", "recompute"} <= set(ctl)
    stages, cap, verdict = W.plan_stages_compute(M, "a100-80gb", tp=8, pp=4, dp=1, zero=0, recompute="full", n_micro=8,
                                                 convention="source-12", sequence_parallel=True)
    assert gb1(max(bd.total for bd in stages)) == 72.0 and verdict.startswith("Fits")
    fp32 = W.plan_stages_compute(M, "a100-80gb", tp=8, pp=4, dp=1, zero=0, recompute="full", n_micro=8,
                                 convention="source-12", sequence_parallel=True, precision="fp32")
    assert fp32[2].startswith("Does not fit")                                  # 16 bytes per parameter in fp32
