"""Chapter 10 alternate scenario: the 7B against the 13B shape, Qwen2.5 0.5B against 7B, 4,096 tokens, 16 B/param."""
from __future__ import annotations

from fractions import Fraction

import vramlib as vl
from vramlib import training_feasibility as TF

STEM = "ch10-1b-vs-7b-linearity"
PARAMS = dict(small="source-7b", big="source-13b", real_small="qwen2.5-0.5b", real_big="qwen2.5-7b", seq=4096,
              convention="mixed-fp32-master", coefficient=34, reserve="0.5GB", tolerance_pct=5, precision="bf16")


def expected(p: dict) -> dict:
    ms, mb = vl.get_model(p["small"]), vl.get_model(p["big"])
    rs, rb = vl.get_model(p["real_small"]), vl.get_model(p["real_big"])
    kw = dict(method="full", precision=p["precision"], convention=p["convention"], reserve=p["reserve"],
              micro_batch=p["micro_batch"])
    tol = Fraction(p["tolerance_pct"], 100)
    c = p["coefficient"]
    src = {k: TF.source_training_memory(m, p["seq"], coefficient=c, **kw) for k, m in (("small", ms), ("big", mb))}
    hf = {k: vl.training_memory(m, seq=p["seq"], **kw) for k, m in (("small", ms), ("big", mb))}
    return {
        "q10_states_small_gb": vl.gb(TF.model_states_bytes(ms.weight_params, p["convention"])),
        "q10_states_big_gb": vl.gb(TF.model_states_bytes(mb.weight_params, p["convention"])),
        "q10_param_ratio": mb.weight_params / ms.weight_params,
        "q10_act_src_small_gb": vl.gb(TF.source_activation_bytes(ms, p["seq"], coefficient=c)),
        "q10_act_src_big_gb": vl.gb(TF.source_activation_bytes(mb, p["seq"], coefficient=c)),
        "q10_ratio_src": src["big"].total / src["small"].total,
        "q10_total_src_small_gb": vl.gb(src["small"].total),
        "q10_ratio_hf": hf["big"].total / hf["small"].total,
        "q10_act_hf_big_gb": vl.gb(hf["big"]["activations"]),
        "q10_linear_src": TF.linear_until(mb, ms, tolerance=tol, activation_style="source", coefficient=c, **kw),
        "q10_linear_hf_none": TF.linear_until(mb, ms, tolerance=tol, **kw),
        "q10_linear_hf_full": TF.linear_until(mb, ms, tolerance=tol, recompute="full", **kw),
        "q10_linear_real_hf_none": TF.linear_until(rb, rs, tolerance=tol, **kw),
        "q10_real_ratio_hf": vl.training_memory(rb, seq=p["seq"], **kw).total
        / vl.training_memory(rs, seq=p["seq"], **kw).total,
        "q10_real_param_ratio": rb.weight_params / rs.weight_params,
        "q10_real_logits_small_gb": vl.gb(4 * p["micro_batch"] * p["seq"] * rs.vocab),
    }
