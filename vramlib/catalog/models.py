"""Model shapes: a frozen :class:`ModelSpec`, exact parameter counts, HF ``config.json`` reading, the catalogue.

Parameter counts evaluate :data:`vramlib.core.formulas.N_PARAMS`; the catalogue's
counts equal what transformers builds (``tools/measure/param_counts.py``).
Used in: every chapter.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, fields, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..core import formulas as F
from ..core.errors import ConfigError, InvalidValueError, UnknownNameError, VramlibError, checked_call, check_positive_int
from .precision import get_precision
from ..core.portable import Fields, ev, portable, q_ceil, raise_problem, share, shared

NORMS = ("rmsnorm", "layernorm")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj", "gate_up_proj")
"""Linear modules of the MLP, repeated per expert in MoE layers."""
_BOOL_FIELDS = ("gated_mlp", "qkv_bias", "attn_out_bias", "mlp_bias", "tied_embeddings", "fused_qkv", "fused_gate_up")


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
        if self.nominal_params is not None:
            put("nominal_params", check_positive_int("nominal_params", self.nominal_params))
        if self.checkpoint_format is not None:
            if not isinstance(self.checkpoint_format, str):
                raise InvalidValueError("checkpoint_format", self.checkpoint_format,
                                        "must be None or a precision name such as 'gptq-4bit-g128' or 'nf4'")
            put("checkpoint_format", get_precision(self.checkpoint_format, field="checkpoint_format").name)

    # --- symbol values for the formulas ---------------------------------------------------------
    def symbols(self, active: bool = False) -> dict[str, int]:
        """Values of :mod:`vramlib.core.symbols` for this shape; ``active`` counts only the routed-to experts. A fresh
        dict each call (callers add their own values); computed once per spec (the spec is immutable)."""
        key = "_cache_symbols_active" if active else "_cache_symbols"
        cached = self.__dict__.get(key)
        if cached is None:
            cached = self.__dict__[key] = self._symbols(active)
        return dict(cached)

    def _symbols(self, active: bool) -> dict[str, int]:
        return symbols_of(Fields(self), active)

    @cached_property
    def n_params(self) -> int:
        """Exact parameter count of the architecture (tied weights counted once)."""
        return int(F.evaluate(F.N_PARAMS, **self.symbols()))

    @cached_property
    def n_active_params(self) -> int:
        """Parameters used per token (equals n_params for dense models; MoE counts experts_per_token experts)."""
        return int(F.evaluate(F.N_PARAMS, **self.symbols(active=True)))

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
        ``sym`` (its symbol values) and ``linear_modules``."""
        return {"spec": Fields(self), "sym": self.symbols(), "linear_modules": self.linear_modules()}

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
        """A copy with some fields changed (validated), e.g. ``m.with_(n_kv_heads=8)``; for widgets."""
        known = [f.name for f in fields(self)]
        for k in changes:
            if k not in known:
                raise UnknownNameError("ModelSpec field", k, known)
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
    def with_group_size(self, queries_per_kv_head: int) -> "ModelSpec":
        """GQA read as "groups of g query heads": n_kv_heads = n_heads / g (chapter 7's other reading)."""
        g = check_positive_int("queries_per_kv_head", queries_per_kv_head)
        if self.n_heads % g:
            raise InvalidValueError("queries_per_kv_head", g, f"must divide n_heads={self.n_heads} (allowed: {_divisors(self.n_heads)})")
        return self.with_(n_kv_heads=self.n_heads // g)

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


def _divisors_near(n: int, k: int) -> str:
    divs = sorted((x for x in range(1, min(n, 1024) + 1) if n % x == 0), key=lambda x: abs(x - k))[:4]
    return ", ".join(str(x) for x in sorted(divs))


def _divisors(n: int) -> str:
    return ", ".join(str(k) for k in range(1, n + 1) if n % k == 0)


# --- Hugging Face config.json -----------------------------------------------------------------------
# How each family's config is read follows transformers 5.24 (models/<family>/configuration_<family>.py for the
# defaults, modeling_<family>.py for which keys build which tensors); the catalogue's counts equal what it builds.
_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3", "yi", "qwen3"}
_FAMILIES = sorted(_LLAMA_LIKE | {"falcon", "gpt_neox", "gpt2", "RefinedWebModel", "RefinedWeb"})

_MAX_INT = 2**31 - 1
"""Largest size a config may give (no tensor dimension of a real model comes near it; 1e20 is a typo, not a model)."""
_MAX_CONFIG_BYTES = 16 * 2**20
"""A config.json is a few kB; anything past this is the wrong file (a safetensors shard ...)."""

# Attention heads: transformers derives num_key_value_heads = num_attention_heads when the key is missing or null
# only for Llama (LlamaConfig.__post_init__), Phi-3 (Phi3Config.__post_init__) and Yi (a Llama); the other config
# classes default it to their reference model's constant, which is refused rather than guessed.
_KV_CONSTANT = {"mistral": 8, "mixtral": 8, "qwen2": 32, "qwen2_moe": 16, "gemma": 16, "gemma2": 4, "qwen3": 32}
# head_dim: Llama, Mistral, Mixtral, Qwen2, Phi-3 attention use ``getattr(config, "head_dim", None) or hidden //
# heads``; GemmaConfig / Gemma2Config default head_dim to 256 (Qwen3Config to 128), not hidden / heads.
_HEAD_DIM_CONSTANT = {"gemma": 256, "gemma2": 256, "qwen3": 128}
# LlamaConfig, Gemma2Config and GPTNeoXConfig.validate_architecture refuse hidden % heads != 0 even with head_dim.
_HEADS_MUST_DIVIDE = {"llama", "yi", "gemma2", "gpt_neox", "gpt2", "falcon"}
# tie_word_embeddings defaults of each config class.
_TIED_DEFAULT = {"gemma": True, "gemma2": True, "falcon": True, "gpt2": True}
# max_position_embeddings defaults (GPT-2: n_positions, read as learned positions and required).
_MAX_POS_DEFAULT = {"llama": 2048, "yi": 2048, "mistral": 131072, "mixtral": 131072, "qwen2": 32768,
                    "qwen2_moe": 32768, "gemma": 8192, "gemma2": 8192, "phi3": 4096, "qwen3": 32768, "falcon": 2048,
                    "gpt_neox": 2048}
_MISSING = object()


from ..core.errors import _short  # noqa: E402  (one way to shorten a value in a message)

@portable
def symbols_of(s, active):
    """Values of :mod:`vramlib.core.symbols` for a shape (``active``: only the routed-to experts count)."""
    experts = s["experts_per_token"] if active else s["n_experts"]
    return {"L": s["n_layers"], "h": s["hidden"], "n_h": s["n_heads"], "n_kv": s["n_kv_heads"], "d_head": s["head_dim"],
            "f": s["ffn"], "V": s["vocab"], "P": s["learned_positions"], "g": 1 if s["gated_mlp"] else 0,
            "n_mlp": (experts or 1) + s["n_shared_experts"], "E": s["n_experts"], "n_norm": s["norms_per_layer"],
            "beta_qkv": 1 if s["qkv_bias"] else 0, "beta_o": 1 if s["attn_out_bias"] else 0,
            "beta_mlp": 1 if s["mlp_bias"] else 0, "beta_norm": 1 if s["norm"] == "layernorm" else 0,
            "t_emb": 1 if s["tied_embeddings"] else 0}


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
      MODEL_GROUP_NAMES=list(F.MODEL_GROUPS), N_PARAMS=F.N_PARAMS)


