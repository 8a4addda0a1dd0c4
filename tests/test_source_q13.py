"""Question 13 (design for memory): the source gives no numbers, so these assert the claims chapter 13 computes
for its default scenario: the source's 13B shape, one H100 SXM 80GB, a 131,072-token target, 8 training GPUs."""
import pytest

import vramlib as vl
from vramlib import design as D

BASE = D.exact("source-13b")
GQA = D.gqa_shape(BASE, 8)
H100 = "h100-sxm-80gb"
CTX = 131_072
OPTS = dict(weights="bf16", kv_dtype="bf16", train_seq=4096, n_gpus=8, prefill_chunk=2048)


def _d(spec):
    return D.evaluate_design(spec, H100, CTX, **OPTS)


def test_gqa_divides_kv_per_token_by_the_group_size():
    assert vl.kv_bytes_per_token(BASE, "bf16") == 2 * 40 * 40 * 128 * 2 == 819_200
    assert vl.kv_bytes_per_token(GQA, "bf16") == 163_840                       # 40 heads / 8 KV heads: 5x
    # 8 KV heads for a 32-head model cut the cache 4x (not 8x); for a 64-head model 8x
    src7 = D.exact("source-7b")
    assert vl.kv_bytes_per_token(src7) == 4 * vl.kv_bytes_per_token(D.gqa_shape(src7, 8))
    l70 = vl.get_model("llama-3.1-70b")
    assert (l70.n_heads, l70.n_kv_heads) == (64, 8)
    assert vl.kv_bytes_per_token(l70.with_(n_kv_heads=64)) == 8 * vl.kv_bytes_per_token(l70)


def test_mha_misses_the_target_context_gqa_meets_it():
    base, gqa = _d(BASE), _d(GQA)
    assert vl.kv_cache_bytes(BASE, CTX, dtype="bf16") == 819_200 * CTX           # 107.4 GB
    assert not base.fits and base.max_sequences == 0 and base.max_context == 71_749
    assert gqa.fits and gqa.max_sequences == 2 and gqa.max_context == 379_227
    # GQA also removes the K and V projection parameters
    assert BASE.n_params - GQA.n_params == 40 * 2 * 5120 * (40 - 8) * 128


def test_training_keeps_no_kv_cache_gqa_changes_activations_a_little():
    base, gqa = _d(BASE), _d(GQA)
    saved = D.fraction_saved(base.activations, gqa.activations)
    assert 0.05 < saved < 0.08                                                   # about 7%, against 5x at inference


def test_depth_vs_width_at_equal_parameters():
    wide = D.equal_params_shape(GQA, hidden=8192, n_kv_heads=8)
    narrow = D.equal_params_shape(GQA, hidden=3072, n_kv_heads=8)
    assert (wide.n_layers, narrow.n_layers) == (16, 111)
    assert float(D.layers_for(wide, GQA.n_params)) == pytest.approx(15.625, abs=0.001)
    dw, dn = _d(wide), _d(narrow)
    assert D.ratio(dn.kv_per_token, dw.kv_per_token) == 111 / 16
    assert 0.6 < D.fraction_saved(dn.activations, dw.activations) < 0.63
    assert (dw.max_micro_batch, dn.max_micro_batch) == (2, 1)
    assert (dw.gpus_to_train, dn.gpus_to_train) == (4, 8)


def test_moe_memory_grows_with_experts_not_compute():
    dense, moe = D.moe_shape(GQA, 0), D.moe_shape(GQA, 8, 2)
    assert abs(moe.n_active_params - dense.n_params) / dense.n_params < 0.001
    assert 3.2 < moe.n_params / dense.n_params < 3.3                            # 36.8B against 11.3B
    dd, dm = _d(dense), _d(moe)
    assert dd.fits and not dm.fits
    assert (dd.gpus_to_train, dm.gpus_to_train) == (4, 15)


def test_cluster_memory_bounds_the_trainable_size():
    assert vl.planning.max_params_model_states(H100, dp=8, stage=3) == 42_760_404_992     # 16 B/param
    assert vl.planning.max_params_model_states(H100, dp=8, stage=3, convention="source-12") == 57_013_873_322


def test_inference_is_the_harsher_constraint_for_mha():
    base = _d(BASE)
    assert base.inference.total > vl.get_gpu(H100).memory_bytes > base.training_per_gpu


def test_real_models():
    assert vl.kv_bytes_per_token("llama-2-13b", "bf16") == 819_200
    q = vl.get_model("qwen2.5-14b")
    assert q.gqa_group == 5 and vl.kv_bytes_per_token(q, "bf16") == 2 * 48 * 8 * 128 * 2
    mx = vl.get_model("mixtral-8x7b")
    assert (mx.n_experts, mx.experts_per_token) == (8, 2)
    assert mx.n_params == 46_702_792_704 and mx.n_active_params == 12_879_925_248
