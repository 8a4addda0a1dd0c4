"""Reading a Hugging Face ``config.json``: the ModelSpec fields of each architecture family, as transformers builds it.

How each family's config is read follows transformers 5.24 (``models/<family>/configuration_<family>.py`` for the
defaults, ``modeling_<family>.py`` for which keys build which tensors, ``cache_utils.get_layer_types_and_kwargs`` for
which layers keep a window); :func:`read_hf_config` returns the keyword arguments of
:class:`vramlib.catalog.models.ModelSpec`, which ``ModelSpec.from_hf_config`` builds. Every bad input is one line
naming the key. Used in: chapters 1, 5, 7, 12, 13 (through the catalogue) and ``vramlib fit --config``.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ConfigError, InvalidValueError, UnknownNameError, VramlibError, _short
from .precision import get_precision
def _divisors_near(n: int, k: int) -> str:
    divs = sorted((x for x in range(1, min(n, 1024) + 1) if n % x == 0), key=lambda x: abs(x - k))[:4]
    return ", ".join(str(x) for x in sorted(divs))


def _divisors(n: int) -> str:
    return ", ".join(str(k) for k in range(1, n + 1) if n % k == 0)


# --- Hugging Face config.json -----------------------------------------------------------------------
# How each family's config is read follows transformers 5.24 (models/<family>/configuration_<family>.py for the
# defaults, modeling_<family>.py for which keys build which tensors); the catalogue's counts equal what it builds.
_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3", "yi", "qwen3",
               "qwen3_moe", "gemma3_text", "olmo2", "cohere", "cohere2", "granite", "granitemoe", "phimoe", "gpt_oss",
               "llama4_text", "deepseek_v2", "deepseek_v3"}
_MULTIMODAL = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral"}
"""Image-text configs whose ``text_config`` is read (the vision tower and projector are not counted, and say so)."""
_FAMILIES = sorted(_LLAMA_LIKE | set(_MULTIMODAL) | {"falcon", "gpt_neox", "gpt2", "RefinedWebModel", "RefinedWeb",
                                                       "bamba", "kimi_k2"})

_ALIASES = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon", "kimi_k2": "deepseek_v3"}
"""Model types read as another family: RefinedWeb is the Falcon of remote code; Kimi-K2's remote-code model is
DeepSeek-V3's (its config names ``architectures: ["DeepseekV3ForCausalLM"]`` and ``auto_map`` to
``modeling_deepseek.DeepseekV3ForCausalLM``; vLLM serves it with that class)."""
_ARCHITECTURE_ALIASES = {"kimi_k2": "DeepseekV3ForCausalLM"}
_MAX_INT = 2**31 - 1
"""Largest size a config may give (no tensor dimension of a real model comes near it; 1e20 is a typo, not a model)."""
_MAX_CONFIG_BYTES = 16 * 2**20
"""A config.json is a few kB; anything past this is the wrong file (a safetensors shard ...)."""

# Attention heads: transformers derives num_key_value_heads = num_attention_heads when the key is missing or null
# for Llama, Phi-3, Yi, OLMo-2, Cohere, Cohere-2, Granite, Granite-MoE and DeepSeek-V2 (their __post_init__); the
# other config classes default it to their reference model's constant, which is refused (Bamba: 8 when missing,
# num_attention_heads when null; both refused).
_KV_CONSTANT = {"mistral": 8, "mixtral": 8, "qwen2": 32, "qwen2_moe": 16, "gemma": 16, "gemma2": 4, "qwen3": 32,
                "qwen3_moe": 4, "gemma3_text": 4, "llama4_text": 8, "gpt_oss": 8, "deepseek_v3": 128, "phimoe": 8,
                "bamba": 8}
# head_dim: most attentions use ``getattr(config, "head_dim", None) or hidden // heads``; these config classes
# default head_dim to a constant instead (printed by AutoConfig.for_model(family, hidden_size=256,
# num_attention_heads=8)).
_HEAD_DIM_CONSTANT = {"gemma": 256, "gemma2": 256, "qwen3": 128, "gemma3_text": 256, "llama4_text": 128,
                      "gpt_oss": 64}
# LlamaConfig, Gemma2Config, Gemma3TextConfig and GPTNeoXConfig.validate_architecture refuse hidden % heads != 0.
_HEADS_MUST_DIVIDE = {"llama", "yi", "gemma2", "gpt_neox", "gpt2", "falcon", "gemma3_text"}
# tie_word_embeddings defaults of each config class.
_TIED_DEFAULT = {"gemma": True, "gemma2": True, "falcon": True, "gpt2": True, "gemma3_text": True, "cohere": True,
                 "cohere2": True}
# max_position_embeddings defaults (GPT-2: n_positions, read as learned positions and required).
_MAX_POS_DEFAULT = {"llama": 2048, "yi": 2048, "mistral": 131072, "mixtral": 131072, "qwen2": 32768,
                    "qwen2_moe": 32768, "gemma": 8192, "gemma2": 8192, "phi3": 4096, "qwen3": 32768, "falcon": 2048,
                    "gpt_neox": 2048, "qwen3_moe": 32768, "gemma3_text": 131072, "olmo2": 2048, "cohere": 8192,
                    "cohere2": 8192, "granite": 2048, "granitemoe": 2048, "phimoe": 131072, "gpt_oss": 131072,
                    "llama4_text": 131072, "deepseek_v2": 2048, "deepseek_v3": 4096, "bamba": 262144}
# Norms per layer: Gemma-2/3 four (pre and post attention and MLP), Cohere one (parallel attention and MLP), the
# rest two (OLMo-2's two are after attention and after the MLP).
_NORMS_PER_LAYER = {"gemma2": 4, "gemma3_text": 4, "cohere": 1, "cohere2": 1}
# q/k norms: Qwen3 and Gemma-3 RMSNorm(head_dim) on q and on k; OLMo-2 RMSNorm over all q (n_h d) and all k (n_kv d);
# Cohere (use_qk_norm) LayerNorm weights of (heads, head_dim); Llama-4's is an L2 norm without weights.
_QK_NORM = {"qwen3": "head", "qwen3_moe": "head", "gemma3_text": "head", "olmo2": "full"}
# Families whose q, k, v and o follow attention_bias.
_ATTENTION_BIAS = {"llama", "yi", "gemma", "gemma2", "qwen3", "qwen3_moe", "gemma3_text", "olmo2", "cohere", "cohere2",
                   "granite", "granitemoe", "phimoe", "gpt_oss", "llama4_text"}
# Sliding windows: families whose attention has one, the window constant their config class fills in when the key
# is missing (refused), and the Qwen families where use_sliding_window decides.
_WINDOWED = {"mistral", "mixtral", "phi3", "phimoe", "gemma2", "gemma3_text", "cohere2", "gpt_oss"}
_WINDOW_CONSTANT = {"mistral": 4096, "gemma2": 4096, "gemma3_text": 4096, "cohere2": 4096, "gpt_oss": 128,
                    "qwen2": 4096, "qwen3": 4096, "qwen2_moe": 4096, "qwen3_moe": 4096, "llama4_text": 8192}
_USES_WINDOW_FLAG = {"qwen2", "qwen3", "qwen2_moe", "qwen3_moe"}
# Layer patterns without layer_types: sliding unless (i + 1) % n == 0 (config __post_init__; Gemma-3 and Cohere-2
# read the older sliding_window_pattern key).
_PATTERN_EVERY = {"gemma2": 2, "gpt_oss": 2, "cohere2": 4, "gemma3_text": 6}
# MoE: the expert-count keys (synonyms), which families size experts by moe_intermediate_size, and the dense
# layers' width key where it is not intermediate_size.
_MOE_KEYS = {"mixtral": ("num_local_experts", "num_experts"), "qwen2_moe": ("num_experts",),
             "qwen3_moe": ("num_experts", "num_local_experts"), "granitemoe": ("num_local_experts",),
             "phimoe": ("num_local_experts",), "gpt_oss": ("num_local_experts", "num_experts"),
             "llama4_text": ("num_local_experts",), "deepseek_v2": ("n_routed_experts",),
             "deepseek_v3": ("n_routed_experts",)}
_MOE_WIDTH_KEY = {"qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"}
_DENSE_WIDTH_KEY = {"llama4_text": "intermediate_size_mlp"}
# What a shipped config may leave to its config class: the Gemma-3 checkpoints' text_config names only a few sizes
# and relies on Gemma3TextConfig's (transformers 5.24) for the rest; these are filled in and named in the source.
_CLASS_DEFAULTS = {"gemma3_text": {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4,
                                   "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096}}
_MISSING = object()



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


def read_hf_config(config: str | Path | Mapping[str, Any], name: str | None) -> tuple[dict[str, Any], str]:
    """The ModelSpec fields a config.json (a path, a model directory or a dict) describes, and where it came from;
    every bad input is one line naming the key."""
    top, src = _config_mapping(config, name)
    cfg, outer = _language_model_config(top, src)
    prefix = "text_config." if outer else ""  # an image-text config: its language model's keys, named as nested
    family = _config_family(_Reader(cfg, src, prefix))
    cfg, filled = _with_class_defaults(cfg, family)
    r = _Reader(cfg, src, prefix)
    hidden, layers, heads, size_keys = _config_sizes(r, family)
    vocab = r.integer("vocab_size")
    checkpoint = _checkpoint_format(top, src)
    head_dim_of = functools.partial(_derived_head_dim, hidden, heads, f"{size_keys[0]}/{size_keys[2]}", src)
    if family in _HEADS_MUST_DIVIDE:
        head_dim_of()
    if family in _LLAMA_LIKE:
        kv, head_dim, ffn, kw = _llama_like_layers(r, family, layers, heads, head_dim_of)
    elif family == "falcon":
        kv, head_dim, ffn, kw = _falcon_layers(r, hidden, heads, head_dim_of)
    elif family == "gpt_neox":
        kv, head_dim, ffn, kw = _gpt_neox_layers(r, heads, head_dim_of)
    elif family == "bamba":
        kv, head_dim, ffn, kw = _bamba_layers(r, hidden, layers, heads, head_dim_of)
    else:
        kv, head_dim, ffn, kw = _gpt2_layers(r, hidden, heads, head_dim_of)
    if heads % kv:
        raise ConfigError("num_key_value_heads", f"{kv} does not divide num_attention_heads={heads} "
                          f"(allowed: {_divisors(heads)})", source=src)
    if family == "gpt2":
        max_ctx = kw["learned_positions"]
    else:
        max_ctx = r.integer("max_position_embeddings", default=_MAX_POS_DEFAULT[family])
    label, source = _config_label(_Reader(top, src), name)
    if filled:
        source += f"; filled in from transformers' {family} config class: " + ", ".join(
            f"{k}={v}" for k, v in filled.items())
    if outer:
        kw["text_only_of"] = f"{outer} (the language model; the vision tower and projector are not counted)"
    return dict(name=label or family, n_layers=layers, hidden=hidden, n_heads=heads, n_kv_heads=kv, head_dim=head_dim,
                ffn=ffn, vocab=vocab, max_context=max_ctx, family=family, source=source, checkpoint_format=checkpoint,
                **kw), src


def _language_model_config(cfg: dict, src: str) -> tuple[dict, str | None]:
    """An image-text config's ``text_config`` (with the model type its text model has) and the outer model type;
    any other config and None."""
    mt = cfg.get("model_type")
    if not isinstance(mt, str) or mt not in _MULTIMODAL:
        return cfg, None
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        raise ConfigError("text_config", f"{mt}: must be a JSON object with the language model's sizes, got "
                          f"{_short(text)}", source=src)
    text = dict(text)
    if text.setdefault("model_type", _MULTIMODAL[mt]) != _MULTIMODAL[mt]:
        raise ConfigError("text_config.model_type", f"{mt} reads a {_MULTIMODAL[mt]} language model, got "
                          f"{_short(text['model_type'])}", source=src)
    return text, mt


def _with_class_defaults(cfg: dict, family: str) -> tuple[dict, dict]:
    """The config with the sizes its shipped form leaves to the config class filled in (_CLASS_DEFAULTS), and them."""
    filled = {k: v for k, v in _CLASS_DEFAULTS.get(family, {}).items() if k not in cfg}
    return ({**cfg, **filled} if filled else cfg), filled


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
    if mt not in _FAMILIES and mt not in _ALIASES:
        raise UnknownNameError(f"{r.src}: model_type", mt, _FAMILIES)
    if mt in _ARCHITECTURE_ALIASES and r.cfg.get("architectures") != [_ARCHITECTURE_ALIASES[mt]]:
        raise r.error("architectures", f"{mt} is read as {_ALIASES[mt]} only when the config names "
                                       f"[{_ARCHITECTURE_ALIASES[mt]!r}]; got {_short(r.cfg.get('architectures'))}")
    return _ALIASES.get(mt, mt)


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
    """KV heads, head dim, dense MLP width and the other ModelSpec fields of a decoder with RMSNorm-style norms and
    gated MLPs (the Llama lineage, MoE and MLA variants included)."""
    if family in _KV_CONSTANT:
        kv = r.integer("num_key_value_heads", why=f"transformers' {family} config would default it to "
                       f"{_KV_CONSTANT[family]} (its reference model), not num_attention_heads; give it")
    else:
        kv = r.integer("num_key_value_heads", default=heads)
    kw: dict[str, Any] = dict(gated_mlp=True, tied_embeddings=r.flag("tie_word_embeddings",
                                                                     default=_TIED_DEFAULT.get(family, False)),
                              norms_per_layer=_NORMS_PER_LAYER.get(family, 2), fused_qkv=family == "phi3",
                              fused_gate_up=family == "phi3", norm="layernorm" if family == "phimoe" else "rmsnorm",
                              qk_norm=_QK_NORM.get(family, "none"), attn_sinks=family == "gpt_oss")
    if family == "cohere":
        kw["qk_norm"] = "full" if r.flag("use_qk_norm", default=False) else "none"
    if family == "deepseek_v2" or family == "deepseek_v3":
        head_dim = _mla_fields(r, kw)
    else:
        head_dim = _config_head_dim(r, family, head_dim_of)
    kw.update(_bias_fields(r, family))
    kw.update(_mixer_fields(r, family, layers))
    ffn = _moe_fields(r, family, layers, kw)
    return kv, head_dim, ffn, kw


def _config_head_dim(r: _Reader, family: str, head_dim_of) -> int:
    """head_dim as the attention builds it: given, else hidden / heads, except where the config class defaults it to
    its reference model's constant (refused: give it)."""
    if family in ("cohere", "cohere2"):  # CohereAttention / Cohere2Config: head_dim = hidden // heads, always
        return head_dim_of()
    if family in _HEAD_DIM_CONSTANT:
        return r.integer("head_dim", why=f"transformers' {family} config would default it to "
                         f"{_HEAD_DIM_CONSTANT[family]}, not hidden_size / num_attention_heads; give it")
    head_dim = r.integer("head_dim", default=None)
    return head_dim_of() if head_dim is None else head_dim


