"""Inference memory: weights (any format), KV cache (MHA/GQA/MQA), prefill workspace, reserve.

Used in: chapters 1, 5, 6, 7, 8, 13, 14, 15.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ..core import formulas as F
from .breakdown import Breakdown
from ..core.errors import InvalidValueError, check_choice, check_positive_int, checked_call
from ..catalog.models import (ModelSpec, get_model, layer_types_of, mixer_span, mlp_types_of, param_groups_of,
                              params_of, weight_params_of)
from ..catalog.precision import (FP32_BYTES, bits_of, get_precision, gguf_problem, gguf_type_70b, layer_bits_of,
                                 kv_bytes_per_element, precision_view, row_length, row_scale_problem)
from ..core.symbols import S_shard, n_gpu, n_kv
from ..core.units import parse_memory
from ..core.signatures import arg, keywords_through, signature
from ..core.settings import Settings, settings_class
from dataclasses import dataclass
from ..core.portable import (Fields, ev, fmt_fixed, portable, q, q_add, q_ceil, q_cmp, q_div, q_mul, raise_problem,
                             share, shared)

ATTENTION = ("eager", "sdpa", "flash")

# --- tensor parallelism: the one rule for how weights and KV heads split over GPUs -----------------------------
TP_SHARD_BYTES = S_shard / n_gpu
"""Bytes of a tensor split evenly over n GPUs by tensor parallelism, per GPU (weights; rounded up to a byte)."""

KV_HEADS_PER_GPU = sp.ceiling(n_kv / n_gpu)
"""KV heads each GPU keeps under tensor parallelism over n GPUs: n_kv / n when n < n_kv (n must divide n_kv), else
one whole head -- the KV heads are replicated n / n_kv times, never split. vLLM's ``QKVParallelLinear``
(vllm/model_executor/layers/linear.py): ``if tp_size >= total_num_kv_heads: num_kv_heads = 1;
num_kv_head_replicas = divide(tp_size, total_num_kv_heads) else: num_kv_heads = divide(total_num_kv_heads,
tp_size)``. Megatron-Core accepts only the first case (tp dividing ``num_query_groups``). :func:`kv_heads_per_gpu`
checks the divisibility; parallel, serving and report evaluate this one expression in their own tp symbol."""

DEFAULT_RESERVE = "0.5GB"
"""CUDA context and framework allocations; the source's 'other 0.5 GB' (chapter 1)."""


def weights_detail(model: ModelSpec | str, dtype: str = "fp16") -> dict[str, int]:
    """Weights split into ``weights`` (the raw quantized bits), ``quantization constants`` (scales, zeros,
    absmax) and ``unquantized tensors`` (embeddings, LM head, norms, biases a format keeps in 16/32 bits).

    A model with a nominal size (the source's shapes) stores nominal x bits, as the source computes.
    """
    return dict(_weights_detail(get_model(model), get_precision(dtype, field="weights")))


@lru_cache(maxsize=4096)
def _weights_detail(m: ModelSpec, p) -> tuple[tuple[str, int], ...]:
    """Cached core of weights_detail (GGUF mixes resolve per-layer types; solvers call this many times)."""
    return tuple(_weights_detail_uncached(m, p).items())


def _weights_detail_uncached(m: ModelSpec, p) -> dict[str, int]:
    return dict(weights_parts(m.view(), precision_view(p)))


share(WEIGHTS_BYTES=F.WEIGHTS_BYTES, KV_CACHE_BYTES=F.KV_CACHE_BYTES, PREFILL_WORKSPACE_BYTES=F.PREFILL_WORKSPACE_BYTES)


