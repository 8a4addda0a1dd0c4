"""vLLM 0.11's KV-cache budget for sliding-window and hybrid (sliding + full) models, recomputed by hand from the source
(vllm-project/vllm v0.11.0, vllm/v1/core/kv_cache_utils.py, kv_cache_interface.py, single_type_kv_cache_manager.py,
kv_cache_manager.py; docs/runtime-rules.md 1.3): the groups, the blocks, the logged tokens and the concurrency."""
from __future__ import annotations

from fractions import Fraction

import pytest

import vramlib as vl


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def vllm_groups(layer_types: list[str]) -> list[list[int]]:
    """vLLM's grouping, written again from the source: ``is_kv_cache_spec_uniform`` -> one group of every layer; else
    ``_get_kv_cache_groups_uniform_page_size``: layers by spec (in order of first appearance), ``group_size = min(len)``,
    each type split into ``num_groups = cdiv(len, group_size)`` groups ``layers[i::num_groups]``."""
    same: dict[str, list[int]] = {}
    for i, t in enumerate(layer_types):
        same.setdefault(t, []).append(i)
    if len(same) == 1:
        return [list(range(len(layer_types)))]
    group_size = min(len(v) for v in same.values())
    out = []
    for layers in same.values():
        n = cdiv(len(layers), group_size)
        out += [layers[i::n] for i in range(n)]
    return out


