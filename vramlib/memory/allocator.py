"""What PyTorch's CUDA caching allocator reserves beyond what tensors occupy, and what lives outside it: the CUDA
context and the libraries' workspaces, per card class (issue 13).

``torch.cuda.memory_allocated`` counts the allocator's *blocks*: every request rounded up to 512 bytes
(:data:`BLOCK_BYTES`, ``round_size``), and a large-pool block handed out whole when splitting it would leave 1 MiB
or less. ``memory_reserved`` counts the *segments* obtained from ``cudaMalloc``: 2 MiB for requests up to 1 MiB,
20 MiB for requests under 10 MiB, else the request rounded up to 2 MiB (:data:`SEGMENT_BYTES`,
``get_allocation_size``); a later request reuses the smallest free block of the same stream and pool that fits
(best fit) and splits it. With ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` each pool is one segment that
grows in 2 MiB (small) or 20 MiB (large) pages and splits at 512 B. :func:`reserved_for` plays these rules for a
sequence of allocations without frees -- what loading a model's weights does -- in Python and in the static
calculators. Source: pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp`` (``round_size``, ``get_pool``,
``get_allocation_size``, ``get_free_block``, ``should_split``, Note [Expandable Segments]), commit 001074d;
``torch/cuda/memory.py`` (``allocated_bytes.all.current``, ``reserved_bytes.all.current``).

What the rules do not give, and this module does not model: fragmentation of the tensors a step frees and
allocates again (activations, gradients with ``set_to_none``), which depends on the order of every allocation;
several streams (each has its own free lists); ``backend:cudaMallocAsync``; CUDA-graph pools.

Outside tensors, but through the allocator: cuBLAS's workspace per (handle, stream) -- 32 MiB on sm90 (Hopper),
8 MiB + 128 KiB elsewhere (``CUBLAS_WORKSPACE_CONFIG`` ``:4096:8`` / ``:4096:2:16:8``) -- and cuBLASLt's 1 MiB
(``aten/src/ATen/cuda/CublasHandlePool.cpp``, ``parseChosenWorkspaceSize``, ``parseCUDABlasLtWorkspaceSize``,
commit 26a3905); FlashAttention-2's backward buffers, fp32 ``dq_accum`` (b, s rounded to 128, heads, head dim
rounded to 32) and ``softmax_d`` (b, heads, s rounded to 128), plus bf16 ``dk``/``dv`` expanded to every query
head under GQA (``aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp``, ``mha_bwd``, commit ef3d5c9),
which the fake-CUDA measurements cannot see (they are internal to the kernel). Outside the allocator: the CUDA
context, :data:`CUDA_CONTEXT` (published figures with lazy module loading, the default since CUDA 11.7 with
PyTorch 1.13; no per-card figure is published for most cards, and the one general figure is used for them, said
in the result).

Used in: chapter 16.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ..catalog.hardware import GPU, get_gpu
from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import get_precision
from ..core import formulas as F
from ..core.errors import InvalidValueError, check_positive_int, checked_call
from ..core.portable import ev, portable, q_ceil, share, shared
from ..core.symbols import b, d, n_h, s
from .breakdown import Breakdown
from .training import LORA_SHAPES

KiB, MiB = 1024, 1024 ** 2

MIN_BLOCK = 512
"""``kMinBlockSize``: every allocation is rounded up to a multiple of 512 bytes."""
SMALL_SIZE = 1 * MiB
"""``kSmallSize``: the largest request of the small pool."""
SMALL_BUFFER = 2 * MiB
"""``kSmallBuffer``: the small pool's segments (and expandable pages)."""
MIN_LARGE_ALLOC = 10 * MiB
"""``kMinLargeAlloc``: requests from 1 MiB up to this share 20 MiB segments."""
ROUND_LARGE = 2 * MiB
"""``kRoundLarge``: larger requests get their own segment, rounded up to 2 MiB."""
LARGE_BUFFER = 20 * MiB
"""``kLargeBuffer``: the segment of requests between 1 and 10 MiB (and the large pool's expandable pages)."""

