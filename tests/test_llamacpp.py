"""llama.cpp in exact bytes (vramlib.serve.llamacpp) against llama.cpp's own buffers on tiny GGUFs
(tools/measure/llamacpp_buffers.py -> vramlib/data/measured/llamacpp_buffers.json: llama_get_memory_breakdown at
context creation, llama.cpp 0c1e57098 via llama-cpp-python 0.3.36)."""
from __future__ import annotations

import pytest

import vramlib as vl
from vramlib import validation as V
from vramlib.core import formulas as F
from vramlib.serve import llamacpp as L

DATA = V.load_measured("llamacpp_buffers")
RAN = [r for r in DATA["rows"] if r["exact"].get("memory_breakdown")]


def test_the_stored_file_says_how_it_was_made():
    assert DATA["command"].startswith("python tools/measure/llamacpp_buffers.py") and DATA["llama_cpp_python"]
    assert "0c1e57098" in DATA["llama_cpp_commit"] and len(RAN) >= 90 and len(DATA["rows"]) > len(RAN)
    assert {r["model"]["arch"] for r in RAN} == {"llama", "gemma2"}


def test_context_padding_is_llamacpps():
    """n_ctx padded to 256; per-sequence cells padded again without a unified cache; the micro-batch clamped to the
    *requested* context (every context that ran)."""
    for r in RAN:
        s = r["settings"]
        vals = dict(n_ctx=s["n_ctx"], n_seq=s["n_seq_max"], z_uni=int(s["kv_unified"]), n_b=s["n_batch"],
                    n_ub=s["n_ubatch"])
        assert F.evaluate(L.N_CTX_SEQ, **vals) == r["exact"]["llama_n_ctx_seq"], r["id"]
        assert F.evaluate(L.U_BATCH, **vals) == r["exact"]["llama_n_ubatch"], r["id"]


def test_kv_cache_and_model_buffer_are_exact():
    for buffer in ("kv cache", "model buffer"):
        rows = V.llamacpp_rows(buffer)
        assert len(rows) >= (90 if buffer == "kv cache" else 9)
        assert all(r.predicted == r.measured for r in rows), [r.id for r in rows if r.predicted != r.measured]


def test_compute_buffer_exact_with_and_without_flash_attention():
    rows = V.llamacpp_rows("compute buffer")
    fa = {r["id"] for r in RAN if V.llamacpp_flash_attn(r)}
    off = [r for r in rows if r.id not in fa]
    assert len(off) >= 60 and sum(r.predicted == r.measured for r in off) == len(off) - 1
    odd = next(r for r in off if r.predicted != r.measured)      # the rotated quantized K: named, within 1.5%
    assert "Hadamard" in odd.note and 0 < odd.error < 0.015
    on = [r for r in rows if r.id in fa]
    assert len(on) >= 26 and all(r.predicted == r.measured for r in on), [r.id for r in on if r.error]


def test_flash_attention_peak_regimes():
    """FA_FFN's cases (the replay of ggml-alloc): 3F + 3E when n_ff > 2 n_embd, 3F + 2E with a rotated V cache, a
    narrow FFN in the gap (3F + 2E, or 2F + 3E with two layers)."""
    u = 512
    def peak(n_embd, n_ff, layers, rv):
        vals = dict(n_embd=n_embd, n_ff=n_ff, n_ub=u, n_b=u, n_ctx=4096, n_l=layers, z_rv=rv)
        return F.to_int_bytes(F.evaluate(L.FA_FFN, **vals))
    e, f = 4 * 512 * u, 4 * 1536 * u
    assert peak(512, 1536, 4, 0) == 3 * f + 3 * e and peak(512, 1536, 4, 1) == 3 * f + 2 * e
    f2 = 4 * 768 * u
    assert peak(512, 768, 4, 0) == 3 * f2 + 2 * e and peak(512, 768, 2, 0) == 2 * f2 + 3 * e
    # a real shape where the attention output is another width is named as a bound
    q3 = L.llamacpp_memory("qwen3-8b", "q4_k_m", n_ctx=4096)
    assert any("lower bound" in n for n in q3.notes) == (vl.get_model("qwen3-8b").n_heads * 128 != 4096)


def test_the_issues_figures():
    """Without flash attention CodeLlama-34B at 16K holds its f32 KQ scores, n_ctx x n_ubatch x n_head x 4 bytes."""
    m = vl.get_model("codellama-34b")
    bd = L.llamacpp_memory(m, "q4_k_m", n_ctx=16384, flash_attn=False)
    assert bd["compute buffer"] > 16384 * 512 * m.n_heads * 4 > 2.1e9
    assert L.llamacpp_memory(m, "q4_k_m", n_ctx=16384)["compute buffer"] < bd["compute buffer"] / 5
    assert bd["kv cache"] == m.n_layers * 16384 * 2 * m.n_kv_heads * m.head_dim * 2