def by_hand(m, cap, window: int | None = None) -> dict:
    """Blocks, logged tokens, blocks per request and concurrency from the source's rules, from the capacity's available
    memory (the part of the budget that is the same as for full attention)."""
    types = [m.layer_types[0]] * m.n_layers if len(m.layer_types) == 1 else list(m.layer_types)
    groups = vllm_groups(types)
    group_size = max(len(g) for g in groups)                                   # get_kv_cache_config_from_groups
    page = 2 * cap.block_size * cap.kv_heads_per_gpu * m.head_dim * 2        # AttentionSpec.page_size_bytes, bf16
    blocks = int(cap.available_kv_bytes // page // group_size)                # get_num_blocks
    tokens = blocks // len(groups) * cap.block_size                           # "GPU KV cache size: %s tokens"
    w = window or m.sliding_window
    sliding_blocks = cdiv(min(w - 1 + cap.max_num_batched_tokens, cap.request_tokens), cap.block_size) + 1
    full_blocks = cdiv(cap.request_tokens, cap.block_size)
    per_request = sum(sliding_blocks if types[g[0]] == "sliding" else full_blocks for g in groups)
    need = page * sum(cdiv(min(w - 1 + cap.max_num_batched_tokens, cap.max_model_len), cap.block_size) + 1
                      if t == "sliding" else cdiv(cap.max_model_len, cap.block_size) for t in types)
    return dict(groups=len(groups), group_size=group_size, page=page, blocks=blocks, tokens=tokens,
                per_request=per_request, concurrency=Fraction(blocks, per_request), need=need)


def check(m, cap, want: dict) -> None:
    assert cap.starts
    assert (cap.kv_groups, cap.kv_group_layers) == (want["groups"], want["group_size"])
    assert cap.block_bytes == want["page"] * want["group_size"]
    assert cap.num_blocks == want["blocks"] and cap.kv_tokens == want["tokens"]
    assert cap.kv_cache_bytes == want["blocks"] * want["page"] * want["group_size"] <= cap.available_kv_bytes
    assert cap.max_concurrency == float(want["concurrency"])
    assert cap.max_concurrent_requests == want["concurrency"].numerator // want["concurrency"].denominator
    assert cap.max_len_kv_bytes == want["need"]
    assert cap.fits_max_model_len == (want["need"] <= cap.available_kv_bytes)


def test_mistral_7b_on_an_a100_is_one_sliding_group():
    """Every layer slides with one window (4,096): one group of all 32 layers, the same blocks and logged tokens as a
    full-attention twin; only the per-request blocks differ: cdiv(min(4095 + 2048, 32768), 16) + 1 = 385."""
    m = vl.get_model("mistral-7b")
    cap = vl.serving_kv_capacity(m, "a100-80gb", weights="bf16")
    want = by_hand(m, cap)
    assert cap.max_num_batched_tokens == 2048 and cap.max_model_len == 32768 and cap.block_size == 16
    assert (want["groups"], want["group_size"], want["page"], want["per_request"]) == (1, 32, 65536, 385)
    check(m, cap, want)
    assert (cap.num_blocks, cap.kv_tokens) == (29050, 464800) and round(cap.max_concurrency, 2) == 75.45
    twin = vl.serving_kv_capacity(m.with_(layer_types=("full",)), "a100-80gb", weights="bf16")
    assert (twin.num_blocks, twin.kv_tokens, twin.available_kv_bytes) == (cap.num_blocks, cap.kv_tokens,
                                                                           cap.available_kv_bytes)
    assert twin.max_concurrency == cap.num_blocks / cdiv(32768, 16) < cap.max_concurrency
    assert "29,050 blocks of 16 tokens = 464,800 tokens" in cap.verdict


def test_gemma_3_27b_on_an_h100_is_seven_groups_of_ten():
    """52 sliding (1,024) + 10 full: group_size 10, the sliding layers in cdiv(52, 10) = 6 groups (9, 9, 9, 9, 8, 8
    layers: vLLM's "padding layers"), the full ones in 1; the pool is available // page // 10 blocks and vLLM logs
    blocks // 7 x 16 tokens. At its trained 131,072 tokens one request's cache (14.67 GB) exceeds the pool."""
    m = vl.get_model("gemma-3-27b")
    assert [len(g) for g in vllm_groups(list(m.layer_types))] == [9, 9, 9, 9, 8, 8, 10]
    cap = vl.serving_kv_capacity(m, "h100-sxm-80gb", weights="bf16")
    want = by_hand(m, cap)
    assert cap.max_num_batched_tokens == 8192 and cap.request_tokens == 131072
    assert (want["groups"], want["group_size"], want["per_request"]) == (7, 10, 6 * (576 + 1) + 8192)
    check(m, cap, want)
    assert (cap.num_blocks, cap.kv_tokens) == (8550, 19536)
    assert not cap.fits_max_model_len and "does not fit" in cap.verdict and "7 KV-cache groups" in cap.verdict
    short = vl.serving_kv_capacity(m, "h100-sxm-80gb", weights="bf16", max_model_len=32768)
    want = by_hand(m, short)
    assert want["per_request"] == 6 * (cdiv(1023 + 8192, 16) + 1) + 2048
    check(m, short, want)
    assert short.fits_max_model_len and short.max_concurrent_requests == 8550 // 5510


def test_gemma_2_9b_on_an_h100_is_two_groups():
    """21 sliding (4,096) + 21 full: two groups of 21; at its 8,192-token context a request holds 513 + 512 blocks."""
    m = vl.get_model("gemma-2-9b")
    cap = vl.serving_kv_capacity(m, "h100-sxm-80gb", weights="bf16")
    want = by_hand(m, cap)
    assert (want["groups"], want["group_size"], want["page"]) == (2, 21, 131072)
    assert want["per_request"] == (cdiv(min(4095 + 8192, 8192), 16) + 1) + 512 == 1025
    check(m, cap, want)
    assert (cap.num_blocks, cap.kv_tokens) == (17071, 136560) and cap.max_concurrent_requests == 16


@pytest.mark.parametrize("model,gpu,kw", [("gemma-3-1b", "rtx-4090", dict(tp=1, block_size=32)),
                                          ("gemma-3-4b", "a100-80gb", dict(request_tokens=4096)),
                                          ("gemma-2-27b", "h100-sxm-80gb", dict(tp=2, kv_dtype="fp8")),
                                          ("phi-3-mini", "a100-80gb", dict(max_num_batched_tokens=512))])
def test_other_sliding_models_follow_the_same_rule(model, gpu, kw):
    m = vl.get_model(model)
    cap = vl.serving_kv_capacity(m, gpu, **kw)
    want = by_hand(m, cap)
    if kw.get("kv_dtype") == "fp8":  # one byte per element: half the bf16 page
        page = want["page"] // 2
        blocks = int(cap.available_kv_bytes // page // want["group_size"])
        want.update(page=page, blocks=blocks, tokens=blocks // want["groups"] * cap.block_size,
                    concurrency=Fraction(blocks, want["per_request"]), need=want["need"] // 2)
    check(m, cap, want)


def test_gpt_oss_grouping_without_its_unmodelled_parts():
    """gpt-oss alternates 128-token windows with full layers (two groups of 12). The catalogue's gpt-oss stays refused
    for what the uniform-layer check does not model (attention sinks, a router bias); without them the grouping is
    vLLM's."""
    with pytest.raises(vl.InvalidValueError, match="attention sinks"):
        vl.serving_kv_capacity("gpt-oss-20b", "h100-sxm-80gb")
    m = vl.get_model("gpt-oss-20b").with_(attn_sinks=False, router_bias=False)
    cap = vl.serving_kv_capacity(m, "h100-sxm-80gb", weights="mxfp4-moe")
    want = by_hand(m, cap)
    assert (want["groups"], want["group_size"], want["per_request"]) == (2, 12, cdiv(127 + 8192, 16) + 1 + 8192)
    check(m, cap, want)


def test_a_full_attention_model_is_unchanged():
    """One group of every layer: available // (page x L) blocks, blocks x 16 tokens, blocks / cdiv(T, 16); the verdict
    reads as before."""
    cap = vl.serving_kv_capacity("llama-3.1-8b", "h100-sxm-80gb")
    page = 2 * 16 * 8 * 128 * 2
    assert (cap.kv_groups, cap.kv_group_layers, cap.sliding_layers) == (1, 32, 0)
    assert cap.num_blocks == cap.available_kv_bytes // (page * 32) == 25994 and cap.kv_tokens == 25994 * 16
    assert cap.max_concurrency == 25994 / cdiv(131072, 16)
    assert cap.verdict == ("llama-3.1-8b on h100-sxm-80gb: 25,994 blocks of 16 tokens = 415,904 tokens of KV cache "
                           "(54.51 GB (50.77 GiB) per GPU); 3.17x concurrency for 131,072-token requests.")
    assert not any("sliding" in n for n in cap.breakdown.notes)


@pytest.mark.parametrize("model,what", [("bamba-9b", "Mamba-2 layers"), ("llama-4-scout", "chunked-local layers"),
                                        ("deepseek-v3", "multi-head latent attention")])
def test_mamba_chunked_and_mla_are_refused_in_one_line(model, what):
    with pytest.raises(vl.InvalidValueError) as e:
        vl.serving_kv_capacity(model, "h200")
    assert what in str(e.value) and "does not model" in str(e.value) and "\n" not in str(e.value)


def test_the_roofline_still_reads_uniform_full_attention():
    with pytest.raises(vl.InvalidValueError, match="uniform full-attention layers"):
        vl.roofline("gemma-2-9b", "h200")


def test_extras_with_sliding_layers_are_refused_in_one_line():
    for kw, name in ((dict(shared_prefix_tokens=1024), "shared_prefix_tokens"),
                     (dict(draft_model="llama-2-7b", num_speculative_tokens=3), "draft_model")):
        with pytest.raises(vl.InvalidValueError) as e:
            vl.serving_kv_capacity("mistral-7b", "h100-sxm-80gb", **kw)
        assert str(e.value).startswith(name) and "sliding-window layers" in str(e.value) and "\n" not in str(e.value)
    assert vl.serving_kv_capacity("gemma-2-9b", "h100-sxm-80gb", max_loras=1).lora_slot_bytes > 0


def held_blocks(window: int, block: int, chunks: list[int]) -> int:
    """The most blocks one request holds in one sliding group while it is scheduled ``chunks`` tokens step by step, as
    ``KVCacheManager.allocate_slots`` does: ``remove_skipped_blocks(num_computed_tokens)`` turns the blocks before
    ``(num_computed - window + 1) // block`` into null blocks, then ``cdiv(num_tokens, block)`` slots are held."""
    computed, peak = 0, 0
    for n in chunks:
        nulls = max(0, (computed - window + 1) // block)
        peak = max(peak, cdiv(computed + n, block) - nulls)
        computed += n
    return peak


@pytest.mark.parametrize("window,nbt,total", [(4096, 2048, 32768), (1024, 8192, 131072), (128, 8192, 40000),
                                              (4096, 8192, 8192)])
def test_running_requests_never_hold_more_than_the_bound(window, nbt, total):
    """The concurrency's per-request blocks (``SlidingWindowSpec.max_memory_usage_bytes``) bound what the scheduler
    really allocates to a running request in a sliding group (``allocate_slots``), for any chunking of at most
    max_num_batched_tokens per step; a chunk of max_num_batched_tokens that starts one token short of a block's end
    reaches it; a decoding request holds only cdiv(window - 1, block) + 1."""
    block = 16
    bound = cdiv(min(window - 1 + nbt, total), block) + 1
    for first in (1, 15, 16, 17, nbt - 1, nbt):  # a first chunk, then full chunks, then decode
        rest = total - first
        chunks = [first] + [nbt] * (rest // (2 * nbt)) + [1] * (rest - nbt * (rest // (2 * nbt)))
        assert held_blocks(window, block, chunks) <= bound
    if window - 1 + nbt < total:
        c = window - 1 + 16 * 10 + 15  # (c - window + 1) % block == block - 1
        assert held_blocks(window, block, [c, min(nbt, total - c)]) == bound
    decode = held_blocks(window, block, [1] * min(total, window + 3 * block))
    assert decode == min(cdiv(window - 1, block) + 1, cdiv(min(total, window + 3 * block), block))


def test_the_static_calculator_gives_the_same_sliding_budgets():
    """The compiled kv_budget (serving_layout, sliding_group_blocks, serving_layers_problem) gives Python's numbers,
    refusals and verdicts for sliding, hybrid, Mamba and chunked models."""
    from test_portable import _heads, _same_panel
    from vramlib.present.widgets.serving import serving_compute

    specs = [vl.get_model(n) for n in ("mistral-7b", "gemma-3-27b", "gemma-2-9b", "gemma-3-1b", "bamba-9b",
                                       "llama-4-scout")]
    specs.append(vl.get_model("gpt-oss-20b").with_(attn_sinks=False, router_bias=False))
    settings = (("bf16", "auto", "a100-80gb", 1, 0.9, 16, 2048, 32768),
                ("int4", "fp8", "rtx-4090", 1, 0.95, 32, 2048, 4096),
                ("bf16", "auto", "h100-sxm-80gb", 2, 0.9, 16, 8192, 131072),
                ("fp16", "fp8_e5m2", "h100-sxm-80gb", 1, 0.5, 8, 512, 100))
    runs = [(spec, dict(_heads(spec), weights=w, kv_dtype=kv, gpu=gpu, tp=tp, gpu_memory_utilization=util,
                        block_size=blk, max_num_batched_tokens=nbt, request_tokens=req))
            for spec in specs for w, kv, gpu, tp, util, blk, nbt, req in settings]
    assert _same_panel("serving", serving_compute, runs) == 28