@portable
def weights_parts(m, p):
    """[[component, bytes]] of a model's weights in format ``p`` (a format view): one figure for a plain format or a
    nominal-size shape (nominal x bits, as the source computes); else the raw quantized bits, the quantization
    constants and the unquantized tensors the format keeps (a GGUF mix reports its layers' types as one figure)."""
    if p["row_scale"]:
        row_scale_problem(m["spec"], p)
    if m["spec"]["nominal_params"] is not None or (not p["keeps"] and p["gguf"] is None):
        n = weight_params_of(m["spec"], params_of(m))
        return [["weights", q_ceil(ev("WEIGHTS_BYTES", None, {"N_q": n, "b_q": p["bits"], "N_u": 0, "b_u": 0}))]]
    s = m["spec"]
    gqa = s["n_heads"] // s["n_kv_heads"]
    type_70b = 0
    if p["gguf"] is not None:
        gguf_problem(s, p)
        type_70b = gguf_type_70b(s)
    n_q = 0
    n_u = 0
    bits_q = q(0)
    bits_u = q(0)
    for g in param_groups_of(m):
        if not g[1]:
            continue
        kind = "lm_head" if g[0] == "embed" and s["tied_embeddings"] else g[0]  # a tied table is stored as the head
        b = q_mul(bits_of(p, kind, s["n_layers"], gqa, s["n_experts"], type_70b), g[1])
        if p["row_scale"] and g[0] not in p["keeps"]:  # one scale per output row: g[1] / row length rows
            b = q_add(b, q_div(q_mul(q(p["row_scale"]), g[1]), q(row_length(s, g[0]))))
        if g[0] in p["keeps"]:
            n_u += g[1]
            bits_u = q_add(bits_u, b)
        else:
            n_q += g[1]
            bits_q = q_add(bits_q, b)
    b_q = q_div(bits_q, n_q) if n_q else q(1)
    b_u = q_div(bits_u, n_u) if n_u else q(0)
    total = q_ceil(ev("WEIGHTS_BYTES", None, {"N_q": n_q, "b_q": b_q, "N_u": n_u, "b_u": b_u}))
    unq = q_ceil(ev("WEIGHTS_BYTES", None, {"N_q": 0, "b_q": 1, "N_u": n_u, "b_u": b_u}))
    if p["gguf"]:
        return [["weights", total - unq], ["unquantized tensors", unq]]
    raw = q_ceil(ev("WEIGHTS_BYTES", None, {"N_q": n_q, "b_q": p["bits_floor"], "N_u": 0, "b_u": 0}))
    return [["weights", raw], ["quantization constants", total - raw - unq], ["unquantized tensors", unq]]


@portable
def layer_weights_of(m, p):
    """A model view's weights in format ``p`` tensor group by tensor group, as a runtime places them on devices:
    ``[outside, layers]`` with ``outside`` the tensors outside the layers (``[kind, bytes]``: embed, lm_head -- a tied
    table once more, as llama.cpp duplicates it for the output layer --, norm, bias) and ``layers`` one ``[bytes,
    routed-expert bytes, largest tensor kind's bytes]`` per layer (GGUF mixes with each layer's own types). Their
    sum is ``weights_parts``' total, up to rounding each layer up to whole bytes (plus the duplicated tied table).
    Refused: nominal-size shapes, per-row scales."""
    s = m["spec"]
    if s["nominal_params"] is not None:
        raise_problem(["model", s["name"], "layer-by-layer weights need the tensors' shapes; " + s["name"] + " has "
                       "only a nominal size"])
    if p["row_scale"]:
        raise_problem(["weights", p["name"], "per-row scales are not priced layer by layer"])
    gqa = s["n_heads"] // s["n_kv_heads"]
    type_70b = 0
    if p["gguf"] is not None:
        gguf_problem(s, p)
        type_70b = gguf_type_70b(s)
    kinds = {}
    for k in m["layers"]:
        kinds[k[1] + "|" + k[2]] = k[3]
    mixers = layer_types_of(s)
    mlps = mlp_types_of(s)
    layers = []
    for i in range(s["n_layers"]):
        sym = kinds[mixers[i] + "|" + mlps[i]]
        total = q(0)
        routed = q(0)
        largest = q(0)
        for kind in shared("LAYER_GROUP_NAMES"):
            n = q_ceil(ev("LAYER_GROUPS", kind, sym))
            if not n:
                continue
            bits = layer_bits_of(p, kind, i, s["n_layers"], gqa, s["n_experts"], type_70b)
            total = q_add(total, q_mul(bits, n))
            if q_cmp(q_mul(bits, n), largest) > 0:
                largest = q_mul(bits, n)
            if mlps[i] == "moe" and kind in ("mlp_gate", "mlp_up", "mlp_down"):
                width = sym["n_mlp"] * sym["f"] * sym["h"]
                routed = q_add(routed, q_mul(bits, sym["g"] * width if kind == "mlp_gate" else width))
        layers.append([q_ceil(q_div(total, 8)), q_ceil(q_div(routed, 8)), q_ceil(q_div(largest, 8))])
    outside = []
    first = m["layers"][0][3]
    for kind in shared("MODEL_GROUP_NAMES"):
        n = q_ceil(ev("MODEL_GROUPS", kind, first))
        stored = "lm_head" if kind == "embed" and s["tied_embeddings"] else kind
        if kind == "lm_head" and s["tied_embeddings"]:
            n = q_ceil(ev("MODEL_GROUPS", "embed", first))
        if n:
            bits = bits_of(p, stored, s["n_layers"], gqa, s["n_experts"], type_70b)
            outside.append([kind, q_ceil(q_div(q_mul(bits, n), 8))])
    return [outside, layers]