def _bias_fields(r: _Reader, family: str) -> dict[str, bool]:
    """Biases, as each modeling file builds them: q, k, v and o follow ``attention_bias`` (GPT-OSS: default true)
    in most families, and Llama's / Granite's MLP ``mlp_bias``; Qwen2 always has q/k/v biases and none on o;
    Qwen2-MoE's q/k/v follow ``qkv_bias`` (default true); Mistral, Mixtral and Phi-3 build none; GPT-OSS's experts
    always have biases; PhiMoE's LM head has one when ``lm_head_bias``; MLA biases are refused."""
    qkv = out = mlp = False
    if family in _ATTENTION_BIAS:
        qkv = out = r.flag("attention_bias", default=family == "gpt_oss")
    if family in ("llama", "yi", "granite"):
        mlp = r.flag("mlp_bias", default=False)
    if family == "qwen2":
        qkv = True
    if family == "qwen2_moe":
        qkv = r.flag("qkv_bias", default=True)
    if family == "gpt_oss":
        mlp = True
    if family in ("deepseek_v2", "deepseek_v3") and r.flag("attention_bias", default=False):
        raise r.error("attention_bias", "true: biases on MLA's q_a and kv_a projections are not modelled")
    return dict(qkv_bias=qkv, attn_out_bias=out, mlp_bias=mlp,
                lm_head_bias=family == "phimoe" and r.flag("lm_head_bias", default=False))


