"""Every number QUESTIONS.md lists for question 15 (fits for inference, not for training), and the audits."""
import pytest

import vramlib as vl
from vramlib import training_feasibility as TF

S7 = vl.get_model("source-7b")
H100 = vl.get_gpu("h100-sxm-80gb")
KW = dict(method="full", seq=2048, precision="fp16", reserve=0)


def test_weights_grads_adam_84_gb():
    bd = vl.training_memory(S7, convention="source-12", **KW)
    assert bd["weights"] == 14 * 10**9                          # FP16 weights 14 GB
    assert bd["gradients"] == 14 * 10**9                        # FP16 gradients 14 GB
    assert bd["optimizer states"] == 56 * 10**9                 # FP32 m + v: 56 GB, 4x the weights
    assert TF.model_states_bytes(S7.weight_params, "source-12") == 84 * 10**9
    assert 84 * 10**9 > vl.parse_memory("80GB")                 # "84 GB > 80 GB"
    assert vl.inference_memory(S7, "fp16", tokens=2048, reserve=0)["weights"] == 14 * 10**9


def test_but_an_80gb_card_holds_85_5_gb():
    assert round(vl.gb(H100.memory_bytes), 1) == 85.5
    assert H100.memory_bytes > 84 * 10**9
    assert round(vl.gb(H100.memory_bytes - 84 * 10**9), 2) == 1.52
    # with the source's 12 B and full checkpointing the 7B would train on one H100
    assert TF.max_seq_for_training(S7, H100, convention="source-12", recompute="full", precision="fp16") == 2272
    # with the fp32 master copy, not at all
    assert TF.max_seq_for_training(S7, H100, convention="mixed-fp32-master", recompute="full") == 0


def test_master_weights_16_and_deepspeed_18():
    assert [TF.bytes_per_param(c) for c in ("source-12", "mixed-fp32-master", "deepspeed")] == [12, 16, 18]
    assert TF.model_states_bytes(S7.weight_params, "mixed-fp32-master") == 112 * 10**9
    assert TF.model_states_bytes(S7.weight_params, "deepspeed") == 126 * 10**9
    bd = vl.training_memory(S7, convention="mixed-fp32-master", **KW)
    assert bd["master weights (fp32)"] == 28 * 10**9


def test_training_over_inference_is_not_3_to_4_with_adam():
    inf = vl.inference_memory(S7, "fp16", "fp16", 2048, reserve=0)
    mult = {c: TF.size_ratio(vl.training_memory(S7, convention=c, **KW), inf) for c in vl.CONVENTIONS}
    assert round(mult["source-12"], 2) == 6.33
    assert round(mult["mixed-fp32-master"], 2) == 8.17
    assert round(mult["deepspeed"], 2) == 9.12                     # 18 B + the largest gathered module
    # states alone vs weights: 84 / 14 = 6
    assert TF.size_ratio(84 * 10**9, 14 * 10**9) == 6.0
    # 3-4x needs a lighter optimizer
    light = TF.size_ratio(vl.training_memory(S7, convention="source-12", optimizer="adamw-8bit", **KW), inf)
    assert 3 <= light <= 4
    light = TF.size_ratio(vl.training_memory(S7, optimizer="adafactor", recompute="full", **KW), inf)
    assert 3 <= light <= 4


def test_adam_28_gb_in_question_4_is_16_bit_moments():
    assert 4 * 7 * 10**9 == vl.parse_memory("28GB")
    assert vl.training.optimizer_state_bytes(S7, "adamw") == 56 * 10**9
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))
    opt = torch.optim.AdamW([p])
    p.grad = torch.ones_like(p)
    opt.step()
    assert opt.state[p]["exp_avg"].dtype == torch.bfloat16 == opt.state[p]["exp_avg_sq"].dtype


def test_real_models_side_by_side():
    for name, expected in (("llama-2-7b", 8.18), ("mistral-7b", 8.65)):
        inf = vl.inference_memory(name, "fp16", "fp16", 2048, reserve=0)
        tr = vl.training_memory(name, **KW)
        assert round(TF.size_ratio(tr, inf), 2) == expected
        assert inf.fits(H100) and not tr.fits(H100)