@portable
def allowed_tp(n_heads, n_kv_heads):
    """Tensor-parallel sizes for ``n_heads`` query heads and ``n_kv_heads`` KV heads: the divisors of n_heads that
    divide n_kv_heads (KV heads split) or are multiples of it (KV heads replicated; KV_HEADS_PER_GPU)."""
    return [k for k in range(1, n_heads + 1) if n_heads % k == 0 and (n_kv_heads % k == 0 or k % n_kv_heads == 0)]


@portable
def tp_problem(field, tp, who, n_heads, n_kv):
    """None, or the error of a tensor-parallel size that does not split the heads into whole heads (``who``: "name's "
    or "")."""
    ok = allowed_tp(n_heads, n_kv)
    if tp in ok:
        return None
    return [field, tp, "tensor parallelism does not split " + who + str(n_heads) + " attention heads / " + str(n_kv) +
            " KV heads into whole heads (tp must divide the heads and divide the KV heads or be a multiple of them); "
            "allowed: " + ", ".join([str(k) for k in ok])]


@checked_call
def kv_heads_per_gpu(n_kv_heads, tp: int = 1, *, n_heads: int | None = None, field: str = "tp") -> int:
    """KV heads one GPU holds under tensor parallelism over ``tp`` GPUs (KV_HEADS_PER_GPU): ``n_kv_heads // tp``
    when tp < n_kv_heads, else 1 (whole heads replicated). ``n_kv_heads`` may be a model (name or ModelSpec),
    which also supplies ``n_heads``. A ``tp`` that neither divides the KV heads nor is a multiple of them (or does
    not divide the query heads, when known) is a one-line InvalidValueError naming ``field`` and the allowed sizes.
    Chapters 6, 7, 12.

    >>> kv_heads_per_gpu(8, 4), kv_heads_per_gpu(8, 16), kv_heads_per_gpu("llama-2-70b", 8)
    (2, 1, 1)
    """
    if isinstance(n_kv_heads, ModelSpec) or (isinstance(n_kv_heads, str) and not n_kv_heads.strip().isdigit()):
        spec = get_model(n_kv_heads)
        if n_heads is not None and n_heads != spec.n_heads:
            raise InvalidValueError("n_heads", n_heads, f"{spec.name} has n_heads={spec.n_heads}; omit n_heads")
        n_kv, n_heads, who = spec.n_kv_heads, spec.n_heads, f"{spec.name}'s "
    else:
        n_kv, who = check_positive_int("n_kv_heads", n_kv_heads), ""
    tp = check_positive_int(field, tp)
    if n_heads is not None:
        n_heads = check_positive_int("n_heads", n_heads)
        if n_heads % n_kv:
            raise InvalidValueError("n_kv_heads", n_kv, f"must divide n_heads={n_heads}")
        raise_problem(tp_problem(field, tp, who, n_heads, n_kv))
    elif (tp < n_kv and n_kv % tp) or (tp >= n_kv and tp % n_kv):
        divs = [k for k in range(1, n_kv + 1) if n_kv % k == 0]
        raise InvalidValueError(field, tp, f"must divide n_kv_heads={n_kv} ({', '.join(map(str, divs))}) or be a "
                                           f"multiple of it ({n_kv}, {2 * n_kv}, {3 * n_kv} ...)")
    return int(F.evaluate(KV_HEADS_PER_GPU, n_kv=n_kv, n=tp))