def _mla_fields(r: _Reader, kw: dict) -> int:
    """DeepSeek-V2/V3 multi-head latent attention: the ranks and head sizes (all required: the config classes
    default them to DeepSeek-V3's); head_dim = qk_nope_head_dim + qk_rope_head_dim (the query/key head)."""
    why = "an MLA size is not guessed (the config class would use DeepSeek's)"
    q_rank = r.integer("q_lora_rank", default=0)  # null: one q_proj (DeepSeek-V2-Lite)
    if "q_lora_rank" not in r.cfg:
        raise r.error("q_lora_rank", "missing; give it (null for one q_proj): the config class would default it "
                                     "to 1536")
    kv_rank = r.integer("kv_lora_rank", why=why)
    rope = r.integer("qk_rope_head_dim", why=why)
    nope = r.integer("qk_nope_head_dim", why=why)
    v = r.integer("v_head_dim", why=why)
    kw.update(attention="mla", q_lora_rank=q_rank, kv_lora_rank=kv_rank, rope_head_dim=rope, v_head_dim=v)
    return nope + rope


def _window(r: _Reader, family: str, key: str = "sliding_window") -> int | None:
    """The window under ``key`` (null: none); where the key is missing, the config class's constant is refused."""
    if key in r.cfg:
        return r.integer(key, default=None)
    if family in _WINDOW_CONSTANT:
        raise r.error(key, f"missing; transformers' {family} config would default it to {_WINDOW_CONSTANT[family]} "
                           "(give it, null for none)")
    return None


