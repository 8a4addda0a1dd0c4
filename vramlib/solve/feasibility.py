"""Work back from the hardware (the heart of the source): max tokens, max batch, max parameters, min GPUs.

Closed forms come from ``sympy.solve`` on the formulas where the budget is linear in the unknown
(KV cache only); otherwise bisection on the full Breakdown. Every answer fits and answer + 1 does not.
Used in: chapters 1, 2, 3, 5, 7, 9, 13.
"""
from __future__ import annotations

from typing import Callable

from ..core import formulas as F
from ..core.errors import InvalidValueError, check_positive_int
from ..memory.inference import DEFAULT_RESERVE, inference_memory, kv_heads_per_gpu, weights_bytes, weights_detail_tp
from ..catalog.models import ModelSpec, get_model
from ..catalog.hardware import capacity_bytes
from ..catalog.precision import get_precision, kv_bytes_per_element
from ..core.units import parse_memory
from ..core.portable import Fields, ev, fmt_fixed, portable, q_ceil, q_floor, raise_problem, share_lazy


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
               prefill_chunk: int | None = None) -> int:
    """Longest context (tokens per sequence, for ``batch`` sequences) that fits ``memory``.

    ``attention=None``: weights + KV cache + reserve only, the closed form formulas.MAX_TOKENS_KV_ONLY
    (the source's method). ``attention="sdpa"|"eager"|"flash"`` adds the prefill workspace (bisection).
    ``memory`` is bytes, a string such as ``"24GiB"``, or a GPU name. Returns 0 when not even one token fits.
    """
    m = get_model(model)
    batch = check_positive_int("batch", batch)
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    w = weights_bytes(m, weights)
    if attention is None:
        return max_tokens_kv_only(Fields(m), cap, res, w, batch, kv_bytes_per_element(kv_dtype))

    def fits(t: int) -> bool:
        return inference_memory(m, weights, kv_dtype, t, batch, attention, res, prefill_chunk=prefill_chunk).total <= cap

    return largest_fitting(fits)


share_lazy(MAX_TOKENS_KV_ONLY=lambda: F.MAX_TOKENS_KV_ONLY)


@portable
def max_tokens_kv_only(spec, cap, reserve, weights, batch, b_kv):
    """MAX_TOKENS_KV_ONLY rounded down (0 when nothing fits): the source's closed form, weights + KV cache + reserve."""
    return max(0, q_floor(ev("MAX_TOKENS_KV_ONLY", None, {"M": cap, "R": reserve, "W": weights, "B": batch,
                                                          "L": spec["n_layers"], "n_kv": spec["n_kv_heads"],
                                                          "d_head": spec["head_dim"], "b_kv": b_kv})))


def max_batch(model: ModelSpec | str, memory: int | str, tokens: int, weights: str = "fp16", kv_dtype: str = "fp16",
              reserve: int | str = DEFAULT_RESERVE, attention: str | None = "sdpa") -> int:
    """Most sequences of ``tokens`` tokens held at once; 0 if none fits.

    ``attention=None``: weights + KV cache + reserve, the closed form formulas.MAX_BATCH_KV_ONLY;
    otherwise the prefill workspace of the whole batch is added (bisection).
    """
    m = get_model(model)
    tokens = check_positive_int("tokens", tokens)
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    if attention is None:
        return max_batch_kv_only(Fields(m), cap, res, weights_bytes(m, weights), tokens, kv_bytes_per_element(kv_dtype))
    return largest_fitting(lambda n: inference_memory(m, weights, kv_dtype, tokens, n, attention, res).total <= cap)


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


share_lazy(MIN_GPUS=lambda: F.MIN_GPUS, MAX_BATCH_KV_ONLY=lambda: F.MAX_BATCH_KV_ONLY)


@portable
def fewest_gpus(sharded, cap, replicated):
    """MIN_GPUS rounded up (at least 1): ``sharded`` bytes split evenly, ``replicated`` on every GPU; 0 when the
    replicated part alone fills a GPU."""
    if cap <= replicated:
        return 0
    return max(1, q_ceil(ev("MIN_GPUS", None, {"S": sharded, "M": cap, "R": replicated})))


@portable
def max_batch_kv_only(spec, cap, reserve, weights, tokens, b_kv):
    """MAX_BATCH_KV_ONLY rounded down (0 when none fits): sequences of ``tokens`` held at once, weights + KV + reserve."""
    return max(0, q_floor(ev("MAX_BATCH_KV_ONLY", None, {"M": cap, "R": reserve, "W": weights, "T": tokens,
                                                         "L": spec["n_layers"], "n_kv": spec["n_kv_heads"],
                                                         "d_head": spec["head_dim"], "b_kv": b_kv})))


def max_tokens_tp(model: ModelSpec | str, memory: int | str, n_gpus: int, weights: str = "fp16",
                  kv_dtype: str = "fp16", reserve: int | str = DEFAULT_RESERVE) -> int:
    """Longest context when weights and KV cache are split over ``n_gpus`` by tensor parallelism (chapter 7).

    Each GPU holds its shard of the weights (weights_detail_tp), the reserve, and the KV cache of its own KV heads
    (KV_HEADS_PER_GPU: whole heads, replicated when ``n_gpus`` exceeds them): the single-GPU closed form
    formulas.MAX_TOKENS_KV_ONLY evaluated per GPU."""
    m = get_model(model)
    kv_heads = kv_heads_per_gpu(m, n_gpus, field="n_gpus")
    cap, res = capacity_bytes(memory, positive=False), parse_memory(reserve, field="reserve")
    w = sum(weights_detail_tp(m, weights, n_gpus, field="n_gpus").values())
    t = F.evaluate(F.MAX_TOKENS_KV_ONLY, M=cap, R=res, W=w, B=1, L=m.n_layers, n_kv=kv_heads, d_head=m.head_dim,
                   b_kv=kv_bytes_per_element(kv_dtype))
    return max(0, int(t // 1))