def weights_detail_tp(model: ModelSpec | str, dtype: str = "fp16", tp: int = 1, field: str = "tp") -> dict[str, int]:
    """:func:`weights_detail` of one GPU under tensor parallelism over ``tp`` GPUs (TP_SHARD_BYTES per part;
    norms, and the K/V projections when tp exceeds the KV heads, are in fact replicated: a small underestimate)."""
    m = get_model(model)
    kv_heads_per_gpu(m, tp, field=field)
    return {k: F.to_int_bytes(F.evaluate(TP_SHARD_BYTES, S=v, n=tp)) for k, v in weights_detail(m, dtype).items()}


def weights_bytes(model: ModelSpec | str, dtype: str = "fp16") -> int:
    """Bytes of the model's weights in ``dtype``, format overheads and unquantized tensors included."""
    return sum(weights_detail(model, dtype).values())


KV_RUNTIMES = ("transformers", "vllm", "every-token")
"""How a runtime holds each layer's KV cache (formulas.KV_TOKENS_HELD): transformers' DynamicCache, vLLM's paged
allocator, or a runtime that ignores sliding windows and chunks (every layer keeps every token)."""


@settings_class
@dataclass(frozen=True)
class CacheRule(Settings):
    """The runtime whose KV-cache rule :func:`kv_cache_bytes` follows (KV_RUNTIMES) and vLLM's two settings the rule
    reads: ``block_size`` (tokens per block, 16 by default) and ``max_num_batched_tokens`` (tokens one step schedules:
    a sliding layer holds its window plus one step; 2048 is ``vllm serve``'s default on cards under 70 GiB,
    vllm/engine/arg_utils.py). Chapters 1, 5, 7."""

    runtime: str = "transformers"
    block_size: int = 16
    max_num_batched_tokens: int = 2048

    def __post_init__(self) -> None:
        object.__setattr__(self, "runtime", check_choice("runtime", self.runtime, KV_RUNTIMES))
        object.__setattr__(self, "block_size", check_positive_int("block_size", self.block_size))
        object.__setattr__(self, "max_num_batched_tokens",
                           check_positive_int("max_num_batched_tokens", self.max_num_batched_tokens))


def cache_rule(runtime: "str | CacheRule") -> CacheRule:
    """A CacheRule from a runtime name or a CacheRule (one-line error otherwise)."""
    if isinstance(runtime, CacheRule):
        return runtime
    if not isinstance(runtime, str):
        raise InvalidValueError("runtime", runtime, f"give one of {', '.join(KV_RUNTIMES)} or a CacheRule")
    return CacheRule(runtime=runtime)


def kv_bytes_per_token(model: ModelSpec | str, dtype: str = "fp16") -> int:
    """KV cache one token of one sequence adds while every layer still holds it (2 x KV heads x head dim x bytes per
    GQA layer, MLA's latent per MLA layer); Mamba layers add nothing per token."""
    m = get_model(model)
    return kv_bytes(m.view(), 1, 1, kv_bytes_per_element(dtype), _rule_view(CacheRule()), False)


def kv_cache_bytes(model: ModelSpec | str, tokens: int, batch: int = 1, dtype: str = "fp16",
                   runtime: "str | CacheRule" = "transformers") -> int:
    """KV cache (and Mamba state) of ``batch`` sequences of ``tokens`` tokens, layer by layer as ``runtime`` holds it
    (KV_TOKENS_HELD: a name from KV_RUNTIMES or a CacheRule). Full layers hold every token, sliding and chunked
    layers their window, MLA layers the latent (KV_LAYER_ELEMENTS), Mamba layers a fixed state per sequence
    (SSM_STATE_ELEMENTS). A uniform full-attention model gives formulas.KV_CACHE_BYTES under transformers."""
    m = get_model(model)
    tokens, batch = check_positive_int("tokens", tokens), check_positive_int("batch", batch)
    rule = cache_rule(runtime)
    return kv_bytes(m.view(), tokens, batch, kv_bytes_per_element(dtype), _rule_view(rule), True)


def _rule_view(rule: CacheRule) -> dict:
    return {"runtime": rule.runtime, "block": rule.block_size, "batched": rule.max_num_batched_tokens}


share(KV_LAYER_ELEMENTS=F.KV_LAYER_ELEMENTS, KV_TOKENS_HELD=F.KV_TOKENS_HELD, SSM_STATE_BYTES=F.SSM_STATE_BYTES,
      DEFAULT_CACHE_RULE=_rule_view(CacheRule()), SSM_STATE_DTYPE_BYTES=FP32_BYTES)