@portable
def param_groups_of(m):
    """[[kind, parameters]] of a model view by tensor kind: every layer's LAYER_GROUPS x the layers, then the
    MODEL_GROUPS outside the layers (the final norm joins the layers' norms); sums to N_PARAMS."""
    out = []
    at = {}
    for kind in shared("LAYER_GROUP_NAMES"):
        at[kind] = len(out)
        out.append([kind, m["spec"]["n_layers"] * q_ceil(ev("LAYER_GROUPS", kind, m["sym"]))])
    for kind in shared("MODEL_GROUP_NAMES"):
        n = q_ceil(ev("MODEL_GROUPS", kind, m["sym"]))
        if kind in at:
            out[at[kind]][1] += n
        else:
            at[kind] = len(out)
            out.append([kind, n])
    return out


def _trim(value: Any) -> Any:
    """``value`` itself for an error message, or its shortened repr when that is long."""
    return value if len(repr(value)) <= 60 else _short(value)


class _Reader:
    """Typed access to one JSON object of a config (the top level or ``quantization_config``), every error one line
    naming ``prefix + key``. ``null`` reads as a missing size; flags must be JSON booleans."""

    def __init__(self, cfg: Mapping[str, Any], src: str, prefix: str = ""):
        self.cfg, self.src, self.prefix = cfg, src, prefix

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.prefix + key, problem, source=self.src)

    def integer(self, *keys: str, default: Any = _MISSING, minimum: int = 1, why: str = "") -> Any:
        """A size under one of ``keys`` (synonyms must agree); ``default`` when all are missing or null."""
        found: list[tuple[str, int]] = []
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not _is_integral(v) or not minimum <= int(v) <= _MAX_INT:
                kind = "positive" if minimum >= 1 else "non-negative"
                raise self.error(k, f"must be a {kind} JSON integer (at most {_MAX_INT}), got {_short(v)}")
            found.append((k, int(v)))
        self.agree(found, str)
        if found:
            return found[0][1]
        if default is _MISSING:
            raise self.error(keys[0], "missing" + (f"; {why}" if why else ""))
        return default

    def agree(self, found: list[tuple[str, Any]], show) -> None:
        """Synonym keys (``n_embd``/``hidden_size``) must carry one value; else a one-line ConfigError."""
        if len({v for _, v in found}) > 1:
            raise ConfigError("/".join(self.prefix + k for k, _ in found), "contradictory values "
                              + ", ".join(f"{k}={show(v)}" for k, v in found), source=self.src)

    def flag(self, *keys: str, default: bool) -> bool:
        """A JSON boolean under one of ``keys`` (synonyms must agree); ``default`` when every key is absent."""
        found: list[tuple[str, bool]] = []
        for k in keys:
            if k not in self.cfg:
                continue
            v = self.cfg[k]
            if not _is_bool(v):
                hint = ("; write true or false without quotes" if isinstance(v, str)
                        else "; null is refused (transformers 5 refuses it too)" if v is None else "")
                raise self.error(k, f"must be a JSON boolean true or false, got {_short(v)}{hint}")
            found.append((k, bool(v)))
        self.agree(found, lambda v: str(v).lower())
        return found[0][1] if found else default

    def text(self, *keys: str, default: Any = _MISSING) -> Any:
        """A string under one of ``keys`` (lower-cased; synonyms must agree); ``default`` when missing or null."""
        found = []
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if not isinstance(v, str):
                raise self.error(k, f"must be a string, got {_short(v)}")
            found.append((k, v.strip().lower()))
        self.agree(found, repr)
        if found:
            return found[0][1]
        if default is _MISSING:
            raise self.error(keys[0], "missing")
        return default


