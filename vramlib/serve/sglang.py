"""SGLang as a runtime: the KV pool SGLang 0.5.3 sizes at start-up from ``mem_fraction_static``, in exact bytes.

SGLang (sgl-project/sglang, version pinned: 0.5.3) reserves a share of the GPU for what it does not pre-allocate
(activations, CUDA graphs, the sampler) and fills the rest, after the weights, with one token pool. The rules, each
read from the source (``docs/runtime-rules.md`` section 2 has the file and lines):

* **gpu_mem** (``sglang/srt/utils/common.py``): nvidia-smi's ``memory.total`` in MiB, the smallest over the GPUs.
  The catalogue's ``memory_bytes`` is that nvidia-smi figure (its ``memory_source`` quotes it in MiB), so
  ``gpu_mem = memory_bytes // 2**20`` here -- not ``cuda_total_bytes``, which is what CUDA reports and what
  SGLang's own fallback (``torch.cuda.mem_get_info()[1] // 2**20``, e.g. under MIG) would read.
* **Defaults by gpu_mem** (``server_args.py`` ``_handle_gpu_memory_settings``): ``chunked_prefill_size`` and
  ``cuda_graph_max_bs`` from a table of memory tiers (:data:`CHUNKED_PREFILL_SIZE`, :data:`CUDA_GRAPH_MAX_BS`),
  then ``reserved_mem`` in MiB (:data:`RESERVED_MEM`) and ``mem_fraction_static = round((gpu_mem - reserved_mem)
  / gpu_mem, 3)`` (:data:`MEM_FRACTION_STATIC`; rounded in Python floats, as SGLang rounds it).
* **KV pool** (``model_runner.py`` ``profile_max_num_token``): ``rest_memory = available_gpu_memory -
  total_gpu_memory * (1 - mem_fraction_static)``, ``max_total_num_tokens = int(rest_memory * 2**30 //
  cell_size)`` (:data:`REST_MEMORY`, :data:`MAX_TOTAL_NUM_TOKENS`), ``total_gpu_memory`` being the free memory at
  init (before the weights) and ``available_gpu_memory`` the free memory after them. Here the free memory at init
  is :func:`vramlib.serve.serving.cuda_total` (what CUDA calls the card's total) minus the CUDA context
  (:func:`vramlib.memory.allocator.context_figure`), as :func:`vramlib.serve.llamacpp.gpu_budget` takes it, and
  the weights are :func:`vramlib.memory.inference.weights_bytes`. SGLang works in float GiB; this module in exact
  bytes (the token count can differ by one where SGLang's floats round across a cell).
* **cell_size** (bytes per token, all layers): MHA/GQA ``n_kv_heads * head_dim * n_layers * 2 * element_size``
  (:data:`CELL_SIZE_MHA`), MLA ``(kv_lora_rank + qk_rope_head_dim) * n_layers * element_size``
  (:data:`CELL_SIZE_MLA`); ``kv_cache_dtype="auto"`` is the model's dtype (the weights' float format of 16 bits
  or more, else bf16, or fp16 on cards without bf16), fp8 one byte.
* **max_running_requests** when unset: ``min(max(int(max_total_num_tokens / context_len * 512), 2048), 4096)``
  (:data:`MAX_RUNNING_REQUESTS`).
* **Speculative decoding**: ``reserved_mem`` grows by 2 GiB (EAGLE) or 6 GiB (STANDALONE; NGRAM adds nothing), and
  EAGLE / STANDALONE enlarge the shared pool by ``max_num_reqs * (speculative_num_steps * speculative_eagle_topk +
  speculative_num_draft_tokens) + 100`` tokens (:data:`SPEC_HEADROOM`); the draft model's weights and its own KV
  pool then come out of the reserved share and are not counted here (the result says so).

Not modelled, refused in one line naming it: tensor parallelism above 1 (``tp_size``), data-parallel attention
(``enable_dp_attention``), page sizes other than 1 (``page_size``), multimodal models (SGLang multiplies the
fraction by ``adjust_mem_fraction_for_vlm``'s vision-tower factor), layers other than full attention (sliding-window,
chunked, Mamba: SGLang's hybrid pools), a context longer than the model's, non-NVIDIA cards (gpu_mem is read with
nvidia-smi).

Used in: chapters 6 and 8.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from ..catalog.hardware import GPU, get_gpu
from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import get_precision, precision_view
from ..core import formulas as F
from ..core.errors import InvalidValueError, check_choice, check_number, check_positive_int, checked_call
from ..core.portable import Fields
from ..core.settings import Settings, settings_class
from ..memory.allocator import context_figure
from ..memory.breakdown import Breakdown
from ..memory.inference import weights_bytes
from .serving import cuda_total, serving_activation_format

VERSION = "0.5.3"
"""The SGLang release these rules are read from."""

MIB = 2**20
GIB_MIB = 1024                       # MiB per GiB: SGLang writes its tiers as ``k * 1024`` MiB
MAX_PREFILL_TOKENS = 16384
"""SGLang's default ``max_prefill_tokens``, used for ``reserved_mem`` when chunked prefill is off (size <= 0)."""

