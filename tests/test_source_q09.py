"""Every number QUESTIONS.md lists for question 9 (choosing a GPU configuration for fine-tuning: the memory factors,
the rules of thumb as computed verdicts), the audited values of chapter 9 and the recommender's answers."""
import math
from fractions import Fraction

import pytest

import vramlib as vl
from vramlib import recommend as R
from vramlib import rules_of_thumb as RT
from vramlib import training_feasibility as TF

GB = 10**9
L7 = vl.get_model("llama-2-7b")
S7 = vl.get_model("source-7b")


def test_weights_factor_2_to_4_bytes_and_nf4():
    assert vl.weights_bytes(S7, "fp16") == 2 * S7.weight_params and vl.weights_bytes(S7, "fp32") == 4 * S7.weight_params
    assert vl.weights_bytes(S7, "int4") == S7.weight_params // 2                     # "NF4 about 0.5 byte"
    assert round(TF.size_ratio(vl.weights_bytes(L7, "nf4-dq"), L7.n_params), 3) == 0.574   # real: constants, 16-bit head


def test_optimizer_factor_adam_8_bytes():
    assert vl.optimizer_state_bytes(S7, "adamw") == 8 * S7.weight_params
    assert TF.bytes_per_param("source-12") == 12 and TF.bytes_per_param("mixed-fp32-master") == 16


def test_audit_8bit_adam_is_a_quarter_not_a_half():
    assert vl.OPTIMIZERS["adamw-8bit"].bytes_per_param == Fraction(65, 32) == 2 * (1 + Fraction(4, 256))
    assert vl.exercises.answer("ch09-1") == 2.03125
    a32, a8 = vl.optimizer_state_bytes(L7, "adamw"), vl.optimizer_state_bytes(L7, "adamw-8bit")
    assert round(a32 / GB, 1) == 53.9 and round(a8 / GB, 1) == 13.7
    assert round(TF.size_ratio(a8, a32), 3) == 0.254 and TF.size_ratio(a8, a32) < 0.26     # ~1/4, not 1/2
    assert a8 != a32 // 2
    assert TF.bytes_per_param("mixed-fp32-master", "adamw-8bit") == Fraction(321, 32)    # 10.03 from 16
    assert TF.bytes_per_param("source-12", "adamw-8bit") == Fraction(193, 32)            # 6.03 from 12


def test_gradients_factor_2_bytes():
    assert vl.CONVENTIONS["source-12"].grad == 2 and vl.CONVENTIONS["mixed-fp32-master"].grad == 2
    assert vl.CONVENTIONS["deepspeed"].grad == 4


def test_activation_coefficient_15_to_40():
    assert TF.source_activation_bytes(S7, 2048, coefficient=15) == 2048 * 4096 * 32 * 15
    assert TF.source_activation_bytes(S7, 2048, coefficient=40) == 10_737_418_240
    c = {k: round(float(RT.implied_coefficient(S7, s, **kw)), 1) for k, (s, kw) in {
        "ckpt": (2048, dict(recompute="full")), "sdpa": (2048, {}), "eager": (2048, dict(attention="eager")),
        "eager_8k": (8192, dict(attention="eager")), "meg_sel": (2048, dict(style="megatron", recompute="selective")),
        "meg_none": (2048, dict(style="megatron"))}.items()}
    assert c == {"ckpt": 3.4, "sdpa": 46.8, "eager": 142.7, "eager_8k": 430.7, "meg_sel": 35.1, "meg_none": 115.1}
    inside = {k for k, v in c.items() if 15 <= v <= 40}
    assert inside == {"meg_sel"}


def test_batch_factor_is_linear_in_the_activations():
    acts = [vl.training_memory(L7, method="qlora", recompute="full", micro_batch=b)["activations"] for b in (1, 2, 4)]
    assert acts[1] < 2 * acts[0] + 1 and acts[2] > 3 * acts[0]            # nearly proportional


def test_audit_no_kv_cache_in_training():
    bd = vl.training_memory(L7, method="qlora", recompute="full")
    assert not any("kv" in k.lower() for k in bd)


