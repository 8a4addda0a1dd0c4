"""Chapter 13 alternate scenario: the source's 7B shape against an A100 80GB and a 64K-token target; the 2025
levers on Phi-4 (3 local : 1 global) and Qwen3-235B-A22B."""
from __future__ import annotations

import vramlib as vl
from vramlib import design as D

STEM = "ch13-design-for-memory"
PARAMS = dict(base_model="source-7b", gpu="a100-80gb", context=65536, train_seq=2048, n_gpus=4,
              kv_heads=[1, 4, 8, 32], gqa_kv_heads=8, hiddens=[2048, 4096, 6144], narrow_hidden=2048,
              wide_hidden=6144, ffn_ratios=[2, 4], experts=[0, 8, 16], moe_experts=16, real_mha="llama-2-7b",
              real_gqa="qwen3-8b", more_models=[],
              modern_base="phi-4", windows=[256, 2048], window_ratio=3, local_ratios=[2, 3, "all"], ratio_window=2048,
              mla_ranks=[512], modern_moe="qwen3-235b-a22b", moe_context=8192, expert_counts=[64, 256],
              shared_counts=[1], ep=8)


def expected(p: dict) -> dict:
    opts = dict(weights=p["weights"], kv_dtype=p["kv_dtype"], train_seq=p["train_seq"], n_gpus=p["n_gpus"],
                prefill_chunk=p["prefill_chunk"])
    base = D.exact(p["base_model"])
    gqa = D.gqa_shape(base, p["gqa_kv_heads"])
    d_base = D.evaluate_design(base, p["gpu"], p["context"], **opts)
    d_gqa = D.evaluate_design(gqa, p["gpu"], p["context"], **opts)
    wide = D.equal_params_shape(gqa, hidden=p["wide_hidden"], n_kv_heads=p["gqa_kv_heads"])
    narrow = D.equal_params_shape(gqa, hidden=p["narrow_hidden"], n_kv_heads=p["gqa_kv_heads"])
    d_wide = D.evaluate_design(wide, p["gpu"], p["context"], **opts)
    d_narrow = D.evaluate_design(narrow, p["gpu"], p["context"], **opts)
    moe = D.moe_shape(gqa, p["moe_experts"], p["experts_per_token"])
    d_moe = D.evaluate_design(moe, p["gpu"], p["context"], **opts)
    d_dense = D.evaluate_design(D.moe_shape(gqa, 0), p["gpu"], p["context"], **opts)
    real_gqa = D.evaluate_design(p["real_gqa"], p["gpu"], p["context"], **opts)
    kv = lambda m: vl.kv_cache_bytes(m, p["context"], dtype=p["kv_dtype"])  # noqa: E731
    modern = vl.get_model(p["modern_base"])
    local = D.window_shape(modern, p["ratio_window"], p["window_ratio"])
    mla = D.mla_shape(modern, p["mla_ranks"][-1], p["rope_head_dim"])
    moe25 = vl.get_model(p["modern_moe"])
    moe_d = D.evaluate_design(moe25, p["gpu"], p["moe_context"], **opts)
    fine = D.evaluate_design(D.granular_moe_shape(moe25, max(p["expert_counts"])), p["gpu"], p["moe_context"],
                             **opts)
    shared = D.shared_expert_shape(moe25, max(p["shared_counts"]))
    rank = lambda m: sum(vl.parallel.stage_params(m, ep=p["ep"])[0])  # noqa: E731
    return {
        "q13_cap_gb": vl.gb(vl.get_gpu(p["gpu"]).memory_bytes),
        "q13_base_kv_tok": vl.kv_bytes_per_token(base, p["kv_dtype"]),
        "q13_base_kv_gb": vl.gb(vl.kv_cache_bytes(base, p["context"], dtype=p["kv_dtype"])),
        "q13_base_max_ctx": d_base.max_context,
        "q13_gqa_max_seq": d_gqa.max_sequences,
        "q13_gqa_x": base.n_heads // p["gqa_kv_heads"],
        "q13_gqa_inf_gb": vl.gb(d_gqa.inference.total),
        "q13_gqa_params_b": gqa.n_params / 1e9,
        "q13_wide_L": wide.n_layers,
        "q13_narrow_L": narrow.n_layers,
        "q13_wide_kv_x": d_narrow.kv_per_token / d_wide.kv_per_token,
        "q13_wide_act_saved_pct": 1 - d_wide.activations / d_narrow.activations,
        "q13_wide_mb": d_wide.max_micro_batch,
        "q13_moe_total_b": moe.n_params / 1e9,
        "q13_moe_active_b": moe.n_active_params / 1e9,
        "q13_moe_w_gb": vl.gb(vl.weights_bytes(moe, p["weights"])),
        "q13_moe_gpus": d_moe.gpus_to_train,
        "q13_dense_gpus": d_dense.gpus_to_train,
        "q13_real_gqa_max_ctx": real_gqa.max_context,
        "q13_m_base_kv_gb": vl.gb(kv(modern)),
        "q13_m_gemma_kv_gb": vl.gb(kv(local)),
        "q13_m_gemma_full": sum(1 for t in local.layer_types if t == "full"),
        "q13_m_all_kv_gb": vl.gb(kv(D.window_shape(modern, p["ratio_window"], "all"))),
        "q13_m_mla_kv_gb": vl.gb(kv(mla)),
        "q13_m_mla_params_b": mla.n_params / 1e9,
        "q13_m_mla_kv_tok": vl.kv_bytes_per_token(mla, p["kv_dtype"]),
        "q13_e_fine_act_pct": fine.activations / moe_d.activations - 1,
        "q13_e_shared_rank_pct": float(rank(shared) / rank(moe25)) - 1,
        "q13_max_train_b": vl.planning.max_params_model_states(p["gpu"], dp=p["n_gpus"], stage=3) / 1e9,
        "q13_gqa_act_saved_pct": 1 - d_gqa.activations / d_base.activations,
        "q13_base_train_gpu_gb": vl.gb(-(-d_base.model_states // p["n_gpus"]) + d_base.activations
                                       + vl.parse_memory("0.5GB")),
    }