FALLBACK_DEFAULTS = {"chunked_prefill_size": 4096, "cuda_graph_max_bs": 160, "mem_fraction_static": 0.88}
"""SGLang's values when gpu_mem is unknown (None); every catalogue card has a gpu_mem, so they are not used."""

KV_CACHE_DTYPES = {"auto": None, "fp8_e4m3": 1, "fp8_e5m2": 1}
"""``--kv-cache-dtype`` values modelled, with bytes per element (``auto``: the model's dtype, see the module doc)."""

SPECULATIVE_ALGORITHMS = (None, "EAGLE", "STANDALONE", "NGRAM")
"""``--speculative-algorithm`` values modelled."""

SPEC_RESERVED_MIB = {None: 0, "NGRAM": 0, "EAGLE": 2 * GIB_MIB, "STANDALONE": 6 * GIB_MIB}
"""MiB added to ``reserved_mem`` for each speculative algorithm (applied after the 10 GiB floor)."""

SPEC_PARAMS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
"""The settings the EAGLE / STANDALONE pool headroom needs (SGLang picks them per model when unset; not modelled)."""

_pos = dict(integer=True, positive=True)
_nn = dict(nonnegative=True)
g_mem = sp.Symbol("gpu_mem", **_pos)             # nvidia-smi memory.total, MiB
n_tp = sp.Symbol("tp", **_pos)                   # tensor-parallel size
n_pp = sp.Symbol("pp", **_pos)                   # pipeline-parallel size
c_pf = sp.Symbol("chunked_prefill_size", integer=True)   # <= 0: chunked prefill off
p_max = sp.Symbol("max_prefill_tokens", **_pos)
b_cg = sp.Symbol("cuda_graph_max_bs", **_pos)
r_spec = sp.Symbol("spec_reserved", **_nn)       # MiB: SPEC_RESERVED_MIB of the algorithm
f_st = sp.Symbol("mem_fraction_static", positive=True)
M_tot = sp.Symbol("total_gpu_memory", **_nn)     # bytes free at init, before the weights
W_b = sp.Symbol("weights", **_nn)                # bytes of the weights
s_cell = sp.Symbol("cell_size", **_pos)
N_tok = sp.Symbol("max_total_num_tokens", integer=True, nonnegative=True)
T_ctx = sp.Symbol("context_len", **_pos)
N_req = sp.Symbol("max_num_reqs", **_pos)
k_steps, k_topk, k_draft = (sp.Symbol(x, **_pos) for x in SPEC_PARAMS)

_small_tp = n_tp < 4
CHUNKED_PREFILL_SIZE = sp.Piecewise(
    (2048, g_mem < 20 * GIB_MIB),       # T4, 4080
    (2048, g_mem < 35 * GIB_MIB),       # A10, 4090, 5090
    (4096, g_mem < 60 * GIB_MIB),       # A100 (40GB), L40
    (8192, g_mem < 90 * GIB_MIB),       # H100, A100
    (8192, g_mem < 160 * GIB_MIB),      # H20, H200
    (16384, True))                      # B200, MI300
"""SGLang's default ``chunked_prefill_size`` by gpu_mem (MiB)."""

