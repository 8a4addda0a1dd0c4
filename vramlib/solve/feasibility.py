"""Work back from the hardware (the heart of the source): max tokens, max batch, max parameters, min GPUs.

Closed forms come from ``sympy.solve`` on the formulas where the budget is linear in the unknown
(KV cache only); otherwise bisection on the full Breakdown. Every answer fits and answer + 1 does not.
Used in: chapters 1, 2, 3, 5, 7, 9, 13.
"""
from __future__ import annotations

from typing import Callable

from ..core import formulas as F
from ..core.errors import InvalidValueError, check_keywords, check_positive_int
from ..memory.inference import (DEFAULT_RESERVE, CacheRule, _rule_view, cache_rule, inference_memory, kv_bytes,
                                kv_heads_per_gpu, kv_is_linear, kv_sequence_bytes, weights_bytes, weights_detail_tp)
from ..catalog.models import ModelSpec, get_model
from ..catalog.hardware import capacity_bytes
from ..catalog.precision import get_precision, kv_bytes_per_element
from ..core.units import parse_memory
from ..core.portable import ev, fmt_fixed, portable, q_ceil, q_floor, raise_problem, share, share_lazy, shared


def largest_fitting(fits: Callable[[int], bool], lo: int = 1, hi: int | None = None, limit: int = 2**64,
                    field: str = "tokens") -> int:
    """Largest n >= lo with fits(n) (fits must be monotone: true then false); 0 if fits(lo) is false.

    The answer is exact: fits(answer) and not fits(answer + 1). When even ``limit`` fits, the question has no
    useful answer (the memory is effectively unbounded for it): InvalidValueError naming ``field``, never a
    capped number that looks like an answer."""
    got = largest_true(fits, lo, hi, limit, field)
    raise_problem(got[1])
    return got[0]


@portable
def largest_true(fits, lo, hi, limit, field):
    """[largest n >= lo with fits(n), None] by doubling then bisection (0 when fits(lo) is false); [limit, problem]
    when even ``limit`` fits -- the memory given is far beyond what the question needs."""
    if not fits(lo):
        return [0, None]
    hi = hi or lo * 2
    while fits(hi):
        lo = hi
        hi = hi * 2
        if hi > limit:
            if fits(limit):
                return [limit, [field, "> " + fmt_fixed(limit, 0, True), "more than this fits: the memory given is far "
                                "beyond what the question needs (check its unit)"]]
            hi = limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return [lo, None]


def kv_budget_bytes(model: ModelSpec | str, memory: int | str, weights: str = "fp16",
                    reserve: int | str = DEFAULT_RESERVE) -> int:
    """Memory left for the KV cache after weights and reserve (formulas.KV_BUDGET_BYTES); negative if none."""
    return int(F.evaluate(F.KV_BUDGET_BYTES, M=capacity_bytes(memory, positive=False), W=weights_bytes(get_model(model), weights),
                          R=parse_memory(reserve, field="reserve")))


def max_tokens(model: ModelSpec | str, memory: int | str = "24GiB", weights: str = "fp16", kv_dtype: str = "fp16",
               batch: int = 1, reserve: int | str = DEFAULT_RESERVE, attention: str | None = None,
               **options) -> int:
    """Longest context (tokens per sequence, for ``batch`` sequences) that fits ``memory``.

    ``attention=None``: weights + KV cache + reserve only, the closed form formulas.MAX_TOKENS_PER_TOKEN_BYTES
    where the cache grows linearly (the source's MAX_TOKENS_KV_ONLY), else an exact search. ``attention="sdpa"|"eager"|"flash"`` adds the prefill workspace (bisection).
    ``memory`` is bytes, a string such as ``"24GiB"``, or a GPU name. Returns 0 when not even one token fits.
    ``options``: ``prefill_chunk`` (tokens per prefill step) and ``runtime``, the KV-cache rule
    (:func:`vramlib.memory.inference.kv_cache_bytes`: "transformers" by default). A model whose cache stops
    growing (every layer keeps a sliding window, a chunk or a Mamba state) is limited by its ``max_context``, not by
    memory, once that cache fits (with a prefill workspace only when a chunk caps it): the answer is then
    ``max_context``.
    """
    m = get_model(model)
    check_keywords("max_tokens", options, ("prefill_chunk", "runtime"))
    prefill_chunk, runtime = options.get("prefill_chunk"), options.get("runtime", "transformers")
    batch = check_positive_int("batch", batch)
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    w = weights_bytes(m, weights)
    if attention is None:
        return max_tokens_kv_only(m.view(), cap, res, w, batch, kv_bytes_per_element(kv_dtype),
                                  _rule_view(cache_rule(runtime)))

    def fits(t: int) -> bool:
        return inference_memory(m, weights, kv_dtype, t, batch, attention, res, prefill_chunk=prefill_chunk,
                                runtime=runtime).total <= cap

    return longest_context(m, fits, prefill_chunk is not None)


