"""Chapter 9 alternate scenario: Mistral-7B, 4,096 tokens, fp16, LoRA rank 64, 20% headroom, other rule cards."""
from __future__ import annotations

from fractions import Fraction

import vramlib as vl
from vramlib import recommend as R
from vramlib import rules_of_thumb as RT

STEM = "ch09-finetune-gpu-config"
PARAMS = dict(model="mistral-7b", seq=4096, long_seq=16384, precision="fp16", lora_rank=64, headroom=0.2,
              rule_small_gpu="rtx-3090", rule_mid="yi-34b", rule_mid_gpu="rtx-a6000", rule_big="qwen2.5-72b",
              rule_big_gpu_48="rtx-a6000", rule_big_gpu_80="h100-sxm-80gb", tiny_model="llama-3.2-1b",
              fit_models=["mistral-7b", "qwen2.5-14b"])


def expected(p: dict) -> dict:
    m, ms = vl.get_model(p["model"]), vl.get_model(p["source_model"])
    seq, mb, prec, r = p["seq"], p["micro_batch"], p["precision"], p["lora_rank"]
    kw = dict(seq=seq, micro_batch=mb, precision=prec, lora_rank=r)
    full = vl.training_memory(m, method="full", **kw)
    adam32, adam8 = (vl.optimizer_state_bytes(m, o) for o in ("adamw", "adamw-8bit"))

    def rule(model, gpu, rc="full", method="qlora"):
        return vl.max_seq_for_training(model, gpu, method=method, recompute=rc, micro_batch=mb, precision=prec,
                                       lora_rank=r)

    recs = {meth: R.recommend_gpus(m, meth, seq, headroom=p["headroom"], recompute="full", micro_batch=mb,
                                   precision=prec, lora_rank=r) for meth in ("qlora", "full")}
    fsdp = vl.plan_memory(p["rule_big"], seq=seq, dp=2, zero=3, method="qlora", recompute="full", micro_batch=mb,
                          precision=prec, lora_rank=r)
    return {
        "q9_model_name": m.name,
        "q9_full_total_gb": vl.gb(full.total),
        "q9_full_act_gb": vl.gb(full["activations"]),
        "q9_w_nf4_gb": vl.gb(vl.weights_bytes(m, "nf4-dq")),
        "q9_qlora_ckpt_gb": vl.gb(vl.training_memory(m, method="qlora", recompute="full", **kw).total),
        "q9_adam8_ratio": float(Fraction(adam8, adam32)),
        "q9_adam8_bpp": float(Fraction(adam8, m.weight_params)),
        "q9_c_hf_full": float(RT.implied_coefficient(ms, seq, mb, dtype=prec, recompute="full")),
        "q9_c_hf_eager_long": float(RT.implied_coefficient(ms, p["long_seq"], mb, dtype=prec, attention="eager")),
        "q9_c_meg_sel": float(RT.implied_coefficient(ms, seq, mb, style="megatron", recompute="selective")),
        "q9_rule_small_maxseq": rule(p["rule_small"], p["rule_small_gpu"]),
        "q9_rule_mid_maxseq_none": rule(p["rule_mid"], p["rule_mid_gpu"], "none"),
        "q9_rule_big48_maxseq": rule(p["rule_big"], p["rule_big_gpu_48"]),
        "q9_rule_tiny_gb_none": vl.gb(vl.training_memory(p["tiny_model"], method="full", **kw).total),
        "q9_full7b_master_adamw8bit_gb": vl.gb(vl.training_memory(p["single_full_model"], recompute="full",
                                                                  optimizer="adamw-8bit", **kw).total),
        "q9_rec_qlora_label": recs["qlora"][0].label(),
        "q9_rec_qlora_cost": recs["qlora"][0].cost_per_hour_usd,
        "q9_rec_full_label": recs["full"][0].label(),
        "q9_rec_full_n": len(recs["full"]),
        "q9_fsdp_gb": vl.gb(fsdp.total),
    }
