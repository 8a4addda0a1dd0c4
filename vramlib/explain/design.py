"""Design levers of a pre-training architecture, against a target GPU and context (chapter 13).

Which choices made before pre-training fix the memory for the model's whole life? This module varies one
lever of a base shape at a time and reports, for each variant, what the memory allows on the target GPU:

* **GQA / MQA** (``n_kv_heads``): KV cache per token, so the longest context and the concurrent sequences;
* **depth vs width at equal parameters**: for a hidden size ``h``, the layer count that keeps the parameter
  count ``N`` is solved with sympy from ``formulas.N_PARAMS_UNIFORM`` (``LAYERS_AT_EQUAL_PARAMS``);
  wider-and-shallower means fewer ``L x h`` products, so less KV cache and fewer activations per token;
* **FFN ratio** at equal parameters: a wider MLP buys fewer layers;
* **MoE experts**: total parameters (memory) against active parameters (compute per token).

Every number comes from vramlib's own functions (``inference_memory``, ``max_tokens``, ``max_batch``,
``training_memory``, ``activation_bytes``, ``min_gpus``); the one new formula is the solved layer count.
(The largest model a cluster can train is :func:`vramlib.solve.planning.max_params_model_states`.)

Used in: chapter 13.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from ..core import formulas as F
from ..memory.activations import activation_bytes
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, as_sequence, check_number, check_positive_int
from ..core.api import public_api
from ..solve.feasibility import largest_fitting, max_batch, max_tokens, min_gpus
from ..memory.inference import DEFAULT_RESERVE, inference_memory, kv_bytes_per_token, weights_bytes
from ..catalog.models import ModelSpec, get_model
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
    """One variant and what it allows on the target GPU (bytes are exact ints)."""

    lever: str
    setting: str
    spec: ModelSpec
    kv_per_token: int
    weights: int
    inference: Breakdown          # one sequence of the target context
    max_context: int              # one sequence, prefill in chunks
    max_sequences: int            # sequences of the target context held at once (weights + KV cache + reserve)
    activations: int              # training, one sequence of train_seq, per GPU
    model_states: int             # training: weights, gradients, master copy, optimizer states
    gpus_to_train: int            # fewest GPUs with the states sharded (ZeRO-3), activations on each
    max_micro_batch: int          # sequences per GPU when training on n_gpus
    capacity: int
    context: int
    n_gpus: int
    reserve: int

    @property
    def training_per_gpu(self) -> int:
        """Bytes per GPU when training on ``n_gpus`` with the model states sharded evenly (ZeRO-3), one sequence."""
        return -(-self.model_states // self.n_gpus) + self.activations + self.reserve

    @property
    def fits(self) -> bool:
        """One sequence of the target context fits the target GPU."""
        return self.inference.total <= self.capacity

    def row(self) -> dict:
        """A display row (GB = 10^9 bytes)."""
        m = self.spec
        return {
            "lever": self.lever, "setting": self.setting, "layers": m.n_layers, "hidden": m.hidden,
            "heads / KV heads": f"{m.n_heads} / {m.n_kv_heads}", "FFN": m.ffn,
            "experts": f"{m.n_experts} (top-{m.experts_per_token})" if m.n_experts else "dense",
            "params (B)": m.n_params / 1e9, "active (B)": m.n_active_params / 1e9,
            "KV KiB/token": self.kv_per_token / 1024, "weights GB": gb(self.weights),
            f"inference GB @ {self.context:,}": gb(self.inference.total), "fits": "yes" if self.fits else "no",
            "max context": self.max_context, f"max sequences @ {self.context:,}": self.max_sequences,
            "activations GB / seq": gb(self.activations), "model states GB": gb(self.model_states),
            "GPUs to train": self.gpus_to_train or "none (activations alone exceed one GPU)",
            f"micro-batch on {self.n_gpus}": self.max_micro_batch,
        }


@public_api
def evaluate_design(spec: ModelSpec | str, gpu, context: int, lever: str = "base", setting: str = "",
                    weights: str = "bf16", kv_dtype: str = "bf16", train_seq: int = 4096, n_gpus: int = 8,
                    train_precision: str = "bf16", optimizer: str = "adamw", convention: str = "mixed-fp32-master",
                    recompute: str = "none", reserve: int | str = DEFAULT_RESERVE, prefill_chunk: int = 2048) -> Design:
    """Inference and training memory of one design against the target GPU and context."""
    m = get_model(spec)
    cap = capacity_bytes(gpu, field="gpu", positive=False)
    context = check_positive_int("context", context)
    n_gpus = check_positive_int("n_gpus", n_gpus)
    res = parse_memory(reserve, field="reserve")
    inf = inference_memory(m, weights, kv_dtype, context, 1, "sdpa", res, prefill_chunk=prefill_chunk)
    train = training_memory(m, "full", seq=train_seq, micro_batch=1, precision=train_precision, optimizer=optimizer,
                            convention=convention, recompute=recompute, reserve=res)
    act = train["activations"]
    states = train.total - act - res

    def trains(b: int) -> bool:
        own = activation_bytes(m, seq=train_seq, batch=b, dtype=train_precision, recompute=recompute, scope="model")
        need = min_gpus(states, cap, own + res)
        return 0 < need <= n_gpus

    return Design(
        lever=lever, setting=setting, spec=m, kv_per_token=kv_bytes_per_token(m, kv_dtype),
        weights=weights_bytes(m, weights), inference=inf,
        max_context=_max_context(m, cap, weights, kv_dtype, res, prefill_chunk),
        max_sequences=max_batch(m, cap, context, weights, kv_dtype, res, attention=None),
        activations=act, model_states=states, gpus_to_train=min_gpus(states, cap, act + res),
        max_micro_batch=largest_fitting(trains), capacity=cap, context=context, n_gpus=n_gpus, reserve=res)


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