def _is_bool(value: Any) -> bool:
    """A Python bool or a numpy boolean scalar (``numpy.bool_``); not 0/1, not "false"."""
    return isinstance(value, bool) or (getattr(value, "dtype", None) is not None
                                       and getattr(value.dtype, "kind", "") == "b" and getattr(value, "shape", 1) == ())


def _is_integral(value: Any) -> bool:
    import numbers

    return isinstance(value, numbers.Integral)


def _load_json(path: Path) -> tuple[Any, str]:
    """Parse a config.json file (UTF-8, UTF-8 with BOM, UTF-16/32 with or without BOM); one-line errors."""
    src = str(path)
    try:
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise ConfigError("path", f"directory {src!r} has no config.json", source="config.json")
            path = path / "config.json"
            src = str(path)
        if not path.exists():
            raise ConfigError("path", f"no such file {src!r}", source="config.json")
        if not path.is_file():
            raise ConfigError("path", f"{src!r} is not a regular file", source="config.json")
        size = path.stat().st_size
        if size > _MAX_CONFIG_BYTES:
            raise ConfigError("path", f"{size:,} bytes is not a config.json (at most {_MAX_CONFIG_BYTES:,})",
                              source=src)
        raw = path.read_bytes()
    except (OSError, ValueError) as e:  # permissions, a name too long, a NUL byte in the path ...
        if isinstance(e, VramlibError):
            raise
        raise ConfigError("path", f"cannot read {src!r} ({type(e).__name__}: {e})", source="config.json") from None
    if not raw.strip():
        raise ConfigError("json", "the file is empty", source=src)
    encoding = json.detect_encoding(raw)  # BOMs and UTF-16/32 without BOM, as json.loads(bytes) does
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise ConfigError("encoding", f"not valid {encoding} text ({e.reason} at byte {e.start})", source=src) from None
    return _parse_json(text, src), src


def _parse_json(text: str, src: str) -> Any:
    def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in pairs:
            if k in seen:  # json keeps the last silently; a config that says two things is refused
                raise ConfigError(k, "appears twice in one JSON object (which one is meant?)", source=src)
            seen[k] = v
        return seen

    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise ConfigError("json", f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})", source=src) from None
    except RecursionError:
        raise ConfigError("json", "nested too deeply to be a config.json", source=src) from None