n_req = sp.Symbol("n_req", integer=True, positive=True)   # bytes a tensor asks for
r_blk = sp.Symbol("r_blk", integer=True, positive=True)   # its rounded block

BLOCK_BYTES = sp.Piecewise((MIN_BLOCK, n_req < MIN_BLOCK), (MIN_BLOCK * sp.ceiling(n_req / MIN_BLOCK), True))
"""``round_size`` (power-of-two divisions off, the default): the block a request of ``n_req`` bytes occupies."""

SEGMENT_BYTES = sp.Piecewise((SMALL_BUFFER, r_blk <= SMALL_SIZE), (LARGE_BUFFER, r_blk < MIN_LARGE_ALLOC),
                             (ROUND_LARGE * sp.ceiling(r_blk / ROUND_LARGE), True))
"""``get_allocation_size``: the segment ``cudaMalloc`` gets when no free block of the pool fits a block of ``r_blk``."""

z_sm90 = sp.Symbol("z_sm90", integer=True, nonnegative=True)   # 1 on compute capability 9.0 (Hopper)

CUBLAS_WORKSPACE_BYTES = sp.Piecewise((4096 * 8 * KiB, sp.Eq(z_sm90, 1)), (4096 * KiB * 2 + 16 * KiB * 8, True))
"""cuBLAS's workspace per (handle, stream), allocated through the caching allocator: 32 MiB on sm90, else
``:4096:2:16:8`` = 8 MiB + 128 KiB (``parseChosenWorkspaceSize``)."""

CUBLASLT_WORKSPACE_BYTES = 1 * MiB
"""cuBLASLt's workspace per (handle, stream), 1 MiB by default (``parseCUDABlasLtWorkspaceSize``)."""

z_gqa = sp.Symbol("z_gqa", integer=True, nonnegative=True)     # 1 when the KV heads are fewer than the heads
b_q = sp.Symbol("b_q", integer=True, positive=True)            # bytes per element of q (bf16: 2)


def _round_up(x: sp.Expr, k: int) -> sp.Expr:
    return k * sp.ceiling(x / k)


FLASH_BACKWARD_BYTES = (4 * b * _round_up(s, 128) * n_h * _round_up(_round_up(d, 8), 32)   # dq_accum, fp32
                        + 4 * b * n_h * _round_up(s, 128)                                   # softmax_d, fp32
                        + z_gqa * 2 * b_q * b * s * n_h * d)                                # dk, dv expanded
"""One FlashAttention-2 backward call's own buffers (``mha_bwd``): fp32 ``dq_accum`` and ``softmax_d``, and under GQA
``dk``/``dv`` for every query head before they are summed into the KV heads."""

share(ALLOC_BLOCK=BLOCK_BYTES, ALLOC_SEGMENT=SEGMENT_BYTES,
      ALLOC_LIMITS=[MIN_BLOCK, SMALL_SIZE, SMALL_BUFFER, LARGE_BUFFER])


