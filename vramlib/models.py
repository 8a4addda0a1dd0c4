"""Model shapes: a frozen :class:`ModelSpec`, exact parameter counts, HF ``config.json`` reading, the catalogue.

Parameter counts evaluate :data:`vramlib.formulas.N_PARAMS`; the catalogue's
counts equal what transformers builds (``tools/measure/param_counts.py``).
Used in: every chapter.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from . import formulas as F
from .errors import ConfigError, InvalidValueError, UnknownNameError, check_positive_int

NORMS = ("rmsnorm", "layernorm")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj", "gate_up_proj")
"""Linear modules of the MLP, repeated per expert in MoE layers."""


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, enough to count parameters, KV cache and activations."""

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

    def __post_init__(self) -> None:
        for name in ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "ffn", "vocab", "max_context"):
            check_positive_int(name, getattr(self, name))
        for name in ("norms_per_layer", "n_experts", "experts_per_token", "n_shared_experts", "learned_positions"):
            check_positive_int(name, getattr(self, name), allow_zero=True)
        if self.n_heads % self.n_kv_heads:
            raise InvalidValueError("n_kv_heads", self.n_kv_heads,
                                    f"must divide n_heads={self.n_heads} (allowed: {_divisors(self.n_heads)})")
        if self.norm not in NORMS:
            raise UnknownNameError("norm", self.norm, NORMS)
        if self.n_experts and not 1 <= self.experts_per_token <= self.n_experts:
            raise InvalidValueError("experts_per_token", self.experts_per_token, f"must be 1..n_experts={self.n_experts}")
        if not self.n_experts and self.experts_per_token:
            raise InvalidValueError("experts_per_token", self.experts_per_token, "must be 0 for a dense model (n_experts=0)")
        if self.nominal_params is not None:
            check_positive_int("nominal_params", self.nominal_params)

    # --- symbol values for the formulas ---------------------------------------------------------
    def symbols(self, active: bool = False) -> dict[str, int]:
        """Values of :mod:`vramlib.symbols` for this shape; ``active`` counts only the routed-to experts."""
        experts = self.experts_per_token if active else self.n_experts
        return {
            "L": self.n_layers, "h": self.hidden, "n_h": self.n_heads, "n_kv": self.n_kv_heads,
            "d_head": self.head_dim, "f": self.ffn, "V": self.vocab, "P": self.learned_positions,
            "g": int(self.gated_mlp), "n_mlp": (experts or 1) + self.n_shared_experts,
            "E": self.n_experts, "n_norm": self.norms_per_layer, "beta_qkv": int(self.qkv_bias),
            "beta_o": int(self.attn_out_bias), "beta_mlp": int(self.mlp_bias),
            "beta_norm": int(self.norm == "layernorm"), "t_emb": int(self.tied_embeddings),
        }

    @property
    def n_params(self) -> int:
        """Exact parameter count of the architecture (tied weights counted once)."""
        return int(F.evaluate(F.N_PARAMS, **self.symbols()))

    @property
    def n_active_params(self) -> int:
        """Parameters used per token (equals n_params for dense models; MoE counts experts_per_token experts)."""
        return int(F.evaluate(F.N_PARAMS, **self.symbols(active=True)))

    @property
    def weight_params(self) -> int:
        """Parameters to store (the nominal size when set, as the source's '13B', else the exact count)."""
        return self.nominal_params if self.nominal_params is not None else self.n_params

    @property
    def gqa_group(self) -> int:
        """Query heads per KV head (1 = MHA, n_heads = MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    def param_groups(self) -> dict[str, int]:
        """Exact parameters by tensor kind (embed, lm_head, attn_q ... mlp_down, router, norm, bias); sums to n_params."""
        vals = self.symbols()
        out = {}
        for kind, expr in F.LAYER_GROUPS.items():
            out[kind] = self.n_layers * int(F.evaluate(expr, **vals))
        for kind, expr in F.MODEL_GROUPS.items():
            out[kind] = out.get(kind, 0) + int(F.evaluate(expr, **vals))
        return out

    def linear_modules(self) -> list[str]:
        """Names of the linear modules in each layer as the HF implementation has them (fused where fused)."""
        attn = ["qkv_proj"] if self.fused_qkv else ["q_proj", "k_proj", "v_proj"]
        if self.gated_mlp:
            mlp = ["gate_up_proj"] if self.fused_gate_up else ["gate_proj", "up_proj"]
        else:
            mlp = ["up_proj"]
        return attn + ["o_proj"] + mlp + ["down_proj"]

    def with_(self, **changes: Any) -> "ModelSpec":
        """A copy with some fields changed (validated), e.g. ``m.with_(n_kv_heads=8)``; for widgets."""
        known = {f.name for f in fields(self)}
        for k in changes:
            if k not in known:
                raise UnknownNameError("ModelSpec field", k, known)
        return replace(self, **changes)

    def with_heads(self, n_heads: int, n_kv_heads: int) -> "ModelSpec":
        """Same hidden size with another head count (head_dim = hidden / heads) and KV heads; for widgets."""
        n_heads = check_positive_int("n_heads", n_heads)
        n_kv_heads = check_positive_int("n_kv_heads", n_kv_heads)
        if self.hidden % n_heads:
            raise InvalidValueError("n_heads", n_heads, f"must divide hidden={self.hidden} (e.g. {_divisors_near(self.hidden, n_heads)})")
        return self.with_(n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=self.hidden // n_heads)

    def with_group_size(self, queries_per_kv_head: int) -> "ModelSpec":
        """GQA read as "groups of g query heads": n_kv_heads = n_heads / g (chapter 7's other reading)."""
        g = check_positive_int("queries_per_kv_head", queries_per_kv_head)
        if self.n_heads % g:
            raise InvalidValueError("queries_per_kv_head", g, f"must divide n_heads={self.n_heads} (allowed: {_divisors(self.n_heads)})")
        return self.with_(n_kv_heads=self.n_heads // g)

    @staticmethod
    def from_hf_config(config: str | Path | Mapping[str, Any], name: str | None = None) -> "ModelSpec":
        """Read a transformers ``config.json`` (path or dict): Llama, Mistral, Mixtral, Qwen2, Gemma/Gemma-2,
        Phi-3, Falcon, GPT-NeoX, GPT-2 families. Missing or contradictory keys raise ConfigError."""
        return _from_hf_config(config, name)


def _divisors_near(n: int, k: int) -> str:
    divs = sorted((x for x in range(1, min(n, 1024) + 1) if n % x == 0), key=lambda x: abs(x - k))[:4]
    return ", ".join(str(x) for x in sorted(divs))


def _divisors(n: int) -> str:
    return ", ".join(str(k) for k in range(1, n + 1) if n % k == 0)


# --- Hugging Face config.json -----------------------------------------------------------------------
_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3", "yi", "qwen3"}
_FAMILIES = sorted(_LLAMA_LIKE | {"falcon", "gpt_neox", "gpt2", "RefinedWebModel", "RefinedWeb"})


def _from_hf_config(config: str | Path | Mapping[str, Any], name: str | None) -> ModelSpec:
    src = "config"
    if isinstance(config, (str, Path)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        try:
            cfg = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError("path", f"no such file {str(path)!r}", source="config.json") from None
        except json.JSONDecodeError as e:
            raise ConfigError("json", f"not valid JSON ({e.msg} at line {e.lineno})", source=str(path)) from None
        src = str(path)
    elif isinstance(config, Mapping):
        cfg = dict(config)
    else:
        raise InvalidValueError("config", type(config).__name__, "give a config.json path or a dict")
    if not isinstance(cfg, dict):
        raise ConfigError("config", "must be a JSON object", source=src)
    mt = cfg.get("model_type")
    if mt is None:
        raise ConfigError("model_type", "missing; cannot tell the architecture", source=src)
    if mt not in _FAMILIES:
        raise UnknownNameError("model_type", mt, _FAMILIES)

    def get(*keys: str, default: Any = ...) -> Any:
        present = [(k, cfg[k]) for k in keys if cfg.get(k) is not None]
        vals = {json.dumps(v) for _, v in present}
        if len(vals) > 1:
            raise ConfigError("/".join(keys), "contradictory values " + ", ".join(f"{k}={v}" for k, v in present), source=src)
        if present:
            return present[0][1]
        if default is ...:
            raise ConfigError(keys[0], "missing", source=src)
        return default

    def posint(value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(key, f"must be a positive integer, got {value!r}", source=src)
        return value

    family = "falcon" if mt.startswith("Refined") else mt
    hidden = posint(get("hidden_size", "n_embd", "d_model"), "hidden_size")
    layers = posint(get("num_hidden_layers", "n_layer", "num_layers"), "num_hidden_layers")
    heads = posint(get("num_attention_heads", "n_head"), "num_attention_heads")
    vocab = posint(get("vocab_size"), "vocab_size")
    kw: dict[str, Any] = {}
    if family in _LLAMA_LIKE:
        kv = posint(get("num_key_value_heads", default=heads), "num_key_value_heads")
        head_dim = posint(get("head_dim", default=None) or hidden // heads, "head_dim")
        if "head_dim" not in cfg and hidden % heads:
            raise ConfigError("hidden_size", f"{hidden} not divisible by num_attention_heads={heads} and no head_dim given", source=src)
        ffn = posint(get("intermediate_size", "moe_intermediate_size" if family == "qwen2_moe" else "intermediate_size"),
                     "intermediate_size")
        kw.update(
            gated_mlp=True,
            qkv_bias=bool(get("attention_bias", default=family in ("qwen2", "qwen2_moe"))) or family in ("qwen2", "qwen2_moe"),
            attn_out_bias=bool(get("attention_bias", default=False)) and family not in ("qwen2", "qwen2_moe"),
            mlp_bias=bool(get("mlp_bias", default=False)),
            tied_embeddings=bool(get("tie_word_embeddings", default=family in ("gemma", "gemma2"))),
            norms_per_layer=4 if family == "gemma2" else 2,
            fused_qkv=family == "phi3", fused_gate_up=family == "phi3",
        )
        if family == "mixtral":
            kw.update(n_experts=posint(get("num_local_experts"), "num_local_experts"),
                      experts_per_token=posint(get("num_experts_per_tok"), "num_experts_per_tok"))
    elif family == "falcon":
        new_arch = bool(get("new_decoder_architecture", default=False))
        multi_query = bool(get("multi_query", default=True))
        if new_arch:
            kv = posint(get("num_kv_heads", "n_head_kv", default=heads), "num_kv_heads")
        else:
            kv = 1 if multi_query else heads
        if cfg.get("alibi"):
            raise ConfigError("alibi", "ALiBi Falcon variants are not modelled", source=src)
        head_dim = hidden // heads
        ffn = posint(get("ffn_hidden_size", default=4 * hidden), "ffn_hidden_size")
        bias = bool(get("bias", default=False))
        parallel = bool(get("parallel_attn", default=True))
        kw.update(gated_mlp=False, qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
                  tied_embeddings=bool(get("tie_word_embeddings", default=True)), norm="layernorm",
                  norms_per_layer=2 if (new_arch or not parallel) else 1, fused_qkv=True)
    elif family == "gpt_neox":
        kv, head_dim = heads, hidden // heads
        ffn = posint(get("intermediate_size", default=4 * hidden), "intermediate_size")
        kw.update(gated_mlp=False, qkv_bias=bool(get("attention_bias", default=True)),
                  attn_out_bias=bool(get("attention_bias", default=True)), mlp_bias=True,
                  tied_embeddings=bool(get("tie_word_embeddings", default=False)), norm="layernorm", fused_qkv=True)
    else:  # gpt2
        kv, head_dim = heads, hidden // heads
        ffn = posint(get("n_inner", default=None) or 4 * hidden, "n_inner")
        kw.update(gated_mlp=False, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                  tied_embeddings=bool(get("tie_word_embeddings", default=True)), norm="layernorm",
                  learned_positions=posint(get("n_positions", "max_position_embeddings"), "n_positions"), fused_qkv=True)
    if heads % kv:
        raise ConfigError("num_key_value_heads", f"{kv} does not divide num_attention_heads={heads}", source=src)
    max_ctx = get("max_position_embeddings", "n_positions", "n_ctx", default=2048)
    try:
        return ModelSpec(name=name or cfg.get("_name") or cfg.get("_name_or_path") or family, n_layers=layers,
                         hidden=hidden, n_heads=heads, n_kv_heads=kv, head_dim=head_dim, ffn=ffn, vocab=vocab,
                         max_context=posint(max_ctx, "max_position_embeddings"), family=family,
                         source=cfg.get("_source", src), **kw)
    except InvalidValueError as e:
        raise ConfigError(e.field, str(e), source=src) from None


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


def get_model(name: str | ModelSpec) -> ModelSpec:
    """A catalogue model by key, case-insensitive (``"Llama-2-13B"``); a ModelSpec passes through."""
    if isinstance(name, ModelSpec):
        return name
    if not isinstance(name, str):
        raise InvalidValueError("model", name, "give a catalogue name such as 'llama-2-13b' or a ModelSpec")
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    cat = catalogue()
    if key in cat:
        return cat[key]
    raise UnknownNameError("model", name, cat)
