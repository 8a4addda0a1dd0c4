"""Chapter 12 alternate scenario: H100s, 1,024-token sequences, a 128-sequence batch, 128 GPUs for the larger search;
Qwen3-235B-A22B with expert parallelism over 16 GPUs."""
from __future__ import annotations

import vramlib as vl
from vramlib import planning as Q
from vramlib import training_feasibility as TF

STEM = "ch12-tp-pp-dp-design"
PARAMS = dict(gpu="h100-sxm-80gb", seq=1024, global_batch=128, n_micro=16, bigger_cluster=128,
              real_model="llama-3.1-70b", real_seq=2048, pp_sweep=[1, 3, 6], moe_model="qwen3-235b-a22b", moe_dp=16,
              moe_ep=[2, 16])


def expected(p: dict) -> dict:
    m, card = vl.get_model(p["model"]), vl.get_gpu(p["gpu"])
    nominal = m.nominal_params or m.n_params
    conv = p["convention"]
    kw = dict(headroom=p["headroom"], mfu=p["mfu"])
    plan = vl.ParallelPlan(tp=p["tp"], pp=p["pp"], n_micro=p["n_micro"], sequence_parallel=p["tp"] > 1)
    pm = {rc: vl.plan_memory(m, plan.with_(recompute=rc), p["seq"], convention=conv, activation_style="megatron")
          for rc in ("none", "full")}
    res = Q.search_plans(m, card, p["n_gpus"], p["seq"], p["global_batch"], convention=conv, top=1, **kw)
    small = Q.search_plans(m, card, p["source_gpus"], p["seq"], p["global_batch"], convention=conv, headroom=0.0,
                           mfu=p["mfu"])
    big = Q.search_plans(m, card, p["bigger_cluster"], p["seq"], p["global_batch"], convention=conv, top=1, **kw)
    rule = Q.search_plans(m, card, p["bigger_cluster"], p["seq"], p["global_batch"], convention=conv, tp=[1], pp=[1],
                          top=1, **kw)
    real = Q.search_plans(p["real_model"], card, p["real_gpus"], p["real_seq"], p["global_batch"],
                          convention=p["master_convention"], top=1, **kw)
    need_kw = dict(zero=1, tp=None, pp=None, recompute="full", sequence_parallel=True, n_micro=p["n_micro"],
                   headroom=p["headroom"])
    need = {c: vl.min_gpus_for_training(m, card, p["seq"], convention=c, **need_kw)
            for c in (p["master_convention"], p["ds_convention"])}
    largest = vl.largest_trainable_model(card, p["source_gpus"], p["seq"], zero=3, convention=conv, recompute="full")
    pp_acts = [vl.plan_memory(m, plan.with_(pp=x, recompute="selective", n_micro=max(p["pp_sweep"])), p["seq"],
                              convention=conv, activation_style="megatron").stages[0]["activations"]
               for x in p["pp_sweep"]]
    return {
        "q12_states_total_gb": vl.gb(vl.zero_model_states(nominal, convention=conv).total),
        "q12_states_per_gpu_gb": vl.gb(vl.zero_model_states(nominal, convention=conv, tp=p["tp"], pp=p["pp"]).total),
        "q12_master_per_gpu_gb": vl.gb(vl.zero_model_states(nominal, convention=p["master_convention"], tp=p["tp"],
                                                            pp=p["pp"]).total),
        "q12_none_peak_gb": vl.gb(pm["none"].total),
        "q12_full_peak_gb": vl.gb(pm["full"].total),
        "q12_z3_small_gb": vl.gb(vl.zero_model_states(nominal, dp=p["source_gpus"], stage=3, convention=conv).total),
        "q12_nsmall_fitting": small.n_fitting,
        "q12_n_candidates": res.n_candidates,
        "q12_n_fitting": res.n_fitting,
        "q12_best_label": res.best.plan.label(),
        "q12_best_tps": res.best.tokens_per_s,
        "q12_big_best_label": big.best.plan.label(),
        "q12_rule_share": TF.size_ratio(rule.best.tokens_per_s, big.best.tokens_per_s),
        "q12_real_best_label": real.best.plan.label(),
        "q12_min_master": need[p["master_convention"]].n_gpus,
        "q12_min_ds": need[p["ds_convention"]].n_gpus,
        "q12_largest_b": vl.gb(largest.n_params),
        "q12_pp_acts": " / ".join(f"{vl.gb(a):.2f}" for a in pp_acts),
        "q12_card_gb": vl.gb(card.memory_bytes),
        "q12_moe_params_b": vl.gb(vl.get_model(p["moe_model"]).n_params),
        "q12_moe_last_gb": vl.gb(vl.plan_memory(p["moe_model"], dp=p["moe_dp"], ep=p["moe_ep"][-1], zero=1,
                                                seq=p["real_seq"], recompute="full",
                                                convention=p["master_convention"]).stages[0].total),
    }
