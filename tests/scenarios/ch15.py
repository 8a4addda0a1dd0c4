"""Chapter 15 alternate scenario: the 13B shape, 4,096 tokens, bf16, an A100 80 GB, a 1 GB reserve."""
from __future__ import annotations

import vramlib as vl
from vramlib import training_feasibility as TF

STEM = "ch15-inference-vs-training"
PARAMS = dict(model="source-13b", real_model="qwen2.5-7b", real_model2="llama-3.1-8b", gpu="a100-80gb", seq=4096,
              seq_long=16384, precision="bf16", weights="bf16", kv_dtype="fp8-e4m3", real_reserve="1GB")


def expected(p: dict) -> dict:
    m, real = vl.get_model(p["model"]), vl.get_model(p["real_model"])
    card = vl.get_gpu(p["gpu"])
    tk = dict(method="full", seq=p["seq"], micro_batch=p["micro_batch"], precision=p["precision"],
              attention=p["attention"], reserve=p["reserve"])
    inf = vl.inference_memory(m, p["weights"], p["kv_dtype"], p["seq"], p["micro_batch"], p["attention"], p["reserve"])
    tr = {c: vl.training_memory(m, convention=c, **tk) for c in vl.CONVENTIONS}
    real_inf = vl.inference_memory(real, p["weights"], p["kv_dtype"], p["seq"], p["micro_batch"], p["attention"],
                                   p["reserve"])
    pk = dict(tk, precision="bf16", reserve=p["real_reserve"])
    pure = vl.training_memory(real, peak="step", convention="pure-bf16", **pk)
    fused = vl.training_memory(real, peak="step", convention="pure-bf16", optimizer_impl="fused", **pk)
    assert pure.total == max(pure.phases.values()) and fused.total <= pure.total
    return {
        "q15_peak_model": p["real_model"],
        "q15_peak_pure_gb": vl.gb(pure.total), "q15_peak_pure_phase": pure.peak_phase,
        "q15_peak_fused_gb": vl.gb(fused.total), "q15_peak_fused_phase": fused.peak_phase,
        "q15_sum_pure_gb": vl.gb(vl.training_memory(real, convention="pure-bf16", **pk).total),
        "q15_steady_pure_gb": vl.gb(pure.steady),
        "q15_inf_gb": vl.gb(inf.total),
        "q15_inf_kv_gb": vl.gb(inf["kv cache"]),
        "q15_states_src12_gb": vl.gb(12 * m.weight_params),
        "q15_states_master_gb": vl.gb(16 * m.weight_params),
        "q15_states_ds_gb": vl.gb(18 * m.weight_params),
        "q15_act_none_gb": vl.gb(vl.activation_bytes(m, p["seq"], scope="model", dtype=p["precision"])),
        "q15_act_long_gb": vl.gb(vl.activation_bytes(m, p["seq_long"], scope="model", dtype=p["precision"])),
        "q15_train_src12_gb": vl.gb(tr["source-12"].total),
        "q15_mult_src12": tr["source-12"].total / inf.total,
        "q15_mult_master": tr["mixed-fp32-master"].total / inf.total,
        "q15_mult_ds": tr["deepspeed"].total / inf.total,
        "q15_mult_real_master": vl.training_memory(real, convention="mixed-fp32-master", **tk).total / real_inf.total,
        "q15_card_gb": vl.gb(card.memory_bytes),
        "q15_max_src12_ckpt": TF.max_seq_for_training(m, card.key, convention="source-12", recompute="full",
                                                      precision=p["precision"], reserve=p["real_reserve"]),
        "q15_max_master_8bit": TF.max_seq_for_training(m, card.key, optimizer="adamw-8bit", recompute="full",
                                                       precision=p["precision"], reserve=p["real_reserve"]),
        "q15_free_src12_gb": vl.gb(card.memory_bytes - 12 * m.weight_params),
    }