CUDA_GRAPH_MAX_BS = sp.Piecewise(
    (8, g_mem < 20 * GIB_MIB),
    (16, sp.And(g_mem < 35 * GIB_MIB, _small_tp)), (80, g_mem < 35 * GIB_MIB),
    (32, sp.And(g_mem < 60 * GIB_MIB, _small_tp)), (160, g_mem < 60 * GIB_MIB),
    (256, sp.And(g_mem < 90 * GIB_MIB, _small_tp)), (512, g_mem < 90 * GIB_MIB),
    (256, sp.And(g_mem < 160 * GIB_MIB, _small_tp)), (512, g_mem < 160 * GIB_MIB),
    (512, True))
"""SGLang's default ``cuda_graph_max_bs`` by gpu_mem (MiB) and tensor-parallel size."""

PREFILL_TOKENS = sp.Piecewise((sp.Max(c_pf, 2048), c_pf > 0), (sp.Max(p_max, 2048), True))
"""The prefill tokens ``reserved_mem`` counts: the chunk, at least 2048; ``max_prefill_tokens`` when chunked
prefill is off."""

RESERVED_BASE = sp.Add(512, PREFILL_TOKENS * sp.Rational(3, 2), b_cg * 2, n_tp * n_pp * sp.Rational(1024, 8),
                       evaluate=False)
"""``reserved_mem`` before the floor (MiB): constant metadata, 1.5 x the prefill chunk (at least 2048 tokens;
``max_prefill_tokens`` when chunked prefill is off), 2 x ``cuda_graph_max_bs``, 128 MiB per tp x pp rank."""

RESERVED_MEM = sp.Piecewise((sp.Max(RESERVED_BASE, 10 * GIB_MIB), g_mem > 60 * GIB_MIB), (RESERVED_BASE, True)) + r_spec
"""``reserved_mem`` (MiB): at least 10 GiB on cards above 60 GiB, then the speculative algorithm's share."""

MEM_FRACTION_STATIC = (g_mem - RESERVED_MEM) / g_mem
"""``mem_fraction_static`` before SGLang's ``round(..., 3)``: (weights + KV pool) / GPU memory."""

REST_MEMORY = sp.Add(M_tot - W_b, -M_tot * (1 - f_st), evaluate=False)
"""Bytes for the KV pool: free after the weights minus the share SGLang keeps back of the free memory at init."""

_CELL_SIZE = F.L * F.KV_LAYER_ELEMENTS * F.b_kv
CELL_SIZE_MHA = _CELL_SIZE.subs({F.z_att: 1, F.z_mla: 0})
"""Bytes per token of an MHA / GQA pool: K and V of every KV head in every layer (formulas.KV_LAYER_ELEMENTS's
attention term over the layers, at the pool's element size)."""

CELL_SIZE_MLA = _CELL_SIZE.subs({F.z_att: 0, F.z_mla: 1})
"""Bytes per token of an MLA pool: the compressed latent and the rope key of every layer (KV_LAYER_ELEMENTS's latent
term)."""

MAX_TOTAL_NUM_TOKENS = sp.floor(REST_MEMORY / s_cell)
"""Tokens of the KV pool (SGLang's ``int(rest_memory * (1 << 30) // cell_size)``); <= 0: SGLang does not start."""

MAX_RUNNING_REQUESTS = sp.Min(sp.Max(sp.floor(N_tok * 512 / T_ctx), 2048), 4096)
"""The default ``max_running_requests`` (``max_num_reqs``) when unset."""

SPEC_HEADROOM = N_req * k_steps * k_topk + N_req * k_draft + 100
"""Tokens EAGLE / STANDALONE add to the shared pool: draft tokens, verify tokens and a 100-token buffer."""


def _check_speculative(c: "SGLangConfig") -> None:
    """The speculative algorithm (case-insensitive, as SGLang reads it) and the headroom settings it needs."""
    algo = c.speculative_algorithm
    if algo is not None:
        upper = algo.strip().upper() if isinstance(algo, str) else algo
        if upper not in SPECULATIVE_ALGORITHMS:
            raise InvalidValueError("speculative_algorithm", algo, "allowed: None, " + ", ".join(
                repr(a) for a in SPECULATIVE_ALGORITHMS if a))
        object.__setattr__(c, "speculative_algorithm", upper)
    needs = c.speculative_algorithm in ("EAGLE", "STANDALONE")
    for name in SPEC_PARAMS:
        value = getattr(c, name)
        if value is not None:
            if not needs:
                raise InvalidValueError(name, value, "is used only with speculative_algorithm 'EAGLE' or "
                                                     "'STANDALONE'")
            object.__setattr__(c, name, check_positive_int(name, value))


