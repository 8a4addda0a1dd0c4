"""vramlib.serve.sglang: SGLang 0.5.3's defaults by gpu_mem and its KV-pool budget (docs/runtime-rules.md section 2)."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest

from vramlib.catalog.hardware import get_gpu
from vramlib.core import formulas as F
from vramlib.core.errors import VramlibError
from vramlib.memory.allocator import context_figure
from vramlib.memory.inference import weights_bytes
from vramlib.serve import sglang as S
from vramlib.serve.serving import cuda_total

GIB = 1024   # MiB


def _table(gpu_mem: int, tp: int = 1) -> tuple[int, int]:
    return (F.evaluate(S.CHUNKED_PREFILL_SIZE, gpu_mem=gpu_mem),
            F.evaluate(S.CUDA_GRAPH_MAX_BS, gpu_mem=gpu_mem, tp=tp))


# (tier's upper bound in MiB, chunked_prefill_size, cuda_graph_max_bs tp < 4, cuda_graph_max_bs tp >= 4)
TIERS = [(20 * GIB, 2048, 8, 8), (35 * GIB, 2048, 16, 80), (60 * GIB, 4096, 32, 160), (90 * GIB, 8192, 256, 512),
         (160 * GIB, 8192, 256, 512), (None, 16384, 512, 512)]


@pytest.mark.parametrize("i", range(len(TIERS)))
def test_piecewise_table_at_each_tier_boundary(i):
    bound, chunk, bs_small, bs_big = TIERS[i]
    low = 1 if i == 0 else TIERS[i - 1][0]            # the first MiB of this tier (the previous bound: "<" excludes it)
    high = bound - 1 if bound else 10**7              # its last MiB
    for g in (low, high):
        assert _table(g, 1) == (chunk, bs_small), g
        assert _table(g, 3) == (chunk, bs_small), g
        assert _table(g, 4) == (chunk, bs_big), g
        assert _table(g, 8) == (chunk, bs_big), g


def test_reserved_floor_applies_only_above_60_gib():
    vals = dict(chunked_prefill_size=4096, max_prefill_tokens=16384, cuda_graph_max_bs=32, tp=1, pp=1, spec_reserved=0)
    assert F.evaluate(S.RESERVED_MEM, gpu_mem=60 * GIB, **vals) == 512 + 4096 * 3 // 2 + 64 + 128
    assert F.evaluate(S.RESERVED_MEM, gpu_mem=60 * GIB + 1, **vals) == 10 * GIB
    off = dict(vals, chunked_prefill_size=-1)          # chunked prefill off: max_prefill_tokens counts
    assert F.evaluate(S.RESERVED_MEM, gpu_mem=60 * GIB, **off) == 512 + 16384 * 3 // 2 + 64 + 128


@pytest.mark.parametrize("gpu, gpu_mem, reserved, fraction", [
    ("t4", 15360, 3728, 0.757), ("rtx-4090", 24564, 3744, 0.848), ("a100-40gb", 40960, 6848, 0.833),
    ("a100-80gb", 81920, 13440, 0.836), ("h100-sxm-80gb", 81559, 13440, 0.835),
    ("h100-pcie-80gb", 81559, 13440, 0.835)])
def test_derived_fractions_of_runtime_rules(gpu, gpu_mem, reserved, fraction):
    d = S.sglang_defaults(gpu)
    assert d["gpu_mem"] == gpu_mem == get_gpu(gpu).memory_bytes // 2**20   # nvidia-smi's total, not CUDA's
    assert d["reserved_mem"] == reserved
    assert d["mem_fraction_static"] == fraction == round((gpu_mem - reserved) / gpu_mem, 3)


def test_defaults_follow_given_settings_and_speculative_reserve():
    h100 = S.sglang_defaults("h100-sxm-80gb")
    assert (h100["chunked_prefill_size"], h100["cuda_graph_max_bs"]) == (8192, 256)
    assert S.sglang_defaults("h100-sxm-80gb", speculative_algorithm="NGRAM") == h100
    eagle = S.sglang_defaults("h100-sxm-80gb", speculative_algorithm="eagle")     # SGLang upper-cases the name
    assert eagle["reserved_mem"] == 13440 + 2048 and eagle["mem_fraction_static"] == round((81559 - 15488) / 81559, 3)
    standalone = S.sglang_defaults("h100-sxm-80gb", speculative_algorithm="STANDALONE")
    assert standalone["reserved_mem"] == 13440 + 6144
    t4 = S.sglang_defaults("t4", chunked_prefill_size=4097, cuda_graph_max_bs=4)
    assert t4["reserved_mem"] == Fraction(512 * 2 + 4097 * 3 + 4 * 4 + 256, 2)    # a half MiB: SGLang's float
    given = S.sglang_defaults("t4", mem_fraction_static=0.8)
    assert given["mem_fraction_static"] == 0.8 and given["reserved_mem"] is None


def _by_hand_h100_llama(fraction=Fraction("0.835"), elem=2):
    card = get_gpu("h100-sxm-80gb")
    total = cuda_total(card)[0] - context_figure(card)[1].bytes        # free memory at init
    weights = weights_bytes("llama-3.1-8b", "bf16")
    available = total - weights                                        # free after the weights
    cell = 8 * 128 * 32 * 2 * elem                                     # n_kv_heads * head_dim * n_layers * 2 * elem
    rest = available - total * (1 - fraction)
    return math.floor(rest / cell), total, weights, cell, rest


def test_token_count_llama_31_8b_bf16_h100_by_hand():
    tokens, total, weights, cell, rest = _by_hand_h100_llama()
    assert S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", "bf16") == tokens
    assert S.sglang_cell_size("llama-3.1-8b", "h100-sxm-80gb") == cell == 131072
    # SGLang's own float GiB arithmetic lands on the same count here
    gib = 1 << 30
    assert int(((total - weights) / gib - total / gib * (1 - 0.835)) * gib // cell) == tokens
    bd = S.sglang_memory("llama-3.1-8b", "h100-sxm-80gb", "bf16")
    assert bd["weights"] == weights and bd["kv pool"] == tokens * cell
    assert bd["reserved (activations, CUDA graphs)"] == F.to_int_bytes(total * (1 - Fraction("0.835")))
    assert bd["CUDA context"] == context_figure(get_gpu("h100-sxm-80gb"))[1].bytes
    assert bd.total <= cuda_total("h100-sxm-80gb")[0] and f"{tokens:,} tokens" in bd.title
    assert all("\n" not in n for n in bd.notes)


def test_fp8_halves_the_cell_size_and_about_doubles_the_tokens():
    for model in ("llama-3.1-8b", "deepseek-v3"):
        auto = S.sglang_cell_size(model, "h100-sxm-80gb")
        for dtype in ("fp8_e4m3", "fp8_e5m2"):
            assert 2 * S.sglang_cell_size(model, "h100-sxm-80gb", kv_cache_dtype=dtype) == auto
    assert S.sglang_cell_size("deepseek-v3", "h100-sxm-80gb") == (512 + 64) * 61 * 2    # MLA: latent + rope key
    tokens = _by_hand_h100_llama(elem=1)[0]
    assert S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", kv_cache_dtype="fp8_e4m3") == tokens
    assert tokens in (2 * _by_hand_h100_llama()[0], 2 * _by_hand_h100_llama()[0] + 1)


def test_default_max_running_requests():
    tokens = _by_hand_h100_llama()[0]
    run = S.sglang_max_running_requests
    assert run("llama-3.1-8b", "h100-sxm-80gb") == min(max(int(tokens / 131072 * 512), 2048), 4096) == 2048
    assert run("llama-3.1-8b", "h100-sxm-80gb", context_length=1024) == 4096
    ctx = 70000
    assert run("llama-3.1-8b", "h100-sxm-80gb", context_length=ctx) == int(tokens / ctx * 512)
    assert 2048 < int(tokens / ctx * 512) < 4096


def test_eagle_headroom_enlarges_the_shared_pool():
    kw = dict(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1,
              speculative_num_draft_tokens=4)
    fraction = Fraction(str(S.sglang_defaults("h100-sxm-80gb", speculative_algorithm="EAGLE")["mem_fraction_static"]))
    tokens, *_ = _by_hand_h100_llama(fraction)
    assert S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", **kw) == tokens
    bd = S.sglang_memory("llama-3.1-8b", "h100-sxm-80gb", **kw)
    assert bd["kv pool"] == (tokens + 2048 * 3 * 1 + 2048 * 4 + 100) * 131072
    assert any("draft model" in n for n in bd.notes)


def test_no_pool_when_the_weights_leave_none():
    assert S.sglang_max_tokens("llama-3.1-70b", "h100-sxm-80gb", "bf16") == 0
    bd = S.sglang_memory("llama-3.1-70b", "h100-sxm-80gb", "bf16")
    assert bd["kv pool"] == 0 and any("does not start" in n for n in bd.notes)


@pytest.mark.parametrize("call, field, words", [
    (lambda: S.SGLangConfig(tp_size=2), "tp_size", "tensor parallelism"),
    (lambda: S.SGLangConfig(enable_dp_attention=True), "enable_dp_attention", "data-parallel attention"),
    (lambda: S.SGLangConfig(page_size=16), "page_size", "page sizes"),
    (lambda: S.SGLangConfig(speculative_algorithm="MEDUSA"), "speculative_algorithm",
     "allowed: None, 'EAGLE', 'STANDALONE', 'NGRAM'"),
    (lambda: S.SGLangConfig(kv_cache_dtype="int4"), "kv_cache_dtype", "auto"),
    (lambda: S.SGLangConfig(mem_fraction_static=1.5), "mem_fraction_static", "(0, 1]"),
    (lambda: S.SGLangConfig(mem_fraction_static=0), "mem_fraction_static", "(0, 1]"),
    (lambda: S.SGLangConfig(chunked_prefill_size="big"), "chunked_prefill_size", "integer"),
    (lambda: S.SGLangConfig(cuda_graph_max_bs=0), "cuda_graph_max_bs", "positive integer"),
    (lambda: S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", speculative_algorithm="EAGLE"),
     "speculative_num_steps", "EAGLE"),
    (lambda: S.SGLangConfig(speculative_num_steps=3), "speculative_num_steps", "used only with"),
    (lambda: S.SGLangConfig(tp=2), "argument", "tp_size"),
    (lambda: S.sglang_memory("gemma-3-4b", "h100-sxm-80gb"), "model", "multimodal"),
    (lambda: S.sglang_memory("mistral-7b", "h100-sxm-80gb"), "model", "sliding layers"),
    (lambda: S.sglang_memory("bamba-9b", "h100-sxm-80gb"), "model", "mamba"),
    (lambda: S.sglang_memory("llama-3.1-8b", "mi300x"), "gpu", "nvidia-smi"),
    (lambda: S.sglang_memory("llama-3.1-8b", "h100-sxm-80gb", context_length=10**6), "context_length", "max_context"),
    (lambda: S.sglang_memory("llama-3.1-8b", "t4", chunked_prefill_size=-1), "mem_fraction_static", "no static"),
    (lambda: S.sglang_memory("llama-3.1-8b", "h100-sxm-80gb", config=3), "config", "SGLangConfig"),
    (lambda: S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", kv_dtype="fp8"), "argument", "kv_cache_dtype"),
])
def test_bad_inputs_are_one_line_naming_the_field(call, field, words):
    with pytest.raises(VramlibError) as err:
        call()
    msg = str(err.value)
    assert "\n" not in msg and field in msg and words in msg, msg


def test_config_is_frozen_and_reusable():
    c = S.SGLangConfig(kv_cache_dtype="fp8_e4m3", context_length=8192)
    with pytest.raises(AttributeError):
        c.tp_size = 2
    assert S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", config=c) == \
        S.sglang_max_tokens("llama-3.1-8b", "h100-sxm-80gb", kv_cache_dtype="fp8_e4m3")
    assert c.with_(kv_cache_dtype="auto").kv_cache_dtype == "auto"