@pytest.mark.parametrize("model,gpu,none_seq,full_seq", [
    ("llama-2-7b", "rtx-4090", 3385, 46200),      # "7B QLoRA: one 24 GB RTX 3090/4090"
    ("llama-2-7b", "rtx-3090", 3387, 46228),
    ("llama-33b", "l40s", 1547, 25795),           # "33B needs 48 GB"
    ("llama-33b", "rtx-a6000", 1722, 28717),
    ("llama-2-70b", "l40s", 254, 4757),           # "70B needs 48-80 GB"
    ("llama-2-70b", "a100-80gb", 1428, 26757),
])
def test_rules_of_thumb_qlora(model, gpu, none_seq, full_seq):
    assert vl.max_seq_for_training(model, gpu, method="qlora") == none_seq
    assert vl.max_seq_for_training(model, gpu, method="qlora", recompute="full") == full_seq
    assert vl.training_memory(model, method="qlora", seq=2048, recompute="full").fits(gpu)


def test_rules_of_thumb_gb():
    got = {m: round(vl.training_memory(m, method="qlora", seq=2048, recompute=rc).total / GB, 1)
           for m, rc in (("llama-2-7b", "full"), ("llama-33b", "full"), ("llama-2-70b", "full"))}
    assert got == {"llama-2-7b": 5.9, "llama-33b": 22.1, "llama-2-70b": 43.7}
    assert round(vl.training_memory("llama-2-70b", method="qlora", seq=2048).total / GB, 1) == 105.7


def test_audit_single_card_full_fine_tuning():
    card = vl.get_gpu("a100-80gb")
    got = {(c, o): vl.training_memory(L7, recompute="full", convention=c, optimizer=o)
           for c in ("source-12", "mixed-fp32-master") for o in ("adamw", "adamw-8bit")}
    assert round(got[("mixed-fp32-master", "adamw")].total / GB, 1) == 109.2
    assert not got[("mixed-fp32-master", "adamw")].fits(card)
    assert got[("source-12", "adamw")].fits(card) and round(got[("source-12", "adamw")].total / GB, 1) == 82.3
    assert got[("mixed-fp32-master", "adamw-8bit")].fits(card)
    assert vl.max_seq_for_training(L7, card, recompute="full") == 0
    # "< 1B on one card": Qwen2.5-0.5B on a 24 GB card
    assert vl.training_memory("qwen2.5-0.5b", seq=2048).fits("rtx-4090")


def test_audit_lora_qlora_and_the_number_of_cards():
    pm = vl.plan_memory("llama-2-70b", seq=2048, dp=2, zero=3, method="qlora", recompute="full")
    assert pm.fits("rtx-3090") and round(pm.total / GB, 1) == 24.9
    assert not vl.training_memory("llama-2-70b", method="qlora", seq=2048, recompute="full").fits("rtx-3090")
    assert R.max_seq_for_plan("llama-2-70b", "rtx-3090", dp=2, zero=3, method="qlora", recompute="full") == 2534


def cheapest(model, method, **kw):
    """The cheapest priced (card, count) that fits under 90%, computed without the recommender."""
    best = None
    for g in vl.list_gpus():
        if g.price_per_hour_usd is None:
            continue
        for n in (1, 2, 4, 8):
            plan = dict(dp=1, zero=0, buckets="none") if n == 1 else dict(dp=n, zero=3)
            pm = vl.plan_memory(model, seq=2048, method=method, recompute="full", **plan, **kw)
            if pm.fits(g, 0.1):
                cost = n * g.price_per_hour_usd
                if best is None or cost < best[0] - 1e-12:
                    best = (cost, g.key, n)
                break
    return best


@pytest.mark.parametrize("model,method", [("llama-2-7b", "qlora"), ("llama-2-7b", "full"), ("llama-2-13b", "full"),
                                          ("llama-2-70b", "qlora")])
def test_recommender_picks_the_cheapest(model, method):
    recs = R.recommend_gpus(model, method, 2048, recompute="full")
    cost, key, n = cheapest(model, method)
    assert recs[0].cost_per_hour_usd == pytest.approx(cost) and (recs[0].gpu.key, recs[0].count) == (key, n)
    assert recs[0].gpu.price_date and not math.isnan(recs[0].row()["$/h"])


def test_recommender_answers_today():
    """With the catalogue's 2025-06 prices (update with the catalogue)."""
    q = R.recommend_gpus("llama-2-7b", "qlora", 2048, recompute="full")
    f = R.recommend_gpus("llama-2-7b", "full", 2048, recompute="full")
    assert (q[0].label(), q[0].cost_per_hour_usd) == ("1 x t4", 0.35) and len(q) == 19
    assert (f[0].label(), f[0].cost_per_hour_usd) == ("1 x mi300x", 1.85) and len(f) == 17
    assert vl.exercises.answer("ch09-2") == pytest.approx(3.7)
    assert vl.exercises.answer("ch09-3") == 6642
