"""Design levers of a pre-training architecture, against a target GPU and context (chapter 13).

Which choices made before pre-training fix the memory for the model's whole life? This module varies one
lever of a base shape at a time and reports, for each variant, what the memory allows on the target GPU:

* **GQA / MQA** (``n_kv_heads``): KV cache per token, so the longest context and the concurrent sequences;
* **depth vs width at equal parameters**: for a hidden size ``h``, the layer count that keeps the parameter
  count ``N`` is solved with sympy from ``formulas.N_PARAMS_UNIFORM`` (``LAYERS_AT_EQUAL_PARAMS``);
  wider-and-shallower means fewer ``L x h`` products, so less KV cache and fewer activations per token;
* **FFN ratio** at equal parameters: a wider MLP buys fewer layers;
* **MoE experts**: total parameters (memory) against active parameters (compute per token).

The levers of 2025-26 models act on a layer stack of several kinds (:func:`attention_levers`, :func:`expert_levers`):

* **sliding window and local:global ratio** (Gemma-3's 5 local : 1 global, GPT-OSS's 1 : 1, Mistral-7B's every
  layer local): local layers hold at most ``w`` tokens of cache, so only the global layers grow with the context;
* **multi-head latent attention** (DeepSeek-V2/V3): the cache holds a latent of ``kv_lora_rank`` and one RoPE key
  per token and layer instead of keys and values per KV head;
* **expert granularity** at equal total and active parameters (more, narrower experts; DeepSeekMoE's fine-grained
  segmentation) and **shared experts** (routed slots turned into experts every token uses): what they change is what
  one GPU holds under expert parallelism, not the model's total.

Training columns need one uniform layer the activation model measures; a shape beyond it (MLA, shared experts)
names what is not modelled in ``Design.training_note`` and leaves those columns empty.

Every number comes from vramlib's own functions (``inference_memory``, ``max_tokens``, ``max_batch``,
``training_memory``, ``activation_bytes``, ``min_gpus``); the one new formula is the solved layer count.
(The largest model a cluster can train is :func:`vramlib.solve.planning.max_params_model_states`.)

Used in: chapter 13.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from ..core import formulas as F
from ..memory.activations import activation_bytes, hf_activation_problem
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, as_sequence, check_number, check_positive_int
from ..core.api import public_api
from ..solve.feasibility import kv_is_bounded, largest_fitting, max_batch, max_tokens, min_gpus
from ..memory.inference import DEFAULT_RESERVE, inference_memory, kv_bytes_per_token, weights_bytes
from ..catalog.models import ModelSpec, get_model
from ..plans.parallel import stage_params
from ..core.symbols import L, N
from ..memory.training import training_memory
from ..core.units import gb, parse_memory
from ..catalog.hardware import capacity_bytes
from ..core.portable import ev, fmt_fixed, portable, q_round, raise_problem, share_lazy

_SOLVED = {
    # Layers that give N parameters for the other dimensions (N_PARAMS is linear in L): chapter 13.
    "LAYERS_AT_EQUAL_PARAMS": lambda: sp.solve(sp.Eq(N, F.N_PARAMS_UNIFORM), L)[0],
}


def _solved(name: str) -> sp.Expr:
    if name not in globals():
        globals()[name] = _SOLVED[name]()
    return globals()[name]


def __getattr__(name: str) -> sp.Expr:
    if name in _SOLVED:  # solved on first use, keeping `import vramlib` fast
        return _solved(name)
    raise AttributeError(f"module 'vramlib.explain.design' has no attribute {name!r}")


def _round_to(value, multiple: int) -> int:
    return max(multiple, int(round(Fraction(value) / multiple)) * multiple)


def exact(model: ModelSpec | str, name: str | None = None) -> ModelSpec:
    """The shape with its exact parameter count (drops a nominal size such as the source's "13B")."""
    m = get_model(model)
    return m.with_(nominal_params=None, name=name or m.name)


def layers_for(model: ModelSpec | str, n_params: int) -> Fraction:
    """Layers (a fraction) that give ``n_params`` parameters with the model's other dimensions
    (evaluates ``LAYERS_AT_EQUAL_PARAMS``)."""
    m = get_model(model)
    vals = m.symbols()
    vals.pop("L", None)
    return Fraction(F.evaluate(_solved("LAYERS_AT_EQUAL_PARAMS"), N=check_positive_int("n_params", n_params), **vals))


def equal_params_shape(base: ModelSpec | str, hidden: int | None = None, ffn: int | None = None,
                       ffn_ratio: float | Fraction | None = None, n_params: int | None = None,
                       n_kv_heads: int | None = None, ffn_multiple: int = 256) -> ModelSpec:
    """A variant of ``base`` with another hidden size and/or FFN size, its layer count solved so the parameter
    count stays ``n_params`` (default: the base's exact count), rounded to the nearest whole layer.

    The head dimension is kept (heads = hidden / head_dim); so is the GQA group (query heads per KV head), unless
    ``n_kv_heads`` fixes the number of KV heads (as Llama 3 keeps 8 at every size). The FFN keeps the base's
    ratio to the hidden size unless ``ffn`` or ``ffn_ratio`` is given, rounded to a multiple of ``ffn_multiple``
    as Llama does.
    """
    b = exact(base)
    target = check_positive_int("n_params", n_params) if n_params is not None else b.n_params
    h = check_positive_int("hidden", hidden) if hidden is not None else b.hidden
    if h % b.head_dim:
        raise InvalidValueError("hidden", h, f"must be a multiple of the head dimension {b.head_dim}")
    heads = h // b.head_dim
    if n_kv_heads is not None:
        kv = check_positive_int("n_kv_heads", n_kv_heads)
        if heads % kv:
            raise InvalidValueError("n_kv_heads", kv, f"must divide the {heads} heads of hidden {h}")
    elif heads % b.gqa_group:
        raise InvalidValueError("hidden", h, f"gives {heads} heads, not a multiple of the GQA group {b.gqa_group}")
    else:
        kv = heads // b.gqa_group
    if ffn is not None:
        f = check_positive_int("ffn", ffn)
    else:
        ratio = Fraction(ffn_ratio) if ffn_ratio is not None else Fraction(b.ffn, b.hidden)
        if ratio <= 0:
            raise InvalidValueError("ffn_ratio", ffn_ratio, "must be positive")
        f = _round_to(ratio * h, check_positive_int("ffn_multiple", ffn_multiple))
    trial = b.with_(hidden=h, n_heads=heads, n_kv_heads=kv, ffn=f, n_layers=1)
    got = equal_layers(trial.symbols(), target, h)
    raise_problem(got[1])
    return trial.with_(n_layers=got[0], name=f"{b.name} h{h} L{got[0]} f{f}")


share_lazy(LAYERS_AT_EQUAL_PARAMS=lambda: _solved("LAYERS_AT_EQUAL_PARAMS"))


@portable
def equal_layers(sym, target, hidden):
    """[layers, problem]: the whole number of layers nearest LAYERS_AT_EQUAL_PARAMS for ``target`` parameters with the
    other dimensions of ``sym``; a problem when not one layer fits."""
    vals = dict(sym)
    vals["N"] = target
    layers = q_round(ev("LAYERS_AT_EQUAL_PARAMS", None, vals))
    if layers < 1:
        return [layers, ["hidden", hidden, "leaves no room for a layer within " + fmt_fixed(target, 0, True) +
                         " parameters"]]
    return [layers, None]


def equal_params_shapes(base: ModelSpec | str, hiddens, **kw) -> list[ModelSpec]:
    """:func:`equal_params_shape` for each hidden size (depth vs width at equal parameters)."""
    return [equal_params_shape(base, hidden=h, **kw) for h in hiddens]


def ffn_ratio_shapes(base: ModelSpec | str, ratios, **kw) -> list[ModelSpec]:
    """:func:`equal_params_shape` for each FFN ratio (f / h) at the base's hidden size."""
    return [equal_params_shape(base, ffn_ratio=r, **kw) for r in ratios]


def gqa_shape(base: ModelSpec | str, n_kv_heads: int) -> ModelSpec:
    """The base with ``n_kv_heads`` key/value heads (same layers: K and V projections shrink with them)."""
    b = exact(base)
    kv = check_positive_int("n_kv_heads", n_kv_heads)
    return b.with_(n_kv_heads=kv, name=f"{b.name} kv{kv}")


def moe_shape(base: ModelSpec | str, n_experts: int, experts_per_token: int = 2,
              expert_ffn: int | None = None, ffn_multiple: int = 128) -> ModelSpec:
    """The base with its MLP replaced by ``n_experts`` experts, ``experts_per_token`` routed per token.

    ``expert_ffn`` defaults to the base FFN / experts_per_token (rounded to ``ffn_multiple``): each token then
    uses about the dense model's MLP (equal active parameters), while memory holds all experts.
    ``n_experts`` 0 (or 1) returns the dense base.
    """
    b = exact(base)
    e = check_positive_int("n_experts", n_experts, allow_zero=True)
    if e <= 1:
        return b.with_(name=f"{b.name} dense")
    k = check_positive_int("experts_per_token", experts_per_token)
    if k > e:
        raise InvalidValueError("experts_per_token", k, f"must be at most n_experts={e}")
    f = check_positive_int("expert_ffn", expert_ffn) if expert_ffn is not None else \
        _round_to(Fraction(b.ffn, k), check_positive_int("ffn_multiple", ffn_multiple))
    return b.with_(n_experts=e, experts_per_token=k, ffn=f, name=f"{b.name} moe{e}x{k} f{f}")


ALL_LOCAL = "all"
"""The ``local_per_global`` of a stack whose every layer is local (Mistral-7B-v0.1's sliding window)."""


def window_shape(base: ModelSpec | str, window: int, local_per_global: int | str = 5) -> ModelSpec:
    """The base with sliding-window attention of ``window`` tokens on its local layers: ``local_per_global`` local
    layers, then one full-attention layer, repeated from the first layer (Gemma-3's 5 : 1, GPT-OSS's 1 : 1;
    transformers' ``layer_types``), or ``"all"`` (:data:`ALL_LOCAL`): every layer local. Parameters do not
    change; the cache of a local layer stops at the window."""
    b = exact(base)
    w = check_positive_int("window", window)
    if w < 2:
        raise InvalidValueError("window", w, "must be at least 2 tokens")
    if local_per_global == ALL_LOCAL:
        types = ("sliding",)
    else:
        if isinstance(local_per_global, str):
            raise InvalidValueError("local_per_global", local_per_global,
                                    f"must be a positive integer (local layers per global one) or {ALL_LOCAL!r}")
        r = check_positive_int("local_per_global", local_per_global)
        if r >= b.n_layers:
            raise InvalidValueError("local_per_global", r, f"must be below the {b.n_layers} layers of {b.name} "
                                    f"(for no global layer give {ALL_LOCAL!r})")
        types = tuple("full" if (i + 1) % (r + 1) == 0 else "sliding" for i in range(b.n_layers))
    return b.with_(layer_types=types, sliding_window=w, attention_chunk=0,
                   name=f"{b.name} window {w} {_ratio_words(local_per_global)}")


def _ratio_words(local_per_global: int | str) -> str:
    """``"5:1"``, or ``"all local"`` for :data:`ALL_LOCAL`."""
    return "all local" if local_per_global == ALL_LOCAL else f"{local_per_global}:1"


def mla_shape(base: ModelSpec | str, kv_lora_rank: int = 512, rope_head_dim: int = 64,
              q_lora_rank: int = 0) -> ModelSpec:
    """The base with multi-head latent attention (DeepSeek-V2/V3): each query head gets its own key and value,
    up-projected from a latent of ``kv_lora_rank`` values per token, and shares one RoPE key of ``rope_head_dim``;
    the cache holds the latent and that key. The base's head size stays the non-RoPE part of q and k
    (``qk_nope_head_dim``) and the size of v; q comes straight from the hidden state (``q_lora_rank`` 0, as
    DeepSeek-V2-Lite) or through a latent of ``q_lora_rank``. Per-head q/k norms and q/k/v biases go (MLA
    normalises its latents instead)."""
    b = exact(base)
    if b.attention == "mla":
        raise InvalidValueError("base", b.name, "already uses multi-head latent attention")
    c = check_positive_int("kv_lora_rank", kv_lora_rank)
    r = check_positive_int("rope_head_dim", rope_head_dim)
    q = check_positive_int("q_lora_rank", q_lora_rank, allow_zero=True)
    return b.with_(attention="mla", kv_lora_rank=c, rope_head_dim=r, q_lora_rank=q, head_dim=b.head_dim + r,
                   v_head_dim=b.head_dim, n_kv_heads=b.n_heads, qk_norm="none", qkv_bias=False,
                   name=f"{b.name} MLA {c}+{r}")


def _expert_width(m: ModelSpec) -> int:
    return m.moe_ffn or m.ffn


def _moe_base(base: ModelSpec | str) -> ModelSpec:
    b = exact(base)
    if not b.n_experts:
        raise InvalidValueError("base", b.name, "is dense: the expert levers start from a mixture of experts "
                                "(e.g. 'qwen3-30b-a3b')")
    return b


def granular_moe_shape(base: ModelSpec | str, n_experts: int) -> ModelSpec:
    """The base's experts cut finer (or merged): ``n_experts`` experts, the experts per token and each expert's
    width scaled so that the expert parameters in total and per token stay the base's (DeepSeekMoE's fine-grained
    expert segmentation); only the router changes (one row per expert). The scale must keep both whole numbers."""
    b = _moe_base(base)
    e = check_positive_int("n_experts", n_experts)
    scale = Fraction(e, b.n_experts)
    k, width = scale * b.experts_per_token, Fraction(_expert_width(b)) / scale
    if k.denominator != 1 or width.denominator != 1:
        ok = [x for x in (b.n_experts * Fraction(p, q) for p in range(1, 9) for q in range(1, 9)) if
              x.denominator == 1 and (x / b.n_experts * b.experts_per_token).denominator == 1 and
              (_expert_width(b) / (x / b.n_experts)).denominator == 1]
        raise InvalidValueError("n_experts", e, f"must scale {b.name}'s {b.n_experts} experts, top-"
                                f"{b.experts_per_token}, width {_expert_width(b)} to whole numbers (e.g. "
                                f"{', '.join(str(int(x)) for x in sorted(set(ok))[:6])})")
    width_field = "moe_ffn" if b.moe_ffn else "ffn"
    changes = {"n_experts": e, "experts_per_token": int(k), width_field: int(width)}
    if b.n_shared_experts and not b.shared_ffn:
        changes["shared_ffn"] = _expert_width(b)     # shared experts keep their width
    return b.with_(**changes, name=f"{b.name} {e}x{int(width)} top-{int(k)}")


def shared_expert_shape(base: ModelSpec | str, n_shared: int) -> ModelSpec:
    """``n_shared`` of the experts each token is routed to become shared experts that every token uses
    (DeepSeekMoE's shared-expert isolation at equal active parameters): top-(k - n_shared) routed experts plus
    ``n_shared`` shared ones of the same width. Every routed expert stays (so expert parallelism still divides
    them): the total grows by ``n_shared`` experts per layer, the active parameters stay."""
    b = _moe_base(base)
    n = check_positive_int("n_shared", n_shared, allow_zero=True)
    if n >= b.experts_per_token:
        raise InvalidValueError("n_shared", n, f"must leave at least one routed expert of {b.name}'s top-"
                                f"{b.experts_per_token} (0..{b.experts_per_token - 1})")
    if not n:
        return b
    return b.with_(experts_per_token=b.experts_per_token - n, n_shared_experts=b.n_shared_experts + n,
                   shared_ffn=_expert_width(b), name=f"{b.name} {n} shared")


def ratio(numerator: int | float, denominator: int | float) -> float:
    """``numerator / denominator``, for the "x times" and "x% less" the chapter states in words."""
    if not denominator:
        raise InvalidValueError("denominator", denominator, "must be non-zero")
    return float(Fraction(numerator) / Fraction(denominator))


def billions(n_params: int) -> float:
    """A parameter count in billions (10^9), for prose ("13.02B")."""
    return n_params / 1e9


def fraction_saved(before: int | float, after: int | float) -> float:
    """``1 - after / before``: the share a design change saves (negative when it costs more)."""
    return 1.0 - ratio(after, before)


# --- what each design allows on the target GPU ----------------------------------------------------------------


@dataclass(frozen=True)
class Design:
    """One variant and what it allows on the target GPU (bytes are exact ints).

    The training fields are None when the activation model does not price the shape (``training_note`` says what it
    has beyond the measured layer); ``unbounded``: every layer's cache stops growing (windows, chunks, Mamba
    states), so memory does not limit the context and ``max_context`` is the model's own. ``ep`` > 1:
    ``ep_rank_params`` are the parameters one GPU holds when the routed experts are split over ``ep`` GPUs (the
    rest, shared experts included, on every GPU)."""

    lever: str
    setting: str
    spec: ModelSpec
    kv_per_token: int
    weights: int
    inference: Breakdown          # one sequence of the target context
    max_context: int              # one sequence, prefill in chunks
    max_sequences: int            # sequences of the target context held at once (weights + KV cache + reserve)
    activations: int | None       # training, one sequence of train_seq, per GPU
    model_states: int | None      # training: weights, gradients, master copy, optimizer states
    gpus_to_train: int | None     # fewest GPUs with the states sharded (ZeRO-3), activations on each
    max_micro_batch: int | None   # sequences per GPU when training on n_gpus
    capacity: int
    context: int
    n_gpus: int
    reserve: int
    training_note: str = ""
    unbounded: bool = False
    ep: int = 1
    ep_rank_params: int = 0

    @property
    def kv_at_context(self) -> int:
        """KV cache (and Mamba state) of one sequence of the target context, as the runtime holds it."""
        return self.inference["kv cache"]

    @property
    def training_per_gpu(self) -> int | None:
        """Bytes per GPU when training on ``n_gpus`` with the model states sharded evenly (ZeRO-3), one sequence
        (None when the training is not modelled for this shape)."""
        if self.model_states is None:
            return None
        return -(-self.model_states // self.n_gpus) + self.activations + self.reserve

    @property
    def fits(self) -> bool:
        """One sequence of the target context fits the target GPU."""
        return self.inference.total <= self.capacity

    def row(self) -> dict:
        """A display row (GB = 10^9 bytes)."""
        m = self.spec
        untrained = "not modelled" if self.model_states is None else None
        row = {
            "lever": self.lever, "setting": self.setting, "layers": m.n_layers, "layer mix": m.layer_summary(),
            "hidden": m.hidden, "heads / KV heads": f"{m.n_heads} / {m.n_kv_heads}", "FFN": m.ffn,
            "experts": _experts_words(m), "params (B)": m.n_params / 1e9, "active (B)": m.n_active_params / 1e9,
            "KV KiB/token": self.kv_per_token / 1024, f"KV GB @ {self.context:,}": gb(self.kv_at_context),
            "weights GB": gb(self.weights),
            f"inference GB @ {self.context:,}": gb(self.inference.total), "fits": "yes" if self.fits else "no",
            "max context": "memory does not limit it" if self.unbounded else self.max_context,
            f"max sequences @ {self.context:,}": self.max_sequences,
            "activations GB / seq": untrained or gb(self.activations),
            "model states GB": untrained or gb(self.model_states),
            "GPUs to train": untrained or self.gpus_to_train or "none (activations alone exceed one GPU)",
            f"micro-batch on {self.n_gpus}": untrained or self.max_micro_batch,
        }
        if self.ep > 1:
            row[f"params per GPU @ EP{self.ep} (B)"] = self.ep_rank_params / 1e9
        return row


def _experts_words(m: ModelSpec) -> str:
    if not m.n_experts:
        return "dense"
    shared = f" + {m.n_shared_experts} shared" if m.n_shared_experts else ""
    return f"{m.n_experts} (top-{m.experts_per_token}){shared}"


@public_api
def evaluate_design(spec: ModelSpec | str, gpu, context: int, lever: str = "base", setting: str = "",
                    weights: str = "bf16", kv_dtype: str = "bf16", train_seq: int = 4096, n_gpus: int = 8,
                    train_precision: str = "bf16", optimizer: str = "adamw", convention: str = "mixed-fp32-master",
                    recompute: str = "none", reserve: int | str = DEFAULT_RESERVE, prefill_chunk: int = 2048,
                    ep: int = 1) -> Design:
    """Inference and training memory of one design against the target GPU and context. A shape whose training
    activations are not modelled (:func:`vramlib.memory.activations.hf_activation_problem`) keeps its inference
    numbers and names why its training ones are missing; ``ep`` > 1 adds the parameters per GPU under expert
    parallelism (:func:`vramlib.plans.parallel.stage_params`)."""
    m = get_model(spec)
    cap = capacity_bytes(gpu, field="gpu", positive=False)
    context = check_positive_int("context", context)
    n_gpus = check_positive_int("n_gpus", n_gpus)
    ep = check_positive_int("ep", ep)
    res = parse_memory(reserve, field="reserve")
    inf = inference_memory(m, weights, kv_dtype, context, 1, "sdpa", res, prefill_chunk=prefill_chunk)
    training = dict(activations=None, model_states=None, gpus_to_train=None, max_micro_batch=None, training_note="")
    problem = hf_activation_problem(m)
    if problem:
        training["training_note"] = problem
    else:
        train = training_memory(m, "full", seq=train_seq, micro_batch=1, precision=train_precision,
                                optimizer=optimizer, convention=convention, recompute=recompute, reserve=res)
        act = train["activations"]
        states = train.total - act - res

        def trains(b: int) -> bool:
            own = activation_bytes(m, seq=train_seq, batch=b, dtype=train_precision, recompute=recompute,
                                   scope="model")
            need = min_gpus(states, cap, own + res)
            return 0 < need <= n_gpus

        training.update(activations=act, model_states=states, gpus_to_train=min_gpus(states, cap, act + res),
                        max_micro_batch=largest_fitting(trains))
    rank = sum(stage_params(m, ep=ep)[0]) if ep > 1 else 0
    return Design(
        lever=lever, setting=setting, spec=m, kv_per_token=kv_bytes_per_token(m, kv_dtype),
        weights=weights_bytes(m, weights), inference=inf,
        max_context=_max_context(m, cap, weights, kv_dtype, res, prefill_chunk),
        max_sequences=max_batch(m, cap, context, weights, kv_dtype, res, attention=None),
        capacity=cap, context=context, n_gpus=n_gpus, reserve=res, unbounded=kv_is_bounded(m.view()),
        ep=ep, ep_rank_params=math.ceil(rank), **training)


def _max_context(m: ModelSpec, cap: int, weights: str, kv_dtype: str, reserve: int, chunk: int) -> int:
    """``max_tokens(..., attention="sdpa", prefill_chunk=chunk)`` without the bisection: from ``chunk`` tokens on,
    the chunked prefill workspace no longer grows, so it acts as a fixed reserve and the closed form applies."""
    chunk = check_positive_int("prefill_chunk", chunk)
    workspace = inference_memory(m, weights, kv_dtype, chunk, 1, "sdpa", reserve, prefill_chunk=chunk)
    t = max_tokens(m, cap, weights, kv_dtype, 1, reserve + workspace["prefill workspace"])
    if t >= chunk:
        return t
    return max_tokens(m, cap, weights, kv_dtype, 1, reserve, attention="sdpa", prefill_chunk=chunk)


def design_levers(base: ModelSpec | str, gpu, context: int, kv_heads=(), hiddens=(), ffn_ratios=(), experts=(),
                  experts_per_token: int = 2, width_kv_heads: int | None = None, **options) -> list[Design]:
    """The base and one variant per lever setting, each evaluated by :func:`evaluate_design` (``options``).

    ``kv_heads``: GQA/MQA (same layers); ``hiddens`` and ``ffn_ratios``: depth vs width and FFN ratio at the
    base's parameter count (layers solved; ``width_kv_heads`` fixes the KV heads, else the GQA group is kept);
    ``experts``: MoE with ``experts_per_token`` routed experts of FFN / experts_per_token each (about the dense
    model's active parameters).
    """
    b = exact(base)
    ints = lambda field, v: [check_positive_int(field, x) for x in as_sequence(  # noqa: E731
        field, v, "(1, 4, 8)", allow_empty=True)]
    kv_heads, hiddens = ints("kv_heads", kv_heads), ints("hiddens", hiddens)
    experts = [check_positive_int("experts", e, allow_zero=True)  # 0 or 1: the dense model
               for e in as_sequence("experts", experts, "(0, 8, 64)", allow_empty=True)]
    ffn_ratios = [check_number("ffn_ratios", r, minimum=0, min_inclusive=False)
                  for r in as_sequence("ffn_ratios", ffn_ratios, "(2, 2.6875, 4)", allow_empty=True)]
    out = [evaluate_design(b, gpu, context, "base", f"{b.n_layers} layers, h {b.hidden}", **options)]
    for kv in kv_heads:
        out.append(evaluate_design(gqa_shape(b, kv), gpu, context, "GQA", f"{kv} KV heads", **options))
    for h in hiddens:
        s = equal_params_shape(b, hidden=h, n_kv_heads=width_kv_heads)
        out.append(evaluate_design(s, gpu, context, "width", f"h {h}, L {s.n_layers}", **options))
    for r in ffn_ratios:
        s = equal_params_shape(b, ffn_ratio=r, n_kv_heads=width_kv_heads)
        out.append(evaluate_design(s, gpu, context, "FFN ratio", f"f/h {float(r):g}, L {s.n_layers}", **options))
    for e in experts:
        s = moe_shape(b, e, experts_per_token)
        out.append(evaluate_design(s, gpu, context, "MoE", f"{e} experts" if e > 1 else "dense", **options))
    return out


def attention_levers(base: ModelSpec | str, gpu, context: int, windows=(), window_ratio: int | str = 5,
                     local_ratios=(), ratio_window: int = 1024, mla_ranks=(), rope_head_dim: int = 64,
                     **options) -> list[Design]:
    """The base and the attention levers of 2025-26 models, each evaluated by :func:`evaluate_design` (``options``):
    ``windows`` at ``window_ratio`` local layers per global one (:func:`window_shape`), ``local_ratios`` (integers
    or ``"all"``) at a window of ``ratio_window``, and multi-head latent attention of each rank in ``mla_ranks``
    (:func:`mla_shape`)."""
    b = exact(base)
    ints = lambda field, v: [check_positive_int(field, x) for x in as_sequence(  # noqa: E731
        field, v, "(512, 1024)", allow_empty=True)]
    windows, mla_ranks = ints("windows", windows), ints("mla_ranks", mla_ranks)
    ratios = as_sequence("local_ratios", local_ratios, "(1, 5, 'all')", allow_empty=True)
    out = [evaluate_design(b, gpu, context, "base", b.layer_summary(), **options)]
    for w in windows:
        s = window_shape(b, w, window_ratio)
        out.append(evaluate_design(s, gpu, context, "window", f"{w:,} tokens, {_ratio_words(window_ratio)}",
                                   **options))
    for r in ratios:
        s = window_shape(b, ratio_window, r)
        out.append(evaluate_design(s, gpu, context, "local:global", f"{_ratio_words(r)}, window {ratio_window:,}",
                                   **options))
    for c in mla_ranks:
        s = mla_shape(b, c, rope_head_dim)
        out.append(evaluate_design(s, gpu, context, "MLA", f"latent {c} + RoPE {rope_head_dim}", **options))
    return out


def expert_levers(base: ModelSpec | str, gpu, context: int, experts=(), shared=(), ep: int = 8,
                  **options) -> list[Design]:
    """The MoE base and its expert levers, each evaluated by :func:`evaluate_design` with ``ep``-way expert
    parallelism (``options``): the experts cut to each count in ``experts`` at equal total and active parameters
    (:func:`granular_moe_shape`), and each number of shared experts in ``shared`` (:func:`shared_expert_shape`)."""
    b = _moe_base(base)
    experts = [check_positive_int("experts", e) for e in as_sequence("experts", experts, "(32, 64, 256)",
                                                                     allow_empty=True)]
    shared = [check_positive_int("shared", n) for n in as_sequence("shared", shared, "(1, 2)", allow_empty=True)]
    out = [evaluate_design(b, gpu, context, "base", _experts_words(b), ep=ep, **options)]
    for e in experts:
        s = granular_moe_shape(b, e)
        out.append(evaluate_design(s, gpu, context, "granularity", _experts_words(s) + f", width {_expert_width(s)}",
                                   ep=ep, **options))
    for n in shared:
        s = shared_expert_shape(b, n)
        out.append(evaluate_design(s, gpu, context, "shared experts", _experts_words(s), ep=ep, **options))
    return out


def plot_levers(designs: list[Design], title: str = ""):
    """Four panels: longest context against KV heads, and against width at equal parameters; training
    activations per sequence against width; MoE weights (all experts) against active parameters. Returns the figure."""
    import matplotlib.pyplot as plt

    from ..core.palette import PALETTE

    by = {k: [d for d in designs if d.lever == k] for k in ("GQA", "width", "MoE")}
    base = next(d for d in designs if d.lever == "base")
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.6))
    target = base.context

    def context_bars(ax, ds, labels, colour, xlabel):
        xs = range(len(ds))
        bars = ax.bar(xs, [max(d.max_context, 1) for d in ds], color=[colour if d.fits else "#c62828" for d in ds])
        ax.set_yscale("log", base=2)
        ax.set_ylim(bottom=min([target] + [d.max_context for d in ds if d.max_context]) / 4)
        ax.axhline(target, color="black", linestyle="--", linewidth=1)
        ax.text(len(ds) - 0.5, target, f"target {target:,} ", ha="right", va="bottom", fontsize=8)
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel("longest context (tokens)", fontsize=9)
        for bar, d in zip(bars, ds):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{d.max_sequences}x",
                    ha="center", va="bottom", fontsize=7)

    ds = sorted(by["GQA"], key=lambda d: d.spec.n_kv_heads)
    context_bars(axes[0, 0], ds, [str(d.spec.n_kv_heads) for d in ds], PALETTE[0], "KV heads (same layers)")
    axes[0, 0].set_title("GQA: longest context on the GPU\n(label: sequences of the target context at once)",
                         fontsize=9)
    ds = sorted(by["width"], key=lambda d: d.spec.hidden)
    labels = [f"h {d.spec.hidden}\nL {d.spec.n_layers}" for d in ds]
    context_bars(axes[0, 1], ds, labels, PALETTE[2], "hidden size and layers at equal parameters")
    axes[0, 1].set_title(f"Depth vs width at equal parameters ({ds[0].spec.n_kv_heads} KV heads): longest context",
                         fontsize=9)
    ax = axes[1, 0]
    bars = ax.bar(range(len(ds)), [gb(d.activations) for d in ds], color=PALETTE[2])
    ax.set_xticks(range(len(ds)), labels, fontsize=8)
    ax.set_ylabel("activations per sequence (GB)", fontsize=9)
    ax.set_xlabel("hidden size and layers at equal parameters", fontsize=9)
    ax.set_title(f"Depth vs width: training activations, {designs[0].n_gpus} GPUs\n"
                 "(label: micro-batch that fits per GPU)", fontsize=9)
    for bar, d in zip(bars, ds):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), str(d.max_micro_batch), ha="center",
                va="bottom", fontsize=8)
    ax = axes[1, 1]
    ds = sorted(by["MoE"], key=lambda d: d.spec.n_experts)
    xs = range(len(ds))
    ax.bar(xs, [gb(d.weights) for d in ds], color=[PALETTE[5] if d.fits else "#c62828" for d in ds],
           label="weights in memory (all experts)")
    ax.plot(xs, [gb(d.weights) * d.spec.n_active_params / d.spec.n_params for d in ds], "o-", color="black",
            label="weights used per token (active)")
    ax.axhline(gb(base.capacity), color="black", linestyle="--", linewidth=1)
    ax.text(len(ds) - 0.5, gb(base.capacity), "GPU memory ", ha="right", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [d.setting for d in ds], fontsize=8)
    ax.set_ylabel("GB (10^9 bytes)", fontsize=9)
    ax.set_title(f"MoE: memory holds every expert, each token uses {ds[-1].spec.experts_per_token or 2}",
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle((title + "\n" if title else "") + f"red: one {target:,}-token sequence does not fit the GPU",
                 fontsize=10)
    fig.tight_layout()
    return fig


def plot_architecture_levers(attention: list[Design], experts: list[Design], title: str = ""):
    """Two panels: the KV cache of one target-context sequence for each attention design (label: sequences held at
    once), and for each expert design the change against the MoE base of its total parameters, of the parameters one
    GPU holds under expert parallelism and of its training activations per sequence ("n/m" where those are not
    modelled). Returns the figure."""
    import matplotlib.pyplot as plt

    from ..core.palette import PALETTE

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.45 * max(len(attention), len(experts)) + 2.2))
    levers = list(dict.fromkeys(d.lever for d in attention))
    ys = range(len(attention))
    bars = left.barh(ys, [gb(d.kv_at_context) for d in attention],
                     color=[PALETTE[levers.index(d.lever) % len(PALETTE)] for d in attention])
    left.set_yticks(list(ys), [f"{d.lever}: {d.setting}" for d in attention], fontsize=8)
    left.invert_yaxis()
    left.set_xlabel(f"KV cache of one {attention[0].context:,}-token sequence (GB, 10^9 bytes)", fontsize=9)
    left.set_title(f"{attention[0].spec.name}: attention levers\n(label: sequences held at once)", fontsize=9)
    for bar, d in zip(bars, attention):
        left.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {d.max_sequences}x", va="center",
                  fontsize=7)
    base, rest = experts[0], experts[1:]
    ys = range(len(rest))
    height = 0.27
    measures = (("total parameters", lambda d: d.spec.n_params),
                (f"parameters on one GPU at EP{base.ep}", lambda d: d.ep_rank_params),
                ("training activations per sequence", lambda d: d.activations))
    for i, (label, value) in enumerate(measures):
        at = [y + (i - 1) * height for y in ys]
        got = [None if value(d) is None or value(base) is None else 100 * (ratio(value(d), value(base)) - 1)
               for d in rest]
        right.barh(at, [g or 0 for g in got], height=height, color=PALETTE[(i * 2) % len(PALETTE)], label=label)
        for y, g in zip(at, got):
            right.text(0 if g is None else g, y, " n/m" if g is None else f" {g:+.1f}%", va="center", fontsize=7)
    right.axvline(0, color="black", linewidth=0.8)
    right.set_yticks(list(ys), [f"{d.lever}: {d.setting}" for d in rest], fontsize=8)
    right.invert_yaxis()
    right.set_xlabel(f"change against {base.spec.name} ({base.setting}), %", fontsize=9)
    right.set_title(f"{base.spec.name}: expert levers\n(n/m: activations not modelled for the shape)", fontsize=9)
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
