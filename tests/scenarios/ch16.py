"""Chapter 16 alternate scenario: Mistral-7B, fp32 AdamW against the deepspeed convention, Mixtral-8x22B, Phi-3."""
from __future__ import annotations

import vramlib as vl
from vramlib import validation as V

STEM = "ch16-validation"
PARAMS = dict(model="mistral-7b", seq=4096, real_setup="fp32", convention="deepspeed", moe_model="mixtral-8x22b",
              sliding_model="phi-3-mini", published_entry="deepspeed-t0-3b-zero3", qlora_default_convention="deepspeed")


def expected(p: dict) -> dict:
    m = vl.get_model(p["model"])
    moe = next(r for r in V.lora_param_rows("catalogue") if r.id == f"catalogue/{p['moe_model']}")
    sw = next(r for r in V.kv_sliding_rows() if r["id"].startswith(f"sliding/{p['sliding_model']}/"))
    kv = next(r for r in V.kv_rows(("catalogue",)) if r.id == f"catalogue/{p['model']}/{p['tokens_measured']}")
    qargs = dict(V.published_entry("qlora-65b-48gb")["vramlib"]["args"], convention=p["qlora_default_convention"])
    return {
        "q16_kv_meas": kv.measured,
        "q16_kv_pred": vl.kv_cache_bytes(m, p["tokens_measured"], p["batch_measured"], "bf16"),
        "q16_sw_meas": sw["measured"],
        "q16_sw_full": sw["every token kept"],
        "q16_moe_peft": moe.measured,
        "q16_moe_vramlib": moe.predicted,
        "q16_real_gb": vl.gb(V.real_setup_bytes(m, p["real_setup"]).total),
        "q16_conv_gb": vl.gb(vl.parallel.zero_model_states(m.weight_params, convention=p["convention"]).total),
        "q16_coef_sdpa": V.activation_coefficient(m, p["seq"], attention="sdpa"),
        "q16_coef_eager": V.activation_coefficient(m, p["seq"], attention="eager"),
        "q16_qlora_default_gb": vl.gb(vl.training_memory(**qargs).total),
        "q16_act_rows": V.error_stats(V.activation_rows("hf"))["n"],
        "q16_pub_median": V.published_stats()["median"],
    }
