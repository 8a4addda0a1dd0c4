"""Every number QUESTIONS.md lists for question 3 (8 x A100 80 GB: the largest model for full fine-tuning), and
the audited values of chapter 3."""
import pytest

import vramlib as vl
from vramlib import parallel as P
from vramlib import planning as Q
from vramlib import rules_of_thumb as RT
from vramlib import training_feasibility as TF

GB = 10**9
A100 = vl.get_gpu("a100-80gb")
S13, S30 = vl.get_model("source-13b"), vl.get_model("source-30b")
ZERO3 = dict(dp=8, zero=3)


def z3(n, convention="source-12"):
    return vl.zero_model_states(n, dp=8, stage=3, convention=convention).total


def test_shapes():
    assert (S13.hidden, S13.n_layers, S13.weight_params) == (5120, 40, 13 * 10**9)
    assert (S30.hidden, S30.n_layers, S30.weight_params) == (6656, 60, 30 * 10**9)


def test_model_states_12n_and_zero3_1_5n():
    conv, adam = vl.CONVENTIONS["source-12"], vl.OPTIMIZERS["adamw"]
    assert (conv.weight, conv.grad, conv.master, adam.bytes_per_param) == (2, 2, 0, 8)       # 2 + 2 + 8
    assert TF.bytes_per_param("source-12") == 12
    assert vl.zero_model_states(13 * 10**9, convention="source-12").total == 12 * 13 * GB
    assert z3(13 * 10**9) == 19_500_000_000                          # 1.5N = 19.5 GB
    assert z3(30 * 10**9) == 45 * GB                                  # 1.5N = 45 GB
    assert z3(40 * 10**9) == 60 * GB                                  # 1.5N = 60 GB
    assert z3(10**9) == 1_500_000_000


def test_activation_rule_and_the_source_figures():
    assert TF.source_activation_bytes(S13, 4096) == 4096 * 5120 * 40 * 40 == 33_554_432_000     # "33.5 GB"
    assert TF.source_activation_bytes(S13, 2048) == 16_777_216_000                            # "16.8 GB"
    assert TF.source_activation_bytes(S30, 2048) == 2048 * 6656 * 60 * 40 == 32_715_571_200     # "32.7 GB"
    assert round(TF.source_activation_bytes(S13, 4096) / GB, 1) == 33.6       # 33.55: the source truncates to 33.5
    assert round(TF.source_activation_bytes(S13, 2048) / GB, 1) == 16.8
    assert round(TF.source_activation_bytes(S30, 2048) / GB, 1) == 32.7
    # the coefficient range 34..40
    assert TF.source_activation_bytes(S13, 2048, coefficient=34) == 14_260_633_600


def test_source_totals():
    t13 = z3(13 * 10**9) + TF.source_activation_bytes(S13, 2048)
    t30 = z3(30 * 10**9) + TF.source_activation_bytes(S30, 2048)
    t40 = z3(40 * 10**9) + TF.source_activation_bytes(S30, 2048)   # a lower bound: the 30B's activations
    assert round(t13 / GB, 1) == 36.3 and round(t30 / GB, 1) == 77.7
    assert t30 <= 80 * GB < t40                                        # "30B fits, 40B may exceed"
    assert round(t40 / GB, 1) == 92.7 and t40 > A100.memory_bytes


def test_answer_30_to_40b_and_the_solver():
    got = {}
    for conv in ("source-12", "mixed-fp32-master", "deepspeed"):
        for rc in ("none", "full"):
            r = vl.largest_trainable_model(A100, 8, 2048, zero=3, convention=conv, recompute=rc)
            assert r.memory.fits(A100) and not r.next_memory.fits(A100)
            got[(conv, rc)] = round(r.n_params / 1e9, 1)
    assert got == {("source-12", "none"): 31.4, ("source-12", "full"): 52.3, ("mixed-fp32-master", "none"): 25.1,
                   ("mixed-fp32-master", "full"): 39.1, ("deepspeed", "none"): 23.7, ("deepspeed", "full"): 35.1}
    assert 30 <= got[("source-12", "none")] <= 40                     # the source's own accounting agrees
    assert got[("mixed-fp32-master", "none")] < 30                    # the standard one does not
    # at 4,096 tokens without recompute the answer halves
    r = vl.largest_trainable_model(A100, 8, 4096, zero=3, convention="source-12")
    assert round(r.n_params / 1e9, 1) == 19.7


def test_audit_16_and_18_bytes_per_parameter():
    assert TF.bytes_per_param("mixed-fp32-master") == 16 and TF.bytes_per_param("deepspeed") == 18
    assert z3(13 * 10**9, "mixed-fp32-master") == 26 * GB                 # 2N per GPU
    assert z3(30 * 10**9, "mixed-fp32-master") == 60 * GB
    assert z3(30 * 10**9, "deepspeed") == 67_500_000_000                  # 2.25N per GPU
    # the full per-GPU plan of the 30B shape (measured activations, buckets, reserve)
    pm = {(c, rc): vl.plan_memory(S30, seq=2048, convention=c, recompute=rc, **ZERO3)
          for c in ("source-12", "mixed-fp32-master") for rc in ("none", "full")}
    assert round(pm[("source-12", "none")].total / GB, 1) == 84.2
    assert pm[("source-12", "none")].fits(A100) and pm[("source-12", "none")].total > 80 * GB
    assert not pm[("mixed-fp32-master", "none")].fits(A100)
    assert round(pm[("mixed-fp32-master", "full")].total / GB, 1) == 63.9