def _mixer_fields(r: _Reader, family: str, layers: int) -> dict[str, Any]:
    """layer_types, sliding_window and attention_chunk: the config's ``layer_types`` when it has them, else the
    pattern its config class builds (transformers 5.24 ``__post_init__``), else what the cache infers
    (``cache_utils.get_layer_types_and_kwargs``: a ``sliding_window`` makes every layer sliding)."""
    given = r.cfg.get("layer_types")
    window = chunk = None
    if family == "llama4_text":
        chunk = _window(r, family, "attention_chunk_size")
    elif family in _USES_WINDOW_FLAG:  # Qwen: the window counts only when use_sliding_window is true
        window = _window(r, family) if r.flag("use_sliding_window", default=False) else None
    elif family in _WINDOWED:
        window = _window(r, family)
    elif r.cfg.get("sliding_window") is not None:
        raise r.error("sliding_window", f"{family}'s attention has no sliding window, yet transformers' cache would "
                                        "keep only the window on every layer; remove the key or set it to null")
    types = _given_layer_types(r, given, layers) if given is not None else \
        _pattern_layer_types(r, family, layers, window, chunk)
    out: dict[str, Any] = {"sliding_window": window or 0, "attention_chunk": chunk or 0}
    if "sliding" in types and not window:
        raise r.error("sliding_window", "missing or null, yet layer_types has sliding layers")
    if "chunked" in types and not chunk:
        raise r.error("attention_chunk_size", "missing or null, yet layer_types has chunked layers")
    if any(t != "full" for t in types):
        out["layer_types"] = tuple(types)
    return out


