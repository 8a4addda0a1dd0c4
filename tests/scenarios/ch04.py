"""Chapter 4 alternate scenario: 8 x V100 16 GB, the 13B shape, 1,024 / 512 / 2,048 tokens, LoRA rank 64."""
from __future__ import annotations

from fractions import Fraction

import vramlib as vl
from vramlib import recommend as R
from vramlib import training_feasibility as TF

STEM = "ch04-train-7b-on-4xv100"
PARAMS = dict(gpu="v100-16gb", n_gpus=8, model="source-13b", real_model="llama-2-13b", seq=1024, short_seq=512,
              long_seq=2048, lora_rank=64, attention="sdpa", source_adam="52GB", source_memory="16GB")


def expected(p: dict) -> dict:
    card = vl.get_gpu(p["gpu"])
    m = vl.get_model(p["model"])
    n, seq, mb, prec = p["n_gpus"], p["seq"], p["micro_batch"], p["precision"]
    zero3 = dict(dp=n, zero=3, micro_batch=mb, precision=prec)
    z_src = vl.zero_model_states(m.weight_params, dp=n, stage=3, convention="source-12").total
    z_master = vl.zero_model_states(m.weight_params, dp=n, stage=3, convention="mixed-fp32-master").total

    def plan(att, rc, conv="mixed-fp32-master", **kw):
        return vl.plan_memory(m, seq=seq, attention=att, recompute=rc, convention=conv, **zero3, **kw)

    def lora(meth, att, rc):
        return vl.training_memory(m, seq=p["long_seq"], method=meth, precision=prec, attention=att, recompute=rc,
                                  lora_rank=p["lora_rank"], micro_batch=mb)

    need = vl.min_gpus_for_training(m, card, seq, zero=3, recompute="full", attention=p["attention"], precision=prec,
                                    convention="mixed-fp32-master", micro_batch=mb)
    return {
        "q4_card_gb": vl.gb(card.memory_bytes),
        "q4_bf16": "yes" if card.supports_bf16 else "no",
        "q4_adam_gb": vl.gb(vl.optimizer_state_bytes(m, "adamw")),
        "q4_adam_src_bpp": float(Fraction(vl.parse_memory(p["source_adam"]), m.weight_params)),
        "q4_zero3_src_gb": vl.gb(z_src),
        "q4_zero3_master_gb": vl.gb(z_master),
        "q4_src_total_seq_gb": vl.gb(z_src + TF.source_activation_bytes(m, seq, mb, p["coefficient"])),
        "q4_src_act_short_gb": vl.gb(TF.source_activation_bytes(m, p["short_seq"], mb, p["coefficient"])),
        "q4_plan_eager_none_gb": vl.gb(plan("eager", "none").total),
        "q4_plan_sdpa_full_gb": vl.gb(plan("sdpa", "full").total),
        "q4_plan_eager_full_src_gb": vl.gb(plan("eager", "full", "source-12").total),
        "q4_maxseq_eager_full": R.max_seq_for_plan(m, card, dp=n, zero=3, micro_batch=mb, precision=prec,
                                                   attention="eager", recompute="full", convention="mixed-fp32-master"),
        "q4_min_gpus_full": need.n_gpus,
        "q4_lora_params": vl.lora_params(m, p["lora_rank"]),
        "q4_lora_sdpa_full_gb": vl.gb(lora("lora", "sdpa", "full").total),
        "q4_qlora_eager_none_gb": vl.gb(lora("qlora", "eager", "none").total),
        "q4_qlora_sdpa_full_maxseq": vl.max_seq_for_training(m, card, method="qlora", precision=prec, attention="sdpa",
                                                             recompute="full", lora_rank=p["lora_rank"], micro_batch=mb),
        "q4_src_lora_rule_gb": vl.gb(vl.parse_memory(p["source_lora_states"]) + vl.parse_memory(p["source_kv"])
                                     + TF.source_activation_bytes(m, p["long_seq"], mb, p["coefficient"])),
        "q4_ladder_8bit_gb": vl.gb(plan("sdpa", "full", optimizer="adamw-8bit").total),
    }