@portable
def kv_bytes(m, tokens, batch, b_kv, rule, states):
    """KV cache of ``batch`` sequences of ``tokens`` tokens at ``b_kv`` bytes per element under ``rule`` (``runtime``,
    ``block``, ``batched``), summed over the layer kinds, rounded up; ``states``: add the Mamba layers' state."""
    return q_ceil(q_mul(kv_sequence_bytes(m, tokens, b_kv, rule, states), q(batch)))


@portable
def kv_sequence_bytes(m, tokens, b_kv, rule, states):
    """The exact (unrounded) KV cache of one sequence of ``tokens`` tokens: KV_TOKENS_HELD x KV_LAYER_ELEMENTS x
    ``b_kv`` per attention layer, SSM_STATE_BYTES per Mamba layer (when ``states``). transformers caches Falcon's
    new-architecture keys and values per query head (``cache_heads``)."""
    total = q(0)
    s = m["spec"]
    for k in m["layers"]:
        if k[1] == "mamba" and states:
            if rule["runtime"] == "vllm":
                raise_problem(["runtime", "vllm", s["name"] + ": Mamba states are modelled as transformers holds "
                               "them (vLLM pads hybrid models' pages to one size); use runtime='transformers'"])
            vals = dict(k[3])
            vals["b_kv"] = b_kv
            vals["b_ssm"] = shared("SSM_STATE_DTYPE_BYTES")
            total = q_add(total, q_mul(q(k[0]), ev("SSM_STATE_BYTES", None, vals)))
        elif k[1] in ("full", "sliding", "chunked"):
            w = mixer_span(s, k[1])
            if w == 0:
                w = 1  # a full layer: KV_TOKENS_HELD reads no span
            held = ev("KV_TOKENS_HELD", rule["runtime"] + "|" + k[1],
                      {"T": tokens, "w": w, "blk": rule["block"], "n_bt": rule["batched"]})
            vals = k[3]
            if s["cache_heads"] and rule["runtime"] == "transformers":
                vals = dict(k[3])
                vals["n_kv"] = s["cache_heads"]
            total = q_add(total, q_mul(q_mul(q_mul(q(k[0]), held), ev("KV_LAYER_ELEMENTS", None, vals)), b_kv))
    return total


@portable
def kv_is_linear(m, rule):
    """True when the KV cache grows as tokens x a constant under ``rule``: every layer a full-attention (or no-mixer)
    layer, no block rounding (vLLM rounds to blocks)."""
    if rule["runtime"] == "vllm":
        return False
    for k in m["layers"]:
        if k[1] not in ("full", "none"):
            return False
    return True


LOGITS = ("last", "all")
"""Which logits a prefill keeps: the last token's (generation, every serving runtime) or every token's (an
evaluation loop, ``logits_to_keep=0``)."""


def prefill_workspace_bytes(model: ModelSpec | str, tokens: int, batch: int = 1, dtype: str = "fp16",
                            attention: str = "sdpa", chunk: int | None = None, logits: str = "last") -> int:
    """Transient prefill peak (formulas.PREFILL_WORKSPACE_BYTES); ``chunk`` caps the tokens per prefill step;
    ``logits="all"``: every token's logits are kept (formulas.PREFILL_WORKSPACE_ALL_LOGITS_BYTES; not with a chunk,
    which runtimes use to generate, keeping the last token's)."""
    m = get_model(model)
    tokens, batch = check_positive_int("tokens", tokens), check_positive_int("batch", batch)
    attention = check_choice("attention", attention, ATTENTION)
    logits = check_choice("logits", logits, LOGITS)
    if chunk is not None:
        chunk = check_positive_int("chunk", chunk)
        if logits == "all":
            raise InvalidValueError("logits", logits, "a chunked prefill keeps the last token's logits; give "
                                    "logits='last' or no prefill_chunk")
    act = precision_view(get_precision(dtype, field="activation_dtype"))
    fp16 = precision_view(get_precision("fp16"))
    if logits == "last":
        return prefill_bytes(Fields(m), tokens, batch, act, fp16, attention, chunk)
    return F.to_int_bytes(F.evaluate(F.PREFILL_WORKSPACE_ALL_LOGITS_BYTES,
                                     **prefill_values(Fields(m), tokens, batch, act, fp16, attention)))