def _from_hf_config(config: str | Path | Mapping[str, Any], name: str | None) -> ModelSpec:
    cfg, src = _config_mapping(config, name)
    r = _Reader(cfg, src)
    family = _config_family(r)
    hidden, layers, heads, size_keys = _config_sizes(r, family)
    vocab = r.integer("vocab_size")
    checkpoint = _checkpoint_format(cfg, src)
    head_dim_of = functools.partial(_derived_head_dim, hidden, heads, f"{size_keys[0]}/{size_keys[2]}", src)
    if family in _HEADS_MUST_DIVIDE:
        head_dim_of()
    if family in _LLAMA_LIKE:
        kv, head_dim, ffn, kw = _llama_like_layers(r, family, layers, heads, head_dim_of)
    elif family == "falcon":
        kv, head_dim, ffn, kw = _falcon_layers(r, hidden, heads, head_dim_of)
    elif family == "gpt_neox":
        kv, head_dim, ffn, kw = _gpt_neox_layers(r, heads, head_dim_of)
    else:
        kv, head_dim, ffn, kw = _gpt2_layers(r, hidden, heads, head_dim_of)
    if heads % kv:
        raise ConfigError("num_key_value_heads", f"{kv} does not divide num_attention_heads={heads} "
                          f"(allowed: {_divisors(heads)})", source=src)
    if family == "gpt2":
        max_ctx = kw["learned_positions"]
    else:
        max_ctx = r.integer("max_position_embeddings", default=_MAX_POS_DEFAULT[family])
    label, source = _config_label(r, name)
    try:
        return ModelSpec(name=label or family, n_layers=layers, hidden=hidden, n_heads=heads, n_kv_heads=kv,
                         head_dim=head_dim, ffn=ffn, vocab=vocab, max_context=max_ctx, family=family, source=source,
                         checkpoint_format=checkpoint, **kw)
    except VramlibError as e:
        raise ConfigError(getattr(e, "field", "config"), str(e), source=src) from None


def _config_mapping(config: str | Path | Mapping[str, Any], name: str | None) -> tuple[dict, str]:
    """The config as a dict and where it came from ("config" for a dict); one-line errors for anything else."""
    if name is not None and not isinstance(name, str):
        raise InvalidValueError("name", name, "must be a string or None")
    src = "config"
    if isinstance(config, (str, Path)):
        if isinstance(config, str) and config.lstrip().startswith("{"):
            raise InvalidValueError("config", _trim(config), "give a config.json path or a dict; this looks like "
                                    "JSON text (json.loads it first)")
        cfg, src = _load_json(Path(config))
    elif isinstance(config, Mapping):
        cfg = config
    else:
        raise InvalidValueError("config", type(config).__name__, "give a config.json path or a dict")
    if not isinstance(cfg, Mapping):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(cfg), "number")
        raise ConfigError("config", f"must be a JSON object {{...}}, got a JSON {kind}", source=src)
    return dict(cfg), src


def _config_family(r: _Reader) -> str:
    """The architecture family from ``model_type`` (RefinedWeb* reads as Falcon); refused when not modelled."""
    mt = r.cfg.get("model_type")
    if mt is None:
        raise r.error("model_type", "missing; cannot tell the architecture")
    if not isinstance(mt, str):
        raise r.error("model_type", f"must be a string such as 'llama', got {_short(mt)}")
    if mt not in _FAMILIES:
        raise UnknownNameError(f"{r.src}: model_type", mt, _FAMILIES)
    family = "falcon" if mt.startswith("Refined") else mt
    if family == "qwen3":
        raise r.error("model_type", "qwen3: the per-head q_norm/k_norm weights (2 x head_dim per layer) are not "
                                    "modelled yet")
    return family


def _config_sizes(r: _Reader, family: str) -> tuple[int, int, int, tuple[str, str, str]]:
    """Hidden size, layers and heads, and the keys they were read under (hidden, layers, heads)."""
    # sizes every family has (GPT-2 and Falcon's older names: GPT2Config.attribute_map, FalconConfig n_embed,
    # RefinedWeb remote-code n_layer / n_head / n_head_kv)
    hidden_keys = {"gpt2": ("n_embd", "hidden_size"), "falcon": ("hidden_size", "n_embed")}.get(
        family, ("hidden_size",))
    layer_keys = {"gpt2": ("n_layer", "num_hidden_layers"), "falcon": ("num_hidden_layers", "n_layer")}.get(
        family, ("num_hidden_layers",))
    head_keys = {"gpt2": ("n_head", "num_attention_heads"), "falcon": ("num_attention_heads", "n_head")}.get(
        family, ("num_attention_heads",))
    hidden = r.integer(*hidden_keys, why="the hidden size is not guessed")
    layers = r.integer(*layer_keys)
    heads = r.integer(*head_keys)
    # Other families' names for the same sizes are not read (transformers ignores them), but a config that states
    # two different hidden sizes is contradictory, not silently resolved.
    cfg, read = r.cfg, hidden_keys + layer_keys + head_keys
    for keys, value in ((("n_embd", "n_embed", "d_model"), hidden), (("n_layer", "num_layers"), layers),
                        (("n_head",), heads)):
        for k in keys:
            other = cfg.get(k)
            if other is not None and other != value and k not in read:
                first = next(x for x in read if cfg.get(x) is not None and cfg.get(x) == value)
                raise ConfigError(f"{first}/{k}", f"contradictory values {first}={value}, {k}={_short(other)}",
                                  source=r.src)
    return hidden, layers, heads, (hidden_keys[0], layer_keys[0], head_keys[0])


