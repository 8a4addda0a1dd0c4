"""Measure llama.cpp's own memory buffers (model, KV cache, output, compute) on the CPU.

What is measured
----------------
Tiny synthetic GGUF models are written with ``gguf.GGUFWriter`` (random weights, a minimal SPM
"llama" tokenizer: ``<unk> <s> </s>``, 256 byte tokens, then plain tokens up to the vocab size):
Llama MHA and GQA in F32, F16, Q8_0 and Q4_0 (quantized with ``gguf.quants.quantize``), one with a
32000-token tied embedding, and Gemma-2 (sliding-window attention on every other layer); models G4 K L M N P
and their flash-attention contexts (:data:`HELD_OUT`) were added after the compute-buffer rule was written and
their rows carry ``held_out: true`` (every other row ``false``). Each case
loads one of them with llama.cpp through the low-level ``llama_cpp`` ctypes API
(``llama_model_load_from_file`` + ``llama_init_from_model``, ``n_gpu_layers=0``) in its own
subprocess, and varies n_ctx, n_batch, n_ubatch, flash attention, the K/V cache types, n_seq_max,
kv_unified, swa_full, mmap and the CPU extra buffer types (REPACK / AMX).

Per case we record

* exact bytes from llama.cpp itself: ``llama_get_memory_breakdown(ctx)`` (llama-ext.h; a C++
  function returning ``std::map<buft, {model, context, compute}>`` -- called through ctypes with the
  Itanium sret convention and the libstdc++ red-black tree walked by hand), i.e. per buffer type the
  model weight buffers, the KV cache buffers ("context") and the scheduler's compute buffer; plus
  ``llama_model_size``, ``llama_model_n_params``, ``llama_state_get_size``, ``llama_n_ctx``,
  ``llama_n_ctx_seq``, ``llama_n_batch``, ``llama_n_ubatch``, ``llama_n_seq_max``;
* everything llama.cpp logs (every level, via ``llama_log_set``, so also DEBUG lines), parsed:
  "model buffer size", "KV buffer size", "llama_kv_cache: size = ... K (f16): ..., V (f16): ...",
  "output buffer size", "compute buffer size" (MiB as printed), n_ctx / n_ctx_seq / n_batch /
  n_ubatch, graph nodes and splits; the raw relevant lines are kept. The output buffer is not in
  the breakdown, so it is known only to the printed 0.01 MiB (and by the closed form, see notes);
* the GGUF written: every tensor's name, ggml shape, type, nbytes and data offset, the file size;
* closed forms (docs/llamacpp-rules.md) evaluated next to the measured bytes, with residuals.

Reproduce (llama-cpp-python 0.3.36 built from source in its own venv, see docs/llamacpp-rules.md)::

    python3 -m venv /tmp/venv-llamacpp
    /tmp/venv-llamacpp/bin/pip install gguf==0.19.0 numpy
    MAKEFLAGS=-j2 CMAKE_BUILD_PARALLEL_LEVEL=2 /tmp/venv-llamacpp/bin/pip install llama-cpp-python==0.3.36
    /tmp/venv-llamacpp/bin/python tools/measure/llamacpp_buffers.py           # all cases, rewrite JSON
    /tmp/venv-llamacpp/bin/python tools/measure/llamacpp_buffers.py --list    # list case ids
    /tmp/venv-llamacpp/bin/python tools/measure/llamacpp_buffers.py --only A-base A-ctx4096 --print

Writes ``vramlib/data/measured/llamacpp_buffers.json`` (unless ``--print`` or ``--out``); ``vramlib.serve.llamacpp``
models what it shows and ``vramlib.explain.validation.llamacpp_rows`` compares the two. Not part of ``make test``
(building llama.cpp takes minutes): the tests read the stored file.
Pure stdlib + gguf + numpy + llama_cpp; no network.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python tools/measure/llamacpp_buffers.py (in a venv with llama-cpp-python==0.3.36, gguf==0.19.0)"
OUT = ROOT / "vramlib" / "data" / "measured" / "llamacpp_buffers.json"
MIB = 1024 * 1024

# ggml type ids (ggml.h enum ggml_type) and block geometry: (block size in elements, bytes per block)
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}
GGML_BLOCK = {"f32": (1, 4), "f16": (1, 2), "q4_0": (32, 18), "q8_0": (32, 34)}


def row_bytes(typ: str, n: int) -> int:
    """ggml_row_size(type, n): n elements of `typ` (n must be a multiple of the block size)."""
    bs, bb = GGML_BLOCK[typ]
    assert n % bs == 0, (typ, n)
    return n // bs * bb


def pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------

MODELS = {
    # id: arch, n_embd, n_head, n_head_kv, n_layer, n_vocab, n_ff, weight type, tied, extra
    "A": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=8, n_layer=2, n_vocab=1000, n_ff=512, wtype="f16", tied=False),
    "B": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=2, n_layer=2, n_vocab=1000, n_ff=512, wtype="f16", tied=False),
    "C": dict(arch="llama", n_embd=512, n_head=8, n_head_kv=8, n_layer=4, n_vocab=1000, n_ff=1024, wtype="f32", tied=False),
    "D": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=2, n_layer=3, n_vocab=32000, n_ff=768, wtype="f16", tied=True),
    "E": dict(arch="llama", n_embd=512, n_head=8, n_head_kv=2, n_layer=2, n_vocab=1000, n_ff=1024, wtype="q8_0", tied=False),
    "F": dict(arch="llama", n_embd=512, n_head=8, n_head_kv=2, n_layer=2, n_vocab=1000, n_ff=1024, wtype="q4_0", tied=False),
    "G": dict(arch="gemma2", n_embd=256, n_head=8, n_head_kv=4, n_layer=4, n_vocab=1000, n_ff=512, wtype="f16", tied=True,
              n_swa=128),
    # odd vocab in Q8_0: tensor sizes that are not multiples of 32 bytes (padding rules); n_ff != 2 n_embd
    "H": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=2, n_layer=2, n_vocab=1001, n_ff=672, wtype="q8_0", tied=False),
    # A with 4 layers (layer-count dependence of the compute buffer)
    "I": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=8, n_layer=4, n_vocab=1000, n_ff=512, wtype="f16", tied=False),
    # head_dim 64, 6 heads, GQA 3:1, n_ff = 8/3 n_embd, vocab 2000
    "J": dict(arch="llama", n_embd=384, n_head=6, n_head_kv=2, n_layer=2, n_vocab=2000, n_ff=1024, wtype="f16", tied=False),
    # measured after the flash-attention compute-buffer rule was written (held out: their cases are HELD_OUT, below)
    # G with n_ff = 4 n_embd
    "G4": dict(arch="gemma2", n_embd=256, n_head=8, n_head_kv=4, n_layer=4, n_vocab=1000, n_ff=1024, wtype="f16",
               tied=True, n_swa=128),
    # 5 layers, n_ff = 3 n_embd, GQA 4:1
    "K": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=2, n_layer=5, n_vocab=1000, n_ff=768, wtype="f16", tied=False),
    # head_dim 64, n_ff = 3 n_embd, 3 layers (quantized K and/or V: Hadamard rotation)
    "L": dict(arch="llama", n_embd=512, n_head=8, n_head_kv=2, n_layer=3, n_vocab=1000, n_ff=1536, wtype="f16", tied=False),
    # head_dim 64, n_ff = 2.69 n_embd, 3 layers
    "M": dict(arch="llama", n_embd=512, n_head=8, n_head_kv=4, n_layer=3, n_vocab=1000, n_ff=1376, wtype="f16", tied=False),
    # n_ff = 1.5 n_embd, 3 layers
    "N": dict(arch="llama", n_embd=256, n_head=8, n_head_kv=4, n_layer=3, n_vocab=1000, n_ff=384, wtype="f16", tied=False),
    # head_dim 64, MHA, 6 layers, 32000-token tied vocab (the logits peak)
    "P": dict(arch="llama", n_embd=256, n_head=4, n_head_kv=4, n_layer=6, n_vocab=32000, n_ff=704, wtype="f16", tied=True),
}


def tensor_specs(m: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, ggml shape ne0..., type) of every tensor the model file holds, in file order."""
    E, H, HKV, L, V, FF = m["n_embd"], m["n_head"], m["n_head_kv"], m["n_layer"], m["n_vocab"], m["n_ff"]
    hd = E // H
    w = m["wtype"]
    # token_embd in the weight type (get_rows works on f32/f16/q8_0/q4_0); 1-D norms always f32
    out = [("token_embd.weight", (E, V), w)]
    for i in range(L):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (E,), "f32"),
            (b + "attn_q.weight", (E, H * hd), w),
            (b + "attn_k.weight", (E, HKV * hd), w),
            (b + "attn_v.weight", (E, HKV * hd), w),
            (b + "attn_output.weight", (H * hd, E), w),
        ]
        if m["arch"] == "gemma2":
            out.append((b + "post_attention_norm.weight", (E,), "f32"))
        out += [
            (b + "ffn_norm.weight", (E,), "f32"),
            (b + "ffn_gate.weight", (E, FF), w),
            (b + "ffn_up.weight", (E, FF), w),
            (b + "ffn_down.weight", (FF, E), w),
        ]
        if m["arch"] == "gemma2":
            out.append((b + "post_ffw_norm.weight", (E,), "f32"))
    out.append(("output_norm.weight", (E,), "f32"))
    if not m["tied"]:
        out.append(("output.weight", (E, V), w))
    return out


