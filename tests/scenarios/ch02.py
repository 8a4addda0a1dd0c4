"""Chapter 2 alternate scenario: rank 64, longer sequences, a 40 GB card against an L40S, a 1 GB reserve."""
from __future__ import annotations

import vramlib as vl
from vramlib import audit
from vramlib import training_feasibility as TF

STEM = "ch02-qlora-33b-on-48gb"
PARAMS = dict(memory="40GB", gpu="l40s", gpu2="a100-40gb", lora_rank=64, seq_short=1024, seq_mid=4096,
              seq_long=8192, real_reserve="1GB", real_convention="source-12")


def expected(p: dict) -> dict:
    m, real = vl.get_model(p["model"]), vl.get_model(p["real_model"])
    card, card2 = vl.get_gpu(p["gpu"]), vl.get_gpu(p["gpu2"])
    lora = dict(method="qlora", lora_rank=p["lora_rank"], lora_targets=p["lora_targets"], base_weights=p["weights"],
                attention=p["attention"])
    src_kw = lora | dict(convention=p["convention"], reserve=p["reserve"], lora_dtype="bf16")   # 16-bit adapters
    real_kw = lora | dict(convention=p["real_convention"], reserve=p["real_reserve"])
    n_lora = vl.lora_params(m, p["lora_rank"], p["lora_targets"])
    kv_tok = vl.kv_bytes_per_token(m)
    out = {
        "q2_w_int4_gb": vl.gb(vl.weights_bytes(m, p["quant"])),
        "q2_w_nf4_gb": vl.gb(vl.weights_bytes(m, p["weights"])),
        "q2_real_w_gb": vl.gb(vl.weights_bytes(real, p["weights"])),
        "q2_lora_params": n_lora,
        "q2_lora_pct": TF.size_ratio(n_lora, m.weight_params),
        "q2_lora_states_gb": vl.gb(TF.model_states_bytes(n_lora, p["convention"])),
        "q2_real_lora_states_gb": vl.gb(TF.model_states_bytes(n_lora, p["real_convention"])),
        "q2_kv_per_token": kv_tok,
        "q2_card_gib": vl.gib(card.memory_bytes),
        "q2_card2_gib": vl.gib(card2.memory_bytes),
        "q2_ckpt_per_token": 2 * m.n_layers * m.hidden,
        "q2_max_none_card": TF.max_seq_for_training(real, card.key, recompute="none", **real_kw),
        "q2_max_full_card": TF.max_seq_for_training(real, card.key, recompute="full", **real_kw),
        "q2_max_none_card2": TF.max_seq_for_training(real, card2.key, recompute="none", **real_kw),
        "q2_max_full_card2": TF.max_seq_for_training(real, card2.key, recompute="full", **real_kw),
        "q2_max_full_48": TF.max_seq_for_training(real, p["memory"], recompute="full", **real_kw),
        "q2_max_shape_full_48": TF.max_seq_for_training(m, p["memory"], recompute="full", **src_kw),
        "q2_max_eager_full_card": TF.max_seq_for_training(real, card.key, recompute="full",
                                                          **(real_kw | {"attention": "eager"})),
    }
    step = real_kw | {"peak": "step"}
    peak_long = vl.training_memory(real, seq=p["seq_long"], recompute="full", **step)
    out.update(q2_step_max_none_card=TF.max_seq_for_training(real, card.key, recompute="none", **step),
               q2_step_max_full_card=TF.max_seq_for_training(real, card.key, recompute="full", **step),
               q2_step_long_gb=vl.gb(peak_long.total), q2_step_long_phase=peak_long.peak_phase)
    # peft's fp32 adapter inputs and the loss's two fp32 T x V gradients: here the phases need more than the sum
    assert out["q2_step_max_none_card"] <= out["q2_max_none_card"]
    for key in ("short", "mid", "long"):
        n = p[f"seq_{key}"]
        out[f"q2_kv_{key}_gb"] = vl.gb(vl.kv_cache_bytes(m, n))
        out[f"q2_src_kv_{key}"] = audit.total_mixed_units(kv_tok, n)
        out[f"q2_act_full_{key}_gb"] = vl.gb(vl.activation_bytes(m, n, attention=p["attention"], recompute="full",
                                                                 scope="model"))
        out[f"q2_total_shape_{key}_gb"] = vl.gb(vl.training_memory(m, seq=n, recompute="full", **src_kw).total)
        out[f"q2_total_real_{key}_gb"] = vl.gb(vl.training_memory(real, seq=n, recompute="full", **real_kw).total)
        out[f"q2_total_real_none_{key}_gb"] = vl.gb(vl.training_memory(real, seq=n, recompute="none", **real_kw).total)
        out[f"q2_total_source_{key}_gb"] = vl.gb(vl.parse_memory(p["source_weights"])
                                                 + vl.parse_memory(f"{audit.total_mixed_units(kv_tok, n)}GB")
                                                 + vl.parse_memory(p["source_activations"])
                                                 + vl.parse_memory(p["source_lora_states"]))
    return out