def _derived_head_dim(hidden: int, heads: int, field: str, src: str) -> int:
    """hidden / heads, refused (naming ``field``, with nearby head counts) when it is not a whole number."""
    if hidden % heads:
        raise ConfigError(field, f"hidden size {hidden} is not divisible by {heads} attention heads, so head_dim = "
                          f"hidden / heads is not a whole number (e.g. heads {_divisors_near(hidden, heads)})",
                          source=src)
    return hidden // heads


def _llama_like_layers(r: _Reader, family: str, layers: int, heads: int, head_dim_of) -> tuple[int, int, int, dict]:
    """KV heads, head dim, MLP width and the other ModelSpec fields of a Llama-like family (gated MLP, RMSNorm)."""
    if family in _KV_CONSTANT:
        kv = r.integer("num_key_value_heads", why=f"transformers' {family} config would default it to "
                       f"{_KV_CONSTANT[family]} (its reference model), not num_attention_heads; give it")
    else:
        kv = r.integer("num_key_value_heads", default=heads)
    if family in _HEAD_DIM_CONSTANT:
        head_dim = r.integer("head_dim", why=f"transformers' {family} config would default it to "
                             f"{_HEAD_DIM_CONSTANT[family]}, not hidden_size / num_attention_heads; give it")
    else:
        head_dim = r.integer("head_dim", default=None)
        head_dim = head_dim_of() if head_dim is None else head_dim
    tied = r.flag("tie_word_embeddings", default=_TIED_DEFAULT.get(family, False))
    # Biases, as each modeling file builds them: Llama/Yi/Gemma/Gemma-2 q, k, v and o follow attention_bias
    # (and Llama's MLP mlp_bias); Qwen2 always has q/k/v biases and none on o; Qwen2-MoE's q/k/v follow
    # qkv_bias (default true); Mistral, Mixtral and Phi-3 build no biases whatever the config says.
    qkv_bias = out_bias = mlp_bias = False
    if family in ("llama", "yi", "gemma", "gemma2"):
        qkv_bias = out_bias = r.flag("attention_bias", default=False)
    if family in ("llama", "yi"):
        mlp_bias = r.flag("mlp_bias", default=False)
    if family == "qwen2":
        qkv_bias = True
    ffn = None
    if family == "qwen2_moe":
        qkv_bias = r.flag("qkv_bias", default=True)
        ffn = _qwen2_moe_dense_ffn(r, layers)
    if ffn is None:
        ffn = r.integer("intermediate_size", why="the MLP width is not guessed")
    kw = dict(gated_mlp=True, qkv_bias=qkv_bias, attn_out_bias=out_bias, mlp_bias=mlp_bias, tied_embeddings=tied,
              norms_per_layer=4 if family == "gemma2" else 2,
              fused_qkv=family == "phi3", fused_gate_up=family == "phi3")
    if family == "mixtral":  # MixtralConfig.attribute_map: num_experts -> num_local_experts
        n_exp = r.integer("num_local_experts", "num_experts",
                          why="a Mixtral without its expert count is not read as dense (transformers' "
                              "MixtralConfig would default it to 8)")
        k_exp = r.integer("num_experts_per_tok", why="transformers' MixtralConfig would default it to 2")
        if k_exp > n_exp:
            raise r.error("num_experts_per_tok", f"{k_exp} is more than num_local_experts={n_exp}")
        kw.update(n_experts=n_exp, experts_per_token=k_exp)
    return kv, head_dim, ffn, kw


def _falcon_layers(r: _Reader, hidden: int, heads: int, head_dim_of) -> tuple[int, int, int, dict]:
    """Falcon (and RefinedWeb): KV heads by architecture, LayerNorms by parallel_attn, fused QKV."""
    new_arch = r.flag("new_decoder_architecture", default=False)
    multi_query = r.flag("multi_query", default=True)
    if r.flag("alibi", default=False):
        raise r.error("alibi", "ALiBi Falcon variants are not modelled")
    head_dim = head_dim_of()
    # FalconAttention: the new architecture has num_kv_heads K/V heads (null -> heads), the old one 1 (multi-query)
    # or num_attention_heads.
    if new_arch:
        kv = r.integer("num_kv_heads", "n_head_kv", default=heads)
    else:
        kv = 1 if multi_query else heads
    ffn = r.integer("ffn_hidden_size", default=4 * hidden)
    bias = r.flag("bias", default=False)
    parallel = r.flag("parallel_attn", default=True)
    # FalconDecoderLayer: two LayerNorms unless parallel_attn, where num_ln_in_parallel_attn (null -> 2 for the
    # new architecture) picks ln_attn + ln_mlp (2) or one input_layernorm (anything else; only 1 or 2 are read).
    n_ln = r.integer("num_ln_in_parallel_attn", default=2 if new_arch else 1)
    if n_ln not in (1, 2):
        raise r.error("num_ln_in_parallel_attn", f"got {n_ln}; must be 1 or 2")
    kw = dict(gated_mlp=False, qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
              tied_embeddings=r.flag("tie_word_embeddings", default=True), norm="layernorm",
              norms_per_layer=2 if not parallel else n_ln, fused_qkv=True)
    return kv, head_dim, ffn, kw


