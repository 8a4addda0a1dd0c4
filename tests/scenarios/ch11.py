"""Chapter 11 alternate scenario: Llama-3.1-70B on H100s, 2,048 tokens, 16 micro-batches, selective recomputation."""
from __future__ import annotations

import vramlib as vl
from vramlib import parallel as PL
from vramlib import planning as Q

STEM = "ch11-pipeline-balance"
PARAMS = dict(model="llama-3.1-70b", real_model2="llama-2-70b", gpu="h100-sxm-80gb", seq=2048, n_micro=16,
              recompute="selective", alt_recompute="full", source_recompute="full", virtual_stages=[2],
              micro_batch_counts=[1, 4, 16], deep_pp=5)


def expected(p: dict) -> dict:
    m, card = vl.get_model(p["model"]), vl.get_gpu(p["gpu"])
    plan = vl.ParallelPlan(tp=p["tp"], pp=p["pp"], dp=p["dp"], n_micro=p["n_micro"], micro_batch=p["micro_batch"],
                           recompute=p["recompute"], sequence_parallel=p["sequence_parallel"])
    common = dict(convention=p["convention"], precision=p["precision"])
    res = vl.balance_pipeline(m, plan, p["seq"], gpu=card, peak_share=p["peak_share"], **common)
    alt = plan.with_(recompute=p["alt_recompute"])
    deep = vl.balance_pipeline(m, alt.with_(tp=p["deep_tp"], pp=p["deep_pp"], sequence_parallel=p["deep_tp"] > 1),
                               p["seq"], gpu=card, peak_share=p["peak_share"], **common)
    src_plan = vl.ParallelPlan(tp=p["source_tp"], pp=p["source_pp"], n_micro=p["n_micro"],
                               recompute=p["source_recompute"], sequence_parallel=p["source_tp"] > 1)
    src = vl.balance_pipeline(p["source_model"], src_plan, p["source_seq"], gpu=card, convention=p["source_convention"],
                              precision=p["precision"], peak_share=p["peak_share"])
    gpipe = vl.plan_memory(m, plan.with_(schedule="gpipe"), p["seq"], activation_style="megatron", **common)
    inter = vl.plan_memory(m, plan.with_(virtual_stages=p["virtual_stages"][0]), p["seq"], activation_style="megatron",
                           **common)
    many = vl.plan_memory(m, plan.with_(n_micro=p["micro_batch_counts"][-1]), p["seq"], activation_style="megatron",
                          **common)
    param_split = vl.balance_pipeline(m, plan, 1, gpu=card, **common)
    a_kw = dict(style="megatron", scope="layer", tp=p["tp"], sequence_parallel=p["sequence_parallel"])
    a_none = vl.activation_bytes(m, p["seq"], p["micro_batch"], recompute="none", **a_kw)
    a_sel = vl.activation_bytes(m, p["seq"], p["micro_batch"], recompute="selective", **a_kw)
    return {
        "q11_n_gpus": plan.n_gpus,
        "q11_limit_gb": vl.gb(Q.peak_limit(card, p["peak_share"])),
        "q11_even_peak_gb": vl.gb(res.even_peak),
        "q11_even_last_gb": vl.gb(res.even_stages[-1].total),
        "q11_bal_peak_gb": vl.gb(res.peak),
        "q11_bal_layers": " / ".join(str(n) for n in res.layers),
        "q11_bal_l0": res.layers[0],
        "q11_even_spread": float(res.even_spread),
        "q11_bal_spread": float(res.spread),
        "q11_even_verdict": res.even_verdict,
        "q11_bal_verdict": res.verdict,
        "q11_layout": "E" + "|".join(f"t*{n}" for n in res.layers) + "L",
        "q11_even_act0_gb": vl.gb(res.even_stages[0]["activations"]),
        "q11_gpipe_peak_gb": vl.gb(gpipe.total),
        "q11_inter_act0_gb": vl.gb(inter.stages[0]["activations"]),
        "q11_mmax_act0_gb": vl.gb(many.stages[0]["activations"]),
        "q11_deep_bal_spread": float(deep.spread),
        "q11_deep_bal_layers": " / ".join(str(n) for n in deep.layers),
        "q11_src_even_peak_gb": vl.gb(src.even_peak),
        "q11_src_bal_layers": " / ".join(str(n) for n in src.layers),
        "q11_param_layers": " / ".join(str(n) for n in param_split.layers),
        "q11_score_share": float(Q.spread([a_none, a_sel])),
        "q11_emb_params": int(vl.formulas.evaluate(PL.FIRST_STAGE_PARAMS, **{**m.symbols(), "t": p["tp"]})),
    }