def _given_layer_types(r: _Reader, given: Any, layers: int) -> list[str]:
    _pattern_size(r, layers)
    if not isinstance(given, list) or len(given) != layers:
        raise r.error("layer_types", f"must be a list of {layers} layer types, got {_short(given)}")
    names = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked"}
    for x in given:
        if x not in names:
            raise UnknownNameError(f"{r.src}: layer_types", x, tuple(names))
    return [names[x] for x in given]


_MAX_PATTERN_LAYERS = 4096
"""Most layers a per-layer pattern may have (the deepest 2025 models have under 200); a config past it is a typo."""


def _pattern_size(r: _Reader, layers: int) -> None:
    if layers > _MAX_PATTERN_LAYERS:
        raise r.error("num_hidden_layers", f"{layers} layers with a per-layer pattern: not a real model (at most "
                                           f"{_MAX_PATTERN_LAYERS})")


def _pattern_layer_types(r: _Reader, family: str, layers: int, window, chunk) -> list[str]:
    """The layer pattern each config class builds when ``layer_types`` is absent (one entry when every layer is
    alike)."""
    if not window and not chunk:
        return ["full"]
    if family not in _PATTERN_EVERY and family not in ("qwen2", "qwen3", "qwen2_moe", "llama4_text"):
        return ["sliding"]
    _pattern_size(r, layers)
    if family in _PATTERN_EVERY:  # sliding unless (i + 1) % n == 0: Gemma-2 / GPT-OSS 2, Cohere-2 4, Gemma-3 6
        n = r.integer("sliding_window_pattern", default=_PATTERN_EVERY[family])
        return ["sliding" if window and (i + 1) % n else "full" for i in range(layers)]
    if family in ("qwen2", "qwen3"):  # Qwen2Config / Qwen3Config: sliding from max_window_layers on
        first = r.integer("max_window_layers", default=28, minimum=0)
        return ["sliding" if window and i >= first else "full" for i in range(layers)]
    if family == "qwen2_moe":  # Qwen2MoeConfig: odd layers below max_window_layers
        below = r.integer("max_window_layers", default=28, minimum=0)
        return ["sliding" if window and (i + 1) % 2 and i < below else "full" for i in range(layers)]
    if family == "llama4_text":  # chunked where RoPE is used: no_rope_layers[i] == 1 (every 4th layer is NoPE)
        interval = r.integer("no_rope_layer_interval", default=4)
        flags = r.cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
        if not isinstance(flags, list) or len(flags) != layers or any(x not in (0, 1) for x in flags):
            raise r.error("no_rope_layers", f"must be a list of {layers} flags 0 or 1, got {_short(flags)}")
        return ["chunked" if f and chunk else "full" for f in flags]
    return ["sliding"]


def _layer_indices(r: _Reader, key: str, layers: int) -> list[int]:
    """A list of layer indices under ``key`` (null or missing: [])."""
    got = r.cfg.get(key)
    got = [] if got is None else got
    if not isinstance(got, list) or not all(_is_integral(i) and not isinstance(i, bool) for i in got):
        raise r.error(key, f"must be a list of layer indices, got {_short(got)}")
    if any(not 0 <= i < layers for i in got):
        raise r.error(key, f"layer indices are 0..{layers - 1}, got {_short(got)}")
    return [int(i) for i in got]