def _gpt_neox_layers(r: _Reader, heads: int, head_dim_of) -> tuple[int, int, int, dict]:
    """GPT-NeoX: multi-head attention, a LayerNorm MLP of intermediate_size, fused QKV."""
    kv, head_dim = heads, head_dim_of()
    ffn = r.integer("intermediate_size", why="transformers' GPTNeoXConfig would default it to 24576 "
                                             "(GPT-NeoX-20B's), not 4 x hidden; give it")
    bias = r.flag("attention_bias", default=True)
    kw = dict(gated_mlp=False, qkv_bias=bias, attn_out_bias=bias, mlp_bias=True,
              tied_embeddings=r.flag("tie_word_embeddings", default=False), norm="layernorm", fused_qkv=True)
    return kv, head_dim, ffn, kw


def _gpt2_layers(r: _Reader, hidden: int, heads: int, head_dim_of) -> tuple[int, int, int, dict]:
    """GPT-2: multi-head attention, MLP n_inner (4 x hidden), a learned position table, no cross-attention."""
    kv, head_dim = heads, head_dim_of()
    ffn = r.integer("n_inner", default=4 * hidden)  # GPT2MLP: n_inner if not None else 4 * n_embd
    if r.flag("add_cross_attention", default=False):
        raise r.error("add_cross_attention", "true adds cross-attention blocks, which are not modelled")
    positions = r.integer("n_positions", "max_position_embeddings",
                          why="GPT-2's learned position table is counted from it")
    kw = dict(gated_mlp=False, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
              tied_embeddings=r.flag("tie_word_embeddings", default=True), norm="layernorm",
              learned_positions=positions, fused_qkv=True)
    return kv, head_dim, ffn, kw


def _config_label(r: _Reader, name: str | None) -> tuple[str | None, str]:
    """The spec's name (``name``, else ``_name`` / ``_name_or_path``) and source (``_source``, else the file)."""
    cfg, label = r.cfg, name
    for key in ("_name", "_name_or_path"):
        if label is None and cfg.get(key) is not None:
            if not isinstance(cfg[key], str):
                raise r.error(key, f"must be a string, got {_short(cfg[key])}")
            label = cfg[key] or None
    source = cfg.get("_source", r.src)
    if not isinstance(source, str):
        raise r.error("_source", f"must be a string, got {_short(source)}")
    return label, source


def _qwen2_moe_dense_ffn(r: _Reader, layers: int) -> int | None:
    """Qwen2-MoE: the MLP width when no layer is sparse (then every layer is a Qwen2MoeMLP of intermediate_size),
    else a one-line refusal. Qwen2MoeDecoderLayer makes layer i sparse when i is not in mlp_only_layers and
    num_experts > 0 and (i + 1) % decoder_sparse_step == 0; each sparse layer adds a shared expert and a
    shared_expert_gate (Qwen2MoeSparseMoeBlock), which ModelSpec's identical-experts count cannot hold."""
    n_exp = r.integer("num_experts", minimum=0, why="a Qwen2-MoE without its expert count is not read as dense "
                                                    "(transformers' Qwen2MoeConfig would default it to 60)")
    step = r.integer("decoder_sparse_step", default=1)
    only = r.cfg.get("mlp_only_layers")
    only = [] if only is None else only
    if not isinstance(only, list) or not all(_is_integral(i) and not isinstance(i, bool) for i in only):
        raise r.error("mlp_only_layers", f"must be a list of layer indices, got {_short(only)}")
    sparse = [i for i in range(layers) if i not in only and n_exp > 0 and (i + 1) % step == 0]
    if not sparse:
        return None
    for key in ("num_experts_per_tok", "moe_intermediate_size"):
        r.integer(key, why="a Qwen2-MoE expert layer cannot be read without it")
    shared = r.integer("shared_expert_intermediate_size", minimum=0,
                       why="a Qwen2-MoE expert layer cannot be read without it")
    raise r.error("model_type", f"qwen2_moe: shared experts are not modelled yet ({len(sparse)} of {layers} layers "
                                f"add a shared expert of shared_expert_intermediate_size={shared} and a "
                                f"shared_expert_gate beside the {n_exp} routed experts)")