@portable
def reserved_for(sizes, expandable):
    """[reserved, allocated] bytes after allocating tensors of ``sizes`` bytes in order on one stream, none freed:
    the caching allocator's rounding, segments, best-fit reuse and splitting, or with ``expandable`` one growing
    segment per pool mapped in pages."""
    lim = shared("ALLOC_LIMITS")
    free = {"s": [], "l": []}
    used = {"s": 0, "l": 0}
    mapped = {"s": 0, "l": 0}
    reserved = 0
    allocated = 0
    for n in sizes:
        if n == 0:
            continue
        r = q_ceil(ev("ALLOC_BLOCK", None, {"n_req": n}))
        p = "s" if r <= lim[1] else "l"
        if expandable:
            page = lim[2] if p == "s" else lim[3]
            used[p] += r
            need = ((used[p] + page - 1) // page) * page
            reserved += need - mapped[p]
            mapped[p] = need
            allocated += r
            continue
        best = -1
        at = -1
        for i in range(len(free[p])):
            if free[p][i] >= r and (best < 0 or free[p][i] < best):
                best = free[p][i]
                at = i
        if best < 0:
            best = q_ceil(ev("ALLOC_SEGMENT", None, {"r_blk": r}))
            reserved += best
        else:
            free[p].pop(at)
        rest = best - r
        if (rest >= lim[0]) if p == "s" else (rest > lim[1]):
            free[p].append(rest)
            allocated += r
        else:
            allocated += best
    return [reserved, allocated]


@dataclass(frozen=True)
class ContextFigure:
    """A published CUDA context size: bytes, the setup it was read on, and its source."""

    bytes: int
    setup: str
    source: str


CUDA_CONTEXT: dict[str, ContextFigure] = {
    "lazy": ContextFigure(287_047_680, "CUDA_MODULE_LOADING=LAZY (PyTorch >= 1.13 sets it), GPU not stated",
                          "pytorch/pytorch PR #86509: total - free after one 6.4 MB tensor; 666,632,192 bytes eager"),
    "rtx-6000-ada": ContextFigure(426 * MiB, "RTX 6000 Ada, PyTorch 2.10 + CUDA 13.0, after mem_get_info only",
                                  "unslothai/unsloth-zoo PR #1053: nvidia-smi 426 MiB, torch allocated 0"),
}
"""Published CUDA context sizes (device memory outside PyTorch's allocator, after initialisation), by card class;
``lazy`` is the general figure used where no card-specific one is published. It grows as cuDNN, NCCL and lazily
loaded kernels initialise (ptrblck, pytorch/pytorch #109888: "around 400MB" with lazy loading)."""


def context_figure(gpu: GPU) -> tuple[str, ContextFigure]:
    """The CUDA context figure for a card: its own where published, else the general lazy-loading one."""
    key = gpu.key if gpu.key in CUDA_CONTEXT else "lazy"
    return key, CUDA_CONTEXT[key]


@checked_call
def weight_tensors(model: ModelSpec | str, dtype: str = "bf16") -> list[tuple[str, int]]:
    """[(name, bytes)] of every parameter tensor of a dense uniform decoder, in the order ``from_pretrained``
    creates them: the embedding, per layer the linear weights with their biases and the norms (with LayerNorm's
    biases), the final norm, the LM head unless tied. They sum to ``weights_bytes(model, dtype)``. q/k norms and
    experts refuse in one line."""
    m = get_model(model)
    if get_precision(dtype, field="dtype").name not in ("bf16", "fp16", "fp32"):
        raise InvalidValueError("dtype", dtype, "the weights are listed as bf16, fp16 or fp32 tensors")
    width = get_precision(dtype).bytes_per_element
    sym = m.symbols()
    if m.n_experts or m.n_shared_experts or sym["beta_qkh"] or sym["beta_qkf"]:
        raise InvalidValueError("model", m.name, "the weight tensors are listed for dense decoders without q/k "
                                "norms; expert layers and q/k norms are not")
    biased = {"q_proj": sym["beta_qkv"], "k_proj": sym["beta_qkv"], "v_proj": sym["beta_qkv"],
              "qkv_proj": sym["beta_qkv"], "o_proj": sym["beta_o"]}
    layer = []
    for x in m.linear_modules():
        n_in, n_out = (F.to_int_bytes(F.evaluate(e, **sym)) for e in LORA_SHAPES[x])
        layer.append((x, F.to_int_bytes(width * n_in * n_out)))
        if biased.get(x, sym["beta_mlp"]):
            layer.append((x + ".bias", F.to_int_bytes(width * n_out)))
    norm = F.to_int_bytes(width * m.hidden)
    norm_parts = [("", norm)] + ([(".bias", norm)] if sym["beta_norm"] else [])
    layer += [(f"norm{j}{suffix}", v) for j in range(sym["n_norm"]) for suffix, v in norm_parts]
    embed = ("embed_tokens", F.to_int_bytes(width * m.vocab * m.hidden))
    out = [embed] + [(f"layers.{i}.{k}", v) for i in range(m.n_layers) for k, v in layer]
    out += [("norm" + suffix, v) for suffix, v in norm_parts]
    return out + ([] if m.tied_embeddings else [("lm_head", embed[1])])


@checked_call
def cuda_overheads(model: ModelSpec | str, gpu: GPU | str, dtype: str = "bf16", seq: int = 2048, batch: int = 1,
                   training: bool = True, expandable_segments: bool = False) -> Breakdown:
    """What a run on ``gpu`` holds beyond its tensors' bytes: the CUDA context (published figure), cuBLAS's and
    cuBLASLt's workspaces, what the allocator adds to the weights and workspaces (:func:`reserved_for` over the
    model's tensors as ``from_pretrained`` creates them, then the workspaces of the first matmul: block rounding,
    and the unused space of their segments) and, in training, one FlashAttention-2 backward call's buffers at
    ``batch`` x ``seq``. The fragmentation of freed and reallocated tensors is not modelled (the notes say so)."""
    m, card = get_model(model), get_gpu(gpu)
    seq, batch = check_positive_int("seq", seq), check_positive_int("batch", batch)
    if not isinstance(training, bool) or not isinstance(expandable_segments, bool):
        bad = "training" if not isinstance(training, bool) else "expandable_segments"
        raise InvalidValueError(bad, training if bad == "training" else expandable_segments, "must be True or False")
    if card.vendor != "nvidia":
        raise InvalidValueError("gpu", card.key, "the CUDA context and cuBLAS workspaces are NVIDIA's; ROCm's "
                                "(hipBLASLt's workspace, HIP's context) are not modelled")
    sizes = [v for _, v in weight_tensors(m, dtype)]
    sm90 = 1 if card.compute_capability == "9.0" else 0
    workspaces = [F.to_int_bytes(F.evaluate(CUBLAS_WORKSPACE_BYTES, z_sm90=sm90)), CUBLASLT_WORKSPACE_BYTES]
    reserved, allocated = reserved_for(sizes + workspaces, expandable_segments)   # loaded, then the first matmul
    key, ctx = context_figure(card)
    parts = {f"CUDA context ({'published for ' + key if key != 'lazy' else 'lazy loading, general figure'})":
             ctx.bytes,
             "cuBLAS + cuBLASLt workspaces": sum(workspaces),
             "allocator rounding (weights, workspaces)": allocated - sum(sizes) - sum(workspaces),
             "unused segment space (weights, workspaces)": reserved - allocated}
    if training:
        sym = m.symbols()
        parts["FlashAttention-2 backward buffers (one layer)"] = F.to_int_bytes(F.evaluate(
            FLASH_BACKWARD_BYTES, b=batch, s=seq, n_h=sym["n_h"], d_head=sym["d_head"],
            z_gqa=1 if m.n_kv_heads < m.n_heads else 0, b_q=get_precision(dtype).bytes_per_element))
    notes = (f"CUDA context: {ctx.setup} ({ctx.source})",
             "not modelled: fragmentation of tensors freed and allocated again within a step (activations, "
             "gradients with set_to_none), several streams, cudaMallocAsync, CUDA graphs")
    seg = "expandable segments" if expandable_segments else "default segments"
    return Breakdown(parts, title=f"{m.name} on {card.key}: beyond the tensors ({dtype} weights, {seg})",
                     notes=notes)


__all__ = ["BLOCK_BYTES", "CUBLASLT_WORKSPACE_BYTES", "CUBLAS_WORKSPACE_BYTES", "CUDA_CONTEXT", "FLASH_BACKWARD_BYTES",
           "LARGE_BUFFER", "MIN_BLOCK", "MIN_LARGE_ALLOC", "ROUND_LARGE", "SEGMENT_BYTES", "SMALL_BUFFER", "SMALL_SIZE",
           "cuda_overheads", "reserved_for", "weight_tensors"]
