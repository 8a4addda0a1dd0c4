"""Model shapes: a frozen :class:`ModelSpec`, exact parameter counts, HF ``config.json`` reading, the catalogue.

Parameter counts evaluate :data:`vramlib.core.formulas.N_PARAMS`; the catalogue's
counts equal what transformers builds (``tools/measure/param_counts.py``).
Used in: every chapter.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..core import formulas as F
from ..core.errors import ConfigError, InvalidValueError, UnknownNameError, VramlibError, checked_call, check_positive_int
from .precision import get_precision
from .hf_config import _divisors, _divisors_near, _is_bool, _trim, read_hf_config
from ..core.portable import Fields, ev, portable, q_ceil, raise_problem, share, shared

NORMS = ("rmsnorm", "layernorm")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj", "gate_up_proj")
"""Linear modules of the MLP, repeated per expert in MoE layers."""
_BOOL_FIELDS = ("gated_mlp", "qkv_bias", "attn_out_bias", "mlp_bias", "tied_embeddings", "fused_qkv", "fused_gate_up",
                "attn_sinks", "shared_expert_gate", "router_bias", "ssm_conv_bias", "ssm_proj_bias", "ssm_norm",
                "router_renorm", "lm_head_bias")
MIXERS = ("full", "sliding", "chunked", "mamba", "none")
"""A layer's token mixer: attention over every token, over a sliding window of ``sliding_window`` tokens, within
chunks of ``attention_chunk`` tokens (Llama-4's local layers), a Mamba-2 state-space mixer, or none (an MLP-only
block, Nemotron-H's ``-``)."""
MLPS = ("dense", "moe", "none")
"""A layer's MLP: one dense MLP of ``ffn``, routed experts (``n_experts`` of ``moe_ffn``, ``experts_per_token`` per
token, plus ``n_shared_experts`` shared MLPs of ``shared_ffn``), or none (a mixer-only block)."""
ATTENTION_FORMS = ("gqa", "mla")
QK_NORMS = ("none", "head", "full")
_SIZE_FIELDS = ("sliding_window", "attention_chunk", "q_lora_rank", "kv_lora_rank", "rope_head_dim", "v_head_dim",
                "moe_ffn", "shared_ffn", "ssm_inner", "ssm_heads", "ssm_groups", "ssm_state", "ssm_conv", "cache_heads")


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, enough to count parameters, KV cache and activations.

    ``checkpoint_format`` is the storage format the checkpoint ships in when that is a quantized format
    (``from_hf_config`` reads it from ``quantization_config``: ``"gptq-4bit-g128"``, ``"awq-4bit-g128"``,
    ``"nf4"``, ``"nf4-dq"``; a name from :func:`vramlib.catalog.precision.precision_names`), else None. It never changes a
    number by itself: ``weights_bytes(spec, dtype)`` prices the ``dtype`` it is given (``"fp16"`` by default), so
    a 4-bit checkpoint is priced as it ships only with ``weights_bytes(spec, spec.default_weights)``.
    """

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    gated_mlp: bool = True
    qkv_bias: bool = False
    attn_out_bias: bool = False
    mlp_bias: bool = False
    tied_embeddings: bool = False
    norm: str = "rmsnorm"
    norms_per_layer: int = 2
    n_experts: int = 0
    experts_per_token: int = 0
    n_shared_experts: int = 0
    learned_positions: int = 0
    max_context: int = 4096
    fused_qkv: bool = False
    fused_gate_up: bool = False
    nominal_params: int | None = None
    family: str = "llama"
    source: str = ""
    checkpoint_format: str | None = None
    # --- per-layer kinds (2025-26 models); the defaults give the uniform layer of the fields above ----------------
    layer_types: tuple[str, ...] = ()
    mlp_types: tuple[str, ...] = ()
    sliding_window: int = 0
    attention_chunk: int = 0
    attention: str = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    v_head_dim: int = 0
    qk_norm: str = "none"
    attn_sinks: bool = False
    moe_ffn: int = 0
    shared_ffn: int = 0
    shared_expert_gate: bool = False
    router_bias: bool = False
    lm_head_bias: bool = False
    ssm_inner: int = 0
    ssm_heads: int = 0
    ssm_groups: int = 0
    ssm_state: int = 0
    ssm_conv: int = 0
    ssm_conv_bias: bool = True
    ssm_proj_bias: bool = False
    ssm_norm: bool = True
    text_only_of: str | None = None
    cache_heads: int = 0
    router_renorm: bool = False

    def __post_init__(self) -> None:
        # Values are checked and stored normalised (8.0 -> 8, numpy ints and bools -> Python ones), so a copy made
        # with with_() or from JSON never carries a string, a float or a truthy stand-in for a flag.
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("name", "family", "source"):
            if not isinstance(getattr(self, name), str):
                raise InvalidValueError(name, getattr(self, name), "must be a string")
        for name in ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "ffn", "vocab", "max_context"):
            put(name, check_positive_int(name, getattr(self, name)))
        for name in ("norms_per_layer", "n_experts", "experts_per_token", "n_shared_experts", "learned_positions"):
            put(name, check_positive_int(name, getattr(self, name), allow_zero=True))
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            if not _is_bool(value):
                raise InvalidValueError(name, value, "must be True or False")
            put(name, bool(value))
        raise_problem(heads_problem(Fields(self)))
        if not isinstance(self.norm, str) or self.norm not in NORMS:
            raise UnknownNameError("norm", self.norm, NORMS)
        raise_problem(experts_problem(Fields(self)))
        self._check_layers(put)
        if self.nominal_params is not None:
            put("nominal_params", check_positive_int("nominal_params", self.nominal_params))
        if self.checkpoint_format is not None:
            if not isinstance(self.checkpoint_format, str):
                raise InvalidValueError("checkpoint_format", self.checkpoint_format,
                                        "must be None or a precision name such as 'gptq-4bit-g128' or 'nf4'")
            put("checkpoint_format", get_precision(self.checkpoint_format, field="checkpoint_format").name)

    def _check_layers(self, put) -> None:
        """The per-layer fields: known kinds, one per layer, and the sizes each kind needs."""
        for name in _SIZE_FIELDS:
            put(name, check_positive_int(name, getattr(self, name), allow_zero=True))
        for name, allowed in (("layer_types", MIXERS), ("mlp_types", MLPS)):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, (tuple, list)):
                raise InvalidValueError(name, _trim(value), f"must be a tuple with one of {', '.join(allowed)} per "
                                                            "layer, or () for the uniform default")
            for x in value:
                if not isinstance(x, str) or x not in allowed:
                    raise UnknownNameError(name, x, allowed)
            if len(value) not in (0, 1, self.n_layers):
                raise InvalidValueError(name, f"{len(value)} entries", f"must have one per layer (n_layers="
                                                                       f"{self.n_layers}), one for every layer, or be ()")
            put(name, tuple(value[:1]) if len(set(value)) == 1 else tuple(value))  # one kind: stored once
        for name, allowed in (("attention", ATTENTION_FORMS), ("qk_norm", QK_NORMS)):
            if not isinstance(getattr(self, name), str) or getattr(self, name) not in allowed:
                raise UnknownNameError(name, getattr(self, name), allowed)
        raise_problem(layers_problem(Fields(self)))
        if self.text_only_of is not None and not isinstance(self.text_only_of, str):
            raise InvalidValueError("text_only_of", self.text_only_of, "must be None or a string")

    # --- symbol values for the formulas ---------------------------------------------------------
    def symbols(self, active: bool = False) -> dict[str, int]:
        """Values of :mod:`vramlib.core.symbols` for this shape's one layer kind, with L; ``active`` counts only the
        routed-to experts. A fresh dict each call (callers add their own values); computed once per spec. A shape
        whose layers differ (a dense prefix, MoE every other layer, Mamba layers) or that has a part the
        single-layer calculations do not model (MLA, q/k norms, sinks, shared experts, a router bias) refuses in one
        line: those calculations read one uniform layer. Parameters and the KV cache read :meth:`layer_kinds`."""
        key = "_cache_symbols_active" if active else "_cache_symbols"
        cached = self.__dict__.get(key)
        if cached is None:
            problem = self.uniform_problem()
            if problem:
                raise_problem(layer_refusal(self.name, problem))
            cached = self.__dict__[key] = self._symbols(active)
        return dict(cached)

    def _symbols(self, active: bool) -> dict[str, int]:
        return symbols_of(Fields(self), active)

    def uniform_problem(self) -> str | None:
        """None for a shape of one classic layer kind repeated (GQA attention over every token or a window, a dense or
        MoE MLP): what every calculation models. Else what it has beyond that, in words."""
        cached = self.__dict__.get("_cache_uniform")
        if cached is None:
            cached = self.__dict__["_cache_uniform"] = [_uniform_problem(self)]
        return cached[0]

    def layer_kinds(self, active: bool = False) -> list[tuple[int, str, str, dict[str, int]]]:
        """The distinct layer kinds, in order: (layers, mixer, MLP, symbol values); ``active``: routed-to experts only."""
        key = "_cache_kinds_active" if active else "_cache_kinds"
        cached = self.__dict__.get(key)
        if cached is None:
            cached = self.__dict__[key] = [tuple(k) for k in layer_kinds_of(Fields(self), active)]
        return [(n, a, b, dict(v)) for n, a, b, v in cached]

    def layer_summary(self) -> str:
        """The layer stack in words, for tables: ``"52 sliding (1,024) + 10 full, GQA 16 KV heads"``."""
        counts: dict[str, int] = {}
        for n, mixer, _, _ in self.layer_kinds():
            counts[mixer] = counts.get(mixer, 0) + n
        spec = Fields(self)
        parts = " + ".join(f"{n} {k}" + (f" ({mixer_span(spec, k):,})" if mixer_span(spec, k) else "")
                           for k, n in counts.items())
        attn = (f"MLA latent {self.kv_lora_rank} + {self.rope_head_dim}" if self.attention == "mla"
                else f"{self.n_kv_heads} of {self.n_heads} KV heads")
        return parts + ", " + attn

    @cached_property
    def n_params(self) -> int:
        """Exact parameter count of the architecture (tied weights counted once), summed over the layer kinds."""
        return int(params_of(self._view(False)))

    @cached_property
    def n_active_params(self) -> int:
        """Parameters used per token (equals n_params for dense models; MoE counts experts_per_token routed experts,
        and the shared experts, routers and everything outside the experts)."""
        return int(params_of(self._view(True)))

    @property
    def weight_params(self) -> int:
        """Parameters to store (the nominal size when set, as the source's '13B', else the exact count)."""
        return weight_params_of(Fields(self), self.n_params)

    @property
    def gqa_group(self) -> int:
        """Query heads per KV head (1 = MHA, n_heads = MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    def param_groups(self) -> dict[str, int]:
        """Exact parameters by tensor kind (embed, lm_head, attn_q ... mlp_down, router, norm, bias); sums to n_params.
        A fresh dict each call, computed once per spec."""
        cached = self.__dict__.get("_cache_param_groups")
        if cached is None:
            cached = self.__dict__["_cache_param_groups"] = self._param_groups()
        return dict(cached)

    def _param_groups(self) -> dict[str, int]:
        return dict(param_groups_of(self.view()))

    def view(self) -> dict:
        """The model as portable code reads it, the shape of the browser's ``VL.model``: ``spec`` (its fields),
        ``layers`` (its layer kinds, ``layer_kinds_of``), ``sym`` (the one layer kind's symbol values; a shape of
        several kinds refuses in one line when a calculation reads it) and ``linear_modules``."""
        return self._view(False)

    def _view(self, active: bool) -> dict:
        problem = self.uniform_problem()
        sym = _Refusing(layer_refusal(self.name, problem)) if problem else self.symbols(active)
        return {"spec": Fields(self), "sym": sym, "layers": [list(k) for k in self.layer_kinds(active)],
                "linear_modules": self.linear_modules()}

    def linear_modules(self) -> list[str]:
        """Names of the linear modules in each layer as the HF implementation has them (fused where fused)."""
        attn = ["qkv_proj"] if self.fused_qkv else ["q_proj", "k_proj", "v_proj"]
        if self.gated_mlp:
            mlp = ["gate_up_proj"] if self.fused_gate_up else ["gate_proj", "up_proj"]
        else:
            mlp = ["up_proj"]
        return attn + ["o_proj"] + mlp + ["down_proj"]

    @property
    def default_weights(self) -> str:
        """The format to price the weights in "as the checkpoint ships": ``checkpoint_format`` when the config named
        a quantized format, else ``"fp16"`` (16-bit weights; bf16 costs the same bytes)."""
        return self.checkpoint_format or "fp16"

    @checked_call
    def with_(self, **changes: Any) -> "ModelSpec":
        """A copy with some fields changed (validated), e.g. ``m.with_(n_kv_heads=8)``; for widgets. A new
        ``n_layers`` keeps a pattern of one kind (stored once); a mixed pattern must be given anew."""
        known = [f.name for f in fields(self)]
        for k in changes:
            if k not in known:
                raise UnknownNameError("ModelSpec field", k, known)
        n = changes.get("n_layers", self.n_layers)
        if n != self.n_layers:
            for name in ("layer_types", "mlp_types"):
                pattern = getattr(self, name)
                if name not in changes and len(pattern) > 1:
                    raise InvalidValueError("n_layers", n, f"{self.name} mixes layer kinds ({name} "
                                            f"{_pattern_words(pattern)}); give {name} for {n} layers too")
        return replace(self, **changes)

    @checked_call
    def with_heads(self, n_heads: int, n_kv_heads: int) -> "ModelSpec":
        """Same hidden size with another head count (head_dim = hidden / heads) and KV heads; for widgets."""
        n_heads = check_positive_int("n_heads", n_heads)
        n_kv_heads = check_positive_int("n_kv_heads", n_kv_heads)
        if self.hidden % n_heads:
            raise InvalidValueError("n_heads", n_heads, f"must divide hidden={self.hidden} (e.g. {_divisors_near(self.hidden, n_heads)})")
        if n_heads % n_kv_heads:
            raise InvalidValueError("n_kv_heads", n_kv_heads,
                                    f"must divide n_heads={n_heads} (allowed: {_divisors(n_heads)})")
        return self.with_(n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=self.hidden // n_heads)

    @checked_call
    def as_heads(self, n_heads: int, n_kv_heads: int) -> "ModelSpec":
        """The model with these query and KV heads, as the panels change them (``heads_change``): unchanged heads
        keep the model, new KV heads alone keep head_dim (Gemma's and MLA models' head_dim is not hidden / heads),
        new query heads re-derive it (:meth:`with_heads`)."""
        change = heads_change(Fields(self), check_positive_int("n_heads", n_heads),
                              check_positive_int("n_kv_heads", n_kv_heads))
        if "head_dim" in change:
            return self.with_heads(n_heads, n_kv_heads)
        return self.with_(**change) if change else self

    @checked_call
    def with_group_size(self, queries_per_kv_head: int) -> "ModelSpec":
        """GQA read as "groups of g query heads": n_kv_heads = n_heads / g (chapter 7's other reading)."""
        g = check_positive_int("queries_per_kv_head", queries_per_kv_head)
        if self.n_heads % g:
            raise InvalidValueError("queries_per_kv_head", g, f"must divide n_heads={self.n_heads} (allowed: {_divisors(self.n_heads)})")
        return self.with_(n_kv_heads=self.n_heads // g)

    @staticmethod
    def from_gguf(path: str | Path) -> "ModelSpec":
        """A GGUF file's header (llama.cpp's format) as a ModelSpec: its hyperparameters, read with the ``gguf``
        package; :func:`read_gguf` also gives every tensor's stored type and bytes."""
        return read_gguf(path).spec

    @staticmethod
    @checked_call
    def from_hf_config(config: str | Path | Mapping[str, Any], name: str | None = None) -> "ModelSpec":
        """Read a transformers ``config.json`` (a path, a model directory or a dict): Llama (and Yi), Mistral,
        Mixtral, Qwen2, Gemma, Gemma-2, Phi-3, Falcon, GPT-NeoX and GPT-2, counted as transformers builds them.

        Every bad input is one line (ConfigError / InvalidValueError / UnknownNameError) naming the key, never a
        plausible wrong number: sizes must be JSON integers (not ``"4096"``, ``4096.5``, NaN or ``1e400``), flags
        JSON booleans (``"false"`` and ``null`` are refused, as transformers 5 refuses them), ``null`` counts as a
        missing size, and a missing size is derived only where transformers derives it (``head_dim = hidden /
        heads``, ``num_key_value_heads = heads`` for Llama/Phi-3, ``4 x hidden`` MLPs for Falcon/GPT-2); where
        transformers would fill in a reference model's constant (Mistral's 8 KV heads, Gemma's head_dim 256, any
        intermediate_size) it is refused. Architectures ModelSpec cannot count exactly (Qwen2-MoE's shared experts,
        Qwen3's per-head norms, ALiBi Falcon, GPT-2 cross-attention) are refused in one line.

        A ``quantization_config`` sets ``checkpoint_format`` (see :class:`ModelSpec`): GPTQ and AWQ (GEMM) with
        their bits and group size, bitsandbytes 4-bit (NF4, or FP4 which stores the same bytes) with or without
        double quantization. Methods the precision catalogue has no exact format for (bitsandbytes 8-bit, FP8,
        MXFP4, compressed-tensors, HQQ ...) raise ConfigError naming ``quantization_config.quant_method``.
        """
        return _from_hf_config(config, name)

    @staticmethod
    @checked_call
    def from_pretrained(model_id: str, revision: str | None = None, cache_dir: str | Path | None = None,
                        name: str | None = None) -> "ModelSpec":
        """A Hub model id (``"Qwen/Qwen3-8B"``): only its ``config.json``, fetched once with huggingface_hub or read
        from the local cache (``HF_HUB_OFFLINE=1``: the cache only), then :meth:`from_hf_config`. Offline with no
        cached copy, a gated or unknown repository: one line naming the id (``catalog.hub.hub_config``)."""
        from .hub import hub_config

        path = hub_config(model_id, revision=revision, cache_dir=cache_dir)
        spec = _from_hf_config(path, name or model_id.strip())
        return replace(spec, source=f"{model_id.strip()}{'@' + revision if revision else ''} on the Hugging Face "
                                    f"Hub (config.json: {path})")


def _checked_init(cls):
    """A wrong-shaped ``ModelSpec(...)`` call (missing or unknown arguments) is a one-line error, not a TypeError;
    the check runs only after a failure, so building specs in loops costs nothing extra."""
    import functools

    init = cls.__init__
    checked = checked_call(init)

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except TypeError:
            checked(self, *args, **kwargs)  # raises the one-line error when the arguments do not fit the fields
            raise

    cls.__init__ = __init__
    return cls


_checked_init(ModelSpec)



class _Refusing(dict):
    """The ``sym`` of a model view whose layers differ: reading it raises the one-line error of what the
    single-layer calculation would miss (``layer_refusal``)."""

    def __init__(self, problem: list):
        super().__init__()
        self.problem = problem

    def _refuse(self, *args):
        raise_problem(self.problem)

    __getitem__ = __iter__ = keys = items = values = get = copy = __len__ = _refuse


def _pattern_words(pattern) -> str:
    """``3 dense, 58 moe`` for a per-layer pattern (kinds in order of first appearance)."""
    counts: dict[str, int] = {}
    for x in pattern:
        counts[x] = counts.get(x, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def _uniform_problem(m: "ModelSpec") -> str | None:
    """What a shape has beyond one classic layer kind repeated, in words (None when nothing)."""
    what = []
    if len({(b, tuple(sorted(v.items()))) for _, _, b, v in m.layer_kinds()}) > 1:
        kinds = [f"{n} {a}/{b}" for n, a, b, _ in m.layer_kinds()]
        what.append("layers of several kinds (" + ", ".join(kinds) + ")")
    mixers = {k[1] for k in m.layer_kinds()}
    if "mamba" in mixers:
        what.append("Mamba-2 layers")
    if "none" in mixers or "none" in {k[2] for k in m.layer_kinds()}:
        what.append("blocks without attention or without an MLP")
    for flag, words in ((m.attention == "mla", "multi-head latent attention"),
                        (m.qk_norm == "full", "full-width q/k norms"), (m.attn_sinks, "attention sinks"),
                        (m.shared_ffn not in (0, m.moe_ffn or m.ffn), "shared experts of another width"),
                        (m.router_bias, "a router bias"), (m.lm_head_bias, "an LM-head bias"),
                        (m.shared_expert_gate, "a shared-expert gate"),
                        (m.moe_ffn not in (0, m.ffn), "an expert width other than ffn")):
        if flag:
            what.append(words)
    return ", ".join(what) + " not modelled here" if what else None


@portable
def layer_types_of(s):
    """Each layer's token mixer (MIXERS): the spec's ``layer_types`` (one entry: every layer), or full attention."""
    if len(s["layer_types"]) == s["n_layers"]:
        return [x for x in s["layer_types"]]
    return [s["layer_types"][0] if len(s["layer_types"]) else "full" for _ in range(s["n_layers"])]


@portable
def mlp_types_of(s):
    """Each layer's MLP (MLPS): the spec's ``mlp_types`` (one entry: every layer), or routed experts in every layer of
    a MoE model, else dense."""
    if len(s["mlp_types"]) == s["n_layers"]:
        return [x for x in s["mlp_types"]]
    one = s["mlp_types"][0] if len(s["mlp_types"]) else ("moe" if s["n_experts"] else "dense")
    return [one for _ in range(s["n_layers"])]


@portable
def kind_symbols(s, mixer, mlp, active):
    """Values of :mod:`vramlib.core.symbols` for one layer kind (``mixer``, ``mlp``) of a shape; ``active`` counts
    only the routed-to experts. The model-level values (V, P, t_emb) ride along."""
    attn = mixer in ("full", "sliding", "chunked")
    mla = attn and s["attention"] == "mla"
    gqa = attn and not mla
    moe = mlp == "moe"
    ssm = mixer == "mamba"
    routed = (s["experts_per_token"] if active else s["n_experts"]) if moe else (1 if mlp == "dense" else 0)
    width = (s["moe_ffn"] or s["ffn"]) if moe else s["ffn"]
    shared_n = s["n_shared_experts"] if moe else 0
    return {"h": s["hidden"], "n_h": s["n_heads"], "n_kv": s["n_kv_heads"], "d_head": s["head_dim"], "f": width,
            "V": s["vocab"], "P": s["learned_positions"], "g": 1 if s["gated_mlp"] else 0, "n_mlp": routed,
            "E": s["n_experts"] if moe else 0, "n_norm": s["norms_per_layer"],
            "beta_qkv": 1 if gqa and s["qkv_bias"] else 0, "beta_o": 1 if attn and s["attn_out_bias"] else 0,
            "beta_mlp": 1 if s["mlp_bias"] and mlp != "none" else 0, "beta_norm": 1 if s["norm"] == "layernorm" else 0,
            "t_emb": 1 if s["tied_embeddings"] else 0, "beta_hb": 1 if s["lm_head_bias"] else 0,
            "z_att": 1 if gqa else 0, "z_mla": 1 if mla else 0,
            "q_r": s["q_lora_rank"] if mla else 0, "z_qr": 1 if mla and s["q_lora_rank"] else 0,
            "c_kv": s["kv_lora_rank"] if mla else 0, "d_r": s["rope_head_dim"] if mla else 0,
            "d_v": s["v_head_dim"] if mla else 0, "beta_qkh": 1 if attn and s["qk_norm"] == "head" else 0,
            "beta_qkf": 1 if attn and s["qk_norm"] == "full" else 0, "beta_sink": 1 if attn and s["attn_sinks"] else 0,
            "n_s": shared_n, "f_s": (s["shared_ffn"] or width) if shared_n else 0,
            "beta_rb": 1 if moe and s["router_bias"] else 0, "z_sg": 1 if moe and s["shared_expert_gate"] else 0,
            "z_ssm": 1 if ssm else 0, "d_in": s["ssm_inner"] if ssm else 0, "n_g": s["ssm_groups"] if ssm else 0,
            "d_s": s["ssm_state"] if ssm else 0, "n_sh": s["ssm_heads"] if ssm else 0,
            "k_c": s["ssm_conv"] if ssm else 0, "beta_cb": 1 if ssm and s["ssm_conv_bias"] else 0,
            "beta_pb": 1 if ssm and s["ssm_proj_bias"] else 0, "beta_mn": 1 if ssm and s["ssm_norm"] else 0}


@portable
def layer_kinds_of(s, active):
    """[[count, mixer, mlp, symbols]] of a shape's distinct layer kinds, in the order they first appear (a shape
    without per-layer patterns is one kind, whatever its layer count)."""
    if len(s["layer_types"]) <= 1 and len(s["mlp_types"]) <= 1:
        mixer = s["layer_types"][0] if len(s["layer_types"]) else "full"
        mlp = s["mlp_types"][0] if len(s["mlp_types"]) else ("moe" if s["n_experts"] else "dense")
        return [[s["n_layers"], mixer, mlp, kind_symbols(s, mixer, mlp, active)]]
    mixers = layer_types_of(s)
    mlps = mlp_types_of(s)
    out = []
    at = {}
    for i in range(s["n_layers"]):
        key = mixers[i] + "|" + mlps[i]
        if key in at:
            out[at[key]][0] += 1
        else:
            at[key] = len(out)
            out.append([1, mixers[i], mlps[i], kind_symbols(s, mixers[i], mlps[i], active)])
    return out


@portable
def symbols_of(s, active):
    """Values of :mod:`vramlib.core.symbols` for a shape of one uniform layer kind (its first layer's, with L); only
    meaningful when every layer has those values (``ModelSpec.symbols`` checks)."""
    first = layer_kinds_of(s, active)[0]
    out = dict(first[3])
    out["L"] = s["n_layers"]
    return out


@portable
def mixer_span(s, mixer):
    """Tokens a local attention layer of ``mixer`` sees: the sliding window, the attention chunk; 0 for other mixers."""
    if mixer == "sliding":
        return s["sliding_window"]
    if mixer == "chunked":
        return s["attention_chunk"]
    return 0


@portable
def layers_problem(s):
    """None, or the error of a per-layer field a layer kind needs and the shape lacks."""
    mixers = s["layer_types"] if len(s["layer_types"]) else ["full"]
    mlps = s["mlp_types"] if len(s["mlp_types"]) else ["moe" if s["n_experts"] else "dense"]
    if "sliding" in mixers and s["sliding_window"] < 2:
        return ["sliding_window", s["sliding_window"], "sliding layers need a window of at least 2 tokens"]
    if "chunked" in mixers and s["attention_chunk"] < 2:
        return ["attention_chunk", s["attention_chunk"], "chunked layers need a chunk of at least 2 tokens"]
    if "moe" in mlps and not s["n_experts"]:
        return ["mlp_types", "moe", "a MoE layer needs n_experts > 0"]
    if s["n_experts"] and "moe" not in mlps:
        return ["n_experts", s["n_experts"], "no layer is a MoE layer (mlp_types has no 'moe')"]
    if s["attention"] == "mla" and not (s["kv_lora_rank"] and 0 < s["rope_head_dim"] < s["head_dim"]
                                        and s["v_head_dim"]):
        return ["attention", "mla", "needs kv_lora_rank, v_head_dim and 0 < rope_head_dim < head_dim (head_dim = "
                "qk_nope_head_dim + qk_rope_head_dim)"]
    if "mamba" in mixers and not (s["ssm_inner"] and s["ssm_heads"] and s["ssm_groups"] and s["ssm_state"]
                                  and s["ssm_conv"]):
        return ["layer_types", "mamba", "Mamba-2 layers need ssm_inner, ssm_heads, ssm_groups, ssm_state and ssm_conv"]
    return None


@portable
def layer_refusal(name, problem):
    """The error of a calculation that reads one uniform layer, for a shape beyond it (``problem``: what it has)."""
    return ["model", name, problem + "; this calculation reads one uniform layer and does not model it yet "
            "(parameters, weights and the KV cache do)"]


@portable
def heads_change(s, n_heads, n_kv_heads):
    """The fields a panel's query and KV heads change: none when they are the model's; the KV heads alone when the
    query heads stay (head_dim stays too); else both and head_dim = hidden / heads."""
    if n_heads == s["n_heads"]:
        return {} if n_kv_heads == s["n_kv_heads"] else {"n_kv_heads": n_kv_heads}
    return {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": s["hidden"] // n_heads}


@portable
def weight_params_of(s, n_params):
    """Parameters to store: the nominal size when the shape has one (the source's '13B'), else the exact count."""
    return s["nominal_params"] if s["nominal_params"] is not None else n_params


@portable
def heads_problem(s):
    """None, or the error of KV heads that do not divide the query heads (with the allowed counts)."""
    if s["n_heads"] % s["n_kv_heads"]:
        return ["n_kv_heads", s["n_kv_heads"], "must divide n_heads=" + str(s["n_heads"]) + " (allowed: " +
                ", ".join([str(k) for k in range(1, s["n_heads"] + 1) if s["n_heads"] % k == 0]) + ")"]
    return None


@portable
def experts_problem(s):
    """None, or the error of a routed-expert count outside 1..n_experts (0 for a dense model)."""
    if s["n_experts"] and not (1 <= s["experts_per_token"] <= s["n_experts"]):
        return ["experts_per_token", s["experts_per_token"], "must be 1..n_experts=" + str(s["n_experts"])]
    if not s["n_experts"] and s["experts_per_token"]:
        return ["experts_per_token", s["experts_per_token"], "must be 0 for a dense model (n_experts=0)"]
    return None


share(LAYER_GROUPS=F.LAYER_GROUPS, MODEL_GROUPS=F.MODEL_GROUPS, LAYER_GROUP_NAMES=list(F.LAYER_GROUPS),
      MODEL_GROUP_NAMES=list(F.MODEL_GROUPS), N_PARAMS=F.N_PARAMS,
      CLASSIC_GROUP_NAMES=["attn_q", "attn_k", "attn_v", "attn_o", "mlp_gate", "mlp_up", "mlp_down", "router", "norm",
                           "bias"])


@portable
def param_groups_of(m):
    """[[kind, parameters]] of a model view by tensor kind: LAYER_GROUPS summed over the layer kinds (each x its
    layers), then the MODEL_GROUPS outside the layers (the final norm joins the layers' norms); sums to the model's
    parameters. Kinds only some architectures have (MLA, Mamba) are listed when present."""
    out = []
    at = {}
    for kind in shared("LAYER_GROUP_NAMES"):
        n = 0
        for k in m["layers"]:
            n += k[0] * q_ceil(ev("LAYER_GROUPS", kind, k[3]))
        if n or kind in shared("CLASSIC_GROUP_NAMES"):
            at[kind] = len(out)
            out.append([kind, n])
    for kind in shared("MODEL_GROUP_NAMES"):
        n = q_ceil(ev("MODEL_GROUPS", kind, m["layers"][0][3]))
        if kind in at:
            out[at[kind]][1] += n
        else:
            at[kind] = len(out)
            out.append([kind, n])
    return out


@portable
def params_of(m):
    """Parameters of a model view: the sum of its param groups."""
    n = 0
    for g in param_groups_of(m):
        n += g[1]
    return n


@checked_call
def read_gguf(path: str | Path):
    """A GGUF file (llama.cpp's format) read with the ``gguf`` package: a
    :class:`~vramlib.catalog.gguf_file.GGUFModel` -- its ModelSpec, every tensor's stored ggml type and bytes, the
    per-layer sums and the notes of the parameter check (``vramlib.catalog.gguf_file``). Chapter 17."""
    from .gguf_file import read_gguf_as

    return read_gguf_as(path, ModelSpec)


def _from_hf_config(config: str | Path | Mapping[str, Any], name: str | None) -> ModelSpec:
    fields_, src = read_hf_config(config, name)
    try:
        return ModelSpec(**fields_)
    except VramlibError as e:
        raise ConfigError(getattr(e, "field", "config"), str(e), source=src) from None


# --- the catalogue ------------------------------------------------------------------------------------
SOURCE_SHAPES: dict[str, ModelSpec] = {
    # The source document's assumed shapes, with its nominal sizes (weights = nominal x bytes per parameter).
    "source-1b": ModelSpec("source-1b", 16, 2048, 16, 16, 128, 5504, 32000, nominal_params=10**9,
                           source="the source, question 10: h 2048, L 16"),
    "source-7b": ModelSpec("source-7b", 32, 4096, 32, 32, 128, 11008, 32000, nominal_params=7 * 10**9,
                           source="the source, questions 4, 7, 10, 15: 32 layers, 32 heads, head dim 128"),
    "source-13b": ModelSpec("source-13b", 40, 5120, 40, 40, 128, 13824, 32000, nominal_params=13 * 10**9,
                            source="the source, questions 1, 3, 7: 40 layers, 40 heads, head dim 128, no GQA"),
    "source-30b": ModelSpec("source-30b", 60, 6656, 52, 52, 128, 17920, 32000, nominal_params=30 * 10**9,
                            source="the source, question 3: N = 30B with h 6656, L 60"),
    "source-33b": ModelSpec("source-33b", 60, 6656, 52, 52, 128, 17920, 32000, nominal_params=33 * 10**9,
                            source="the source, question 2: LLaMA-1 33B, 60 layers, hidden 6656, 52 heads"),
    "source-175b": ModelSpec("source-175b", 96, 12288, 96, 96, 128, 49152, 50257, gated_mlp=False, qkv_bias=True,
                             attn_out_bias=True, mlp_bias=True, tied_embeddings=True, norm="layernorm",
                             learned_positions=2048, max_context=2048, nominal_params=175 * 10**9, family="gpt2",
                             source="the source, question 12: 175B (GPT-3 shape, Brown et al. 2020: 96 layers, "
                                    "d_model 12288)"),
}


def _config_dir() -> Path:
    return Path(str(resources.files("vramlib") / "data" / "hf_configs"))


@lru_cache(maxsize=1)
def catalogue() -> dict[str, ModelSpec]:
    """Every catalogue model by key: real models from ``data/hf_configs/*.json`` plus the source's shapes."""
    out: dict[str, ModelSpec] = {}
    for path in sorted(_config_dir().glob("*.json")):
        out[path.stem] = ModelSpec.from_hf_config(path, name=path.stem)
    out.update(SOURCE_SHAPES)
    return out


def model_names() -> list[str]:
    return sorted(catalogue())


@checked_call
def get_model(name: str | ModelSpec) -> ModelSpec:
    """A catalogue model by key, case-insensitive (``"Llama-2-13B"``); a ModelSpec passes through."""
    if isinstance(name, ModelSpec):
        return name
    if not isinstance(name, str):
        raise InvalidValueError("model", _trim(name), "give a catalogue name such as 'llama-2-13b' or a ModelSpec")
    if len(name) > 200:
        raise InvalidValueError("model", _trim(name), "a catalogue name is a short key such as 'llama-2-13b'")
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    cat = catalogue()
    if key in cat:
        return cat[key]
    raise UnknownNameError("model", name, cat)
