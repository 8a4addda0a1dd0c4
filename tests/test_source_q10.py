"""Every number QUESTIONS.md lists for question 10 (is 1B vs 7B memory linear?), and the audits."""
from fractions import Fraction

import pytest

import vramlib as vl
from vramlib import training_feasibility as TF

S1, S7 = vl.get_model("source-1b"), vl.get_model("source-7b")
KW = dict(method="full", convention="source-12", reserve=0, precision="fp16")


def test_shapes():
    assert (S1.hidden, S1.n_layers, S1.weight_params) == (2048, 16, 10**9)
    assert (S7.hidden, S7.n_layers, S7.weight_params) == (4096, 32, 7 * 10**9)


def test_states_are_linear_12_and_84_gb():
    assert TF.model_states_bytes(S1.weight_params, "source-12") == 12 * 10**9
    assert TF.model_states_bytes(S7.weight_params, "source-12") == 84 * 10**9
    for m in (S1, S7):
        bd = vl.training_memory(m, seq=2048, **KW)
        assert bd["weights"] + bd["gradients"] + bd["optimizer states"] == 12 * m.weight_params


def test_source_totals_and_ratio():
    assert vl.parse_memory("12GB") + vl.parse_memory("1.5GB") == 13_500_000_000
    assert vl.parse_memory("84GB") + vl.parse_memory("10GB") == 94 * 10**9
    assert TF.size_ratio(94 * 10**9, 13_500_000_000) == pytest.approx(6.96, abs=0.005)


def test_source_rule_gives_10_7_for_7b_and_2_7_for_1b():
    assert TF.source_activation_bytes(S7, 2048) == 2048 * 4096 * 32 * 40 == 10_737_418_240      # "10.7 GB"
    assert TF.source_activation_bytes(S1, 2048) == 2048 * 2048 * 16 * 40 == 2_684_354_560       # not 1.5 GB
    assert round(vl.gb(TF.source_activation_bytes(S1, 2048)), 1) == 2.7
    assert TF.size_ratio(TF.source_activation_bytes(S7, 2048), TF.source_activation_bytes(S1, 2048)) == 4.0
    # the ratio with the source's own rule
    r = TF.scaling_ratio(S7, S1, 2048, "source", **KW)
    assert r == pytest.approx(94_737_418_240 / 14_684_354_560) and round(r, 2) == 6.45
    # 1.5 GB is the 7B's 10 GB scaled linearly by the parameter ratio
    assert vl.gb(TF.size_ratio(10 * 10**9, 7)) == pytest.approx(1.43, abs=0.01)


def test_which_accounting_gives_10_7():
    # only c = 40 gives 10.7 GB; Megatron selective is 34 s b h per layer (+ embeddings, final norm, logits)
    meg_sel = vl.activation_bytes(S7, 2048, style="megatron", recompute="selective", scope="model")
    assert meg_sel == 34 * 2048 * 4096 * 32 + 5 * 2048 * 4096 + 4 * 2048 * 32000
    assert TF.source_activation_bytes(S7, 2048, coefficient=34) == 34 * 2048 * 4096 * 32
    hf = vl.activation_bytes(S7, 2048, style="hf", scope="model")
    assert round(vl.gb(hf), 2) == 12.55 and round(vl.gb(meg_sel), 2) == 9.43


def test_ratio_at_2048_by_accounting():
    got = {style: round(TF.scaling_ratio(S7, S1, 2048, style, **KW), 3) for style in ("source", "hf", "megatron")}
    assert got == {"source": 6.452, "hf": 6.289, "megatron": 5.764}
    assert round(TF.scaling_ratio(S7, S1, 2048, "hf", recompute="full", **KW), 3) == 6.832


def test_where_linear_stops():
    tol = Fraction(1, 10)
    assert TF.linear_until(S7, S1, tol, "source", **KW) == 2786
    assert TF.linear_until(S7, S1, tol, "hf", **KW) == 2007
    assert TF.linear_until(S7, S1, tol, "hf", recompute="full", **KW) == 9616
    assert TF.linear_until(S7, S1, tol, "megatron", **KW) == 1221
    # the ratio falls monotonically toward the activation ratio 4 with the source's rule
    seq = [2**k for k in range(7, 18)]
    r = [TF.scaling_ratio(S7, S1, n, "source", **KW) for n in seq]
    assert all(a > b for a, b in zip(r, r[1:])) and 4 < r[-1] < 4.3


def test_real_models():
    rs, rb = vl.get_model("llama-3.2-1b"), vl.get_model("llama-2-7b")
    assert round(TF.size_ratio(rb.weight_params, rs.weight_params), 2) == 5.45
    assert round(TF.scaling_ratio(rb, rs, 2048, **KW), 2) == 4.80
    assert TF.linear_until(rb, rs, Fraction(1, 10), **KW) == 1616