def _require_spec_params(c: "SGLangConfig") -> None:
    """EAGLE / STANDALONE's pool headroom needs :data:`SPEC_PARAMS` (the fraction alone does not)."""
    for name in SPEC_PARAMS:
        if getattr(c, name) is None:
            raise InvalidValueError(name, None, f"give it for {c.speculative_algorithm}'s KV-pool headroom (SGLang's "
                                                "per-model choice when unset is not modelled)")


def _check_optional_ints(c: "SGLangConfig") -> None:
    if c.chunked_prefill_size is not None:
        v = check_number("chunked_prefill_size", c.chunked_prefill_size, integer=True,
                         allowed="must be an integer (<= 0, e.g. -1: chunked prefill off) or None (the default)")
        object.__setattr__(c, "chunked_prefill_size", v)
    for name in ("cuda_graph_max_bs", "context_length"):
        if getattr(c, name) is not None:
            object.__setattr__(c, name, check_positive_int(name, getattr(c, name)))
    if c.mem_fraction_static is not None:
        check_number("mem_fraction_static", c.mem_fraction_static, minimum=0, min_inclusive=False, maximum=1,
                     allowed="must be a number in (0, 1], or None (SGLang's default formula)")


@settings_class
@dataclass(frozen=True)
class SGLangConfig(Settings):
    """An SGLang server's memory settings (``python -m sglang.launch_server`` flags): ``mem_fraction_static``
    (None: SGLang's default formula), ``chunked_prefill_size`` (None: by gpu_mem; -1: off), ``cuda_graph_max_bs``
    (None: by gpu_mem), ``tp_size`` (1 only), ``kv_cache_dtype`` (a key of :data:`KV_CACHE_DTYPES`), ``page_size``
    (1 only), ``speculative_algorithm`` (one of :data:`SPECULATIVE_ALGORITHMS`) with the EAGLE / STANDALONE
    headroom settings :data:`SPEC_PARAMS`, ``context_length`` (None: the model's max_context),
    ``enable_dp_attention`` (False only). Each field is checked here in one line."""

    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    tp_size: int = 1
    kv_cache_dtype: str = "auto"
    page_size: int = 1
    speculative_algorithm: str | None = None
    context_length: int | None = None
    enable_dp_attention: bool = False
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None

    def __post_init__(self) -> None:
        if check_positive_int("tp_size", self.tp_size) != 1:
            raise InvalidValueError("tp_size", self.tp_size, "tensor parallelism is not modelled for SGLang yet: use 1")
        if check_positive_int("page_size", self.page_size) != 1:
            raise InvalidValueError("page_size", self.page_size, "page sizes above 1 are not modelled for SGLang yet: "
                                                                 "use 1 (SGLang's default)")
        if self.enable_dp_attention is not False:
            raise InvalidValueError("enable_dp_attention", self.enable_dp_attention,
                                    "data-parallel attention is not modelled for SGLang yet: use False")
        object.__setattr__(self, "kv_cache_dtype", check_choice("kv_cache_dtype", self.kv_cache_dtype,
                                                                KV_CACHE_DTYPES))
        _check_optional_ints(self)
        _check_speculative(self)


def _card(gpu: GPU | str) -> GPU:
    card = get_gpu(gpu)
    if card.vendor != "nvidia":
        raise InvalidValueError("gpu", card.key, "SGLang's gpu_mem is modelled from nvidia-smi; ROCm cards are not "
                                                 "modelled yet")
    return card


def _ints(expr, vals: dict) -> int:
    return F.to_int_bytes(F.evaluate(expr, **vals))     # whole counts (the expressions are integral here)


def _mib(value) -> int | Fraction:
    """A MiB figure as an int when whole (``reserved_mem`` is a half with an odd chunk size)."""
    value = Fraction(value)
    return int(value) if value.denominator == 1 else value