def _moe_layers(r: _Reader, family: str, layers: int, n_exp: int) -> list[bool]:
    """Which layers have routed experts, as each decoder layer decides ([True]: every layer)."""
    if family not in ("qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "llama4_text"):
        return [True]
    _pattern_size(r, layers)
    if family in ("qwen2_moe", "qwen3_moe"):  # not in mlp_only_layers, num_experts > 0, (i + 1) % sparse step == 0
        step = r.integer("decoder_sparse_step", default=1)
        only = _layer_indices(r, "mlp_only_layers", layers)
        return [i not in only and n_exp > 0 and (i + 1) % step == 0 for i in range(layers)]
    if family in ("deepseek_v2", "deepseek_v3"):  # layer_idx >= first_k_dense_replace
        first = r.integer("first_k_dense_replace", minimum=0, why="the dense prefix is not guessed (DeepSeek-V3's "
                                                                  "config class would say 3)")
        return [i >= first for i in range(layers)]
    if family == "llama4_text":  # moe_layers, else every interleave_moe_layer_step-th layer
        if r.cfg.get("moe_layers") is not None:
            idx = set(_layer_indices(r, "moe_layers", layers))
            return [i in idx for i in range(layers)]
        step = r.integer("interleave_moe_layer_step", default=1)
        return [(i + 1) % step == 0 for i in range(layers)]
    return [True]


def _moe_fields(r: _Reader, family: str, layers: int, kw: dict) -> int:
    """The MoE fields (into ``kw``) and the dense MLP width: routed experts and top-k (required: every config class
    defaults them to a reference model's), the expert width, shared experts (Qwen2-MoE one of
    shared_expert_intermediate_size with a sigmoid gate; DeepSeek one of moe_intermediate_size x n_shared_experts;
    Llama-4 one of intermediate_size), the router's bias (GPT-OSS) and which layers are sparse."""
    if family not in _MOE_KEYS:
        return r.integer("intermediate_size", why="the MLP width is not guessed")
    why = f"a {family} model without it is not read (its config class would default it to a reference model's)"
    n_exp = r.integer(*_MOE_KEYS[family], minimum=0 if family in ("qwen2_moe", "qwen3_moe") else 1, why=why)
    moe = _moe_layers(r, family, layers, n_exp)
    if not n_exp or not any(moe):
        return r.integer("intermediate_size", why="the MLP width is not guessed")
    k = r.integer("num_experts_per_tok", why=why)
    if k > n_exp:
        raise r.error("num_experts_per_tok", f"{k} is more than the {n_exp} experts")
    width_key = "moe_intermediate_size" if family in _MOE_WIDTH_KEY else "intermediate_size"
    width = r.integer(width_key, why=why)
    dense = r.integer(_DENSE_WIDTH_KEY.get(family, "intermediate_size"), why="the dense layers' MLP width is not "
                      "guessed") if not all(moe) else width
    n_shared, shared = 0, 0
    if family == "qwen2_moe":
        n_shared, shared = 1, r.integer("shared_expert_intermediate_size", why=why)
        kw["shared_expert_gate"] = True
    elif family in ("deepseek_v2", "deepseek_v3"):
        n_sh = r.integer("n_shared_experts", minimum=0, why=why)
        n_shared, shared = (1, width * n_sh) if n_sh else (0, 0)
    elif family == "llama4_text":
        n_shared, shared = 1, width
    kw.update(n_experts=n_exp, experts_per_token=k, moe_ffn=width if width != dense else 0, n_shared_experts=n_shared,
              shared_ffn=shared if shared not in (0, width) else 0, router_bias=family == "gpt_oss")
    if family in ("qwen2_moe", "qwen3_moe"):  # the top-k weights renormalised to sum to 1 (their router's option)
        kw["router_renorm"] = r.flag("norm_topk_prob", default=False)
    if not all(moe):
        kw["mlp_types"] = tuple("moe" if x else "dense" for x in moe)
    return dense


def _bamba_layers(r: _Reader, hidden: int, layers: int, heads: int, head_dim_of) -> tuple[int, int, int, dict]:
    """Bamba: Mamba-2 layers with full-attention layers at ``attn_layer_indices`` (BambaConfig.layers_block_type),
    each with a gated MLP and two RMSNorms. The Mamba-2 mixer (BambaMixer): inner width mamba_expand x hidden,
    mamba_n_heads heads of mamba_d_head (which must tile the inner width, as the kernels need), mamba_n_groups B/C
    groups of mamba_d_state, a causal convolution of mamba_d_conv."""
    why = "a Mamba size is not guessed (BambaConfig would use its reference model's)"
    attn = set(_layer_indices(r, "attn_layer_indices", layers))
    expand = r.integer("mamba_expand", why=why)
    n_heads = r.integer("mamba_n_heads", why=why)
    inner = expand * hidden
    d_head = r.cfg.get("mamba_d_head", "auto")
    d_head = inner // n_heads if d_head == "auto" else r.integer("mamba_d_head", why=why)
    if n_heads * d_head != inner:
        raise r.error("mamba_d_head", f"{d_head} x mamba_n_heads={n_heads} must equal mamba_expand x hidden_size="
                                      f"{inner} (the Mamba-2 kernels need it)")
    kv = r.integer("num_key_value_heads", why="BambaConfig would default it to 8 (null: num_attention_heads); give it")
    head_dim = r.integer("head_dim", default=None) or head_dim_of()
    bias = r.flag("attention_bias", default=False)
    kw = dict(gated_mlp=True, qkv_bias=bias, attn_out_bias=bias, mlp_bias=r.flag("mlp_bias", default=False),
              tied_embeddings=r.flag("tie_word_embeddings", default=False),
              layer_types=tuple("full" if i in attn else "mamba" for i in range(layers)),
              ssm_inner=inner, ssm_heads=n_heads, ssm_groups=r.integer("mamba_n_groups", why=why),
              ssm_state=r.integer("mamba_d_state", why=why), ssm_conv=r.integer("mamba_d_conv", why=why),
              ssm_conv_bias=r.flag("mamba_conv_bias", default=True), ssm_proj_bias=r.flag("mamba_proj_bias",
                                                                                           default=False))
    return kv, head_dim, r.integer("intermediate_size", why="the MLP width is not guessed"), kw


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
    # FalconAttention._split_heads: the new architecture's keys and values are expanded to every query head before
    # transformers caches them ("num_kv_heads = self.num_heads if self.new_decoder_architecture"), so its cache holds
    # n_heads K/V heads per layer where vLLM holds num_kv_heads.
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
              norms_per_layer=2 if not parallel else n_ln, fused_qkv=True,
              cache_heads=heads if new_arch and kv != heads else 0)
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