# --- quantization_config -> checkpoint_format ---------------------------------------------------------------
_QUANT_SUPPORTED = ("gptq (2, 3, 4 or 8 bits, a positive group_size), awq (gemm, zero point), "
                    "bitsandbytes 4-bit (nf4 or fp4, with or without double quant)")
_QUANT_KNOWN = ("aqlm", "auto-round", "awq", "bitnet", "bitsandbytes", "compressed-tensors", "eetq", "fbgemm_fp8",
                "fouroversix", "fp8", "fp_quant", "gemma", "gguf", "gptq", "higgs", "hqq", "metal", "mxfp4", "mxfp8",
                "nvfp4", "quanto", "quark", "sinq", "spqr", "torchao", "vptq")
"""transformers 5.24 QuantizationMethod values (utils/quantization_config.py)."""
_UNQUANTIZED_OK = {"lm_head"}
"""Modules a checkpoint may keep unquantized that the catalogue's formats keep in 16 bits anyway."""


def _checkpoint_format(cfg: Mapping[str, Any], src: str) -> str | None:
    """The precision name of the checkpoint's storage, from ``quantization_config`` (None when there is none)."""
    if cfg.get("compression_config") is not None:  # the older name of a compressed-tensors quantization_config
        raise ConfigError("compression_config", "compressed-tensors checkpoints are not mapped to the precision "
                          f"catalogue; supported quantization: {_QUANT_SUPPORTED}", source=src)
    qc = cfg.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise ConfigError("quantization_config", f"must be a JSON object, got {_short(qc)}", source=src)
    q = _Reader(qc, src, prefix="quantization_config.")
    method, load4, load8 = _quant_method(q)
    if method == "gptq":
        return _gptq_format(q)
    if method == "awq":
        return _awq_format(q)
    if method == "bitsandbytes":
        return _bitsandbytes_format(q, load4, load8)
    raise _unpriced_method(method, src)


_QUANT_FIELD = "quantization_config.quant_method"


def _quant_method(q: _Reader) -> tuple[str, bool, bool]:
    """``quant_method`` (bitsandbytes when load_in_4bit / load_in_8bit say so, as AutoQuantizationConfig.from_dict
    reads them) and the two load flags."""
    load4 = q.flag("load_in_4bit", "_load_in_4bit", default=False)
    load8 = q.flag("load_in_8bit", "_load_in_8bit", default=False)
    method = q.text("quant_method", default=None)
    if load4 or load8:
        if method not in (None, "bitsandbytes"):
            raise ConfigError(_QUANT_FIELD, f"{method!r} contradicts load_in_{'4' if load4 else '8'}bit=true "
                              "(a bitsandbytes setting)", source=q.src)
        method = "bitsandbytes"
    if method is None:
        raise ConfigError(_QUANT_FIELD, f"missing; cannot tell the checkpoint's storage format (supported: "
                          f"{_QUANT_SUPPORTED})", source=q.src)
    return method, load4, load8


def _keeps_only_lm_head(q: _Reader, *keys: str) -> None:
    """The modules the checkpoint keeps unquantized (under ``keys``) must be ones the catalogue keeps in 16 bits."""
    for key in keys:
        mods = q.cfg.get(key)
        if mods is None or mods == []:
            continue
        if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
            raise q.error(key, f"must be a list of module names, got {_short(mods)}")
        extra = [m for m in mods if m.split(".")[-1] not in _UNQUANTIZED_OK]
        if extra:
            raise q.error(key, f"keeps {_short(extra)} unquantized, which the precision catalogue's formats do "
                               "not model (they keep embeddings, lm_head, norms, biases and routers in 16 bits)")


def _group_format(q: _Reader, kind: str, bits: int, group: int) -> str:
    """The catalogue's ``{kind}-{bits}bit-g{group}`` format (bits 2, 3, 4 or 8; a positive group size)."""
    if bits not in (2, 3, 4, 8):
        raise q.error("bits", f"got {bits}; the precision catalogue's {kind} formats take 2, 3, 4 or 8 bits")
    if group == -1:
        raise q.error("group_size", "-1 (one group per column) is not in the precision catalogue; its "
                      f"{kind} formats need a group size such as 32, 64 or 128")
    if group <= 0:
        raise q.error("group_size", f"got {group}; must be a positive group size or -1")
    return get_precision(f"{kind}-{bits}bit-g{group}", field=_QUANT_FIELD).name