def _defaults(card: GPU, c: SGLangConfig) -> dict:
    """gpu_mem, the table's defaults (or the given values), reserved_mem and mem_fraction_static."""
    vals = {"gpu_mem": card.memory_bytes // MIB, "tp": c.tp_size, "pp": 1, "max_prefill_tokens": MAX_PREFILL_TOKENS,
            "spec_reserved": SPEC_RESERVED_MIB[c.speculative_algorithm]}
    chunk = c.chunked_prefill_size if c.chunked_prefill_size is not None else _ints(CHUNKED_PREFILL_SIZE, vals)
    graph_bs = c.cuda_graph_max_bs if c.cuda_graph_max_bs is not None else _ints(CUDA_GRAPH_MAX_BS, vals)
    vals.update(chunked_prefill_size=chunk, cuda_graph_max_bs=graph_bs)
    out = {"gpu_mem": vals["gpu_mem"], "chunked_prefill_size": chunk, "cuda_graph_max_bs": graph_bs}
    if c.mem_fraction_static is not None:
        return dict(out, reserved_mem=None, mem_fraction_static=c.mem_fraction_static)
    reserved = _mib(F.evaluate(RESERVED_MEM, **vals))
    fraction = round(float(F.evaluate(MEM_FRACTION_STATIC, **vals)), 3)   # SGLang's round(., 3) of a float
    return dict(out, reserved_mem=reserved, mem_fraction_static=fraction)


@checked_call
def sglang_defaults(gpu: GPU | str, config: SGLangConfig | None = None, **settings) -> dict:
    """What SGLang 0.5.3 picks on ``gpu`` (one card, tp 1): ``gpu_mem`` (MiB, nvidia-smi's total: the catalogue's
    ``memory_bytes``), ``chunked_prefill_size``, ``cuda_graph_max_bs``, ``reserved_mem`` (MiB; None when
    ``mem_fraction_static`` is given, as SGLang then does not compute it) and ``mem_fraction_static`` (rounded to 3
    decimals as SGLang does). Given settings (``config`` or keywords) replace the defaults they name.

    >>> sglang_defaults("h100-sxm-80gb")["mem_fraction_static"]
    0.835
    """
    c = SGLangConfig.build("sglang_defaults", config, settings, field="config", also=("gpu", "config"))
    return _defaults(_card(gpu), c)


def _check_model(m: ModelSpec, c: SGLangConfig) -> int:
    """Refuse what the pool rules here do not cover; the context length SGLang uses."""
    if m.text_only_of is not None:
        raise InvalidValueError("model", m.name, "multimodal models are not modelled for SGLang: its "
                                "adjust_mem_fraction_for_vlm factor (vision tower) is not")
    kinds = {mixer for _, mixer, _, _ in m.layer_kinds()}
    if kinds != {"full"}:
        raise InvalidValueError("model", m.name, f"{'/'.join(sorted(kinds - {'full'}))} layers are not modelled "
                                "for SGLang (its hybrid SWA / Mamba pools): full-attention models are")
    if c.context_length is not None and c.context_length > m.max_context:
        raise InvalidValueError("context_length", c.context_length, f"longer than {m.name}'s max_context "
                                f"{m.max_context:,} (SGLang refuses it unless "
                                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set)")
    return c.context_length or m.max_context


def _element_size(card: GPU, weights: str, c: SGLangConfig) -> tuple[int, str]:
    """Bytes per KV element and the dtype's name."""
    if c.kv_cache_dtype != "auto":
        return KV_CACHE_DTYPES[c.kv_cache_dtype], c.kv_cache_dtype
    name = serving_activation_format(precision_view(get_precision(weights, field="weights")), Fields(card))
    return F.to_int_bytes(get_precision(name).bytes_per_element), name


def _cell_size(m: ModelSpec, elem: int) -> int:
    vals = {"L": m.n_layers, "b_kv": elem}
    if m.attention == "mla":
        return _ints(CELL_SIZE_MLA, dict(vals, c_kv=m.kv_lora_rank, d_r=m.rope_head_dim))
    return _ints(CELL_SIZE_MHA, dict(vals, n_kv=m.n_kv_heads, d_head=m.head_dim))