@pytest.mark.parametrize("kw, field", [(dict(type_v="q8_0", flash_attn=False), "type_v"), (dict(n_gpu_layers=-3),
                                        "n_gpu_layers"), (dict(type_k="q3_k"), "type_k"), (dict(n_ctx=0), "n_ctx"),
                                       (dict(flash_attn="yes"), "flash_attn")])
def test_refusals_name_the_field(kw, field):
    with pytest.raises(vl.VramlibError, match=field) as e:
        L.llamacpp_memory("llama-3.1-8b", "q4_k_m", **kw)
    assert "\n" not in str(e.value)


def test_layer_kinds_not_modelled_refuse():
    for name in ("deepseek-v3", "bamba-9b", "mixtral-8x7b"):
        with pytest.raises(vl.VramlibError, match="not modelled"):
            L.llamacpp_memory(name, "q4_k_m")


def test_sliding_window_layers_hold_their_window():
    m = vl.get_model("gemma-2-9b")
    short = L.llamacpp_memory(m, "q4_k_m", n_ctx=32768)
    full = L.llamacpp_memory(m, "q4_k_m", n_ctx=32768, swa_full=True)
    assert short["kv cache"] < full["kv cache"]


def test_the_longest_context_is_the_last_256_cells_that_fit():
    n = vl.llamacpp_max_ctx("llama-3.1-8b", "rtx-4090", "q4_k_m")
    budget = L.gpu_budget("rtx-4090")[0]
    on_gpu = (lambda k: sum(L.llamacpp_memory("llama-3.1-8b", "q4_k_m", n_ctx=k)[x] for x in L.GPU_BUFFERS))
    assert n % L.CTX_PAD == 0 and on_gpu(n) <= budget < on_gpu(n + L.CTX_PAD)
    assert vl.llamacpp_max_ctx("llama-3.1-8b", "rtx-4090", "q4_k_m", flash_attn=False) < n      # the f32 scores
    assert vl.llamacpp_max_ctx("llama-3.1-8b", "rtx-4090", "q4_k_m", type_k="q8_0", type_v="q8_0") > 1.8 * n
    assert vl.llamacpp_max_ctx("llama-3.1-70b", "rtx-4090", "q4_k_m") == 0                   # the weights alone


def test_llamacpp_keeps_windows_only_where_it_implements_them():
    """llama.cpp's llama architecture (Mistral-7B) and Phi-3 ignore the config's window: every layer keeps every
    token, and the result says so; Gemma-2 keeps its windows."""
    m = vl.get_model("mistral-7b")
    bd = L.llamacpp_memory(m, "q4_k_m", n_ctx=32768)
    assert bd["kv cache"] == m.n_layers * 32768 * 2 * m.n_kv_heads * m.head_dim * 2
    assert any("ignores mistral's sliding window" in n for n in bd.notes)
    g = vl.get_model("gemma-2-9b")
    assert L.llamacpp_memory(g, "q4_k_m", n_ctx=32768)["kv cache"] < g.n_layers * 32768 * 4 * g.n_kv_heads * g.head_dim
    assert L.llamacpp_refusal("mistral-7b") is None and "moe" in L.llamacpp_refusal("mixtral-8x7b")


def test_partial_offload_in_llamacpp_memory_is_the_split():
    """llamacpp_memory(n_gpu_layers=k): the GPU's buffers under the usual names, the host's prefixed, as
    offload_plan splits them; every byte accounted once."""
    bd = L.llamacpp_memory("llama-3.1-70b", "q4_k_m", n_ctx=8192, n_gpu_layers=44)
    p = vl.offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", n_gpu_layers=44)
    assert {k: bd[k] for k in L.GPU_BUFFERS} == dict(p.gpu)
    assert bd["host: model buffer"] == p.host["model buffer"] and bd["host: kv cache"] == p.host["kv cache"]
    whole = L.llamacpp_memory("llama-3.1-70b", "q4_k_m", n_ctx=8192)
    assert bd["kv cache"] + bd["host: kv cache"] == whole["kv cache"]
    with pytest.raises(vl.VramlibError, match="n_gpu_layers"):
        L.llamacpp_memory("llama-3.1-70b", "q4_k_m", n_gpu_layers=-2)