def longest_context(m: ModelSpec, fits: Callable[[int], bool], prefill_capped: bool) -> int:
    """The largest T with ``fits(T)`` (:func:`largest_fitting`), or the model's ``max_context`` when nothing grows
    with the context -- a cache that stops growing (windows, chunks, Mamba states) and a prefill workspace capped by a
    chunk (``prefill_capped``) -- and it fits even at TOKENS_LIMIT: then the model limits the context, not memory."""
    if prefill_capped and kv_is_bounded(m.view()) and fits(TOKENS_LIMIT):
        return m.max_context
    return largest_fitting(fits)


TOKENS_LIMIT = 2**40
"""Past a trillion tokens a context is not a question memory answers: a cache that still fits there stops growing."""
share(TOKENS_LIMIT=TOKENS_LIMIT)
share_lazy(MAX_TOKENS_PER_TOKEN_BYTES=lambda: F.MAX_TOKENS_PER_TOKEN_BYTES,
           MAX_BATCH_PER_SEQUENCE_BYTES=lambda: F.MAX_BATCH_PER_SEQUENCE_BYTES)


@portable
def max_tokens_kv_only(m, cap, reserve, weights, batch, b_kv, rule):
    """Longest context, weights + KV cache + reserve (0 when nothing fits): the closed form MAX_TOKENS_PER_TOKEN_BYTES
    rounded down where the cache grows linearly (the source's MAX_TOKENS_KV_ONLY for uniform layers), else the exact
    largest T whose cache fits (KV_TOKENS_HELD). A cache that stops growing (every layer a window, a chunk or a Mamba
    state) and fits does not limit the context: the model does, and the answer is its ``max_context``."""
    if kv_is_linear(m, rule):
        per = kv_sequence_bytes(m, 1, b_kv, rule, False)
        return max(0, q_floor(ev("MAX_TOKENS_PER_TOKEN_BYTES", None, {"M": cap, "R": reserve, "W": weights,
                                                                      "B": batch, "K_tok": per})))
    fixed = weights + reserve

    def fits(t):
        return fixed + kv_bytes(m, t, batch, b_kv, rule, True) <= cap

    if kv_is_bounded(m) and fits(shared("TOKENS_LIMIT")):
        return m["spec"]["max_context"]
    got = largest_true(fits, 1, None, shared("TOKENS_LIMIT"), "tokens")
    raise_problem(got[1])
    return got[0]


@portable
def kv_is_bounded(m):
    """True when the cache stops growing with the context: no full-attention layer (windows, chunks, Mamba states)."""
    for k in m["layers"]:
        if k[1] == "full":
            return False
    return True