# --- quantization_config -> checkpoint_format ---------------------------------------------------------------
_QUANT_SUPPORTED = ("gptq (2, 3, 4 or 8 bits, a positive group_size), awq (gemm, zero point), fp8 (128 x 128 "
                    "blocks), mxfp4, bitsandbytes 8-bit (LLM.int8) and 4-bit (nf4 or fp4, with or without double "
                    "quant), compressed-tensors (symmetric int4/int8 groups, NVFP4, per-tensor FP8)")
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
    if method == "fp8":
        return _fp8_format(q)
    if method == "mxfp4":
        return _mxfp4_format(q)
    if method == "compressed-tensors":
        return _compressed_tensors_format(q)
    raise _unpriced_method(method, src)


_CT_IGNORED_OK = ("lm_head", "gate", "router")
"""Last names of modules a compressed-tensors ``ignore`` list may leave unquantized: ones the catalogue keeps in 16
bits anyway (the LM head, MoE routers)."""


def _compressed_tensors_format(q: _Reader) -> str:
    """compressed-tensors (llm-compressor's checkpoints): one config group over every Linear layer, mapped by its
    weight scheme and the checkpoint's ``format``: pack-quantized symmetric int4/int8 groups -> int{b}-sym-g{g},
    nvfp4-pack-quantized -> nvfp4, float-quantized per-tensor FP8 -> fp8-e4m3. Anything else is refused by name."""
    groups = q.cfg.get("config_groups")
    if not isinstance(groups, Mapping) or len(groups) != 1:
        raise q.error("config_groups", f"{_short(groups)}: one config group is modelled (several groups quantize "
                                       "layers differently, which the precision catalogue does not price)")
    (gname, group), = groups.items()
    key = f"config_groups.{gname}"
    if not isinstance(group, Mapping):
        raise q.error(key, f"must be a JSON object, got {_short(group)}")
    targets = group.get("targets")
    if targets != ["Linear"]:
        raise q.error(f"{key}.targets", f"{_short(targets)}: only ['Linear'] (every linear layer) is modelled")
    w = group.get("weights")
    if not isinstance(w, Mapping):
        raise q.error(f"{key}.weights", f"must be a JSON object of the weight scheme, got {_short(w)}")
    wq = _Reader(w, q.src, prefix=f"{q.prefix}{key}.weights.")
    bits = wq.integer("num_bits", why="the weight scheme has no default for it")
    kind = wq.text("type", default="int")
    strategy = wq.text("strategy", default="tensor")
    fmt = q.text("format", default="dense")
    ignored = q.cfg.get("ignore") or []
    if not isinstance(ignored, list) or not all(isinstance(m, str) for m in ignored):
        raise q.error("ignore", f"must be a list of module names, got {_short(ignored)}")
    extra = [m for m in ignored if m.split(".")[-1].strip("*$") not in _CT_IGNORED_OK]  # "re:.*mlp.gate$" -> gate
    if extra:
        raise q.error("ignore", f"keeps {_short(extra)} unquantized, which the precision catalogue's formats do not "
                                "model (they keep embeddings, lm_head, norms, biases and routers in 16 bits)")
    scheme = f"{kind} {bits}-bit {strategy} weights in format {fmt!r}"
    if kind == "int" and strategy == "group" and fmt == "pack-quantized" and bits in (4, 8):
        if not wq.flag("symmetric", default=True):
            raise wq.error("symmetric", "false: asymmetric groups store packed zero points, which the precision "
                                        "catalogue does not price for compressed-tensors")
        if wq.text("actorder", default=None) == "group":
            raise wq.error("actorder", "'group' stores a group index per input column, which is not modelled")
        group_size = wq.integer("group_size", why="a group strategy needs it")
        return get_precision(f"int{bits}-sym-g{group_size}", field=_QUANT_FIELD).name
    if kind == "float" and bits == 4 and strategy == "tensor_group" and fmt == "nvfp4-pack-quantized":
        if wq.integer("group_size", default=16) != 16:
            raise wq.error("group_size", "NVFP4 groups are 16 elements")
        return "nvfp4"
    if kind == "float" and bits == 8 and strategy == "tensor" and fmt == "float-quantized":
        return "fp8-e4m3"
    raise q.error("config_groups", f"{scheme}: not in the precision catalogue (modelled: pack-quantized symmetric "
                                   "int4/int8 groups, nvfp4-pack-quantized, float-quantized per-tensor FP8)")