def write_gguf(mid: str, m: dict, path: Path, seed: int = 0) -> dict:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q

    rng = np.random.default_rng(seed)
    E, H, HKV, L, V = m["n_embd"], m["n_head"], m["n_head_kv"], m["n_layer"], m["n_vocab"]
    w = gguf.GGUFWriter(str(path), m["arch"])
    w.add_name(f"tiny-{mid}")
    w.add_context_length(8192)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(m["n_ff"])
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(E // H)
    w.add_file_type({"f32": 0, "f16": 1, "q8_0": 7, "q4_0": 2}[m["wtype"]])
    if m["arch"] == "gemma2":
        w.add_sliding_window(m["n_swa"])
        w.add_key_length(E // H)
        w.add_value_length(E // H)
    # minimal SPM tokenizer
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    toks += [f"t{i}" for i in range(V - len(toks))]
    types += [1] * (V - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([-float(i) for i in range(V)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    for name, ne, typ in tensor_specs(m):
        shape = tuple(reversed(ne))  # numpy order
        a = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if name.endswith("norm.weight"):
            a = np.ones(shape, dtype=np.float32)
        if typ == "f32":
            w.add_tensor(name, a)
        elif typ == "f16":
            w.add_tensor(name, a.astype(np.float16))
        else:
            qt = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0}[typ]
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(str(path))
    tensors = []
    for t in r.tensors:
        tensors.append(dict(name=t.name, shape=[int(x) for x in t.shape], type=t.tensor_type.name.lower(),
                            nbytes=int(t.n_bytes), data_offset=int(t.data_offset)))
    hd = E // H
    info = dict(arch=m["arch"], n_embd=E, n_head=H, n_head_kv=HKV, n_layer=L, n_vocab=V, n_ff=m["n_ff"],
                head_dim=hd, n_embd_k_gqa=HKV * hd, n_embd_v_gqa=HKV * hd, weight_type=m["wtype"],
                tied_embeddings=m["tied"], n_swa=m.get("n_swa"), file_size=path.stat().st_size,
                gguf_alignment=32, tensors=tensors)
    return info


# --------------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------------

def _case(cid, model, held_out=False, **kw):
    """One context: ``held_out`` marks a case measured after the rule it tests was written."""
    s = dict(n_ctx=512, n_batch=512, n_ubatch=512, flash_attn=0, type_k="f16", type_v="f16", n_seq_max=1,
             kv_unified=False, swa_full=False, use_mmap=True, use_extra_bufts=True, embeddings=False)
    s.update(kw)
    return dict(id=cid, model=model, settings=s, held_out=held_out)


VARIANTS = {
    "base": {}, "nommap": dict(use_mmap=False), "noextra": dict(use_extra_bufts=False),
    "noextra-nommap": dict(use_extra_bufts=False, use_mmap=False), "ctx4096": dict(n_ctx=4096),
    "ctx4096-ub128": dict(n_ctx=4096, n_ubatch=128), "ctx4096-fa": dict(n_ctx=4096, flash_attn=1),
    "ctx4096-fa-ub128": dict(n_ctx=4096, flash_attn=1, n_ubatch=128), "ctx1000-ub100": dict(n_ctx=1000, n_ubatch=100),
    "ctx4096-fa-q8kv": dict(n_ctx=4096, flash_attn=1, type_k="q8_0", type_v="q8_0"),
    "ctx4096-seq4": dict(n_ctx=4096, n_seq_max=4), "ctx4096-seq4-unified": dict(n_ctx=4096, n_seq_max=4, kv_unified=True),
    "ctx4096-swafull": dict(n_ctx=4096, swa_full=True),
    # flash-attention contexts of the held-out models (G4 K L M N P)
    "ctx4096-fa-b1024-ub256": dict(n_ctx=4096, flash_attn=1, n_batch=1024, n_ubatch=256),
    "ctx1000-fa-ub100": dict(n_ctx=1000, flash_attn=1, n_ubatch=100),
    "ctx4096-fa-q8k-f16v": dict(n_ctx=4096, flash_attn=1, type_k="q8_0", type_v="f16"),
    "ctx4096-fa-f16k-q8v": dict(n_ctx=4096, flash_attn=1, type_k="f16", type_v="q8_0"),
    "ctx2048-fa": dict(n_ctx=2048, flash_attn=1),
    "ctx2048-fa-b1024-ub1024": dict(n_ctx=2048, flash_attn=1, n_batch=1024, n_ubatch=1024),
    "ctx4096-seq4-fa": dict(n_ctx=4096, n_seq_max=4, flash_attn=1),
    "ctx4096-fa-b2048-ub2048": dict(n_ctx=4096, flash_attn=1, n_batch=2048, n_ubatch=2048),
}
"""The settings the models share, by the suffix of their case ids."""


def _variants(model: str, *names: str, held_out: bool = False) -> list[dict]:
    """The cases ``<model>-<name>`` of :data:`VARIANTS`, in the order given."""
    return [_case(f"{model}-{n}", model, held_out=held_out, **VARIANTS[n]) for n in names]


HELD_OUT = {
    "G4": ("ctx4096-fa", "ctx4096-fa-ub128"),
    "K": ("ctx4096-fa", "ctx4096-fa-b1024-ub256", "ctx1000-fa-ub100"),
    "L": ("ctx4096-fa", "ctx4096-fa-q8k-f16v", "ctx4096-fa-f16k-q8v", "ctx4096-fa-q8kv"),
    "M": ("ctx2048-fa-b1024-ub1024", "ctx4096-seq4-fa"),
    "N": ("ctx4096-fa",),
    "P": ("ctx2048-fa", "ctx4096-fa-b2048-ub2048"),
}
"""Flash-attention contexts measured after the compute-buffer rule was written (``held_out`` rows): the models'
:data:`VARIANTS`, appended after every other case."""


def build_cases() -> list[dict]:
    c = []
    A = "A"
    c += [
        _case("A-base", A),
        _case("A-ctx1000", A, n_ctx=1000),
        _case("A-ctx4096", A, n_ctx=4096),
        _case("A-ctx4096-ub128", A, n_ctx=4096, n_ubatch=128),
        _case("A-ctx4096-b2048", A, n_ctx=4096, n_batch=2048),
        _case("A-ctx4096-b2048-ub2048", A, n_ctx=4096, n_batch=2048, n_ubatch=2048),
        _case("A-ctx4096-b128", A, n_ctx=4096, n_batch=128, n_ubatch=512),
        _case("A-ctx300", A, n_ctx=300),
        _case("A-ctx100", A, n_ctx=100),
        _case("A-ctx4096-fa", A, n_ctx=4096, flash_attn=1),
        _case("A-ctx4096-fa-ub128", A, n_ctx=4096, flash_attn=1, n_ubatch=128),
        _case("A-ctx1000-fa", A, n_ctx=1000, flash_attn=1),
        _case("A-ctx4096-fa-auto", A, n_ctx=4096, flash_attn=-1),
        _case("A-ctx4096-f32kv", A, n_ctx=4096, type_k="f32", type_v="f32"),
        _case("A-ctx4096-fa-q8kv", A, n_ctx=4096, flash_attn=1, type_k="q8_0", type_v="q8_0"),
        _case("A-ctx4096-fa-q4kv", A, n_ctx=4096, flash_attn=1, type_k="q4_0", type_v="q4_0"),
        _case("A-ctx4096-fa-q8k-f16v", A, n_ctx=4096, flash_attn=1, type_k="q8_0", type_v="f16"),
        _case("A-ctx4096-q8k-f16v", A, n_ctx=4096, type_k="q8_0", type_v="f16"),
        _case("A-ctx4096-q8kv-nofa", A, n_ctx=4096, type_k="q8_0", type_v="q8_0"),
        _case("A-ctx4096-seq4", A, n_ctx=4096, n_seq_max=4),
        _case("A-ctx4096-seq4-unified", A, n_ctx=4096, n_seq_max=4, kv_unified=True),
        _case("A-ctx1000-seq4", A, n_ctx=1000, n_seq_max=4),
        _case("A-ctx1000-seq4-unified", A, n_ctx=1000, n_seq_max=4, kv_unified=True),
        _case("A-ctx4096-seq4-fa", A, n_ctx=4096, n_seq_max=4, flash_attn=1),
        _case("A-ctx4096-seq4-unified-fa", A, n_ctx=4096, n_seq_max=4, kv_unified=True, flash_attn=1),
        _case("A-nommap", A, use_mmap=False),
        _case("A-noextra", A, use_extra_bufts=False),
        _case("A-noextra-nommap", A, use_extra_bufts=False, use_mmap=False),
        _case("A-noextra-ctx4096", A, n_ctx=4096, use_extra_bufts=False),
        _case("A-embeddings", A, embeddings=True),
    ]
    c += _variants("B", "base", "noextra-nommap", "ctx4096", "ctx4096-ub128", "ctx4096-fa", "ctx4096-fa-q8kv",
                   "ctx4096-seq4")
    c += _variants("C", "base", "ctx4096", "ctx4096-fa", "nommap", "noextra-nommap")
    D = "D"
    c += _variants(D, "base", "ctx4096", "ctx4096-fa", "ctx4096-ub128")
    c += [_case("D-seq4", D, n_seq_max=4, n_ctx=2048)] + _variants(D, "nommap", "noextra-nommap")
    c.append(_case("D-ctx4096-seq16", D, n_ctx=4096, n_seq_max=16))
    for M in ("H", "I", "J"):
        c += _variants(M, "base", "nommap", "noextra-nommap", "ctx4096", "ctx4096-ub128", "ctx4096-fa",
                       "ctx4096-fa-ub128", "ctx1000-ub100")
    # head_dim 64: quantized K/V turn on the Hadamard rotation (attn_rot_k / attn_rot_v)
    c += [
        _case("J-ctx4096-fa-q8kv", "J", n_ctx=4096, flash_attn=1, type_k="q8_0", type_v="q8_0"),
        _case("J-ctx4096-fa-q4kv", "J", n_ctx=4096, flash_attn=1, type_k="q4_0", type_v="q4_0"),
        _case("J-ctx4096-q8k-f16v", "J", n_ctx=4096, type_k="q8_0", type_v="f16"),
        _case("C-ctx4096-fa-q8kv", "C", n_ctx=4096, flash_attn=1, type_k="q8_0", type_v="q8_0"),
        _case("J-ctx4096-auto-q8kv", "J", n_ctx=4096, flash_attn=-1, type_k="q8_0", type_v="q8_0"),
    ]
    for M in ("E", "F"):
        c += _variants(M, "base", "nommap", "noextra", "noextra-nommap", "ctx4096-fa")
    c += _variants("G", "base", "noextra-nommap", "ctx4096", "ctx4096-fa", "ctx4096-ub128", "ctx4096-swafull",
                   "ctx4096-seq4", "ctx4096-seq4-unified")
    for M, names in HELD_OUT.items():
        c += _variants(M, *names, held_out=True)
    return c


# --------------------------------------------------------------------------------------------------
# worker (one case, its own process)
# --------------------------------------------------------------------------------------------------

def _memory_breakdown(lib, ggml_base, ctx) -> list[dict]:
    """Call C++ llama_get_memory_breakdown(ctx) -> std::map<ggml_backend_buffer_type_t, data>.

    x86-64 Itanium ABI: a non-trivially-copyable class is returned through a hidden pointer (rdi).
    libstdc++ std::map (48 bytes): [0] comparator, [8] header color, [16] root, [24] leftmost,
    [32] rightmost, [40] node_count. Node: color, parent, left@16, right@24, then the value
    pair<buft*, {size_t model, context, compute}> at 32.
    """
    fn = None
    for name in ("_Z26llama_get_memory_breakdownPK13llama_context",):
        fn = getattr(lib, name, None)
        if fn is not None:
            break
    if fn is None:
        return []
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_void_p
    buf = (ctypes.c_uint8 * 128)()
    fn(ctypes.addressof(buf), ctx)
    base = ctypes.addressof(buf)
    rd = lambda a: ctypes.c_uint64.from_address(a).value  # noqa: E731
    root, count = rd(base + 16), rd(base + 40)
    ggml_base.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    ggml_base.ggml_backend_buft_name.restype = ctypes.c_char_p
    out = []

    def walk(n):
        if not n:
            return
        walk(rd(n + 16))
        buft = rd(n + 32)
        out.append(dict(buft=ggml_base.ggml_backend_buft_name(buft).decode(), model=rd(n + 40),
                        context=rd(n + 48), compute=rd(n + 56)))
        walk(rd(n + 24))

    walk(root)
    assert len(out) == count, (len(out), count)
    return out  # (the map is leaked; the worker exits right after)


def worker(path: str, s: dict) -> dict:
    import llama_cpp as L

    logs: list[tuple[int, str]] = []

    @L.llama_log_callback
    def _cb(level, text, user_data):
        logs.append((int(level), text.decode("utf-8", "replace")))

    L.llama_log_set(_cb, ctypes.c_void_p(0))
    L.llama_backend_init()
    lib = L.llama_cpp._lib
    libdir = Path(L.__file__).parent / "lib"
    ggml_base = ctypes.CDLL(str(next(libdir.glob("libggml-base.so*"))))

    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.load_mode = L.LLAMA_LOAD_MODE_MMAP if s["use_mmap"] else L.LLAMA_LOAD_MODE_NONE
    mp.use_extra_bufts = bool(s["use_extra_bufts"])
    res: dict = {}
    t0 = time.time()
    model = L.llama_model_load_from_file(path.encode(), mp)
    if not model:
        res["error"] = "model load failed"
    else:
        res["llama_model_size"] = int(L.llama_model_size(model))
        res["llama_model_n_params"] = int(L.llama_model_n_params(model))
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = s["n_ctx"], s["n_batch"], s["n_ubatch"]
        cp.n_seq_max = s["n_seq_max"]
        cp.n_threads = cp.n_threads_batch = 2
        cp.flash_attn_type = int(s["flash_attn"])
        cp.type_k, cp.type_v = GGML_TYPES[s["type_k"]], GGML_TYPES[s["type_v"]]
        cp.kv_unified = bool(s["kv_unified"])
        cp.swa_full = bool(s["swa_full"])
        cp.embeddings = bool(s["embeddings"])
        ctx = L.llama_init_from_model(model, cp)
        if not ctx:
            res["error"] = "context creation failed"
        else:
            res["llama_n_ctx"] = int(L.llama_n_ctx(ctx))
            res["llama_n_ctx_seq"] = int(L.llama_n_ctx_seq(ctx))
            res["llama_n_batch"] = int(L.llama_n_batch(ctx))
            res["llama_n_ubatch"] = int(L.llama_n_ubatch(ctx))
            res["llama_n_seq_max"] = int(L.llama_n_seq_max(ctx))
            res["llama_state_get_size"] = int(L.llama_state_get_size(ctx))
            res["memory_breakdown"] = _memory_breakdown(lib, ggml_base, ctx)
    res["load_s"] = round(time.time() - t0, 3)
    text = "".join(t for _, t in logs)
    res["log"] = text
    return res


# --------------------------------------------------------------------------------------------------
# log parsing
# --------------------------------------------------------------------------------------------------

_KEEP = re.compile(r"buffer size|KV cache|kv_cache|n_ctx|n_batch|n_ubatch|n_seq_max|kv_unified|flash_attn|"
                   r"graph|compute buffer|output buffer|reallocating|worst-case|max_nodes|error|failed|"
                   r"requires|file size|model size|repack|REPACK|AMX|cells|n_swa|Flash Attention|"
                   r"causal_attn|n_outputs|swa", re.I)


def parse_log(text: str) -> dict:
    p: dict = {"model_buffers_mib": {}, "kv_buffers_mib": {}, "output_buffer_mib": {}, "compute_buffer_mib": {}}
    for line in text.splitlines():
        if m := re.search(r"load_tensors:\s+(\S+) model buffer size =\s*([\d.]+) MiB", line):
            p["model_buffers_mib"][m[1]] = p["model_buffers_mib"].get(m[1], 0.0) + float(m[2])
        elif m := re.search(r"(llama_kv_cache\S*):\s+(\S+) KV buffer size =\s*([\d.]+) MiB", line):
            p["kv_buffers_mib"].setdefault(m[2], []).append(float(m[3]))
        elif m := re.search(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\), "
                            r"K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB", line):
            p.setdefault("kv_caches", []).append(dict(size_mib=float(m[1]), cells=int(m[2]), layers=int(m[3]),
                                                      n_seq_max=int(m[4]), n_stream=int(m[5]), type_k=m[6],
                                                      k_mib=float(m[7]), type_v=m[8], v_mib=float(m[9])))
        elif m := re.search(r"(\S+)\s+output buffer size =\s*([\d.]+) MiB", line):
            p["output_buffer_mib"][m[1]] = float(m[2])
        elif m := re.search(r"sched_reserve:\s+(\S+) compute buffer size =\s*([\d.]+) MiB", line):
            p["compute_buffer_mib"][m[1]] = float(m[2])
        elif m := re.search(r"llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|n_outputs_max)\s+= (\d+)", line):
            p[m[1]] = int(m[2])
        elif m := re.search(r"llama_context: (flash_attn|kv_unified)\s+= (\S+)", line):
            p[m[1]] = m[2]
        elif m := re.search(r"graph(?: \(pp bs=(\d+), tg bs=(\d+)\))?: nodes = ([\d /]+), splits = ([\d /]+)", line):
            p["graph_nodes"] = m[3].strip()
            p["graph_splits"] = m[4].strip()
        elif m := re.search(r"max_nodes = (\d+)", line):
            p["max_nodes"] = int(m[1])
        elif m := re.search(r"creating (non-SWA|    SWA|SWA) KV cache, size = (\d+) cells", line):
            p.setdefault("iswa_cells", {})[m[1].strip()] = int(m[2])
        elif m := re.search(r"Flash Attention (enabled|was auto, set to (\w+)|not supported)", line):
            p["fa_resolved"] = line.strip()
        elif m := re.search(r"attn_rot_(k|v) = (\d)", line):
            p[f"attn_rot_{m[1]}"] = int(m[2])
        elif "quantized V cache" in line or "failed to" in line or "requires" in line:
            p.setdefault("errors", []).append(line.strip())
    return p


def relevant_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if (_KEEP.search(line) and not line.startswith(("print_info", "llama_model_loader: - ",
                                                         "llama_graph_n_input_tensors", "load_tensors: layer",
                                                         "create_tensor", "llama_kv_cache: layer"))):
            out.append(line.rstrip())
    return out


# --------------------------------------------------------------------------------------------------
# closed forms
# --------------------------------------------------------------------------------------------------

def closed_forms(info: dict, s: dict, meas: dict) -> dict:
    """The simplest closed forms of docs/llamacpp-rules.md, next to the measured exact bytes."""
    cf: dict = {}
    tensors = info["tensors"]
    n_seq = max(1, s["n_seq_max"])
    n_ctx = pad(s["n_ctx"], 256)
    if s["kv_unified"]:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = pad(n_ctx // n_seq, 256)
        n_ctx = n_ctx_seq * n_seq
    cf["n_ctx"] = n_ctx
    cf["n_ctx_seq"] = n_ctx_seq
    n_stream = 1 if s["kv_unified"] else n_seq
    L, ekv = info["n_layer"], info["n_embd_k_gqa"]
    tk, tv = s["type_k"], s["type_v"]
    if info["arch"] == "gemma2":
        n_ub = min(s["n_ubatch"], s["n_batch"], n_ctx)
        size_swa = pad(min(n_ctx_seq, info["n_swa"] * (n_seq if s["kv_unified"] else 1) + n_ub), 256)
        if s["swa_full"]:
            size_swa = n_ctx_seq
        n_swa_layers = sum(1 for il in range(L) if il % 2 < 1)
        cells = [(n_ctx_seq, L - n_swa_layers), (size_swa, n_swa_layers)]
        cf["kv_cells"] = {"base": n_ctx_seq, "swa": size_swa}
    else:
        cells = [(n_ctx_seq, L)]
    kv = sum(nl * n_stream * cells_ * (row_bytes(tk, ekv) + row_bytes(tv, ekv)) for cells_, nl in cells)
    cf["kv_bytes"] = kv
    # model: non-mmap buffers = sum(pad(nbytes, 32)); mmap buffer = span of tensor data in the file
    cf["model_bytes_alloc"] = sum(pad(t["nbytes"], 32) for t in tensors)
    first = min(t["data_offset"] for t in tensors)
    last = max(t["data_offset"] + t["nbytes"] for t in tensors)
    cf["model_bytes_mmap_span"] = last - first
    cf["model_nbytes_sum"] = sum(t["nbytes"] for t in tensors)
    # compute buffer (worst-case pp graph at n_ubatch tokens). n_batch is clamped to the *unpadded* n_ctx.
    n_batch = min(s["n_ctx"], s["n_batch"])
    n_ub = min(n_batch, s["n_ubatch"])
    E, H, V = info["n_embd"], info["n_head"], info["n_vocab"]
    evg = info["n_embd_v_gqa"]
    n_kvs = [cells_ for cells_, nl in cells if nl > 0]  # one KQ mask (and k/v idxs) per KV cache
    P = lambda x: pad(x, 32)  # noqa: E731  every tensor is 32-byte aligned in the compute buffer
    common = 3 * P(4 * n_ub)  # inp_tokens, inp_pos (i32), out_ids (i32, n_outputs = n_ub)
    if not s["flash_attn"]:
        attn = (P(4 * H * max(n_kvs) * n_ub) + sum(P(4 * k * n_ub) for k in n_kvs) + common
                + sum(P(8 * n_ub) + P(8 * n_ub * evg) for _ in n_kvs) + 5 * P(4 * E * n_ub))
    else:
        # f16 masks, v_idxs is one i64 per token; then the FFN intermediates (~4 x n_ff floats per token)
        attn = (sum(P(2 * k * n_ub) for k in n_kvs) + common + sum(2 * P(8 * n_ub) for _ in n_kvs)
                + 4 * P(4 * info["n_ff"] * n_ub))
    logits = P(4 * V * n_ub) + 2 * P(4 * E * n_ub) + P(4 * n_ub)
    cf["compute_n_ubatch"] = n_ub
    cf["compute_attn_peak"] = attn
    cf["compute_logits_peak"] = logits
    cf["compute_bytes"] = max(attn, logits)
    # output buffer: logits n_vocab x max(n_seq_max, 1) floats (+ n_embd x n_seq_max if embeddings)
    cf["output_bytes"] = 4 * n_seq * (info["n_vocab"] + (info["n_embd"] if s["embeddings"] else 0))
    mb = meas.get("memory_breakdown") or []
    if mb:
        cf["measured_model"] = sum(x["model"] for x in mb)
        cf["measured_kv"] = sum(x["context"] for x in mb)
        cf["measured_compute"] = sum(x["compute"] for x in mb)
        cf["kv_residual"] = cf["measured_kv"] - kv
        cf["compute_residual"] = cf["measured_compute"] - cf["compute_bytes"]
        plain = [x for x in mb if x["buft"] in ("CPU", "CPU_Mapped")]
        cf["measured_model_plain"] = sum(x["model"] for x in plain)
        extra = sum(x["model"] for x in mb if x["buft"] not in ("CPU", "CPU_Mapped"))
        cf["measured_model_extra"] = extra
        if not s["use_mmap"]:
            # non-mmap: plain CPU buffer + extra buffers == sum(pad(nbytes, 32)) (extra bufts: their alloc size)
            cf["model_residual"] = cf["measured_model"] - cf["model_bytes_alloc"]
        else:
            # mmap: CPU_Mapped covers the whole tensor-data span, extra buffers are allocated on top
            cf["model_residual"] = cf["measured_model_plain"] - cf["model_bytes_mmap_span"]
    return cf


# --------------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------------

def _versions() -> dict:
    import importlib.metadata as md
    v = {}
    for pkg in ("llama_cpp_python", "gguf", "numpy"):
        try:
            v[pkg] = md.version(pkg.replace("_", "-"))
        except md.PackageNotFoundError:
            v[pkg] = None
    return v


def _cpu_flags() -> list[str]:
    try:
        txt = Path("/proc/cpuinfo").read_text()
        flags = set(re.search(r"^flags\s*:(.*)$", txt, re.M)[1].split())
        return sorted(f for f in flags if f in {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vnni",
                                              "avx_vnni", "amx_int8", "amx_bf16", "amx_tile"})
    except Exception:  # noqa: BLE001
        return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="list case ids and exit")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run only these case ids (or model letters: A B ...)")
    ap.add_argument("--print", action="store_true", help="print results, do not write the JSON")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--worker", nargs=2, metavar=("GGUF", "SETTINGS_JSON"), help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        res = worker(a.worker[0], json.loads(a.worker[1]))
        sys.stdout.write("\n@@RESULT@@" + json.dumps(res) + "\n")
        sys.stdout.flush()
        os._exit(0)  # skip destructors (the breakdown map is leaked on purpose)

    cases = build_cases()
    if a.list:
        for c in cases:
            print(c["id"], json.dumps(c["settings"]))
        return 0
    if a.only:
        cases = [c for c in cases if c["id"] in a.only or c["model"] in a.only]
        if not cases:
            print("no such case", file=sys.stderr)
            return 2

    t_start = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="llamacpp_buffers_") as td:
        infos = {}
        for mid in sorted({c["model"] for c in cases}):
            infos[mid] = write_gguf(mid, MODELS[mid], Path(td) / f"tiny-{mid}.gguf")
        for c in cases:
            info, s = infos[c["model"]], c["settings"]
            path = str(Path(td) / f"tiny-{c['model']}.gguf")
            p = subprocess.run([sys.executable, __file__, "--worker", path, json.dumps(s)],
                               capture_output=True, text=True, timeout=300)
            meas: dict = {}
            if "@@RESULT@@" in p.stdout:
                meas = json.loads(p.stdout.split("@@RESULT@@", 1)[1])
            else:
                meas = {"error": f"worker exited with {p.returncode}", "log": ""}
            log = meas.pop("log", "") + p.stderr
            parsed = parse_log(log)
            model_hp = {k: v for k, v in info.items() if k != "tensors"}
            row = dict(id=c["id"], model_id=c["model"], held_out=c["held_out"], model=model_hp, settings=s, exact=meas,
                       parsed=parsed, closed_form=closed_forms(info, s, meas), log_lines=relevant_lines(log),
                       tensors=info["tensors"])
            rows.append(row)
            mb = meas.get("memory_breakdown", [])
            brief = ", ".join(f"{x['buft']}: m={x['model']} kv={x['context']} c={x['compute']}" for x in mb)
            print(f"{c['id']:28s} {meas.get('error', '')} {brief} out={parsed['output_buffer_mib']}", flush=True)

    import llama_cpp  # noqa: F401  (only for the header)
    head = dict(
        command=COMMAND,
        llama_cpp_python=_versions()["llama_cpp_python"],
        llama_cpp_commit="0c1e57098 (ggml-org/llama.cpp, vendored in llama-cpp-python 0.3.36 per its CHANGELOG)",
        gguf=_versions()["gguf"], numpy=_versions()["numpy"], python=platform.python_version(),
        device="cpu", cpu=platform.processor() or platform.machine(), cpu_flags=_cpu_flags(),
        build="pip install llama-cpp-python==0.3.36 from the sdist, default CMake flags (GGML_NATIVE=ON => "
              "-march=native; CPU_REPACK and, where the CPU has AMX-INT8, the AMX extra buffer type are compiled in)",
        note=("Exact bytes come from llama_get_memory_breakdown (per buffer type: model weights, KV cache "
              "'context', scheduler 'compute'); the output buffer is only logged in MiB (2 decimals). "
              "All sizes are at context creation (after sched_reserve), before any decode; the output buffer "
              "later grows on demand to n_outputs x n_vocab floats. Models are random tiny GGUFs written by this "
              "script. closed_form holds the formulas of docs/llamacpp-rules.md."),
        elapsed_s=round(time.time() - t_start, 1),
    )
    doc = {**head, "rows": rows}     # the header fields at the top, as every measurement file has them
    if a.print:
        print(json.dumps(head, indent=1))
        return 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {a.out} ({len(rows)} rows, {head['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