def _pool(m: ModelSpec, card: GPU, weights: str, c: SGLangConfig) -> dict:
    """Every quantity of the start-up: defaults, free memory, cell size, tokens, requests."""
    context_len = _check_model(m, c)
    d = _defaults(card, c)
    seen, how = cuda_total(card)
    ctx_key, ctx = context_figure(card)
    if d["mem_fraction_static"] <= 0:
        raise InvalidValueError("mem_fraction_static", d["mem_fraction_static"], f"SGLang's default on {card.key} "
                                f"leaves no static memory (reserved_mem {float(d['reserved_mem']):g} MiB of gpu_mem "
                                f"{d['gpu_mem']:,}): give mem_fraction_static or a smaller chunked_prefill_size")
    elem, kv_name = _element_size(card, weights, c)
    vals = dict(total_gpu_memory=seen - ctx.bytes, weights=weights_bytes(m, weights),
                mem_fraction_static=Fraction(str(d["mem_fraction_static"])), cell_size=_cell_size(m, elem))
    tokens = max(F.evaluate(MAX_TOTAL_NUM_TOKENS, **vals), 0)   # a floor: an int
    reqs = _ints(MAX_RUNNING_REQUESTS, {"max_total_num_tokens": tokens, "context_len": context_len})
    pool_tokens = tokens
    if c.speculative_algorithm in ("EAGLE", "STANDALONE"):
        _require_spec_params(c)
        if tokens:
            pool_tokens += _ints(SPEC_HEADROOM, {"max_num_reqs": reqs, **{k: getattr(c, k) for k in SPEC_PARAMS}})
    return dict(vals, **d, fraction_exact=vals["mem_fraction_static"], rest_memory=F.evaluate(REST_MEMORY, **vals),
                max_total_num_tokens=tokens, pool_tokens=pool_tokens, max_running_requests=reqs,
                context_len=context_len, kv_dtype=kv_name, cuda_total=seen, cuda_how=how, ctx_key=ctx_key,
                ctx_bytes=ctx.bytes)


def _notes(card: GPU, c: SGLangConfig, p: dict) -> tuple[str, ...]:
    frac = "given" if p["reserved_mem"] is None else f"SGLang's default: reserved_mem {float(p['reserved_mem']):g} MiB"
    notes = [f"SGLang {VERSION} on {card.key}: gpu_mem {p['gpu_mem']:,} MiB (nvidia-smi total), chunked_prefill_size "
             f"{p['chunked_prefill_size']:,}, cuda_graph_max_bs {p['cuda_graph_max_bs']}, mem_fraction_static "
             f"{p['mem_fraction_static']} ({frac})",
             f"free at init {p['total_gpu_memory']:,} B: CUDA total ({p['cuda_how']}, {p['cuda_total']:,} B) minus the "
             f"CUDA context ({p['ctx_key']} figure, {p['ctx_bytes']:,} B); the weights as vramlib prices the format",
             f"KV pool: {p['pool_tokens']:,} tokens x cell_size {p['cell_size']:,} B ({p['kv_dtype']}); default "
             f"max_running_requests {p['max_running_requests']:,} at context_len {p['context_len']:,}",
             "reserved: the (1 - mem_fraction_static) share of the free memory at init, left for activations, CUDA "
             "graphs and the sampler (SGLang's budget, not an allocation)"]
    if p["max_total_num_tokens"] == 0:
        notes.append("no KV pool fits: SGLang does not start ('Not enough memory. Please try to increase "
                     "--mem-fraction-static')")
    if c.speculative_algorithm in ("EAGLE", "STANDALONE"):
        notes.append(f"{c.speculative_algorithm}: the pool holds {p['pool_tokens'] - p['max_total_num_tokens']:,} "
                     "headroom tokens for draft and verify; the draft model's weights and KV pool are not counted")
    return tuple(notes)