def _not_converted(q: _Reader) -> list[str]:
    """``modules_to_not_convert`` as the last name of each module (``model.layers.*.self_attn`` -> ``self_attn``)."""
    mods = q.cfg.get("modules_to_not_convert")
    mods = [] if mods is None else mods
    if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
        raise q.error("modules_to_not_convert", f"must be a list of module names, got {_short(mods)}")
    return [m.split(".")[-1] for m in mods]


def _fp8_format(q: _Reader) -> str:
    """transformers' FineGrainedFP8Config (quant_method "fp8"): E4M3 weights with one fp32 scale per
    weight_block_size block, (128, 128) by default (DeepSeek-V3); embeddings, LM head, norms and routers stay 16-bit."""
    block = q.cfg.get("weight_block_size", [128, 128])
    if block != [128, 128] and block != (128, 128):
        raise q.error("weight_block_size", f"{_short(block)}: the precision catalogue has fp8-block128 (128 x 128 "
                                           "blocks) only")
    fmt = q.text("fmt", default="e4m3")
    if fmt != "e4m3":
        raise q.error("fmt", f"{fmt!r}: the precision catalogue's fp8-block128 stores E4M3")
    extra = [m for m in _not_converted(q) if m not in ("lm_head", "embed_tokens", "gate", "router")]
    if extra:
        raise q.error("modules_to_not_convert", f"keeps {_short(extra)} unquantized, which fp8-block128 does not model")
    return "fp8-block128"


def _mxfp4_format(q: _Reader) -> str:
    """transformers' Mxfp4Config: MXFP4 where not in modules_to_not_convert. GPT-OSS keeps attention (self_attn),
    the router, the embeddings and the LM head in bf16 and quantizes the routed experts: mxfp4-moe; a checkpoint that
    quantizes attention too is mxfp4."""
    kept = set(_not_converted(q))
    extra = sorted(kept - {"self_attn", "router", "embed_tokens", "lm_head"})
    if extra:
        raise q.error("modules_to_not_convert", f"keeps {_short(extra)} unquantized, which the catalogue's mxfp4 "
                                                "formats do not model")
    return "mxfp4-moe" if "self_attn" in kept else "mxfp4"


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
    """bitsandbytes 4-bit: nf4 or nf4-dq (FP4 stores the same bytes); 8-bit: llm-int8."""
    if load4 and load8:  # BitsAndBytesConfig raises for both
        raise ConfigError("quantization_config.load_in_4bit/load_in_8bit", "both are true; only one can be",
                          source=q.src)
    if load8:  # LLM.int8: int8 weights, one fp32 scale per output row, 16-bit embeddings, head, norms, biases
        _keeps_only_lm_head(q, "llm_int8_skip_modules", "modules_to_not_convert")
        return "llm-int8"
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
    if method in ("fbgemm_fp8", "mxfp8"):
        return ConfigError(_QUANT_FIELD, f"{method!r}: its scales (per channel, per 32 elements) are not in the "
                           f"precision catalogue; not priced as shipped (supported: {_QUANT_SUPPORTED})", source=src)
    if method in _QUANT_KNOWN:
        return ConfigError(_QUANT_FIELD, f"{method!r} has no exact format in the precision catalogue (supported: "
                           f"{_QUANT_SUPPORTED})", source=src)
    import difflib

    close = difflib.get_close_matches(method, _QUANT_KNOWN, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    return ConfigError(_QUANT_FIELD, f"unknown method {_short(method)}; {hint}supported: {_QUANT_SUPPORTED}",
                       source=src)