def max_batch(model: ModelSpec | str, memory: int | str, tokens: int, weights: str = "fp16", kv_dtype: str = "fp16",
              reserve: int | str = DEFAULT_RESERVE, attention: str | None = "sdpa",
              runtime: "str | CacheRule" = "transformers") -> int:
    """Most sequences of ``tokens`` tokens held at once; 0 if none fits.

    ``attention=None``: weights + KV cache + reserve, the closed form formulas.MAX_BATCH_PER_SEQUENCE_BYTES;
    otherwise the prefill workspace of the whole batch is added (bisection).
    """
    m = get_model(model)
    tokens = check_positive_int("tokens", tokens)
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    if attention is None:
        return max_batch_kv_only(m.view(), cap, res, weights_bytes(m, weights), tokens, kv_bytes_per_element(kv_dtype),
                                 _rule_view(cache_rule(runtime)))
    return largest_fitting(lambda n: inference_memory(m, weights, kv_dtype, tokens, n, attention, res,
                                                      runtime=runtime).total <= cap)


def max_params(memory: int | str, weights: str = "int4", reserve: int | str = 0) -> int:
    """Most parameters whose weights alone fit ``memory - reserve`` (chapter 5: 24 GB / 0.5 B = 48B)."""
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    if res >= cap:
        raise InvalidValueError("reserve", reserve, f"must be below the memory ({cap:,} bytes)")
    return int(F.evaluate(F.MAX_PARAMS, M=cap, R=res, b_q=get_precision(weights, field="weights").bits) // 1)


def min_gpus(sharded_bytes: int, memory: int | str, replicated_bytes: int | str = 0) -> int:
    """Fewest GPUs when ``sharded_bytes`` split evenly and ``replicated_bytes`` sit on every GPU; 0 if impossible."""
    cap, rep = capacity_bytes(memory, positive=False), parse_memory(replicated_bytes, field="replicated_bytes")
    return fewest_gpus(sharded_bytes, cap, rep)


share_lazy(MIN_GPUS=lambda: F.MIN_GPUS)


@portable
def fewest_gpus(sharded, cap, replicated):
    """MIN_GPUS rounded up (at least 1): ``sharded`` bytes split evenly, ``replicated`` on every GPU; 0 when the
    replicated part alone fills a GPU."""
    if cap <= replicated:
        return 0
    return max(1, q_ceil(ev("MIN_GPUS", None, {"S": sharded, "M": cap, "R": replicated})))


@portable
def max_batch_kv_only(m, cap, reserve, weights, tokens, b_kv, rule):
    """MAX_BATCH_PER_SEQUENCE_BYTES rounded down (0 when none fits): sequences of ``tokens`` held at once, weights +
    KV + reserve, each sequence's cache as ``rule`` holds it (the source's MAX_BATCH_KV_ONLY for uniform layers)."""
    return max(0, q_floor(ev("MAX_BATCH_PER_SEQUENCE_BYTES", None, {
        "M": cap, "R": reserve, "W": weights, "K_seq": kv_sequence_bytes(m, tokens, b_kv, rule, True)})))


def max_tokens_tp(model: ModelSpec | str, memory: int | str, n_gpus: int, weights: str = "fp16",
                  kv_dtype: str = "fp16", reserve: int | str = DEFAULT_RESERVE) -> int:
    """Longest context when weights and KV cache are split over ``n_gpus`` by tensor parallelism (chapter 7).

    Each GPU holds its shard of the weights (weights_detail_tp), the reserve, and the KV cache of its own KV heads
    (KV_HEADS_PER_GPU: whole heads, replicated when ``n_gpus`` exceeds them; an MLA latent is replicated whole):
    :func:`max_tokens` of one GPU (the closed form per GPU where the cache grows linearly, a window kept as
    transformers keeps it). Mamba states split over tensor-parallel ranks are not modelled (one line)."""
    m = get_model(model)
    kv_heads = kv_heads_per_gpu(m, n_gpus, field="n_gpus")
    if any(k[1] == "mamba" for k in m.layer_kinds()):
        raise InvalidValueError("model", m.name, "max_tokens_tp does not model Mamba states split over "
                                "tensor-parallel ranks; use max_tokens on one GPU")
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    w = sum(weights_detail_tp(m, weights, n_gpus, field="n_gpus").values())
    return max_tokens_kv_only(m.with_(n_kv_heads=kv_heads).view(), cap, res, w, 1, kv_bytes_per_element(kv_dtype),
                              _rule_view(CacheRule()))
