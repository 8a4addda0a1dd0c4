"""Reading a reader's own GGUF file (llama.cpp's format): its header as a
:class:`~vramlib.catalog.models.ModelSpec` and every tensor's stored ggml type and bytes, so the file is priced tensor
by tensor rather than by a format's average bits.

:func:`~vramlib.catalog.models.read_gguf` opens the file with the ``gguf`` package (``gguf.GGUFReader``: the header
and the tensor index; the weights are memory-mapped, never read) and returns a :class:`GGUFModel`: the ModelSpec of
its hyperparameters, each
tensor's name, ggml type (``"Q4_K"``), shape (ggml order, ``ne0`` first: ``token_embd`` is ``(hidden, vocab)``),
elements and the bytes the file stores for it, with per-layer and outside-the-layers sums.

How the header is read follows llama.cpp (``llama_model_base::load_hparams`` and each architecture's
``load_arch_hparams``, the copy llama-cpp-python 0.3.36 vendors): ``head_count_kv`` defaults to ``head_count``,
``key_length`` and ``value_length`` to ``embedding_length / head_count``; head counts and widths may be per-layer
arrays (read only when every layer has the same value). The parts the header does not state are read from the
tensors the file holds: tied embeddings (no ``output.weight``), biases (``blk.0.attn_q.bias`` ...), the norms per
layer and q/k norms, the vocabulary (``token_embd``'s rows), which layers have routed experts (``ffn_gate_inp``) and
shared experts (``ffn_*_shexp``). Layer windows are llama.cpp's: Gemma-2 slides on even layers (window 4096 unless
given), Gemma-3 on five of six, Llama-4 attends in chunks of 8,192 on three of four, a file's
``attention.sliding_window_pattern`` (a period or one flag per layer) overriding the pattern; llama.cpp disables
Phi-3's window, so Phi-3 layers are full attention (named in ``notes``). The ``gguf`` reader parses the whole header
in Python: a 150k-token tokenizer with its merges takes it about 4 s.

The ModelSpec's parameter count is checked against the file: the elements of its tensors, less RoPE frequency tables
(``rope_freqs``, ``rope_factors_long/short``: constants, not parameters; their bytes are in ``weights_bytes``). Any
difference is named in ``GGUFModel.notes`` by tensor kind, never passed over.

Every bad input is one line (:class:`~vramlib.core.errors.ConfigError` or ``InvalidValueError``): a missing,
unreadable or corrupt file names the path; an architecture outside :data:`SUPPORTED_ARCHS`, a missing key, or a
layer ModelSpec cannot express (per-layer head counts or widths that differ, value heads of another size than key
heads, multi-head latent attention, state-space layers) names the key and the file. Used in: chapter 17.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, InvalidValueError, VramlibError
from .precision import GGUF_BASE_TYPE

SUPPORTED_ARCHS: dict[str, str] = {
    "llama": "llama", "qwen2": "qwen2", "qwen2moe": "qwen2_moe", "qwen3": "qwen3", "qwen3moe": "qwen3_moe",
    "gemma2": "gemma2", "gemma3": "gemma3_text", "phi3": "phi3", "llama4": "llama4_text",
}
"""The ``general.architecture`` values read, and the ModelSpec ``family`` each becomes (transformers' model type).
``llama`` covers Llama 1-3, Mistral and Mixtral (llama.cpp converts them all to it)."""

CONSTANT_TENSORS = ("rope_freqs", "rope_factors_long", "rope_factors_short")
"""Tensors that hold RoPE frequency tables computed by the converter: stored and loaded, but not parameters."""

_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "llama4": 4}
"""llama.cpp's default layer pattern (``set_swa_pattern(n)``: layer i is local unless (i + 1) % n == 0)."""
_GEMMA2_WINDOW = 4096
"""llama.cpp's Gemma-2 window when the file names none (``hparams.n_swa = 4096; // default value of gemma 2``)."""
_LLAMA4_CHUNK = 8192
"""llama.cpp's Llama-4 attention chunk: set whatever the file says, unless ``sliding_window`` is 0 (no chunks)."""
_ROUTER_RENORM = {"qwen3moe"}
"""Architectures whose llama.cpp MoE graph renormalises the top-k router weights (``build_moe_ffn(..., true)``)."""
_MAX_LIST = 4096
"""Longest metadata array kept whole (per-layer arrays); longer ones (the tokenizer's) keep their length only."""
_UNSUPPORTED_TENSORS = {"attn_kv_a_mqa": "multi-head latent attention", "attn_kv_b": "multi-head latent attention",
                        "ssm_in": "state-space (Mamba) layers", "ssm_conv1d": "state-space (Mamba) layers"}
_GROUP_OF_STEM = {
    "token_embd": "embed", "output": "lm_head", "attn_q": "attn_qkv", "attn_k": "attn_qkv", "attn_v": "attn_qkv",
    "attn_qkv": "attn_qkv", "attn_output": "attn_o", "ffn_gate": "mlp_in", "ffn_up": "mlp_in",
    "ffn_gate_exps": "mlp_in", "ffn_up_exps": "mlp_in", "ffn_gate_shexp": "mlp_in", "ffn_up_shexp": "mlp_in",
    "ffn_down": "mlp_down", "ffn_down_exps": "mlp_down", "ffn_down_shexp": "mlp_down", "ffn_gate_inp": "router",
    "ffn_gate_inp_shexp": "router",
}
"""The tensor kinds of a GGUF file, as ModelSpec's parameter groups are compared with them (fused q/k/v and
gate/up tensors make q, k, v one kind and gate, up another)."""
_SPEC_GROUPS = {"attn_q": "attn_qkv", "attn_k": "attn_qkv", "attn_v": "attn_qkv", "attn_o": "attn_o",
                "mlp_gate": "mlp_in", "mlp_up": "mlp_in", "mlp_down": "mlp_down", "router": "router", "norm": "norm",
                "bias": "bias", "embed": "embed", "lm_head": "lm_head"}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file as stored: ``ggml_type`` a ggml type name (``"F16"``, ``"Q8_0"``, ``"Q4_K"``),
    ``shape`` in ggml order (``ne0``, the contiguous row, first), ``n_bytes`` the bytes of its data in the file
    (without the alignment padding after it), ``offset`` where that data starts in the file."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    n_elements: int
    n_bytes: int
    offset: int = 0

    @property
    def layer(self) -> int | None:
        """The block index of a ``blk.N.*`` tensor, else None."""
        m = _LAYER_RE.match(self.name)
        return int(m.group(1)) if m else None

    @property
    def kind(self) -> str:
        """The name without ``blk.N.`` and ``.weight`` / ``.bias``: ``attn_q``, ``ffn_down_exps``, ``token_embd``."""
        return _stem(self.name)


@dataclass(frozen=True)
class GGUFModel:
    """A GGUF file read by :func:`~vramlib.catalog.models.read_gguf`: its ModelSpec, its tensors in file order, what
    the header says.

    ``weights_bytes`` is the sum of every tensor's stored bytes (what llama.cpp's model buffer holds, before its
    32-byte padding of each tensor); ``file_params`` the elements of the parameter tensors (all but
    :data:`CONSTANT_TENSORS`); ``notes`` what the reading assumed or found (empty: the ModelSpec's parameter count
    equals the file's and nothing was assumed)."""

    path: str
    arch: str
    spec: Any
    tensors: tuple[GGUFTensor, ...]
    file_type: str | None
    weights_bytes: int
    file_params: int
    notes: tuple[str, ...] = field(default=())

    @property
    def params_agree(self) -> bool:
        """Whether the ModelSpec counts exactly the parameters the file's tensors hold."""
        return self.spec.n_params == self.file_params

    def layer_bytes(self) -> dict[int, int]:
        """Stored bytes of the ``blk.N.*`` tensors of each layer N, in layer order."""
        out: dict[int, int] = {}
        for t in self.tensors:
            if t.layer is not None:
                out[t.layer] = out.get(t.layer, 0) + t.n_bytes
        return dict(sorted(out.items()))

    def non_layer_bytes(self) -> dict[str, int]:
        """Stored bytes of the tensors outside the layers by kind (``token_embd``, ``output``, ``output_norm`` ...)."""
        out: dict[str, int] = {}
        for t in self.tensors:
            if t.layer is None:
                out[t.kind] = out.get(t.kind, 0) + t.n_bytes
        return out

    def layer_weights(self) -> list:
        """The file's tensors in the shape :func:`vramlib.memory.inference.layer_weights_of` gives for a format:
        ``[outside, layers]`` -- ``outside`` as ``[kind, bytes]`` (embed: ``token_embd``; lm_head: ``output``, or
        the embeddings again when tied, as llama.cpp duplicates them for the output layer; norm: ``output_norm``
        and any other tensor outside the blocks), ``layers`` one ``[bytes, routed-expert bytes (the *_exps
        tensors), largest tensor's bytes]`` per block -- so a split prices the file tensor by tensor."""
        outside = self.non_layer_bytes()
        embed = outside.pop("token_embd", 0)
        head = outside.pop("output", embed)
        layers: dict[int, list[int]] = {}
        for t in self.tensors:
            if t.layer is not None:
                x = layers.setdefault(t.layer, [0, 0, 0])
                x[0] += t.n_bytes
                x[1] += t.n_bytes if t.kind.endswith("_exps") else 0
                x[2] = max(x[2], t.n_bytes)
        return [[["embed", embed], ["lm_head", head], ["norm", sum(outside.values())]],
                [layers[i] for i in sorted(layers)]]

    def bytes_by_type(self) -> dict[str, int]:
        """Stored bytes by ggml type (``{"Q4_K": ..., "Q6_K": ..., "F32": ...}``), largest first."""
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.ggml_type] = out.get(t.ggml_type, 0) + t.n_bytes
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def tensor(self, name: str) -> GGUFTensor:
        """The tensor called ``name`` (``"blk.0.attn_q.weight"``); one line naming the file when there is none."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise InvalidValueError("tensor", name, f"{self.path} has no such tensor ({len(self.tensors)} tensors, "
                                                f"e.g. {', '.join(t.name for t in self.tensors[:3])})")


def _stem(name: str) -> str:
    m = _LAYER_RE.match(name)
    base = m.group(2) if m else name
    for suffix in (".weight", ".bias"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


# --- the file ------------------------------------------------------------------------------------------------------
def _open(path: Any) -> tuple[Path, Any]:
    """The path and its ``gguf.GGUFReader``; a missing, unreadable or corrupt file is one line naming the path."""
    if not isinstance(path, (str, Path)) or not str(path).strip():
        raise InvalidValueError("path", path, "give the path of a .gguf file")
    p = Path(path).expanduser()
    try:
        if not p.exists():
            raise ConfigError("file", "no such file", source=str(p))
        if p.is_dir():
            raise ConfigError("file", "is a directory; give the path of a .gguf file", source=str(p))
    except OSError as e:  # a name too long, a NUL byte, no permission to look
        raise ConfigError("file", f"cannot be read ({type(e).__name__})", source=str(p)) from None
    import gguf

    try:
        return p, gguf.GGUFReader(str(p))
    except Exception as e:  # noqa: BLE001 - any failure of the reader is a bad file, said in one line
        why = " ".join(f"{type(e).__name__}: {e}".split())
        raise ConfigError("file", f"not a readable GGUF file: truncated, corrupt or not GGUF ({why[:160]})",
                          source=str(p)) from None


def _metadata(reader: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """Every key-value of the header as Python values, and the length of every array; arrays longer than
    :data:`_MAX_LIST` (the tokenizer's) keep only their length."""
    from gguf import GGUFValueType

    meta: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if f.types and f.types[0] == GGUFValueType.ARRAY:
            lengths[key] = len(f.data)
            if len(f.data) > _MAX_LIST or len(f.types) > 2:
                continue
        try:
            meta[key] = f.contents()
        except Exception:  # noqa: BLE001 - a value the reader cannot decode is treated as missing
            continue
    return meta, lengths


def _tensors(reader: Any) -> tuple[GGUFTensor, ...]:
    return tuple(GGUFTensor(t.name, t.tensor_type.name, tuple(int(x) for x in t.shape), int(t.n_elements),
                            int(t.n_bytes), int(t.data_offset)) for t in reader.tensors)


def _file_type(meta: dict[str, Any], notes: list[str]) -> str | None:
    """``general.file_type`` by its name in ``gguf.LlamaFileType`` (``"MOSTLY_Q4_K_M"``), None when absent."""
    from gguf import LlamaFileType

    value = meta.get("general.file_type")
    if value is None:
        return None
    try:
        return LlamaFileType(int(value)).name
    except (ValueError, TypeError):
        notes.append(f"general.file_type = {value!r} is a file type gguf does not name")
        return None


# --- the header ----------------------------------------------------------------------------------------------------
class _Header:
    """Typed access to the header of one file; every error one line naming the key and the file."""

    def __init__(self, meta: dict[str, Any], lengths: dict[str, int], arch: str, src: str, n_layers: int = 0):
        self.meta, self.lengths, self.arch, self.src, self.n_layers = meta, lengths, arch, src, n_layers

    def key(self, name: str) -> str:
        return name if name.startswith(("general.", "tokenizer.")) else f"{self.arch}.{name}"

    def error(self, name: str, problem: str) -> ConfigError:
        return ConfigError(self.key(name), problem, source=self.src)

    def has(self, name: str) -> bool:
        return self.key(name) in self.meta

    def integer(self, name: str, default: Any = None, minimum: int = 1) -> Any:
        """A whole number; ``default`` when the key is absent (no default: refused as missing)."""
        value = self.meta.get(self.key(name))
        if value is None:
            if self.key(name) in self.lengths:
                raise self.error(name, "is an array; a single number is expected")
            if default is None:
                raise self.error(name, "missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(name, f"must be an integer >= {minimum}, got {value!r}")
        return value

    def uniform(self, name: str, default: Any = None, minimum: int = 1, what: str = "") -> Any:
        """A number that llama.cpp also reads per layer (``get_key_or_arr``): a per-layer array is read when every
        layer has one value, else refused (ModelSpec has one value for every layer)."""
        value = self.meta.get(self.key(name))
        if isinstance(value, list):
            if len(value) != self.n_layers:
                raise self.error(name, f"has {len(value)} entries for {self.n_layers} layers")
            if len(set(value)) != 1:
                raise self.error(name, f"differs between layers ({_runs(value)}); ModelSpec has one {what or name} "
                                       "for every layer")
            value = value[0]
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise self.error(name, f"must hold integers >= {minimum}, got {value!r}")
            return value
        return self.integer(name, default, minimum)


def _runs(values: list) -> str:
    """``4 x 8, 2 x 4`` for a per-layer array (runs in order, at most four shown)."""
    runs: list[list] = []
    for v in values:
        if runs and runs[-1][1] == v:
            runs[-1][0] += 1
        else:
            runs.append([1, v])
    text = ", ".join(f"{n} x {v}" for n, v in runs[:4])
    return text + (f" ... ({len(runs)} runs)" if len(runs) > 4 else "")


def _attention(h: _Header, hidden: int) -> dict[str, int]:
    """Heads, KV heads and head size as llama.cpp reads them (its defaults: KV heads = heads, key and value heads of
    embedding_length / head_count); value heads of another size than key heads are refused."""
    heads = h.uniform("attention.head_count", what="head count")
    kv = h.uniform("attention.head_count_kv", default=heads, what="KV head count")
    if hidden % heads and not (h.has("attention.key_length") and h.has("attention.value_length")):
        raise h.error("attention.head_count", f"{heads} does not divide embedding_length {hidden} and the head size "
                                              "(attention.key_length, attention.value_length) is not given")
    key = h.integer("attention.key_length", default=hidden // heads)
    value = h.integer("attention.value_length", default=hidden // heads)
    for name, got in (("attention.value_length", value), ("attention.key_length_swa", None),
                      ("attention.value_length_swa", None)):
        got = got if got is not None else h.integer(name, default=key)
        if got != key:
            raise h.error(name, f"{got} differs from the key head size {key}; ModelSpec has one head_dim for keys and "
                                "values on every layer")
    if heads % kv:
        raise h.error("attention.head_count_kv", f"{kv} does not divide head_count {heads}")
    return {"n_heads": heads, "n_kv_heads": kv, "head_dim": key}


def _pattern(h: _Header, default: int) -> list[bool]:
    """Which layers are local (sliding or chunked): ``attention.sliding_window_pattern`` as one flag per layer or a
    period n (local unless (i + 1) % n == 0; 0: every layer), else the architecture's period."""
    value = h.meta.get(h.key("attention.sliding_window_pattern"))
    if isinstance(value, list):
        if len(value) != h.n_layers or not all(isinstance(x, (bool, int)) for x in value):
            raise h.error("attention.sliding_window_pattern", f"must be one flag per layer ({h.n_layers}), got "
                                                              f"{len(value)} values")
        return [bool(x) for x in value]
    n = h.integer("attention.sliding_window_pattern", default=default, minimum=0)
    return [n == 0 or i % n < n - 1 for i in range(h.n_layers)]


def _mixers(h: _Header, notes: list[str]) -> dict[str, Any]:
    """layer_types, sliding_window and attention_chunk, as llama.cpp's ``load_arch_hparams`` sets its SWA layers."""
    out: dict[str, Any] = {}
    window = h.integer("attention.sliding_window", default=_GEMMA2_WINDOW if h.arch == "gemma2" else 0, minimum=0)
    if h.arch in ("gemma2", "gemma3") and window:
        local = _pattern(h, _SWA_PATTERN[h.arch])
        out.update(sliding_window=window, layer_types=tuple("sliding" if x else "full" for x in local))
        if not h.has("attention.sliding_window"):
            notes.append(f"no {h.key('attention.sliding_window')}: llama.cpp's Gemma-2 window of {_GEMMA2_WINDOW} "
                         "tokens is used")
    elif h.arch == "llama4" and not (h.has("attention.sliding_window") and window == 0):
        local = _pattern(h, _SWA_PATTERN["llama4"])
        out.update(attention_chunk=_LLAMA4_CHUNK, layer_types=tuple("chunked" if x else "full" for x in local))
        notes.append(f"Llama-4 attends in chunks of {_LLAMA4_CHUNK:,} tokens on its local layers (llama.cpp's "
                     "constant; the file's attention.sliding_window, if any, is not used)")
    elif window:
        why = ("llama.cpp disables Phi-3's sliding window (its load_arch_hparams sets swa_type NONE)"
               if h.arch == "phi3" else f"llama.cpp's {h.arch} graph has no sliding window")
        notes.append(f"{h.key('attention.sliding_window')} = {window} is not used: {why}; every layer is read as "
                     "full attention")
    if "layer_types" in out and set(out["layer_types"]) == {"full"}:
        del out["layer_types"]
        out.pop("sliding_window", None)
        out.pop("attention_chunk", None)
    return out


# --- the tensors ---------------------------------------------------------------------------------------------------
def _tensor_fields(h: _Header, by_name: dict[str, GGUFTensor], head_dim: int, notes: list[str]) -> dict[str, Any]:
    """What only the tensors say: the vocabulary, tied embeddings, biases, norms and q/k norms (read on layer 0)."""
    emb = by_name.get("token_embd.weight")
    if emb is None or len(emb.shape) != 2:
        raise ConfigError("token_embd.weight", "missing or not 2-D; the vocabulary is read from its rows", source=h.src)
    tokens = h.lengths.get("tokenizer.ggml.tokens")
    if tokens is not None and tokens != emb.shape[1]:
        notes.append(f"the tokenizer lists {tokens:,} tokens, token_embd has {emb.shape[1]:,} rows: vocab is the rows")
    for kind, what in _UNSUPPORTED_TENSORS.items():
        if f"blk.0.{kind}.weight" in by_name:
            raise ConfigError(f"blk.0.{kind}.weight", f"{what}: a layer kind this reader does not map to a ModelSpec",
                              source=h.src)
    b = "blk.0."
    norms = [t for n, t in by_name.items() if n.startswith(b) and n.endswith("norm.weight")
             and t.kind not in ("attn_q_norm", "attn_k_norm")]
    q_norm = by_name.get(b + "attn_q_norm.weight")
    qk_norm = "none" if q_norm is None else "head" if q_norm.n_elements == head_dim else "full"
    return dict(vocab=emb.shape[1], tied_embeddings="output.weight" not in by_name,
                qkv_bias=b + "attn_q.bias" in by_name or b + "attn_qkv.bias" in by_name,
                attn_out_bias=b + "attn_output.bias" in by_name,
                mlp_bias=any(b + k + ".bias" in by_name for k in ("ffn_up", "ffn_down", "ffn_up_exps",
                                                                   "ffn_down_exps")),
                lm_head_bias="output.bias" in by_name,
                norm="layernorm" if b + "attn_norm.bias" in by_name else "rmsnorm",
                norms_per_layer=len(norms), qk_norm=qk_norm, fused_qkv=b + "attn_qkv.weight" in by_name,
                fused_gate_up=h.arch == "phi3", gated_mlp=True)


def _mlp_fields(h: _Header, by_name: dict[str, GGUFTensor]) -> dict[str, Any]:
    """The MLP widths and experts: routed experts where a layer has a router (``blk.N.ffn_gate_inp``), their count,
    top-k and width from the header, shared experts from the ``ffn_*_shexp`` tensors of the first MoE layer."""
    moe = [f"blk.{i}.ffn_gate_inp.weight" in by_name for i in range(h.n_layers)]
    n_exp = h.integer("expert_count", default=0, minimum=0)
    if not n_exp or not any(moe):
        if any(moe) or n_exp:
            raise h.error("expert_count", f"{n_exp}, yet {sum(moe)} of {h.n_layers} layers have a router "
                                          "(blk.N.ffn_gate_inp): the two must agree")
        return {"ffn": h.uniform("feed_forward_length", what="MLP width")}
    k = h.integer("expert_used_count")
    if k > n_exp:
        raise h.error("expert_used_count", f"{k} is more than the {n_exp} experts")
    dense = h.uniform("feed_forward_length", default=0, minimum=0, what="MLP width")
    width = h.uniform("expert_feed_forward_length", default=dense or None, what="expert width")
    if not all(moe) and not dense:
        raise h.error("feed_forward_length", f"missing, yet {moe.count(False)} layers have a dense MLP")
    first = moe.index(True)
    up = by_name.get(f"blk.{first}.ffn_up_shexp.weight")
    n_shared = shared = 0
    if up is not None and len(up.shape) == 2:
        count = h.integer("expert_shared_count", default=1)
        n_shared, shared = (count, up.shape[1] // count) if up.shape[1] % count == 0 else (1, up.shape[1])
    renorm = h.meta.get(h.key("expert_weights_norm"))
    out = dict(n_experts=n_exp, experts_per_token=k, ffn=width if all(moe) else dense,
               moe_ffn=0 if all(moe) or width == dense else width, n_shared_experts=n_shared,
               shared_ffn=0 if shared == width else shared,
               shared_expert_gate=f"blk.{first}.ffn_gate_inp_shexp.weight" in by_name,
               router_bias=f"blk.{first}.ffn_gate_inp.bias" in by_name,
               router_renorm=renorm if isinstance(renorm, bool) else h.arch in _ROUTER_RENORM)
    if not all(moe):
        out["mlp_types"] = tuple("moe" if x else "dense" for x in moe)
    return out


def _spec_fields(h: _Header, by_name: dict[str, GGUFTensor], path: Path, notes: list[str]) -> dict[str, Any]:
    """The keyword arguments of the file's ModelSpec."""
    hidden = h.integer("embedding_length")
    att = _attention(h, hidden)
    name = h.meta.get("general.name")
    fields = dict(name=name.strip() if isinstance(name, str) and name.strip() else path.stem, n_layers=h.n_layers,
                  hidden=hidden, **att, max_context=h.integer("context_length"), family=SUPPORTED_ARCHS[h.arch],
                  source=f"GGUF file {path} (general.architecture {h.arch})")
    fields.update(_tensor_fields(h, by_name, att["head_dim"], notes))
    fields.update(_mlp_fields(h, by_name))
    fields.update(_mixers(h, notes))
    return fields


def _checkpoint_format(file_type: str | None) -> str | None:
    """The catalogue's GGUF mix of a ``MOSTLY_*`` file type (``MOSTLY_Q4_K_M`` -> ``"q4_k_m"``), else None (float
    files and mixes the catalogue has no rules for)."""
    if file_type and file_type.startswith("MOSTLY_"):
        key = file_type[len("MOSTLY_"):].lower()
        return key if key in GGUF_BASE_TYPE else None
    return None


def _group(t: GGUFTensor) -> str:
    """The parameter kind of a tensor, as :data:`_SPEC_GROUPS` names ModelSpec's groups; ``other`` when unknown."""
    kind = re.sub(r"\.\d+$", "", t.kind)  # older files store one tensor per expert: ffn_gate.3
    if kind.endswith("norm"):
        return "norm"
    if t.name.endswith(".bias"):
        return "router" if kind == "ffn_gate_inp" else "bias"
    return _GROUP_OF_STEM.get(kind, "other")


def _param_notes(spec: Any, tensors: tuple[GGUFTensor, ...], n_layers: int) -> list[str]:
    """The parameter check: the file's tensor elements against the ModelSpec's count, by kind where they differ;
    the constant tables and tensors of layers past block_count named."""
    notes = []
    in_file: dict[str, int] = {}
    unknown: list[str] = []
    for t in tensors:
        if t.kind in CONSTANT_TENSORS:
            notes.append(f"{t.name} ({t.n_elements:,} elements, {t.ggml_type}) is a RoPE frequency table, not a "
                         f"parameter; its {t.n_bytes:,} bytes are in weights_bytes")
            continue
        g = _group(t)
        in_file[g] = in_file.get(g, 0) + t.n_elements
        if g == "other" and t.kind not in unknown:
            unknown.append(t.kind)
    extra = sorted({t.layer for t in tensors if t.layer is not None and t.layer >= n_layers})
    if extra:
        notes.append(f"tensors of layers {extra[0]}..{extra[-1]} lie past block_count {n_layers} (not in the "
                     "ModelSpec)")
    counted: dict[str, int] = {}
    for kind, n in spec.param_groups().items():
        g = _SPEC_GROUPS.get(kind, "other")
        counted[g] = counted.get(g, 0) + n
    diff = {g: in_file.get(g, 0) - counted.get(g, 0) for g in sorted(set(in_file) | set(counted))}
    diff = {g: d for g, d in diff.items() if d}
    total = sum(in_file.values())
    if diff or total != spec.n_params:
        notes.append(f"parameters differ: the file's tensors hold {total:,}, the ModelSpec counts {spec.n_params:,} "
                     f"(file - ModelSpec by kind: {', '.join(f'{g} {d:+,}' for g, d in diff.items())})"
                     + (f"; tensor kinds ModelSpec has no group for: {', '.join(unknown[:6])}" if unknown else ""))
    return notes


def read_gguf_as(path: str | Path, spec_class: Any) -> GGUFModel:
    """Read a GGUF file's header and tensor index (nothing else is read: the weights stay on disk) into a
    :class:`GGUFModel` whose spec is a ``spec_class`` (ModelSpec: this module sits below it in the catalogue and is
    handed the class by :func:`vramlib.catalog.models.read_gguf`): every tensor's stored ggml type and bytes, the
    file type, the notes of the parameter check. Architectures: :data:`SUPPORTED_ARCHS`; every bad input is one line
    naming the file."""
    p, reader = _open(path)
    meta, lengths = _metadata(reader)
    tensors = _tensors(reader)
    del reader  # the memory map goes with it
    src = str(p)
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise InvalidValueError("general.architecture", arch, f"{src}: an architecture this reader does not map to a "
                                f"ModelSpec; supported: {', '.join(SUPPORTED_ARCHS)}")
    notes: list[str] = []
    file_type = _file_type(meta, notes)
    h = _Header(meta, lengths, arch, src)
    h.n_layers = h.integer("block_count")
    fields = _spec_fields(h, {t.name: t for t in tensors}, p, notes)
    fields["checkpoint_format"] = _checkpoint_format(file_type)
    try:
        spec = spec_class(**fields)
    except VramlibError as e:
        raise ConfigError(getattr(e, "field", "ModelSpec"), str(e), source=src) from None
    notes += _param_notes(spec, tensors, h.n_layers)
    weight_bytes = sum(t.n_bytes for t in tensors)
    params = sum(t.n_elements for t in tensors if t.kind not in CONSTANT_TENSORS)
    return GGUFModel(src, arch, spec, tensors, file_type, weight_bytes, params, tuple(notes))
