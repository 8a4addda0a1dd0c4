"""The serving extras of vLLM's KV budget (ServingConfig: max_loras / max_lora_rank / lora_dtype, shared_prefix_tokens,
draft_model / num_speculative_tokens), checked against numbers worked out here by hand from the layer shapes, and the
static calculator's compiled copy against Python."""
from __future__ import annotations

import math

import pytest

import vramlib as vl
from vramlib.present.jsdata import model_json

GPU = "h100-sxm-80gb"
TARGET, DRAFT = "llama-3.1-8b", "llama-3.2-1b"
# Llama-3.1-8B: 32 layers, hidden 4096, 32 query heads, 8 KV heads of 128, SwiGLU MLP of 14336
L, H, NH, NKV, D, FF = 32, 4096, 32, 8, 128, 14336


def lora_slot_bytes_by_hand(max_loras: int, rank: int, nbytes: int, tp: int) -> int:
    """Every wrapped linear slice holds A (max_loras, 1, rank, in) and B (max_loras, 1, out, rank) on each GPU:
    column-parallel slices (q, k, v, gate, up) shard their output, row-parallel ones (o, down) their input."""
    kv_out = max(1, NKV // tp) * D  # KV heads per GPU (replicated beyond their count)
    slices = [  # (input on this GPU, output on this GPU)
        (H, NH * D // tp), (H, kv_out), (H, kv_out),  # q, k, v: QKVParallelLinear, 3 slices
        (NH * D // tp, H),  # o_proj: RowParallelLinear
        (H, FF // tp), (H, FF // tp),  # gate, up: MergedColumnParallelLinear, 2 slices
        (FF // tp, H),  # down_proj: RowParallelLinear
    ]
    per_layer = sum(max_loras * 1 * rank * i + max_loras * 1 * o * rank for i, o in slices)
    return L * per_layer * nbytes


def test_lora_slot_bytes_by_hand():
    # tp=1: rank 16 x (in + out) summed over the seven linears = 16 x 81,920 per adapter and layer
    assert lora_slot_bytes_by_hand(4, 16, 2, 1) == 32 * 4 * 16 * 81920 * 2 == 335_544_320
    for tp in (1, 2):
        cap = vl.serving_kv_capacity(TARGET, GPU, tp=tp, max_loras=4, max_lora_rank=16, lora_dtype="bf16")
        assert cap.lora_slot_bytes == lora_slot_bytes_by_hand(4, 16, 2, tp)
        assert cap.breakdown["LoRA slots"] == cap.lora_slot_bytes
    assert lora_slot_bytes_by_hand(4, 16, 2, 2) == 226_492_416
    # "auto" is the model's activation dtype (bf16 weights: bf16), fp16 costs the same 2 bytes
    auto = vl.serving_kv_capacity(TARGET, GPU, max_loras=4)
    assert auto.lora_slot_bytes == 335_544_320
    assert vl.serving_kv_capacity(TARGET, GPU, max_loras=2, max_lora_rank=64).lora_slot_bytes == \
        lora_slot_bytes_by_hand(2, 64, 2, 1)


@pytest.mark.parametrize("tp", [1, 2])
def test_lora_slots_come_out_of_the_kv_cache(tp):
    base = vl.serving_kv_capacity(TARGET, GPU, tp=tp)
    lora = vl.serving_kv_capacity(TARGET, GPU, tp=tp, max_loras=4, max_lora_rank=16, lora_dtype="bf16")
    slots = lora_slot_bytes_by_hand(4, 16, 2, tp)
    assert lora.available_kv_bytes == base.available_kv_bytes - slots
    assert lora.block_bytes == base.block_bytes
    assert lora.num_blocks == (base.available_kv_bytes - slots) // base.block_bytes
    assert lora.kv_tokens == lora.num_blocks * 16
    assert base.num_blocks - lora.num_blocks in (slots // base.block_bytes, slots // base.block_bytes + 1)
    assert lora.weights_bytes == base.weights_bytes  # the weights themselves are unchanged; the slots are their own part
    assert sum(lora.breakdown.values()) == sum(base.breakdown.values())  # still adds up to the card


def test_defaults_change_nothing():
    for kw in ({}, dict(tp=2, request_tokens=4096), dict(kv_dtype="fp8", block_size=32)):
        base = vl.serving_kv_capacity(TARGET, GPU, **kw)
        explicit = vl.serving_kv_capacity(TARGET, GPU, max_loras=0, max_lora_rank=16, lora_dtype="auto",
                                          shared_prefix_tokens=0, draft_model=None, num_speculative_tokens=0, **kw)
        assert explicit == base and list(explicit.breakdown.items()) == list(base.breakdown.items())
        assert "LoRA slots" not in base.breakdown and "draft model" not in base.breakdown
        assert (base.lora_slot_bytes, base.draft_weights_bytes, base.draft_block_bytes) == (0, 0, 0)


@pytest.mark.parametrize("prefix", [1000, 1008, 15, 4095])
def test_prefix_caching_concurrency_by_hand(prefix):
    req = 4096
    base = vl.serving_kv_capacity(TARGET, GPU, request_tokens=req)
    cap = vl.serving_kv_capacity(TARGET, GPU, request_tokens=req, shared_prefix_tokens=prefix)
    assert cap.num_blocks == base.num_blocks  # prefix caching adds no allocation: the same pool
    shared = prefix // 16  # only whole blocks are hashed and shared; the partial block is each request's own
    own = math.ceil(req / 16) - shared
    want = (base.num_blocks - shared) / own
    assert cap.max_concurrency == pytest.approx(want, rel=1e-15)
    assert cap.max_concurrent_requests == (base.num_blocks - shared) // own
    if prefix == 1000:  # 62 shared blocks, 194 own blocks per 4,096-token request
        assert (shared, own) == (62, 194)


def test_drafter_weights_and_kv_by_hand():
    # llama-3.2-1b: 16 layers, hidden 2048, 32 heads, 8 KV heads of 64, MLP 8192, vocabulary 128256, tied embeddings
    lh, lnh, lkv, ld, lf, ll, vocab = 2048, 32, 8, 64, 8192, 16, 128256
    per_layer = lh * lnh * ld + 2 * lh * lkv * ld + lnh * ld * lh + 3 * lh * lf + 2 * lh  # q, k, v, o, MLP, 2 norms
    params = vocab * lh + ll * per_layer + lh  # tied embedding, layers, final norm
    draft_weights = 2 * params  # bf16
    assert draft_weights == 2_471_628_800
    draft_kv_per_token = ll * 2 * lkv * ld * 2  # layers x (K, V) x KV heads x head dim x bf16
    target_kv_per_token = L * 2 * NKV * D * 2
    assert (draft_kv_per_token, target_kv_per_token) == (32_768, 131_072)

    req, k = 4096, 3
    base = vl.serving_kv_capacity(TARGET, GPU, request_tokens=req)
    cap = vl.serving_kv_capacity(TARGET, GPU, request_tokens=req, draft_model=DRAFT, num_speculative_tokens=k)
    assert cap.draft_weights_bytes == draft_weights == cap.breakdown["draft model"]
    assert cap.draft_block_bytes == 16 * draft_kv_per_token
    assert cap.block_bytes == 16 * (target_kv_per_token + draft_kv_per_token) == 2_621_440
    assert cap.available_kv_bytes == base.available_kv_bytes - draft_weights
    assert cap.num_blocks == cap.available_kv_bytes // cap.block_bytes
    assert cap.kv_cache_bytes == cap.num_blocks * cap.block_bytes
    # each request also holds k lookahead slots (capped at max_model_len, 131,072 here): ceil(4099 / 16) = 257 blocks
    assert cap.max_concurrency == pytest.approx(cap.num_blocks / 257, rel=1e-15)
    assert any("EAGLE-style" in n and "not supported yet" in n for n in cap.breakdown.notes)
    # at max_model_len the lookahead is capped: ceil(131072 / 16) blocks
    full = vl.serving_kv_capacity(TARGET, GPU, draft_model=DRAFT, num_speculative_tokens=k)
    assert full.max_concurrency == pytest.approx(full.num_blocks / 8192, rel=1e-15)


def test_drafter_under_tp_and_with_a_shared_prefix():
    cap = vl.serving_kv_capacity(TARGET, GPU, tp=2, request_tokens=4096, draft_model=DRAFT, num_speculative_tokens=2,
                                 shared_prefix_tokens=1000)
    assert cap.draft_weights_bytes == 2_471_628_800 // 2
    assert cap.draft_block_bytes == 16 * 16 * 2 * 4 * 64 * 2  # 4 of the drafter's 8 KV heads per GPU
    shared = 1000 // 16 - 1  # EAGLE drops the last hit block: it is each request's own
    own = math.ceil((4096 + 2) / 16) - shared
    assert cap.max_concurrency == pytest.approx((cap.num_blocks - shared) / own, rel=1e-15)


ONE_LINE = [
    (dict(max_lora_rank=17), "max_lora_rank"),
    (dict(max_lora_rank=True), "max_lora_rank"),
    (dict(max_loras=-1), "max_loras"),
    (dict(max_loras=1.5), "max_loras"),
    (dict(lora_dtype="fp32"), "lora_dtype"),
    (dict(lora_dtype=16), "lora_dtype"),
    (dict(shared_prefix_tokens=-3), "shared_prefix_tokens"),
    (dict(shared_prefix_tokens=4096, request_tokens=4096), "shared_prefix_tokens"),
    (dict(shared_prefix_tokens=200_000), "shared_prefix_tokens"),
    (dict(draft_model="no-such-model", num_speculative_tokens=2), "draft_model"),
    (dict(draft_model=7, num_speculative_tokens=2), "draft_model"),
    (dict(draft_model=DRAFT), "num_speculative_tokens"),
    (dict(num_speculative_tokens=3), "num_speculative_tokens"),
    (dict(draft_model="qwen2.5-0.5b", num_speculative_tokens=3), "draft_model"),  # another vocabulary
]


@pytest.mark.parametrize("kw,field", ONE_LINE, ids=[f"{f}-{i}" for i, (_, f) in enumerate(ONE_LINE)])
def test_bad_inputs_one_line(kw, field):
    with pytest.raises(vl.VramlibError) as e:
        vl.serving_kv_capacity(TARGET, GPU, **kw)
    msg = str(e.value)
    assert "\n" not in msg and field in msg, msg


def test_lora_on_routed_experts_is_refused():
    with pytest.raises(vl.VramlibError, match="max_loras: .*not modelled"):
        vl.serving_kv_capacity("mixtral-8x7b", GPU, tp=2, max_loras=2)


def test_static_calculator_gives_the_same_extras():
    """VL.servingKvCapacity (the compiled kv_budget, serving_extras, serving_concurrency) against Python."""
    from nodejs import js, run_js

    cases = [dict(max_loras=4), dict(max_loras=2, max_lora_rank=64, lora_dtype="fp16", tp=2),
             dict(shared_prefix_tokens=1000, request_tokens=4096),
             dict(draft_model=DRAFT, num_speculative_tokens=3, request_tokens=4096),
             dict(draft_model=DRAFT, num_speculative_tokens=2, shared_prefix_tokens=1000, request_tokens=4096, tp=2,
                  max_loras=1),
             dict(max_lora_rank=17), dict(shared_prefix_tokens=4096, request_tokens=4096), dict(num_speculative_tokens=1),
             dict(draft_model="qwen2.5-0.5b", num_speculative_tokens=3)]
    spec = vl.get_model(TARGET)
    reqs, want = [], []
    for kw in cases:
        try:
            cap = vl.serving_kv_capacity(spec, GPU, **kw)
            want.append([cap.num_blocks, cap.kv_tokens, cap.max_concurrency, [[k, v] for k, v in cap.breakdown.items()]])
        except vl.VramlibError as e:
            want.append(str(e))
        reqs.append(f"(function () {{ var c = VL.servingKvCapacity(VL.model({js(model_json(spec))}), {js(GPU)}, "
                    f"{js(kw)}); return [c.num_blocks, c.kv_tokens, c.max_concurrency, c.breakdown.parts]; }})()")
    got = run_js(reqs)
    for kw, g, w in zip(cases, got, want):
        assert g.get("ok", g.get("err")) == w, kw