def _signed(q: _Reader, key: str, *more: str, default: Any = _MISSING) -> int:
    """An integer that may be negative (group_size may be -1)."""
    return q.integer(key, *more, default=default, minimum=-(2**31))


def _gptq_format(q: _Reader) -> str:
    """GPTQConfig(bits, group_size=128, format="gptq"; legacy checkpoint_format), every module quantized."""
    bits = q.integer("bits", why="GPTQConfig has no default for it")
    group = _signed(q, "group_size", default=128)
    fmt = q.text("checkpoint_format", "format", default="gptq")
    if fmt not in ("gptq", "gptq_v2"):
        raise q.error("checkpoint_format", f"{fmt!r} packs differently from the catalogue's gptq formats "
                                           "(supported: 'gptq', 'gptq_v2')")
    for key in ("modules_in_block_to_quantize", "dynamic"):
        if q.cfg.get(key) not in (None, [], {}):
            raise q.error(key, "quantizes only some modules, which the precision catalogue does not model")
    _keeps_only_lm_head(q, "modules_to_not_convert")
    return _group_format(q, "gptq", bits, group)


def _awq_format(q: _Reader) -> str:
    """AwqConfig(bits=4, group_size=128, zero_point=True, format/version="gemm"); AutoAWQ's w_bit, q_group_size."""
    bits = q.integer("bits", "w_bit", default=4)
    group = _signed(q, "group_size", "q_group_size", default=128)
    if not q.flag("zero_point", default=True):
        raise q.error("zero_point", "false (no zero points) is not in the precision catalogue, whose awq formats "
                                    "store a zero point per group")
    fmt = q.text("version", "format", default="gemm")
    if fmt != "gemm":
        raise q.error("version", f"{fmt!r} pads or packs differently from the catalogue's awq formats "
                                 "(supported: 'gemm')")
    _keeps_only_lm_head(q, "modules_to_not_convert")
    return _group_format(q, "awq", bits, group)


def _bitsandbytes_format(q: _Reader, load4: bool, load8: bool) -> str:
    """bitsandbytes 4-bit: nf4 or nf4-dq (FP4 stores the same bytes); 8-bit has no exact format."""
    if load4 and load8:  # BitsAndBytesConfig raises for both
        raise ConfigError("quantization_config.load_in_4bit/load_in_8bit", "both are true; only one can be",
                          source=q.src)
    if load8:
        raise q.error("load_in_8bit", "bitsandbytes 8-bit (LLM.int8: int8 weights, fp32 row scales, 16-bit "
                      "embeddings) has no exact format in the precision catalogue, whose 'int8' stores every "
                      "tensor in 8 bits; pass weights='int8' for that idealised figure (supported: "
                      f"{_QUANT_SUPPORTED})")
    if not load4:
        raise q.error("load_in_4bit", "neither load_in_4bit nor load_in_8bit is true; cannot tell the storage")
    qtype = q.text("bnb_4bit_quant_type", default="fp4")  # BitsAndBytesConfig default
    if qtype not in ("nf4", "fp4"):
        raise UnknownNameError(f"{q.src}: quantization_config.bnb_4bit_quant_type", qtype, ("nf4", "fp4"))
    double = q.flag("bnb_4bit_use_double_quant", default=False)
    _keeps_only_lm_head(q, "llm_int8_skip_modules", "modules_to_not_convert")
    # FP4 and NF4 differ only in the 16-value code book: both store 4-bit codes in blocks of 64 with an fp32
    # absmax (bitsandbytes quantize_4bit, blocksize 64), so both are priced as the catalogue's nf4 / nf4-dq.
    return "nf4-dq" if double else "nf4"


def _unpriced_method(method: str, src: str) -> ConfigError:
    """The one-line refusal of a quantization method the catalogue has no exact format for (close matches for an
    unknown name)."""
    if method in ("fp8", "fbgemm_fp8", "mxfp8"):
        return ConfigError(_QUANT_FIELD, f"{method!r}: FP8 checkpoints keep embeddings and lm_head in 16 bits and "
                           "carry scales, which the catalogue's fp8-e4m3 (every tensor in 8 bits) does not; not priced "
                           f"as shipped (supported: {_QUANT_SUPPORTED})", source=src)
    if method in _QUANT_KNOWN:
        return ConfigError(_QUANT_FIELD, f"{method!r} has no exact format in the precision catalogue (supported: "
                           f"{_QUANT_SUPPORTED})", source=src)
    import difflib

    close = difflib.get_close_matches(method, _QUANT_KNOWN, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    return ConfigError(_QUANT_FIELD, f"unknown method {_short(method)}; {hint}supported: {_QUANT_SUPPORTED}",
                       source=src)


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
