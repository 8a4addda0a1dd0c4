"""llama.cpp as a runtime, in exact bytes: the buffers a ``llama_context`` allocates at start-up (issue 14).

llama.cpp (ggml-org/llama.cpp at commit 0c1e57098, the copy llama-cpp-python 0.3.36 vendors) allocates, per
backend: the **model buffer** (the GGUF's tensors), the **KV cache** (``llama_kv_cache``: one K and one V tensor per
layer), the **compute buffer** (``sched_reserve``: ggml-alloc's high-water mark over the worst-case graph of one
micro-batch) and the host **output buffer** (logits). The rules, read from the source (``docs/llamacpp-rules.md``
has the file and line of each) and measured on tiny GGUFs (``tools/measure/llamacpp_buffers.py`` ->
``vramlib/data/measured/llamacpp_buffers.json``, 110 contexts, exact bytes from ``llama_get_memory_breakdown``; the
14 marked ``held_out`` were measured after the flash-attention rule was written):

* **Context** (``src/llama-context.cpp``): ``n_batch = min(n_ctx, n_batch)`` and ``n_ubatch = min(n_batch,
  n_ubatch)`` on the *requested* n_ctx, then ``n_ctx`` is padded to a multiple of 256; without a unified KV cache
  each of the ``n_seq`` sequences gets ``pad256(n_ctx / n_seq)`` cells of its own stream (:data:`N_CTX_SEQ`).
* **KV cache** (``src/llama-kv-cache.cpp``, ``-iswa.cpp``): layers x streams x cells x (row(K) + row(V)), a row
  being ``n_embd_kv / block x block bytes`` of the cache type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,
  iq4_nl); sliding-window layers hold ``pad256(min(n_ctx_seq, n_swa x streams' sequences + n_ubatch))`` cells
  (:data:`SWA_CELLS`). Quantized V needs flash attention (llama.cpp refuses it otherwise; so does this module).
  Exact in every measured context.
* **Compute buffer, without flash attention**: the f32 KQ scores ``n_head x n_kv x u`` with the f32 mask, the
  inputs, the transposed V's row indices and five ``n_embd``-wide f32 activations, or the LM head's f32 logits of
  ``u`` tokens, whichever is larger (:data:`COMPUTE_NO_FA`; ``u = min(n_ubatch, n_batch, n_ctx)``). The five
  activations are read from the measurements (exact in 69 of 70 contexts; the other has a quantized K with a
  64-wide head, whose Hadamard rotation makes the buffer 1,504 B per token smaller: named in the result).
  **With flash attention** the inputs (the f16 mask, the row indices, an unread ``n_embd``-wide input, rotation
  matrices) under the FFN's peak -- three ``n_ff`` rows over a gap of two ``n_embd`` rows that the SwiGLU cannot
  reuse (:data:`FA_INPUTS`, :data:`FA_FFN`, :data:`COMPUTE_FA`): exact in every measured context, read from a replay
  of ggml-alloc's placements on the measured graphs. For ``n_head x head_dim != n_embd`` (Qwen3, Gemma) the peak lies
  up to two ``n_embd`` rows above it: the result names it as a lower bound.
* **Output buffer** (host): ``4 x n_seq x n_vocab`` bytes of logits at start-up (it grows to the outputs of a
  batch when all logits are requested).
* **Model buffer**: the weights as :func:`vramlib.memory.inference.weights_bytes` prices the format, with the
  1-D tensors (norms, biases) in f32 as llama.cpp's converter writes them for float files; each tensor is padded
  to 32 bytes (nothing for real shapes). The CPU backend's extra buffer types (AMX, repacked Q4_0) copy some
  weights again and are not counted (named in the result).

Measured on the CPU backend; the CUDA backend builds the same graphs and KV tensors. **Partial offload**
(``n_gpu_layers``, :func:`llamacpp_split`): llama.cpp's placement read from its source (``docs/offload-rules.md``),
the compute buffers under it estimated from the scheduler's rules, not measured (named by
:mod:`vramlib.serve.offload`, which prices the split). Not modelled, refused in one line: layer kinds other than full
and sliding-window attention (MLA, state-space layers, chunked attention), mixture-of-experts compute graphs.

Used in: chapters 5, 7, 16 and 17.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from fractions import Fraction

import sympy as sp

from ..catalog.hardware import GPU, get_gpu
from ..catalog.models import ModelSpec, get_model, layer_types_of
from ..catalog.precision import GGML_BITS, get_precision, precision_view
from ..solve.feasibility import largest_fitting
from ..core.errors import InvalidValueError, check_choice, check_positive_int, checked_call
from ..core.portable import Fields, ev, portable, q, q_add, q_ceil, q_div, q_mul, raise_problem, share, shared
from ..core.settings import Settings, settings_class
from ..memory.allocator import CUDA_CONTEXT, context_figure
from ..memory.breakdown import Breakdown
from ..memory.inference import layer_weights_of, weights_bytes
from ..core.units import parse_memory
from .serving import DRIVER_RESERVED, cuda_total, driver_reserve

CTX_PAD = 256
"""llama.cpp pads the context (and each sequence's cells) to a multiple of 256 (``GGML_PAD(n_ctx, 256)``)."""

TENSOR_ALIGNMENT = 32
"""ggml's tensor alignment in a buffer (``TENSOR_ALIGNMENT``, ggml-impl.h; ``GGML_PAD(size, 32)`` per tensor)."""

KV_TYPES: dict[str, Fraction] = {t: GGML_BITS[base] / 8 for t, base in (
    ("f32", "f32"), ("f16", "f16"), ("bf16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q4_1", "q4_1"),
    ("q5_0", "q5_0"), ("q5_1", "q5_1"), ("iq4_nl", "q4_0"))}
"""Bytes per element of the cache types llama.cpp accepts for ``--cache-type-k/-v``: the ggml block sizes of
``vramlib.catalog.precision.GGML_BITS`` (bf16 is as wide as f16; iq4_nl's 32-value block is q4_0's 18 bytes)."""

FLOAT_CACHE_TYPES = ("f32", "f16", "bf16")
"""Cache types stored as plain floats; the others are quantized blocks (a quantized V needs flash attention, and a
quantized cache with a 64-multiple head is Hadamard-rotated: :func:`llamacpp_rotated`)."""

_nn = dict(integer=True, nonnegative=True)
_pos = dict(integer=True, positive=True)
n_ctx, n_seq, n_ub, n_b, n_swa, n_kv = (sp.Symbol(x, **_pos) for x in ("n_ctx", "n_seq", "n_ub", "n_b", "n_swa",
                                                                       "n_kv"))
z_uni = sp.Symbol("z_uni", **_nn)       # 1: one unified KV stream for all sequences
n_head, n_embd, n_vocab, n_ff, e_v = (sp.Symbol(x, **_pos) for x in ("n_head", "n_embd", "n_vocab", "n_ff", "e_v"))
n_kv_f, n_kv_s = (sp.Symbol(x, **_nn) for x in ("n_kv_f", "n_kv_s"))   # cells per stream of each cache
z_f, z_s = (sp.Symbol(x, **_nn) for x in ("z_f", "z_s"))               # 1 when the model has such layers


def _pad(x, k):
    return k * sp.ceiling(x / k)


N_CTX = _pad(n_ctx, CTX_PAD)
"""The context llama.cpp allocates for a requested n_ctx."""

N_CTX_SEQ = z_uni * N_CTX + (1 - z_uni) * _pad(sp.floor(N_CTX / n_seq), CTX_PAD)
"""Cells per stream: the whole padded context (unified) or each sequence's padded share."""

N_STREAM = z_uni + (1 - z_uni) * n_seq
"""KV streams: one when unified, else one per sequence."""

U_BATCH = sp.Min(n_ub, n_b, n_ctx)
"""The micro-batch the compute buffer is reserved for: n_ubatch clamped to n_batch and the requested n_ctx."""

SWA_CELLS = _pad(sp.Min(N_CTX_SEQ, n_swa * (z_uni * n_seq + 1 - z_uni) + U_BATCH), CTX_PAD)
"""Cells of a sliding-window layer (``llama_kv_cache_iswa``; ``swa_full`` gives it ``N_CTX_SEQ``)."""


def _p(x):
    return _pad(x, TENSOR_ALIGNMENT)


_u = U_BATCH
COMPUTE_LOGITS = _p(4 * n_vocab * _u) + 2 * _p(4 * n_embd * _u) + _p(4 * _u)
"""The LM head's peak: f32 logits of u tokens, two n_embd-wide rows and the output ids."""

COMPUTE_NO_FA = sp.Max(_p(4 * n_head * n_kv * _u) + z_f * _p(4 * n_kv_f * _u) + z_s * _p(4 * n_kv_s * _u)
                       + 3 * _p(4 * _u) + (z_f + z_s) * (_p(8 * _u) + _p(8 * _u * e_v)) + 5 * _p(4 * n_embd * _u),
                       COMPUTE_LOGITS)
"""Compute buffer without flash attention: the f32 scores with softmax in place (``n_kv``: the larger cache's
cells per stream), the f32 mask of each cache (full ``n_kv_f``, sliding-window ``n_kv_s``), the token, position and
output-id inputs, each cache's K and transposed-V row indices, five n_embd-wide f32 activations (measured) -- or the
logits."""

n_l = sp.Symbol("n_l", integer=True, positive=True)                  # layers
z_rk, z_rv = (sp.Symbol(x, **_nn) for x in ("z_rk", "z_rv"))          # 1: K / V rows Hadamard-rotated
r_k = sp.Symbol("r_k", **_pos)                                         # side of K's rotation matrix
_E = _p(4 * n_embd * _u)
_F = _p(4 * n_ff * _u)
_WIDE = sp.Min(1, sp.Max(0, (_F - 2 * _E) / TENSOR_ALIGNMENT))         # 1 when n_ff > 2 n_embd
_TWO = sp.Min(1, sp.Max(0, 3 - n_l))                                    # 1 for a two-layer model
FA_INPUTS = (3 * _p(4 * _u) + _E + z_f * (_p(2 * n_kv_f * _u) + 2 * _p(8 * _u))
             + z_s * (_p(2 * n_kv_s * _u) + 2 * _p(8 * _u)) + (z_f + z_s) * (z_rk * 4 * r_k**2 + z_rv * 4 * 64**2))
"""With flash attention, what stays allocated under the layers: the token, position and output-id inputs, the
``n_embd``-wide f32 input a token graph never reads (``inp_embd``), each cache's f16 mask and K / V row indices, and
the f32 Hadamard matrices of rotated caches (K's ``r_k`` wide, V's 64)."""
FA_FFN = (3 * _F + 3 * _E - _WIDE * z_rv * _E
          - (1 - _WIDE) * ((1 - z_rv) * _TWO * _F + (1 - (1 - z_rv) * _TWO) * _E))
"""A layer's peak with flash attention: ``ffn_inp``, ``ffn_gate``, ``ffn_up`` and ``ffn_swiglu`` (3 n_ff rows) over a
gap of two n_embd rows (the freed ``ffn_norm`` and attention output) that the n_ff-wide SwiGLU cannot reuse when
n_ff > 2 n_embd: 3F + 3E; a rotated V's extra un-rotation shrinks the gap to one row; a narrower FFN fits the gap
(3F + 2E, or 2F + 3E with two layers). Read from ggml-alloc's allocations replayed on the measured graphs."""
COMPUTE_FA = sp.Max(FA_INPUTS + FA_FFN, COMPUTE_LOGITS)
"""Compute buffer with flash attention: the inputs and the FFN's peak, or the logits (exact on the 40 measured
contexts, for n_head x head_dim = n_embd)."""

OUTPUT_BYTES = 4 * n_seq * n_vocab
"""The host output buffer at start-up: one f32 row of logits per sequence."""


LLAMACPP_SWA_FAMILIES = ("gemma2", "gemma3_text", "gpt_oss")
"""Families whose sliding-window layers llama.cpp keeps as windows (src/models/gemma2.cpp, gemma3.cpp,
openai-moe.cpp set ``swa_type``); for the others in the catalogue (Mistral-7B as the llama architecture, Phi-3, which
phi3.cpp sets to LLAMA_SWA_TYPE_NONE) every layer keeps every token."""


share(LLAMACPP_SWA_FAMILIES=list(LLAMACPP_SWA_FAMILIES), LLAMACPP_FLOAT_CACHE=list(FLOAT_CACHE_TYPES))
share(N_CTX=N_CTX, N_CTX_SEQ=N_CTX_SEQ, N_STREAM=N_STREAM, U_BATCH=U_BATCH, SWA_CELLS=SWA_CELLS,
      COMPUTE_FA=COMPUTE_FA, COMPUTE_NO_FA=COMPUTE_NO_FA, OUTPUT_BYTES=OUTPUT_BYTES, LLAMACPP_KV_TYPES=dict(KV_TYPES))


@portable
def llamacpp_problem(m, moe):
    """None, or the one-line refusal of a model view whose layers llama.cpp's rules here do not cover: full and
    sliding-window GQA attention with dense MLPs are (routed-expert MLPs too when ``moe``: the caller then names the
    compute buffer as an estimate)."""
    for k in m["layers"]:
        if (k[1] != "full" and k[1] != "sliding") or m["spec"]["attention"] != "gqa":
            return ["model", m["spec"]["name"], k[1] + " layers (" + m["spec"]["attention"] + ") are not modelled "
                    "for llama.cpp yet: full and sliding-window GQA attention are"]
        if k[2] != "dense" and not (moe and k[2] == "moe"):
            return ["model", m["spec"]["name"], "llama.cpp's compute buffer is measured for dense MLPs; " + k[2] +
                    " layers are not modelled yet"]
    return None


@portable
def llamacpp_kinds(m, moe):
    """[[mixer, layers]] of a model view by attention kind (:func:`llamacpp_problem` refuses the rest)."""
    raise_problem(llamacpp_problem(m, moe))
    out = []
    for k in m["layers"]:
        found = False
        for o in out:
            if o[0] == k[1]:
                o[1] += k[0]
                found = True
        if not found:
            out.append([k[1], k[0]])
    return out


def llamacpp_refusal(model: ModelSpec | str) -> str | None:
    """Why :func:`llamacpp_memory` refuses ``model`` (one line), or None when its rules cover it: what a chapter asks
    before it prices a model in llama.cpp."""
    problem = llamacpp_problem(get_model(model).view(), False)
    return None if problem is None else str(InvalidValueError(problem[0], problem[1], problem[2]))


@portable
def llamacpp_swa(s):
    """Whether llama.cpp keeps a shape's sliding-window layers as windows (LLAMACPP_SWA_FAMILIES)."""
    return s["family"] in shared("LLAMACPP_SWA_FAMILIES")


@portable
def llamacpp_rotated(cache_type, head_dim):
    """Whether llama.cpp Hadamard-rotates a cache's rows: a quantized type and a head a multiple of 64
    (src/llama-kv-cache.cpp)."""
    return cache_type not in shared("LLAMACPP_FLOAT_CACHE") and head_dim % 64 == 0


@portable
def llamacpp_context(m, c, moe):
    """A llama.cpp context's numbers for a model view and a LlamaCppConfig ``c`` (its fields): the padded context,
    cells per stream of each layer kind, streams, the micro-batch, the KV bytes of one layer of each kind
    (``layer_kv``) and the compute buffer's symbol values (``moe``: routed-expert layers allowed, their MLP width
    taken as the k routed experts' and the shared experts' together -- an estimate, not measured)."""
    s = m["spec"]
    vals = {"n_ctx": c["n_ctx"], "n_b": c["n_batch"], "n_ub": c["n_ubatch"], "n_seq": c["n_seq"],
            "z_uni": 1 if c["kv_unified"] else 0, "n_swa": max(s["sliding_window"], 1)}
    full = q_ceil(ev("N_CTX_SEQ", None, vals))
    swa = llamacpp_swa(s)
    sliding = full if c["swa_full"] or not swa else q_ceil(ev("SWA_CELLS", None, vals))
    kinds = llamacpp_kinds(m, moe)
    e_kv = s["n_kv_heads"] * s["head_dim"]
    types = shared("LLAMACPP_KV_TYPES")
    row = q_mul(q_add(q(types[c["type_k"]]), q(types[c["type_v"]])), e_kv)
    has_full = 0
    has_sliding = 0
    for k in kinds:
        if k[0] == "full" or not swa:
            has_full = 1
        else:
            has_sliding = 1
    vals["n_head"] = s["n_heads"]
    vals["n_embd"] = s["hidden"]
    vals["n_vocab"] = s["vocab"]
    vals["n_ff"] = s["ffn"]
    vals["n_l"] = s["n_layers"]
    vals["z_rk"] = 1 if llamacpp_rotated(c["type_k"], s["head_dim"]) else 0
    vals["z_rv"] = 1 if llamacpp_rotated(c["type_v"], s["head_dim"]) else 0
    r = 64
    while s["head_dim"] % (2 * r) == 0:
        r = 2 * r
    vals["r_k"] = r
    if s["n_experts"]:
        vals["n_ff"] = s["experts_per_token"] * s["moe_ffn"] + s["n_shared_experts"] * s["shared_ffn"]
    vals["e_v"] = e_kv
    vals["n_kv"] = full if has_full else sliding
    vals["n_kv_f"] = full
    vals["n_kv_s"] = sliding
    vals["z_f"] = has_full
    vals["z_s"] = has_sliding
    streams = q_ceil(ev("N_STREAM", None, vals))
    return {"vals": vals, "kinds": kinds, "cells": {"full": full, "sliding": sliding}, "streams": streams,
            "n_ctx_pad": q_ceil(ev("N_CTX", None, vals)), "u": q_ceil(ev("U_BATCH", None, vals)),
            "layer_kv": {"full": q_ceil(q_mul(row, streams * full)), "sliding": q_ceil(q_mul(row, streams * sliding))}}


@portable
def llamacpp_buffers(m, c, moe):
    """[kv cache, compute buffer, output buffer] bytes of a llama.cpp context with every layer on one device, and
    the context's numbers (:func:`llamacpp_context`; ``moe``: allow routed experts, an estimated compute buffer)."""
    x = llamacpp_context(m, c, moe)
    kv = 0
    for k in x["kinds"]:
        kv += k[1] * x["layer_kv"][k[0]]
    compute = q_ceil(ev("COMPUTE_FA" if c["flash_attn"] else "COMPUTE_NO_FA", None, x["vals"]))
    return [kv, compute, q_ceil(ev("OUTPUT_BYTES", None, x["vals"])), x]


@settings_class
@dataclass(frozen=True)
class LlamaCppConfig(Settings):
    """A llama.cpp context's settings (``llama-server`` / ``llama-cli`` flags): ``n_ctx`` (``-c``), ``n_batch``
    (``-b``), ``n_ubatch`` (``-ub``), ``flash_attn`` (``-fa``), ``type_k`` / ``type_v`` (``-ctk`` / ``-ctv``: a key
    of :data:`KV_TYPES`), ``n_seq`` (``-np``, parallel sequences), ``kv_unified`` (one KV stream for all of them),
    ``swa_full`` (full-size cache for sliding-window layers), ``n_gpu_layers`` (``-ngl``; -1: all). Each field is
    checked here in one line; quantized V needs flash attention (llama.cpp refuses it too)."""

    n_ctx: int = 8192
    n_batch: int = 2048
    n_ubatch: int = 512
    flash_attn: bool = True
    type_k: str = "f16"
    type_v: str = "f16"
    n_seq: int = 1
    kv_unified: bool = True
    swa_full: bool = False
    n_gpu_layers: int = -1

    def __post_init__(self) -> None:
        for name in ("n_ctx", "n_batch", "n_ubatch", "n_seq"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        for name in ("flash_attn", "kv_unified", "swa_full"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidValueError(name, getattr(self, name), "must be True or False")
        for name in ("type_k", "type_v"):
            object.__setattr__(self, name, check_choice(name, getattr(self, name), KV_TYPES))
        if self.type_v not in FLOAT_CACHE_TYPES and not self.flash_attn:
            raise InvalidValueError("type_v", self.type_v, "quantized V cache requires flash_attn=True (llama.cpp "
                                                           "refuses it)")
        if self.n_gpu_layers != -1:
            try:
                check_positive_int("n_gpu_layers", self.n_gpu_layers, allow_zero=True)
            except InvalidValueError:
                raise InvalidValueError("n_gpu_layers", self.n_gpu_layers, "give -ngl as llama.cpp takes it: 0 .. "
                                        "the layers + 1, or -1 (all)") from None

    def values(self) -> dict[str, int]:
        """The symbol values of the context expressions."""
        return {"n_ctx": self.n_ctx, "n_b": self.n_batch, "n_ub": self.n_ubatch, "n_seq": self.n_seq,
                "z_uni": int(self.kv_unified)}


OP_OFFLOAD_MIN_BATCH = 32
"""llama.cpp runs a host-resident weight's matmul on the GPU (copying the weight into the GPU's compute buffer) for
batches of at least this many tokens (``GGML_OP_OFFLOAD_MIN_BATCH``, ggml-cuda); the start-up reservation uses the
micro-batch, so with -ub >= 32 the GPU's compute buffer holds room for the largest such weight."""

share(OP_OFFLOAD_MIN_BATCH=OP_OFFLOAD_MIN_BATCH)


@portable
def llamacpp_split(m, lw, bufs, ngl, cpu_moe):
    """Where llama.cpp puts a model view's buffers with ``-ngl ngl`` (-1: all) and ``--cpu-moe``: ``lw`` is
    :func:`~vramlib.memory.inference.layer_weights_of`'s result, ``bufs``
    :func:`~vramlib.serve.llamacpp.llamacpp_buffers`'. llama.cpp counts the output layer as
    one more unit after the blocks and offloads from the end (``i_gpu_start = n_layer + 1 - ngl``): -ngl 1 is the
    output layer alone, -ngl k the output and the last k - 1 blocks. Returns ``{gpu: [[part, bytes]], host: [[part,
    bytes]], layers_on_gpu, output_on_gpu, read_gpu, read_host}``, ``read_*`` being the bytes one decoded token
    reads on each side less the KV cache (``vramlib.serve.offload.decode_kv_read`` adds it)."""
    s = m["spec"]
    layers = lw[1]
    n = len(layers)
    units = n + 1 if ngl < 0 else min(ngl, n + 1)
    out_gpu = units >= 1
    on_gpu = max(units - 1, 0)
    first = n - on_gpu
    mixers = layer_types_of(s)
    kv_of = bufs[3]["layer_kv"]
    active = q(1) if not s["n_experts"] else q_div(s["experts_per_token"], s["n_experts"])
    w = [0, 0]
    kv = [0, 0]
    experts = 0
    copied = 0
    read = [q(0), q(0)]
    for i in range(n):
        side = 0 if i >= first else 1
        routed = layers[i][1]
        dense = layers[i][0] - routed
        kv[side] += kv_of[mixers[i]]
        if side == 1 or (cpu_moe and routed):
            copied = max(copied, layers[i][2])
        if cpu_moe:
            w[side] += dense
            experts += routed
            read[side] = q_add(read[side], q(dense))
            read[1] = q_add(read[1], q_mul(active, routed))
        else:
            w[side] += layers[i][0]
            read[side] = q_add(read[side], q_add(q(dense), q_mul(active, routed)))
    embed = 0
    head = 0
    for o in lw[0]:
        if o[0] == "embed":
            embed += o[1]
        elif not (o[0] == "lm_head" and s["tied_embeddings"] and not out_gpu):
            head += o[1]     # a tied table serves a host output layer from the embeddings' own pages
    side = 0 if out_gpu else 1
    w[side] += head
    read[side] = q_add(read[side], q(head))
    offload = out_gpu and bufs[3]["u"] >= shared("OP_OFFLOAD_MIN_BATCH")
    gpu = [["model buffer", w[0]], ["kv cache", kv[0]],
           ["compute buffer", (bufs[1] + (copied if offload else 0)) if out_gpu else 0]]
    host = [["model buffer", embed + w[1]], ["routed experts", experts], ["kv cache", kv[1]],
            ["compute buffer", bufs[1] if first > 0 or not out_gpu else 0], ["output buffer", bufs[2]]]
    return {"gpu": gpu, "host": host, "layers_on_gpu": on_gpu, "output_on_gpu": out_gpu, "read_gpu": read[0],
            "read_host": read[1], "copied": copied if offload else 0}


def weights_label(weights) -> str:
    """A format's name, or a GGUF file's name (``vl.read_gguf``'s result), for titles."""
    return Path(weights.path).name if hasattr(weights, "path") else str(weights)


def _model_buffer(m: ModelSpec, weights) -> int:
    """The weights, with float files' 1-D tensors in f32 as llama.cpp's converter writes them; a GGUF file read with
    ``vl.read_gguf``: the bytes its tensors store."""
    if hasattr(weights, "weights_bytes"):
        return weights.weights_bytes
    total = weights_bytes(m, weights)
    if weights in ("fp16", "bf16"):
        g = m.param_groups()
        total += 2 * (g["norm"] + g["bias"])
    return total


def _notes(m: ModelSpec, c: LlamaCppConfig, s: dict) -> tuple[str, ...]:
    notes = [f"llama.cpp at commit 0c1e57098 (llama-cpp-python 0.3.36): n_ctx {s['n_ctx_pad']:,}, "
             f"{s['cells']['full']:,} cells per stream x {s['streams']} stream(s), micro-batch {s['u']:,}",
             "model buffer: the weights as vramlib prices the format (1-D tensors in f32); the CPU backend's "
             "AMX / repacked copies of some weights are not counted"]
    if "sliding" in m.layer_types and not llamacpp_swa(Fields(m)):
        notes.append(f"llama.cpp ignores {m.family}'s sliding window (LLAMACPP_SWA_FAMILIES): every layer keeps every "
                     "token")
    if c.flash_attn and m.n_heads * m.head_dim != m.hidden:
        notes.append("compute buffer with flash attention: a lower bound for n_head x head_dim != n_embd (the "
                     "attention output is another width; the peak can be up to two n_embd rows higher)")
    elif c.flash_attn and llamacpp_rotated(c.type_v, m.head_dim) and m.ffn > 2 * m.hidden:
        notes.append("compute buffer with flash attention and a rotated V cache: exact on the measured shapes; a "
                     "replay of ggml-alloc finds some shapes one n_embd row higher")
    elif llamacpp_rotated(c.type_k, m.head_dim):
        notes.append("compute buffer: quantized K with a 64-multiple head turns on llama.cpp's Hadamard rotation, "
                     "measured 1,504 B per token below this figure (an upper bound)")
    return tuple(notes)


@checked_call
def llamacpp_memory(model: ModelSpec | str, weights: str = "q4_k_m", config: LlamaCppConfig | None = None,
                    **settings) -> Breakdown:
    """The buffers of a llama.cpp context (see the module doc): ``model buffer``, ``kv cache``, ``compute buffer``
    and ``output buffer``, exact bytes, with notes naming what is a bound or not counted. ``config``: a
    :class:`LlamaCppConfig`, or its fields as keywords (``n_ctx=8192, n_ubatch=512, flash_attn=True, type_k="f16",
    ...``; on top of it when both are given).

    With ``n_gpu_layers`` (``-ngl``) short of all, the four are what the GPU holds (:func:`llamacpp_split`: the
    output layer first, then blocks from the last) and ``host: model buffer``, ``host: kv cache``, ``host: compute
    buffer`` what stays in host memory (the output buffer is host memory either way).

    >>> llamacpp_memory("llama-3.1-8b", "q4_k_m", n_ctx=8192)["kv cache"]
    1073741824
    """
    m = get_model(model)
    c = LlamaCppConfig.build("llamacpp_memory", config, settings, field="config", also=("model", "weights", "config"))
    kv, compute, output, s = llamacpp_buffers(m.view(), Fields(c), False)
    parts = {"model buffer": _model_buffer(m, weights), "kv cache": kv, "compute buffer": compute,
             "output buffer": output}
    if c.n_gpu_layers != -1:
        parts = _split_parts(m, weights, c)
    return Breakdown(parts,
                     title=f"{m.name} in llama.cpp: {weights_label(weights)}, n_ctx {c.n_ctx:,}, K {c.type_k} / "
                           f"V {c.type_v}, "
                           f"flash attention {'on' if c.flash_attn else 'off'}", notes=_notes(m, c, s))


def _split_parts(m: ModelSpec, weights, c: LlamaCppConfig) -> dict[str, int]:
    """The buffers of a partial offload (``c.n_gpu_layers``): the GPU's under the usual names, the host's prefixed."""
    lw = weights.layer_weights() if hasattr(weights, "layer_weights") else layer_weights_of(
        m.view(), precision_view(get_precision(weights, field="weights")))
    x = llamacpp_split(m.view(), lw, llamacpp_buffers(m.view(), Fields(c), False), c.n_gpu_layers, False)
    gpu, host = dict(x["gpu"]), dict(x["host"])
    return {"model buffer": gpu["model buffer"], "kv cache": gpu["kv cache"], "compute buffer": gpu["compute buffer"],
            "output buffer": host["output buffer"], "host: model buffer": host["model buffer"],
            "host: kv cache": host["kv cache"], "host: compute buffer": host["compute buffer"]}


GPU_BUFFERS = ("model buffer", "kv cache", "compute buffer")
"""The buffers that live on the GPU when every layer is offloaded (``-ngl`` all); the output buffer is host memory."""


@portable
def gpu_budget_of(card):
    """What a llama.cpp process can allocate on ``card`` (its fields): CUDA's total for the card (its published
    figure, or the nvidia-smi total less the assumed driver reservation: ``serving.driver_reserve``) less the CUDA
    context (the allocator's figure for the card, else its lazy-loading one)."""
    reserved = driver_reserve(card, None, shared("LLAMACPP_DRIVER_RESERVED"))[0]
    contexts = shared("LLAMACPP_CUDA_CONTEXT")
    key = card["key"] if card["key"] in contexts else "lazy"
    return card["memory_bytes"] - reserved - contexts[key]


def gpu_budget(gpu: GPU | str) -> tuple[int, str]:
    """:func:`gpu_budget_of` a catalogue card, and where the figures come from."""
    card = get_gpu(gpu)
    how = cuda_total(card)[1]
    key, ctx = context_figure(card)
    return (gpu_budget_of(Fields(card)),
            f"{card.key}: CUDA total ({how}) minus the CUDA context ({key} figure, {ctx.bytes:,} B)")


share(LLAMACPP_DRIVER_RESERVED=parse_memory(DRIVER_RESERVED),
      LLAMACPP_CUDA_CONTEXT={k: v.bytes for k, v in CUDA_CONTEXT.items()})


@checked_call
def llamacpp_max_ctx(model: ModelSpec | str, gpu: GPU | str, weights: str = "q4_k_m",
                     config: LlamaCppConfig | None = None, **settings) -> int:
    """The largest ``n_ctx`` (a multiple of 256, as llama.cpp pads it) whose GPU buffers (:data:`GPU_BUFFERS`) fit
    :func:`gpu_budget` with every layer on the GPU, for one llama.cpp context; 0 if not even 256 tokens fit."""
    m = get_model(model)
    c = LlamaCppConfig.build("llamacpp_max_ctx", config, settings, field="config",
                             also=("model", "gpu", "weights", "config"))
    budget = gpu_budget(gpu)[0]

    def fits(k: int) -> bool:
        bd = llamacpp_memory(m, weights, c.with_(n_ctx=k * CTX_PAD))
        return sum(bd[x] for x in GPU_BUFFERS) <= budget

    return CTX_PAD * largest_fitting(fits, 1, None, 2**24, field="n_ctx")


__all__ = ["COMPUTE_FA", "COMPUTE_LOGITS", "COMPUTE_NO_FA", "CTX_PAD", "FA_FFN", "FA_INPUTS", "FLOAT_CACHE_TYPES",
           "gpu_budget", "gpu_budget_of", "GPU_BUFFERS", "KV_TYPES", "llamacpp_max_ctx", "llamacpp_memory",
           "llamacpp_problem", "llamacpp_refusal", "llamacpp_swa", "LLAMACPP_SWA_FAMILIES", "LlamaCppConfig", "N_CTX",
           "N_CTX_SEQ", "N_STREAM", "OUTPUT_BYTES", "SWA_CELLS", "TENSOR_ALIGNMENT", "U_BATCH"]
