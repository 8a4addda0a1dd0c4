"""Chapter 3 alternate scenario: 16 x H100 80 GB, the 7B and 13B shapes, 4,096 tokens, c = 34, Llama-2-70B."""
from __future__ import annotations

from fractions import Fraction

import vramlib as vl
from vramlib import planning as Q
from vramlib import rules_of_thumb as RT
from vramlib import training_feasibility as TF

STEM = "ch03-full-finetune-8xa100"
PARAMS = dict(gpu="h100-sxm-80gb", n_gpus=16, seq=4096, long_seq=8192, coefficient=34, low_coefficient=30,
              small="source-7b", big="source-13b", real_big="llama-2-13b", too_big=20_000_000_000,
              extreme="llama-2-70b", sp_tp=8, global_batch=128)


def expected(p: dict) -> dict:
    card = vl.get_gpu(p["gpu"])
    n, seq, mb = p["n_gpus"], p["seq"], p["micro_batch"]
    m13, m30, real30, m65 = (vl.get_model(p[k]) for k in ("small", "big", "real_big", "extreme"))

    def z3(params, conv="source-12"):
        return vl.zero_model_states(params, dp=n, stage=3, convention=conv).total

    act30 = TF.source_activation_bytes(m30, seq, mb, p["coefficient"])
    zero3 = dict(dp=n, zero=3, micro_batch=mb)

    def largest(conv, rc, tokens):
        return Q.largest_trainable_model(card, n, tokens, family=p["family"], zero=3, convention=conv, recompute=rc,
                                         micro_batch=mb).n_params / 1e9

    off = vl.plan_memory(m65, seq=seq, convention="mixed-fp32-master", recompute="full", offload_optimizer="cpu", **zero3)
    return {
        "q3_bpp_src": 12, "q3_bpp_master": 16, "q3_bpp_ds": 18,
        "q3_share_src": float(Fraction(z3(m13.weight_params), m13.weight_params)),
        "q3_share_master": float(Fraction(z3(m13.weight_params, "mixed-fp32-master"), m13.weight_params)),
        "q3_states_13b_gb": vl.gb(z3(m13.weight_params)),
        "q3_states_40b_gb": vl.gb(z3(p["too_big"])),
        "q3_act_13b_long_gb": vl.gb(TF.source_activation_bytes(m13, p["long_seq"], mb, p["coefficient"])),
        "q3_act_13b_low_gb": vl.gb(TF.source_activation_bytes(m13, seq, mb, p["low_coefficient"])),
        "q3_src_total_30b_gb": vl.gb(z3(m30.weight_params) + act30),
        "q3_src_total_40b_gb": vl.gb(z3(p["too_big"]) + act30),
        "q3_src_total_real30_gb": vl.gb(z3(real30.n_params) + act30),
        "q3_c_hf_none": float(RT.implied_coefficient(m30, seq, mb, style="hf", recompute="none", attention="sdpa")),
        "q3_act30_tpsp_gb": vl.gb(vl.activation_bytes(m30, seq, mb, style="megatron", recompute="selective",
                                                      tp=p["sp_tp"], sequence_parallel=True, scope="model")),
        "q3_plan_30b_src_none_gb": vl.gb(vl.plan_memory(m30, seq=seq, convention="source-12", **zero3).total),
        "q3_plan_30b_master_full_gb": vl.gb(vl.plan_memory(m30, seq=seq, convention="mixed-fp32-master",
                                                           recompute="full", **zero3).total),
        "q3_largest_src_none_b": largest("source-12", "none", seq),
        "q3_largest_master_full_b": largest("mixed-fp32-master", "full", seq),
        "q3_largest_ds_none_long_b": largest("deepspeed", "none", p["long_seq"]),
        "q3_65b_states_src_gb": vl.gb(z3(m65.n_params)),
        "q3_65b_offload_gb": vl.gb(off.total),
        "q3_65b_host_node_gb": vl.gb(off.host_bytes_per_node(n)),
        "q3_65b_min_gpus_master": vl.min_gpus_for_training(m65, card, seq, zero=3, recompute="full",
                                                           convention="mixed-fp32-master", micro_batch=mb).n_gpus,
        "q3_65b_search_fit": Q.search_plans(m65, card, n, seq, p["global_batch"], convention="source-12",
                                            headroom=0.0).n_fitting,
    }
