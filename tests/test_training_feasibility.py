"""vramlib.solve.training_feasibility: the longest training sequence, ratios, the source's activation rule."""
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings, strategies as st

import vramlib as vl
from vramlib import training_feasibility as TF

MODELS = ["llama-2-7b", "mistral-7b", "qwen2.5-7b", "llama-3.2-1b", "source-13b", "llama-33b", "source-33b"]


def fits(model, mem, seq, **kw):
    return vl.training_memory(model, seq=seq, **kw).total <= vl.parse_memory(mem)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), gib=st.integers(8, 200), method=st.sampled_from(["full", "lora", "qlora"]),
       recompute=st.sampled_from(["none", "selective", "full"]), attention=st.sampled_from(["eager", "sdpa"]),
       batch=st.integers(1, 4), convention=st.sampled_from(["source-12", "mixed-fp32-master", "deepspeed"]),
       style=st.sampled_from(["hf", "megatron"]), optimizer=st.sampled_from(["adamw", "adamw-8bit", "adafactor"]))
def test_answer_fits_and_answer_plus_one_does_not(model, gib, method, recompute, attention, batch, convention, style,
                                                  optimizer):
    kw = dict(method=method, recompute=recompute, attention=attention, micro_batch=batch, convention=convention,
              activation_style=style, optimizer=optimizer)
    mem = f"{gib}GiB"
    n = TF.max_seq_for_training(model, mem, **kw)
    if n == 0:
        assert not fits(model, mem, 1, **kw)
        return
    assert fits(model, mem, n, **kw)
    assert not fits(model, mem, n + 1, **kw)


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(MODELS), a=st.integers(8, 200), b=st.integers(8, 200),
       recompute=st.sampled_from(["none", "full"]))
def test_more_memory_never_shortens_the_sequence(model, a, b, recompute):
    lo, hi = sorted([a, b])
    kw = dict(method="qlora", recompute=recompute)
    assert TF.max_seq_for_training(model, f"{lo}GiB", **kw) <= TF.max_seq_for_training(model, f"{hi}GiB", **kw)


def test_gpu_names_and_zero_when_states_do_not_fit():
    assert TF.max_seq_for_training("llama-33b", "rtx-a6000", method="qlora", recompute="full", reserve=0) == \
        TF.max_seq_for_training("llama-33b", vl.get_gpu("rtx-a6000").memory_bytes, method="qlora", recompute="full",
                                reserve=0)
    assert TF.max_seq_for_training("llama-2-7b", "80GB", method="full") == 0      # 16 B x 6.7B = 108 GB of states
    with pytest.raises(vl.InvalidValueError, match="seq"):
        TF.max_seq_for_training("llama-2-7b", "80GB", seq=2048)
    with pytest.raises(vl.UnknownNameError, match="optimizer"):
        TF.max_seq_for_training("llama-2-7b", "80GB", optimizer="adam9")


def test_source_activation_rule():
    assert TF.source_activation_bytes("source-7b", 2048) == 2048 * 4096 * 32 * 40 == 10_737_418_240
    assert TF.source_activation_bytes("source-1b", 2048) == 2048 * 2048 * 16 * 40 == 2_684_354_560
    assert TF.source_activation_bytes("source-13b", 4096, coefficient=34) == 4096 * 5120 * 40 * 34
    assert TF.source_activation_bytes("source-7b", 1024, batch=2, coefficient=Fraction(69, 2)) == 1024 * 2 * 4096 * 32 * 69 // 2
    with pytest.raises(vl.InvalidValueError, match="coefficient"):
        TF.source_activation_bytes("source-7b", 2048, coefficient=-1)
    bd = TF.source_training_memory("source-7b", 2048, convention="source-12", reserve=0)
    ref = vl.training_memory("source-7b", seq=2048, convention="source-12", reserve=0)
    assert bd["activations"] == 10_737_418_240
    assert {k: v for k, v in bd.items() if k != "activations"} == {k: v for k, v in ref.items() if k != "activations"}


def test_bytes_per_param_and_states():
    assert [TF.bytes_per_param(c) for c in ("source-12", "mixed-fp32-master", "deepspeed")] == [12, 16, 18]
    assert TF.bytes_per_param("source-12", "sgd") == 8
    assert TF.bytes_per_param("mixed-fp32-master", "adamw", "fp32") == 16     # 4 + 4 + 8, no separate master
    assert TF.bytes_per_param("source-12", "adamw-8bit") == 4 + 2 * (1 + Fraction(4, 256))
    assert TF.model_states_bytes(33_000_000) == 396_000_000                     # the source's "0.4 GB"
    assert TF.model_states_bytes(7 * 10**9, "mixed-fp32-master") == 112 * 10**9
    with pytest.raises(vl.UnknownNameError, match="convention"):
        TF.bytes_per_param("source-13")
    with pytest.raises(vl.InvalidValueError, match="precision"):
        TF.bytes_per_param(precision="int8")


def test_ratios():
    assert TF.size_ratio(94, 13.5) == pytest.approx(6.963, abs=1e-3)
    bd = vl.Breakdown({"a": 3, "b": 1})
    assert TF.size_ratio(bd, 2) == 2.0
    with pytest.raises(vl.InvalidValueError, match="denominator"):
        TF.size_ratio(1, 0)
    with pytest.raises(vl.InvalidValueError, match="numerator"):
        TF.size_ratio("1", 2)
    # the source's rule, source-12, no reserve: (84 + 10.74) / (12 + 2.68)
    r = TF.scaling_ratio("source-7b", "source-1b", 2048, "source", convention="source-12", reserve=0)
    assert r == pytest.approx((84 + 10.73741824) / (12 + 2.68435456))
    assert TF.linearity("source-7b", "source-1b", 2048, "source", convention="source-12", reserve=0) == pytest.approx(r / 7)
    with pytest.raises(vl.UnknownNameError, match="activation_style"):
        TF.scaling_ratio("source-7b", "source-1b", 2048, "megatronn")


@settings(max_examples=12, deadline=None)
@given(style=st.sampled_from(["hf", "megatron", "source"]), recompute=st.sampled_from(["none", "full"]),
       tol=st.sampled_from([Fraction(1, 20), Fraction(1, 10), Fraction(1, 5)]),
       pair=st.sampled_from([("source-7b", "source-1b"), ("llama-2-7b", "llama-3.2-1b")]))
def test_linear_until_is_the_last_sequence_within_tolerance(style, recompute, tol, pair):
    kw = dict(activation_style=style, recompute=recompute, convention="source-12", reserve=0)
    n = TF.linear_until(*pair, tolerance=tol, **kw)
    assume(0 < n < 2**24)
    assert TF.linearity(*pair, n, **kw) >= 1 - tol
    assert TF.linearity(*pair, n + 1, **kw) < 1 - tol


@settings(max_examples=300, deadline=None)
@given(a=st.integers(0, 10**6), b=st.integers(0, 10**3), c=st.integers(0, 50), kink=st.integers(1, 10**5),
       cap_extra=st.integers(0, 10**9), limit=st.one_of(st.just(2**40), st.integers(1, 10**6)))
def test_secant_search_equals_bisection_on_any_non_decreasing_total(a, b, c, kink, cap_extra, limit):
    def total(n):  # affine, quadratic, with a kink: what activations look like under each accounting
        return a + b * n + c * n * n + 3 * b * max(0, n - kink)

    cap = total(1) + cap_extra
    lo, hi = 1, limit
    if total(limit) <= cap:
        expected = limit
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if total(mid) <= cap else (lo, mid)
        expected = lo
    assert TF._largest_by_secant(total, cap, limit) == expected