def test_audit_the_30b_shape_is_llama_33b():
    real = vl.get_model("llama-33b")
    assert (real.hidden, real.n_layers) == (S30.hidden, S30.n_layers) and real.n_params == 32_528_943_616
    assert round(z3(real.n_params) / GB, 1) == 48.8
    total = z3(real.n_params) + TF.source_activation_bytes(S30, 2048)
    assert round(total / GB, 1) == 81.5 and total > 80 * GB


def test_audit_activation_accountings_and_coefficients():
    acts = {k: vl.activation_bytes(S30, 2048, scope="model", **kw) for k, kw in {
        "hf": {}, "eager": dict(attention="eager"), "ckpt": dict(recompute="full"),
        "meg_sel": dict(style="megatron", recompute="selective"),
        "tp_sp": dict(style="megatron", recompute="selective", tp=4, sequence_parallel=True)}.items()}
    assert {k: round(v / GB, 1) for k, v in acts.items()} == {"hf": 37.6, "eager": 116.1, "ckpt": 2.3,
                                                             "meg_sel": 28.1, "tp_sp": 7.0}
    c = {k: round(float(RT.implied_coefficient(S30, 2048, **kw)), 1) for k, kw in {
        "hf": {}, "eager": dict(attention="eager"), "ckpt": dict(recompute="full"),
        "meg_sel": dict(style="megatron", recompute="selective")}.items()}
    assert c == {"hf": 46.0, "eager": 142.0, "ckpt": 2.8, "meg_sel": 34.4}
    # per layer, Megatron's selective count is exactly the 34 of the source's range
    assert RT.implied_coefficient(S30, 2048, style="megatron", recompute="selective", scope="layer") == 34
    # sequence parallelism needs tensor parallelism: 52 heads allow TP 4, not 8
    with pytest.raises(vl.InvalidValueError, match="tp"):
        vl.activation_bytes(S30, 2048, style="megatron", tp=8, sequence_parallel=True)


def test_audit_65b_on_8_a100():
    m65 = vl.get_model("llama-65b")
    assert round(z3(m65.n_params) / GB, 1) == 97.9 and z3(m65.n_params) > A100.memory_bytes
    assert round(z3(m65.n_params, "mixed-fp32-master") / GB, 1) == 130.6
    full = vl.plan_memory(m65, seq=2048, convention="source-12", recompute="full", **ZERO3)
    assert not full.fits(A100)
    # no TP x PP x DP x ZeRO x recompute x micro-batch plan without offload fits
    for conv in ("source-12", "mixed-fp32-master"):
        res = Q.search_plans(m65, A100, 8, 2048, 64, convention=conv, headroom=0.0)
        assert res.n_candidates == 480 and res.n_fitting == 0
    # 8-bit AdamW at 12 B/param fits, at 16 B/param it does not
    assert vl.plan_memory(m65, seq=2048, convention="source-12", recompute="full", optimizer="adamw-8bit",
                          **ZERO3).fits(A100)
    assert not vl.plan_memory(m65, seq=2048, recompute="full", optimizer="adamw-8bit", **ZERO3).fits(A100)
    # ZeRO-Offload: the optimizer states, master copy and gradient shards go to the host
    off = vl.plan_memory(m65, seq=2048, recompute="full", offload_optimizer="cpu", **ZERO3)
    assert off.fits(A100) and round(off.total / GB, 1) == 21.4
    assert off.host[0].total == 14 * m65.n_params // 8 and round(off.host_bytes_per_node(8) / GB) == 914
    off12 = vl.plan_memory(m65, seq=2048, convention="source-12", recompute="full", offload_optimizer="cpu", **ZERO3)
    assert round(off12.host_bytes_per_node(8) / GB) == 653
    # without offload: the fewest A100s
    assert vl.min_gpus_for_training(m65, A100, 2048, zero=3, recompute="full", convention="source-12").n_gpus == 10
    assert vl.min_gpus_for_training(m65, A100, 2048, zero=3, recompute="full").n_gpus == 13


def test_zero3_expression_is_the_sources_arithmetic():
    vals = dict(Psi=30 * 10**9, N_d=8, b_w=2, b_g=2, b_gh=0, b_m=0, b_o=8)
    assert vl.formulas.evaluate(P.ZERO_MODEL_STATES[3], **vals) == 45 * GB           # 12N / 8 = 1.5N
    assert vl.formulas.evaluate(P.ZERO_MODEL_STATES[3], **(vals | dict(b_m=4))) == 60 * GB