@portable
def prefill_values(spec, tokens, batch, act, fp16, attention):
    """The symbol values of the prefill workspace expressions for ``tokens`` tokens in the activation format ``act``
    (fp16 when it is not a float format), eager attention keeping the scores."""
    b_a = act["bytes_per_element"] if act["is_float"] else fp16["bytes_per_element"]
    return {"B": batch, "T": tokens, "h": spec["hidden"], "f": spec["ffn"], "b_a": b_a,
            "e_att": 1 if attention == "eager" else 0, "n_h": spec["n_heads"], "V": spec["vocab"]}


@portable
def prefill_bytes(spec, tokens, batch, act, fp16, attention, chunk):
    """PREFILL_WORKSPACE_BYTES of a prefill of ``tokens`` (at most ``chunk`` per step) (:func:`prefill_values`);
    rounded up."""
    if chunk is not None:
        tokens = min(tokens, chunk)
    return q_ceil(ev("PREFILL_WORKSPACE_BYTES", None, prefill_values(spec, tokens, batch, act, fp16, attention)))


_INFERENCE_SIGNATURE = signature(
    arg("model", annotation="ModelSpec | str"), arg("weights", "fp16", "str"), arg("kv_dtype", "fp16", "str"),
    arg("tokens", 4096, "int"), arg("batch", 1, "int"), arg("attention", "sdpa", "str"),
    arg("reserve", DEFAULT_RESERVE, "int | str"), arg("activation_dtype", None, "str | None"),
    arg("prefill_chunk", None, "int | None"), arg("runtime", "transformers", "str | CacheRule"),
    arg("logits", "last", "str"))


@keywords_through(_INFERENCE_SIGNATURE)
def inference_memory(model: ModelSpec | str, weights: str = "fp16", kv_dtype: str = "fp16", tokens: int = 4096,
                     batch: int = 1, attention: str = "sdpa", reserve: int | str = DEFAULT_RESERVE,
                     **prefill) -> Breakdown:
    """Peak memory to serve ``batch`` sequences of ``tokens`` tokens: weights, KV cache, prefill workspace, reserve.

    ``prefill``: how the prompt is processed -- ``activation_dtype`` (default: fp16, or the weights' format if it
    is a float) and ``prefill_chunk`` (tokens per prefill step, :func:`prefill_workspace_bytes`' ``chunk``) -- and
    ``runtime``, the KV-cache rule (:func:`kv_cache_bytes`: "transformers" by default, "vllm", "every-token"), and
    ``logits``: "last" (generation) or "all" (every token's logits, an evaluation loop: :data:`LOGITS`).
    """
    m = get_model(model)
    wdet = weights_detail(m, weights)
    act = activation_format(prefill.get("activation_dtype"), weights,
                            precision_view(get_precision(weights, field="weights")))
    got = inference_parts(m.name, list(wdet.items()), kv_cache_bytes(m, tokens, batch, kv_dtype,
                                                                    prefill.get("runtime", "transformers")),
                          prefill_workspace_bytes(m, tokens, batch, act, attention, prefill.get("prefill_chunk"),
                                                  prefill.get("logits", "last")),
                          parse_memory(reserve, field="reserve"), [weights, kv_dtype, batch, tokens, attention])
    return Breakdown(dict(got[0]), title=got[1])


@portable
def activation_format(given, weights, weights_p):
    """The prefill's activation format: the one given, else the weights' format when it is a float, else fp16."""
    if given:
        return given
    return weights if weights_p["is_float"] else "fp16"


@portable
def inference_parts(name, weights, kv, prefill, reserve, labels):
    """[[component, bytes], title] of inference memory: the weights' parts, the KV cache, the prefill workspace and
    the reserve; ``labels`` = [weights, kv_dtype, batch, tokens, attention] for the title."""
    parts = [w for w in weights]
    parts.append(["kv cache", kv])
    parts.append(["prefill workspace", prefill])
    parts.append(["reserve (CUDA context, framework)", reserve])
    return [parts, name + ": " + labels[0] + " weights, " + labels[1] + " KV, " + str(labels[2]) + " x " +
            fmt_fixed(labels[3], 0, True) + " tokens, " + labels[4]]