@checked_call
def sglang_memory(model: ModelSpec | str, gpu: GPU | str, weights: str = "bf16", config: SGLangConfig | None = None,
                  **settings) -> Breakdown:
    """What SGLang 0.5.3 lays out on one ``gpu`` at start-up (see the module doc), exact bytes: ``weights``, ``kv
    pool`` (``max_total_num_tokens`` x ``cell_size``, with the EAGLE / STANDALONE headroom), ``reserved
    (activations, CUDA graphs)`` (the ``1 - mem_fraction_static`` share of the free memory at init) and ``CUDA
    context``; notes give the defaults, token count and requests. ``config``: an :class:`SGLangConfig`, or its
    fields as keywords (on top of it when both are given).

    >>> sglang_memory("llama-3.1-8b", "h100-sxm-80gb")["kv pool"] // 131072
    416777
    """
    m, card = get_model(model), _card(gpu)
    c = SGLangConfig.build("sglang_memory", config, settings, field="config",
                           also=("model", "gpu", "weights", "config"))
    p = _pool(m, card, weights, c)
    reserved = F.to_int_bytes(p["total_gpu_memory"] * (1 - p["fraction_exact"]))
    return Breakdown({"weights": p["weights"], "kv pool": p["pool_tokens"] * p["cell_size"],
                      "reserved (activations, CUDA graphs)": reserved, "CUDA context": p["ctx_bytes"]},
                     title=f"{m.name} in SGLang {VERSION} on {card.key}: {weights}, KV {p['kv_dtype']}, "
                           f"{p['max_total_num_tokens']:,} tokens", notes=_notes(card, c, p))


def _pool_of(where: str, model, gpu, weights: str, config, settings: dict) -> dict:
    """:func:`_pool` for a public call ``where`` (its settings object built from ``config`` and the keywords)."""
    c = SGLangConfig.build(where, config, settings, field="config", also=("model", "gpu", "weights", "config"))
    return _pool(get_model(model), _card(gpu), weights, c)


@checked_call
def sglang_max_tokens(model: ModelSpec | str, gpu: GPU | str, weights: str = "bf16",
                      config: SGLangConfig | None = None, **settings) -> int:
    """SGLang's ``max_total_num_tokens`` for ``model`` on ``gpu``: the KV pool's tokens from the memory budget
    (before any speculative headroom); 0 when no pool fits (SGLang then refuses to start)."""
    return _pool_of("sglang_max_tokens", model, gpu, weights, config, settings)["max_total_num_tokens"]


@checked_call
def sglang_max_running_requests(model: ModelSpec | str, gpu: GPU | str, weights: str = "bf16",
                                config: SGLangConfig | None = None, **settings) -> int:
    """SGLang's default ``max_running_requests`` (:data:`MAX_RUNNING_REQUESTS`) for ``model`` on ``gpu``, from
    :func:`sglang_max_tokens` and the context length (``context_length``, else the model's max_context)."""
    return _pool_of("sglang_max_running_requests", model, gpu, weights, config, settings)["max_running_requests"]


@checked_call
def sglang_cell_size(model: ModelSpec | str, gpu: GPU | str, weights: str = "bf16",
                     config: SGLangConfig | None = None, **settings) -> int:
    """Bytes per token of SGLang's KV pool for ``model`` (all layers; :data:`CELL_SIZE_MHA` or
    :data:`CELL_SIZE_MLA`) with ``kv_cache_dtype`` (``auto`` resolves on ``gpu`` from ``weights``)."""
    m, card = get_model(model), _card(gpu)
    c = SGLangConfig.build("sglang_cell_size", config, settings, field="config",
                           also=("model", "gpu", "weights", "config"))
    _check_model(m, c)
    return _cell_size(m, _element_size(card, weights, c)[0])


__all__ = ["CELL_SIZE_MHA", "CELL_SIZE_MLA", "CHUNKED_PREFILL_SIZE", "CUDA_GRAPH_MAX_BS", "FALLBACK_DEFAULTS",
           "KV_CACHE_DTYPES", "MAX_PREFILL_TOKENS", "MAX_RUNNING_REQUESTS", "MAX_TOTAL_NUM_TOKENS",
           "MEM_FRACTION_STATIC", "PREFILL_TOKENS", "RESERVED_BASE", "RESERVED_MEM", "REST_MEMORY", "SGLangConfig",
           "SPECULATIVE_ALGORITHMS", "SPEC_HEADROOM", "SPEC_PARAMS", "SPEC_RESERVED_MIB", "VERSION", "sglang_cell_size",
           "sglang_defaults", "sglang_max_running_requests", "sglang_max_tokens", "sglang_memory"]
