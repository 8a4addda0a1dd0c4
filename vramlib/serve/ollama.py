"""Ollama's automatic GPU layer split (``num_gpu`` unset) on the llama engine: how many layers Ollama v0.12.0 puts
on one CUDA GPU, and the GPU memory it expects to use (issue 14).

Owned here, read from ollama v0.12.0 (tag ``9f3a37fd36bf1c46cc86a47bc5372535f8ee3547``; ``docs/runtime-rules.md``
section 4 and ``docs/offload-rules.md`` section 8 cite the lines):

* **Inputs** (``llm/server.go#L168-L177``, ``server/sched.go#L86-L88``): ``num_ctx`` at least 4 and at most the
  model's trained context, ``num_batch = min(num_batch, num_ctx)``; flash attention only when asked for
  (``OLLAMA_FLASH_ATTENTION``; the GPU check, discover/types.go#L173-L184, reads the CUDA driver's major version,
  >= 7, which every current driver passes), and ``OLLAMA_KV_CACHE_TYPE`` (f16, q8_0, q4_0) only with it.
* **KV cache and graph** (``fs/ggml/ggml.go`` ``GraphSize``, #L549-L624): each layer's KV is
  :data:`KV_LAYER` over ``num_ctx x num_parallel`` tokens; the llama architecture's graph sizes
  :data:`FULL_OFFLOAD` and :data:`PARTIAL_OFFLOAD` (Go's unsigned integer arithmetic: each ``x*9/16`` rounds down).
* **Placement** (``llm/memory.go`` ``estimateGPULayers``, #L144-L421; the loop evaluates :data:`LAYER_FITS` itself): a
  GPU is usable when :data:`GPU_USABLE`
  holds; it is charged ``cudaMinimumMemory`` (457 MiB) plus one block's size as a buffer; blocks are placed from
  the last one down while :data:`LAYER_FITS` (the first that does not fit ends the placement), then the output layer
  (final norm and LM head, or the tied embeddings) by the same test; last the full graph if every block and the
  output layer went, else the partial one. What Ollama expects to use on the GPU is that sum (0 when no layer went).
* **Free memory**: Ollama reads ``cudaMemGetInfo``'s free bytes with its own CUDA context open; here the card's CUDA
  total less the CUDA context (:func:`vramlib.serve.llamacpp.gpu_budget`), as for llama.cpp.

Ollama passes the layer count (blocks plus the output layer) to llama.cpp as ``n_gpu_layers`` (server.go#L528,
#L606-L650); the llama.cpp it vendors uses the older rule (``i_gpu_start = n_layer - n_gpu_layers``, the output
layer on the GPU only at ``n_layer + 1``: llama/llama.cpp/src/llama-model.cpp#L1961-L1986). On one GPU the output
layer is placed only after every block, so the runner loads exactly the blocks estimated.

Refused in one line: architectures other than the llama family's (GGUF ``llama``: Llama, Mistral) dense GQA with
full attention on every layer, GPUs other than NVIDIA's, weights that are not a GGUF type. Not parameters here:
more than one GPU, a user's ``num_gpu``, projectors (vision models), Metal, and the newer "Ollama engine"
(``ollamaServer``, v0.12's ``assignLayers``) that other architectures use.

Used in: chapter 17.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ..catalog.hardware import GPU, get_gpu
from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import GGUF_MIXES, get_precision, precision_view
from ..core.errors import InvalidValueError, check_choice, check_positive_int, checked_call
from ..core.settings import Settings, settings_class
from ..core.units import parse_memory
from ..memory.inference import layer_weights_of
from .llamacpp import gpu_budget

OLLAMA_VERSION = "v0.12.0"
"""The Ollama release whose llama-engine estimate this module follows (``llm/memory.go`` is gone in v0.13.0)."""

CUDA_MINIMUM_MEMORY = 457 * 2**20
"""``cudaMinimumMemory = 457 * format.MebiByte``: what Ollama keeps free on each CUDA GPU (discover/gpu.go#L41)."""

OLLAMA_DEFAULT_CONTEXT = 4096
"""``OLLAMA_CONTEXT_LENGTH``'s default from v0.6.8 to v0.15.0 (envconfig/config.go#L196 in v0.12.0)."""

OLLAMA_KV_TYPES: dict[str, sp.Rational] = {"f16": sp.Integer(2), "q8_0": sp.Integer(1), "q4_0": sp.Rational(1, 2)}
"""``kvCacheBytesPerElement`` of the types ``SupportsKVCacheType`` accepts (fs/ggml/ggml.go#L866-L916)."""

LLAMA_FAMILIES = ("llama", "mistral")
"""Model families llama.cpp converts to the GGUF architecture ``llama`` (the graph formula modelled here)."""

FLOAT_WEIGHTS = ("fp16", "bf16", "fp32")
"""Float formats a GGUF file can hold besides the quantized mixes (:data:`vramlib.catalog.precision.GGUF_MIXES`)."""

_pos = dict(integer=True, positive=True)
c, b, e, h, h_kv, V, d_e, d_k, d_v = (sp.Symbol(x, **_pos) for x in ("c", "b", "e", "h", "h_kv", "V", "d_e", "d_k",
                                                                       "d_v"))
n_ctx, n_batch, n_par = (sp.Symbol(x, **_pos) for x in ("n_ctx", "n_batch", "n_par"))
beta = sp.Symbol("beta", positive=True)                       # KV bytes per element
F, o, M, L, A, P, G = (sp.Symbol(x, integer=True, nonnegative=True) for x in ("F", "o", "M", "L", "A", "P", "G"))

CONTEXT = n_ctx * n_par
"""The tokens ``GraphSize`` sizes the cache and graph for: ``context *= numParallel``."""

BATCH = sp.Min(n_ctx, n_batch)
"""The batch ``GraphSize`` is given: ``min(NumCtx, NumBatch)``."""

KV_LAYER = sp.floor(c * (d_k + d_v) * h_kv * beta)
"""One full-attention layer's K and V: ``context * (head_dim_k + head_dim_v) * n_head_kv * bytesPerElement``
(ggml.go#L587; ``c`` = :data:`CONTEXT`)."""

FULL_OFFLOAD = sp.Max(4 * b * (1 + 4 * e + c * (1 + h)), 4 * b * (e + V))
"""The llama graph with every layer on the GPU (ggml.go#L614-L617): ``c`` context tokens, ``b`` batch, ``e``
embedding, ``h`` heads, ``V`` vocabulary."""

PARTIAL_OFFLOAD = 4 * b * e + sp.Max(
    4 * b * (1 + e + sp.Max(c, e)) + sp.floor(e * e * 9 / 16) + 4 * c * (b * h + d_e * h_kv),
    4 * b * (e + V) + sp.floor(e * V * 105 / 128))
"""The llama graph under partial offload (ggml.go#L619-L623); ``d_e`` = embedding / heads (``EmbeddingHeadCountMax``),
``h_kv`` the KV heads."""

GPU_USABLE = sp.GreaterThan(F, o + sp.Max(P, G) + M + 2 * L)
"""A GPU takes layers when its free memory ``F`` covers ``OLLAMA_GPU_OVERHEAD`` ``o``, the larger graph, the minimum
``M`` and two of ``blk.0``'s size with its KV (``L``) (memory.go#L268)."""

LAYER_FITS = sp.StrictGreaterThan(F, o + A + sp.Max(P, G) + L)
"""A layer of ``L`` bytes (weights and KV) goes to the GPU when the free memory exceeds the overhead, what is
allocated so far ``A`` (minimum, buffer layer, placed layers) and the larger graph (memory.go#L316-L317, #L341-L342)."""


@settings_class
@dataclass(frozen=True)
class OllamaConfig(Settings):
    """Ollama's settings that the estimate reads: ``num_ctx`` (request option / ``OLLAMA_CONTEXT_LENGTH``, default
    4096 in v0.12.0), ``num_batch`` (512), ``num_parallel`` (``OLLAMA_NUM_PARALLEL``, 1), ``flash_attention``
    (``OLLAMA_FLASH_ATTENTION``), ``kv_cache_type`` (``OLLAMA_KV_CACHE_TYPE``: f16, q8_0, q4_0; used only with flash
    attention, as Ollama does) and ``gpu_overhead`` (``OLLAMA_GPU_OVERHEAD``: bytes, or e.g. ``"1GiB"``)."""

    num_ctx: int = OLLAMA_DEFAULT_CONTEXT
    num_batch: int = 512
    num_parallel: int = 1
    flash_attention: bool = False
    kv_cache_type: str = "f16"
    gpu_overhead: int | str = 0

    def __post_init__(self) -> None:
        for name in ("num_ctx", "num_batch", "num_parallel"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        if not isinstance(self.flash_attention, bool):
            raise InvalidValueError("flash_attention", self.flash_attention, "must be True or False")
        object.__setattr__(self, "kv_cache_type", check_choice("kv_cache_type", self.kv_cache_type, OLLAMA_KV_TYPES))
        object.__setattr__(self, "gpu_overhead", parse_memory(self.gpu_overhead, field="gpu_overhead"))

    @property
    def kv_type(self) -> str:
        """The cache type Ollama uses: ``kv_cache_type`` with flash attention, else f16."""
        return self.kv_cache_type if self.flash_attention else "f16"


@dataclass(frozen=True)
class OllamaEstimate:
    """Ollama's estimate for one model on one GPU: ``n_gpu_layers`` (its layer count, blocks plus the output layer;
    what it logs as ``offload`` and passes to llama.cpp), ``layers_on_gpu`` (blocks, 0 .. ``n_layers``),
    ``output_on_gpu``, the graph sizes (``graph_partial``, ``graph_full``, ``graph``: the one charged), ``kv_bytes``
    (all layers) and ``kv_layer_bytes``, ``layer_bytes`` (each block's weights and KV), ``output_bytes``,
    ``vram_bytes`` (GPU memory Ollama expects to use), ``total_bytes`` (its size of the whole model), ``free_bytes``
    (the free memory assumed), ``minimum_bytes``, ``usable`` (the GPU passed :data:`GPU_USABLE`), ``num_ctx`` and
    ``batch`` as used and notes."""

    model: str
    gpu: str
    weights: str
    n_layers: int
    n_gpu_layers: int
    layers_on_gpu: int
    output_on_gpu: bool
    graph_partial: int
    graph_full: int
    graph: int
    kv_bytes: int
    kv_layer_bytes: int
    layer_bytes: tuple[int, ...]
    output_bytes: int
    vram_bytes: int
    total_bytes: int
    free_bytes: int
    minimum_bytes: int
    usable: bool
    num_ctx: int
    batch: int
    notes: tuple[str, ...]

    @property
    def fully_offloaded(self) -> bool:
        """Every block and the output layer on the GPU (Ollama's ``fullyLoaded``)."""
        return self.layers_on_gpu == self.n_layers and self.output_on_gpu

    @property
    def host_bytes(self) -> int:
        """``TotalSize - VRAMSize``: what Ollama checks against free RAM plus swap (server.go#L536-L541)."""
        return self.total_bytes - self.vram_bytes


def _model_problem(m: ModelSpec) -> None:
    """Refuse, in one line, a model whose GGUF is not the dense, full-attention llama architecture."""
    if m.family not in LLAMA_FAMILIES:
        raise InvalidValueError("model", m.name, f"family {m.family!r} is not modelled for Ollama's estimate: only "
                                                 f"llama-family models (GGUF architecture llama) are")
    if m.attention != "gqa" or m.n_experts:
        raise InvalidValueError("model", m.name, "Ollama's llama estimate is modelled for dense GQA models; "
                                                 f"{'MoE' if m.n_experts else m.attention} is not")
    kinds = {k[1] for k in m.view()["layers"]} | {k[2] for k in m.view()["layers"]}
    if kinds != {"full", "dense"}:
        raise InvalidValueError("model", m.name, "layers other than full attention with a dense MLP ("
                                                 f"{', '.join(sorted(kinds - {'full', 'dense'}))}) are not modelled "
                                                 "for Ollama's llama estimate")


def _weights_problem(weights: str) -> str:
    w = get_precision(weights, field="weights").name
    if w not in GGUF_MIXES and w not in FLOAT_WEIGHTS:
        raise InvalidValueError("weights", weights, "Ollama loads GGUF files: give a GGUF type (q4_k_m, q8_0, ...) or "
                                                    "fp16 / bf16 / fp32")
    return w


@checked_call
def ollama_context(model: ModelSpec | str, config: OllamaConfig) -> tuple[int, int]:
    """``(num_ctx, batch)`` as the estimate sees them: num_ctx at least 4 (the scheduler) and at most the trained
    context (the server), the batch ``min(num_ctx, num_batch)``."""
    m = get_model(model)
    ctx = min(max(config.num_ctx, 4), m.max_context)
    return ctx, min(ctx, config.num_batch)


@checked_call
def ollama_graph(model: ModelSpec | str, config: OllamaConfig) -> dict:
    """``GraphSize`` for a llama model: ``kv_layer`` (bytes of one layer's K and V), ``partial`` and ``full`` graph
    bytes, with the ``context`` (num_ctx x num_parallel) and ``batch`` they were sized for."""
    m = get_model(model)
    ctx, batch = ollama_context(m, config)
    vals = {c: int(CONTEXT.subs({n_ctx: ctx, n_par: config.num_parallel})),
            b: int(BATCH.subs({n_ctx: ctx, n_batch: batch})), e: m.hidden, h: m.n_heads, h_kv: m.n_kv_heads,
            V: m.vocab, d_e: m.hidden // m.n_heads, d_k: m.head_dim, d_v: m.head_dim,
            beta: OLLAMA_KV_TYPES[config.kv_type]}
    return {"context": vals[c], "batch": vals[b], "kv_layer": int(KV_LAYER.subs(vals)),
            "partial": int(PARTIAL_OFFLOAD.subs(vals)), "full": int(FULL_OFFLOAD.subs(vals))}


@checked_call
def ollama_place(free: int, blocks: list[int], output: int, graphs: tuple[int, int], minimum: int,
                 overhead: int) -> dict:
    """``estimateGPULayers`` on one GPU (module doc): ``blocks`` each block's weights plus KV, ``output`` the output
    layer, ``graphs`` = (partial, full). Returns ``usable``, ``layers`` (blocks placed), ``output`` (placed),
    ``graph`` (charged), ``vram`` (the GPU's allocation, 0 when nothing went) and ``total`` (``TotalSize``)."""
    partial, full = graphs
    vals = {F: free, o: overhead, P: partial, G: full, M: minimum, L: blocks[0]}
    usable = bool(GPU_USABLE.subs(vals))
    fits = sp.lambdify((A, L), LAYER_FITS.subs({F: free, o: overhead, P: partial, G: full}))   # the one test
    alloc = minimum + blocks[0] if usable else 0
    placed, space, overflow = 0, usable, 0
    for size in reversed(blocks):
        if space and fits(alloc, size):
            alloc += size
            placed += 1
        else:
            space = False
            overflow += size
    out = space and bool(fits(alloc, output))
    if out:
        alloc += output
    else:
        overflow += output
    fully = placed == len(blocks) and out
    charged = full if fully else partial
    count = placed + int(out)
    if count:
        alloc += charged
    return {"usable": usable, "layers": placed, "output": out, "graph": charged,
            "vram": alloc if count else 0, "total": alloc + overflow}


def _notes(m: ModelSpec, cfg: OllamaConfig, x: dict, how: str, w: str) -> tuple[str, ...]:
    notes = [f"Ollama {OLLAMA_VERSION}, llama engine (llm/memory.go estimateGPULayers), one CUDA GPU: num_ctx "
             f"{x['num_ctx']:,} x {cfg.num_parallel} parallel, batch {x['batch']:,}, KV {cfg.kv_type}, flash "
             f"attention {'on' if cfg.flash_attention else 'off'}",
             f"free memory assumed: {how}; Ollama keeps {CUDA_MINIMUM_MEMORY:,} B (cudaMinimumMemory) and one block as "
             "a buffer",
             "an estimate of Ollama's (its graph formulas are heuristics), not what llama.cpp then allocates: see "
             "vramlib.serve.offload for llama.cpp's own buffers"]
    if not x["usable"]:
        notes.append("the GPU is below the minimum for any layer (GPU_USABLE): Ollama runs the model on the CPU")
    if cfg.num_ctx != x["num_ctx"]:
        notes.append(f"num_ctx {cfg.num_ctx:,} clamped to {x['num_ctx']:,} (at least 4, at most the trained context)")
    if cfg.kv_cache_type != cfg.kv_type:
        notes.append(f"kv_cache_type {cfg.kv_cache_type} ignored without flash attention (Ollama warns and uses f16)")
    if w in FLOAT_WEIGHTS:
        notes.append("float weights: 1-D tensors priced at the format's width (a GGUF stores them in f32)")
    return tuple(notes)


@checked_call
def ollama_estimate(model: ModelSpec | str, gpu: GPU | str, weights: str = "q4_k_m",
                    config: OllamaConfig | None = None, **settings) -> OllamaEstimate:
    """How many layers Ollama v0.12.0 offloads ``model`` in ``weights`` to ``gpu`` when ``num_gpu`` is unset, and
    the GPU memory it expects to use (module doc). ``config``: an :class:`OllamaConfig`, or its fields as keywords
    (``num_ctx=8192, num_parallel=2, flash_attention=True, kv_cache_type="q8_0"``; on top of it when both given).

    >>> ollama_estimate("llama-3.1-8b", "t4").layers_on_gpu
    32
    """
    m = get_model(model)
    card = get_gpu(gpu)
    cfg = OllamaConfig.build("ollama_estimate", config, settings, field="config",
                             also=("model", "gpu", "weights", "config"))
    _model_problem(m)
    w = _weights_problem(weights)
    if card.vendor != "nvidia":
        raise InvalidValueError("gpu", card.key, f"{card.vendor} cards are not modelled for Ollama: NVIDIA (CUDA) are")
    outside, layers = layer_weights_of(m.view(), precision_view(get_precision(w)))
    g = ollama_graph(m, cfg)
    blocks = [x[0] + g["kv_layer"] for x in layers]
    output = sum(b_ for kind, b_ in outside if kind != "embed")
    free, how = gpu_budget(card)
    x = ollama_place(free, blocks, output, (g["partial"], g["full"]), CUDA_MINIMUM_MEMORY, cfg.gpu_overhead)
    x.update(num_ctx=ollama_context(m, cfg)[0], batch=g["batch"])
    k = x["layers"] + int(x["output"])
    return OllamaEstimate(
        model=m.name, gpu=card.key, weights=w, n_layers=m.n_layers, n_gpu_layers=k, layers_on_gpu=x["layers"],
        output_on_gpu=x["output"], graph_partial=g["partial"], graph_full=g["full"], graph=x["graph"],
        kv_bytes=g["kv_layer"] * m.n_layers, kv_layer_bytes=g["kv_layer"], layer_bytes=tuple(blocks),
        output_bytes=output, vram_bytes=x["vram"], total_bytes=x["total"], free_bytes=free,
        minimum_bytes=CUDA_MINIMUM_MEMORY, usable=x["usable"], num_ctx=x["num_ctx"], batch=g["batch"],
        notes=_notes(m, cfg, x, how, w))


__all__ = ["BATCH", "CONTEXT", "CUDA_MINIMUM_MEMORY", "FLOAT_WEIGHTS", "FULL_OFFLOAD", "GPU_USABLE", "KV_LAYER",
           "LAYER_FITS", "LLAMA_FAMILIES", "OLLAMA_DEFAULT_CONTEXT", "OLLAMA_KV_TYPES", "OLLAMA_VERSION",
           "OllamaConfig", "OllamaEstimate", "PARTIAL_OFFLOAD", "ollama_context", "ollama_estimate", "ollama_graph",
           "ollama_place"]
