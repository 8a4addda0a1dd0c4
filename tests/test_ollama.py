"""Ollama v0.12.0's llama-engine layer split (vramlib.serve.ollama): the llama graph formulas by hand, the layer
counts recomputed from ``estimateGPULayers``' rule with a loop of this file's own, monotonic in num_ctx, and one-line
refusals."""
import pytest

import vramlib as vl
from vramlib.catalog.precision import get_precision, precision_view
from vramlib.core.errors import VramlibError
from vramlib.memory.inference import layer_weights_of
from vramlib.serve.llamacpp import gpu_budget
from vramlib.serve.ollama import OllamaConfig, ollama_estimate

MIB = 2**20


def _go_llama_graph(context, batch, embedding, heads, heads_kv, vocab):
    """fs/ggml/ggml.go#L614-L623 in Go's uint64 arithmetic (left to right, each division rounding down)."""
    emb_heads = embedding // heads
    full = max(4 * batch * (1 + 4 * embedding + context * (1 + heads)), 4 * batch * (embedding + vocab))
    partial = 4 * batch * embedding + max(
        4 * batch * (1 + embedding + max(context, embedding)) + embedding * embedding * 9 // 16
        + 4 * context * (batch * heads + emb_heads * heads_kv),
        4 * batch * (embedding + vocab) + embedding * vocab * 105 // 128)
    return partial, full


def test_llama_graph_by_hand_for_llama_70b():
    """Llama-3.1-70B (e 8192, 64 heads, 8 KV heads, vocab 128256) at num_ctx 4096, batch 512:
    full = max(2048 * (1 + 32768 + 4096 * 65), 2048 * 136448) = 2048 * 299009;
    partial = 2048 * 8192 + max(2048 * 16385 + 8192^2 * 9/16 + 16384 * (512 * 64 + 128 * 8),
                                2048 * 136448 + 8192 * 128256 * 105/128) = 16777216 + 279445504 + 861880320;
    KV per layer = 4096 * (128 + 128) * 8 * 2 bytes (f16)."""
    r = ollama_estimate("llama-3.1-70b", "rtx-4090")
    assert r.graph_full == 2048 * 299009 == 612_370_432
    assert r.graph_partial == 16_777_216 + 279_445_504 + 861_880_320 == 1_158_103_040
    assert r.kv_layer_bytes == 4096 * 256 * 8 * 2 == 16 * MIB and r.kv_bytes == 80 * 16 * MIB
    assert (r.graph_partial, r.graph_full) == _go_llama_graph(4096, 512, 8192, 64, 8, 128256)


@pytest.mark.parametrize("model,settings", [
    ("llama-3.1-8b", dict(num_ctx=8192, num_parallel=2, num_batch=256)),
    ("llama-3.1-8b", dict(num_ctx=300, num_batch=512)),                      # batch = min(num_ctx, num_batch)
    ("mistral-small-24b", dict(num_ctx=32768)),                               # head_dim 128 != 5120 / 32
    ("llama-3.2-1b", dict(num_ctx=2048, flash_attention=True, kv_cache_type="q4_0"))])
def test_llama_graph_formula_matches_go_arithmetic(model, settings):
    m = vl.get_model(model)
    r = ollama_estimate(m, "h100-sxm-80gb", **settings)
    c = OllamaConfig(**settings)
    ctx, batch = min(c.num_ctx, m.max_context), min(c.num_ctx, c.num_batch)
    assert r.batch == batch
    assert (r.graph_partial, r.graph_full) == _go_llama_graph(ctx * c.num_parallel, batch, m.hidden, m.n_heads,
                                                              m.n_kv_heads, m.vocab)
    per_elem = {"f16": 2, "q8_0": 1, "q4_0": 0.5}[c.kv_type]
    assert r.kv_layer_bytes == int(ctx * c.num_parallel * 2 * m.head_dim * m.n_kv_heads * per_elem)


def _rule(model, gpu, weights="q4_k_m", num_ctx=4096):
    """estimateGPULayers for one CUDA GPU, written out again: [blocks placed, output placed, VRAM expected]."""
    m = vl.get_model(model)
    outside, layers = layer_weights_of(m.view(), precision_view(get_precision(weights)))
    kv = num_ctx * 2 * m.head_dim * m.n_kv_heads * 2
    sizes = [x[0] + kv for x in layers]
    output = sum(n for kind, n in outside if kind != "embed")        # output_norm + output
    partial, full = _go_llama_graph(num_ctx, min(num_ctx, 512), m.hidden, m.n_heads, m.n_kv_heads, m.vocab)
    free, minimum, graph = gpu_budget(gpu)[0], 457 * MIB, max(partial, full)
    assert free >= graph + minimum + 2 * sizes[0]                     # the GPU is usable
    used, placed = minimum + sizes[0], 0                             # minimum + one block as a buffer
    for size in reversed(sizes):                                     # from the last block down
        if not free > used + graph + size:
            break
        used += size
        placed += 1
    out = placed == len(sizes) and free > used + graph + output
    used += output if out else 0
    return placed, out, used + (full if out else partial)


def test_layer_count_llama_70b_q4_k_m_on_rtx_4090():
    r = ollama_estimate("llama-3.1-70b", "rtx-4090", "q4_k_m")
    assert (r.layers_on_gpu, r.output_on_gpu, r.vram_bytes) == _rule("llama-3.1-70b", "rtx-4090")
    assert (r.layers_on_gpu, r.output_on_gpu, r.n_gpu_layers) == (43, False, 43)
    assert r.graph == r.graph_partial and r.vram_bytes <= r.free_bytes and not r.fully_offloaded
    assert r.layer_bytes[-1] == r.layer_bytes[0]                     # q4_k_m's upgraded first and last layers
    assert r.host_bytes == sum(r.layer_bytes[:80 - 43]) + r.output_bytes


def test_layer_count_llama_8b_q4_k_m_on_t4():
    r = ollama_estimate("llama-3.1-8b", "t4", "q4_k_m")
    assert (r.layers_on_gpu, r.output_on_gpu, r.vram_bytes) == _rule("llama-3.1-8b", "t4")
    assert (r.layers_on_gpu, r.output_on_gpu, r.n_gpu_layers) == (32, True, 33)
    assert r.fully_offloaded and r.graph == r.graph_full and r.host_bytes == 0
    partial = ollama_estimate("llama-3.1-8b", "t4", num_ctx=65536)   # 8 GiB of KV: a partial split
    assert (partial.layers_on_gpu, partial.output_on_gpu, partial.vram_bytes) == _rule("llama-3.1-8b", "t4",
                                                                                      num_ctx=65536)
    assert 0 < partial.layers_on_gpu < 32 and not partial.output_on_gpu


@pytest.mark.parametrize("model,gpu", [("llama-3.1-70b", "rtx-4090"), ("llama-3.1-8b", "t4"),
                                       ("llama-3.1-70b", "h100-sxm-80gb")])
def test_monotonic_in_num_ctx(model, gpu):
    runs = [ollama_estimate(model, gpu, num_ctx=n) for n in (512, 2048, 4096, 8192, 16384, 32768, 65536, 131072)]
    for a, z in zip(runs, runs[1:]):
        assert z.layers_on_gpu <= a.layers_on_gpu and z.n_gpu_layers <= a.n_gpu_layers
        assert z.kv_layer_bytes > a.kv_layer_bytes and z.graph_partial >= a.graph_partial
        assert z.graph_full >= a.graph_full
    assert runs[0].n_gpu_layers > runs[-1].n_gpu_layers


def test_settings_as_ollama_reads_them():
    base = ollama_estimate("llama-3.1-8b", "t4")
    fa = ollama_estimate("llama-3.1-8b", "t4", flash_attention=True, kv_cache_type="q8_0")
    assert fa.kv_layer_bytes * 2 == base.kv_layer_bytes
    ignored = ollama_estimate("llama-3.1-8b", "t4", kv_cache_type="q8_0")      # no flash attention: f16
    assert ignored.kv_layer_bytes == base.kv_layer_bytes and any("ignored" in n for n in ignored.notes)
    assert ollama_estimate("llama-3.1-8b", "t4", num_ctx=10**6).num_ctx == 131072
    assert ollama_estimate("llama-3.1-8b", "t4", num_parallel=2).kv_layer_bytes == 2 * base.kv_layer_bytes
    less = ollama_estimate("llama-3.1-70b", "rtx-4090", gpu_overhead="2GiB")
    assert less.layers_on_gpu < ollama_estimate("llama-3.1-70b", "rtx-4090").layers_on_gpu
    none = ollama_estimate("llama-3.1-70b", "t4", gpu_overhead="14GiB")    # below GPU_USABLE: all on the CPU
    assert not none.usable and none.n_gpu_layers == 0 and none.vram_bytes == 0
    assert none.total_bytes == sum(none.layer_bytes) + none.output_bytes
    assert ollama_estimate("llama-3.1-8b", "t4", config=OllamaConfig(num_ctx=8192)).num_ctx == 8192


@pytest.mark.parametrize("call,word", [
    (lambda: ollama_estimate("qwen3-8b", "t4"), "qwen3"),
    (lambda: ollama_estimate("mixtral-8x7b", "t4"), "mixtral"),
    (lambda: ollama_estimate("mistral-7b", "t4"), "sliding"),
    (lambda: ollama_estimate("gemma-3-4b", "t4"), "gemma3"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", "gptq-4bit-g128"), "GGUF"),
    (lambda: ollama_estimate("llama-3.1-8b", "mi300x"), "amd"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", num_ctx=0), "num_ctx"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", num_ctxx=8192), "num_ctx"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", kv_cache_type="q5_0"), "kv_cache_type"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", flash_attention="yes"), "flash_attention"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", gpu_overhead="lots"), "gpu_overhead"),
    (lambda: ollama_estimate("llama-3.1-8b", "t4", config=dict(num_ctx=8192)), "OllamaConfig"),
    (lambda: ollama_estimate("no-such-model", "t4"), "no-such-model")])
def test_one_line_errors(call, word):
    with pytest.raises(VramlibError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and word in text
