"""Storage formats: bits per element *including* each format's overheads, with sources.

Plain formats (fp32 ... int4) store every tensor at one width, which is the
source document's arithmetic (13e9 x 0.5 B for "INT4"). Real quantized
formats (NF4, GPTQ, AWQ, GGUF) carry scales and zero points per block or
group, and keep some tensors (embeddings, LM head, norms, biases) in 16 or
32 bits: :func:`~vramlib.catalog.precision.tensor_bits` says which, and ``weights_bytes`` counts them.

GGUF mixes follow llama.cpp's llama_tensor_get_type_impl (src/llama-quant.cpp at commit 007dbbf): per tensor kind
and layer, with its 8-expert, 70B and grouped-query rules, and tied embeddings stored as the LM head. Not modelled,
and refused in one line where they would change a figure: Falcon's own rules, tensor rows that are not a multiple
of the block (llama.cpp falls back to another type), MLA and Mamba tensors. Not modelled and not detectable from a
config: an importance matrix (``--imatrix`` drops the first-eighth ffn_down upgrade of IQ4_XS, adds one to Q4_0 and
Q5_0); MoE ffn_down follows the per-expert-tensor files the published Mixtral sizes were measured on.
Used in: chapters 1, 2, 5, 6, 7, 14.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import sympy as sp

from ..core.errors import InvalidValueError, UnknownNameError
from ..core.portable import ev, ev_mean, portable, q, raise_problem, share, shared

# GGML block types: bytes per block / weights per block (llama.cpp ggml-common.h block structs)
GGML_BITS: dict[str, Fraction] = {
    "f32": Fraction(32), "f16": Fraction(16),
    "q8_0": Fraction(34 * 8, 32),    # 32 int8 + fp16 scale
    "q5_1": Fraction(24 * 8, 32),    # 32 x 5 bit (4-bit qs + 32 high bits) + fp16 scale and min
    "q5_0": Fraction(22 * 8, 32),    # 32 x 5 bit + fp16 scale
    "q4_1": Fraction(20 * 8, 32),    # 32 x 4 bit + fp16 scale and min
    "q4_0": Fraction(18 * 8, 32),    # 32 x 4 bit + fp16 scale
    "q6_k": Fraction(210 * 8, 256),  # super-block of 256: 6-bit quants, int8 sub-scales, fp16 d
    "q5_k": Fraction(176 * 8, 256),
    "q4_k": Fraction(144 * 8, 256),
    "q3_k": Fraction(110 * 8, 256),
    "q2_k": Fraction(84 * 8, 256),
    "iq4_xs": Fraction(136 * 8, 256),   # fp16 d, 16-bit high and 4 x 8-bit low sub-scale bits, 128 bytes of codes
    "iq2_xxs": Fraction(66 * 8, 256),   # fp16 d, 32 x 16-bit grid indices with signs and scales
}
GGML_BLOCK: dict[str, int] = {t: (256 if t.endswith("_k") or t in ("iq4_xs", "iq2_xxs") else 1 if t in ("f32", "f16")
                                  else 32) for t in GGML_BITS}
"""Weights per block of each GGML type (QK_K = 256 for the k- and i-quants): a tensor's rows must be a multiple."""

WEIGHT_KINDS = ("embed", "pos_embed", "lm_head", "attn_q", "attn_k", "attn_v", "attn_o",
                "mlp_gate", "mlp_up", "mlp_down", "router", "norm", "bias")
"""Tensor kinds a :class:`~vramlib.catalog.models.ModelSpec` reports in ``param_groups()``."""
GGUF_UNMODELLED_KINDS = ("attn_kv_a", "attn_kv_b", "ssm_in", "ssm_conv", "ssm_out")
"""Tensor kinds of MLA and Mamba layers, whose GGUF types (llama.cpp's rules for them) are not modelled."""
LINEAR_KINDS = ("attn_q", "attn_k", "attn_v", "attn_o", "mlp_gate", "mlp_up", "mlp_down")


@dataclass(frozen=True)
class Precision:
    """A named storage format.

    ``bits`` is the average bits per quantized element, constants included;
    ``keeps`` maps tensor kinds the format leaves unquantized to their bits.
    ``gguf`` names a llama.cpp mix whose per-tensor types :func:`~vramlib.catalog.precision.tensor_bits` resolves.
    ``row_scale_bits``: one scale of that many bits per output row of every quantized Linear (LLM.int8's fp32 SCB),
    so the overhead per weight is ``row_scale_bits`` / the row's length and depends on the tensor
    (:func:`vramlib.memory.inference.weights_detail` reads the rows from the shape; ``bits`` excludes it).
    """

    name: str
    bits: Fraction
    description: str
    source: str
    keeps: tuple[tuple[str, int], ...] = ()
    gguf: str | None = None
    is_float: bool = False
    overhead_note: str = ""
    aliases: tuple[str, ...] = field(default=(), compare=False)
    row_scale_bits: int = 0

    @property
    def bytes_per_element(self) -> Fraction:
        """Bytes per quantized element (exact fraction), e.g. 2 for fp16, 1/2 for int4."""
        return self.bits / 8

    @property
    def bits_float(self) -> float:
        return float(self.bits)


def group_quant_bits(bits: int, group: int, scale_bits: int = 16, zero_bits: int | None = None) -> Fraction:
    """Bits per weight of a group-wise format: ``bits + (scale + zero) / group`` (GPTQ, AWQ)."""
    zero_bits = bits if zero_bits is None else zero_bits
    return Fraction(bits) + Fraction(scale_bits + zero_bits, group)


_KEEP16 = (("embed", 16), ("pos_embed", 16), ("lm_head", 16), ("norm", 16), ("bias", 16), ("router", 16))

# NF4 (bitsandbytes / QLoRA, Dettmers et al. 2023): 64 weights per block with an fp32 absmax;
# double quantization stores the absmax as 8 bits with one fp32 constant per 256 blocks:
# 32/64 = 0.5 bit/param without DQ, 8/64 + 32/(64*256) = 0.127 bit/param with it (paper, section 3).
NF4_BITS = Fraction(4) + Fraction(32, 64)
NF4_DQ_BITS = Fraction(4) + Fraction(8, 64) + Fraction(32, 64 * 256)

_BASE: dict[str, Precision] = {}


def _add(p: Precision) -> None:
    _BASE[p.name] = p


_add(Precision("fp32", Fraction(32), "IEEE single precision", "IEEE 754", is_float=True))
FP32_BYTES = int(_BASE["fp32"].bits) // 8
"""Bytes of one fp32 value: the weights and gradients of fp32 training (which keeps no separate master copy) and
fp32 activations (memory.activations' z_32)."""
_add(Precision("tf32", Fraction(32), "TensorFloat-32: a compute mode; stored as 32-bit floats",
               "NVIDIA A100 whitepaper", is_float=True))
_add(Precision("bf16", Fraction(16), "bfloat16", "Google Brain bfloat16", is_float=True))
_add(Precision("fp16", Fraction(16), "IEEE half precision", "IEEE 754", is_float=True))
_add(Precision("fp8-e4m3", Fraction(8), "FP8 E4M3 (weights/activations; per-tensor scales ignored)",
               "Micikevicius et al. 2022, FP8 formats", is_float=True))
_add(Precision("fp8-e5m2", Fraction(8), "FP8 E5M2 (gradients; per-tensor scales ignored)",
               "Micikevicius et al. 2022, FP8 formats", is_float=True))
_add(Precision("int8", Fraction(8), "8-bit integers, every tensor, no scales (the source's arithmetic)",
               "the source document", overhead_note="idealised: real INT8 keeps scales and 16-bit embeddings"))
_add(Precision("int4", Fraction(4), "4-bit integers, every tensor, no scales (the source's arithmetic)",
               "the source document", overhead_note="idealised: real 4-bit formats carry scales; see nf4, gptq, awq, gguf"))
# LLM.int8 (bitsandbytes Linear8bitLt, transformers' load_in_8bit): int8 weights with one fp32 absmax scale per
# output row (Int8Params.SCB), embeddings, LM head, norms and biases in 16 bits (tools/measure/bnb_int8.py).
_add(Precision("llm-int8", Fraction(8), "bitsandbytes LLM.int8: int8 weights, one fp32 scale per output row",
               "Dettmers et al. 2022 (LLM.int8()); bitsandbytes Int8Params", keeps=_KEEP16, row_scale_bits=32,
               aliases=("bnb-int8",),
               overhead_note="the 1-byte weight_format tensor each Linear writes into a saved checkpoint is left out"))
_add(Precision("nf4", NF4_BITS, "bitsandbytes NormalFloat4, blocks of 64 with an fp32 absmax",
               "Dettmers et al. 2023 (QLoRA); bitsandbytes", keeps=_KEEP16))
_add(Precision("nf4-dq", NF4_DQ_BITS, "NF4 with double quantization of the block constants",
               "Dettmers et al. 2023 (QLoRA), 0.127 bits/param of constants", keeps=_KEEP16))
_GGUF_MIXES = [
    # (name, base GGML type, description); the per-tensor upgrades are _gguf_layer_rule's
    ("q8_0", "q8_0", "GGUF Q8_0: blocks of 32 int8 + fp16 scale"),
    ("q6_k", "q6_k", "GGUF Q6_K: 256-weight super-blocks"),
    ("q5_k_m", "q5_k", "GGUF Q5_K_M: Q5_K with Q6_K for some attn_v / ffn_down layers"),
    ("q5_1", "q5_1", "GGUF Q5_1: blocks of 32 x 5 bit + fp16 scale and min"),
    ("q5_0", "q5_0", "GGUF Q5_0: blocks of 32 x 5 bit + fp16 scale"),
    ("q4_k_m", "q4_k", "GGUF Q4_K_M: Q4_K with Q6_K for some attn_v / ffn_down layers"),
    ("q4_k_s", "q4_k", "GGUF Q4_K_S: Q4_K with Q5_K for the first 4 attn_v and the first eighth of ffn_down"),
    ("q4_1", "q4_1", "GGUF Q4_1: blocks of 32 x 4 bit + fp16 scale and min"),
    ("q4_0", "q4_0", "GGUF Q4_0: blocks of 32 x 4 bit + fp16 scale"),
    ("iq4_xs", "iq4_xs", "GGUF IQ4_XS: 256-weight super-blocks of non-linear 4-bit codes (4.25 bits)"),
    ("q3_k_l", "q3_k", "GGUF Q3_K_L: Q3_K with Q5_K for attn_v, attn_output, ffn_down"),
    ("q3_k_m", "q3_k", "GGUF Q3_K_M: Q3_K with Q4_K/Q5_K for attn_v, attn_output, ffn_down"),
    ("q2_k", "q2_k", "GGUF Q2_K: Q2_K with Q3_K/Q4_K for attn_v and ffn_down"),
    ("iq2_xxs", "iq2_xxs", "GGUF IQ2_XXS: 2.06-bit lattice codes; Q2_K/Q4_K for attn_v, Q5_K for the LM head"),
]
GGUF_BASE_TYPE = {name: base for name, base, _ in _GGUF_MIXES}
"""The GGML type a GGUF mix stores by default (llama.cpp's llama_ftype -> default_type)."""
for _name, _base, _desc in _GGUF_MIXES:
    _add(Precision(_name, GGML_BITS[_base], _desc,
                   "llama.cpp: ggml block structs and llama_tensor_get_type (mix rules)",
                   keeps=(("norm", 32), ("bias", 32), ("router", 32)), gguf=_name))

# Block-scaled 4- and 8-bit floats (the 2025-26 checkpoints): the OCP Microscaling spec's MXFP4 (32 FP4 E2M1
# elements share one E8M0 scale: 4 + 8/32 bits), NVIDIA's NVFP4 (16 FP4 E2M1 elements share one FP8 E4M3 scale,
# 4 + 8/16 bits, plus one fp32 scale per tensor, left out: 4 bytes a tensor) and DeepSeek-V3's FP8 E4M3 weights with
# one fp32 scale per 128 x 128 block (8 + 32/16384 bits; a side that is not a multiple of 128 adds a partial row or
# column of blocks, left out: DeepSeek-V3's kv_a_proj_with_mqa, 576 rows, stores 5 block rows for 4.5).
MXFP4_BITS = Fraction(4) + Fraction(8, 32)
NVFP4_BITS = Fraction(4) + Fraction(8, 16)
FP8_BLOCK128_BITS = Fraction(8) + Fraction(32, 128 * 128)
_KEEP16_ATTENTION = _KEEP16 + tuple((k, 16) for k in ("attn_q", "attn_k", "attn_v", "attn_o", "attn_kv_a",
                                                        "attn_kv_b"))
_add(Precision("mxfp4", MXFP4_BITS, "MXFP4: blocks of 32 FP4 (E2M1) with a shared 8-bit (E8M0) scale",
               "OCP Microscaling Formats (MX) v1.0", keeps=_KEEP16))
_add(Precision("mxfp4-moe", MXFP4_BITS, "MXFP4 routed experts, everything else (attention, router, embeddings, "
               "LM head) in 16 bits: GPT-OSS as shipped", "OpenAI gpt-oss model card; OCP MX v1.0", keeps=_KEEP16_ATTENTION))
_add(Precision("nvfp4", NVFP4_BITS, "NVFP4: blocks of 16 FP4 (E2M1) with an FP8 (E4M3) scale",
               "NVIDIA TensorRT Model Optimizer; NVIDIA Blackwell", keeps=_KEEP16,
               overhead_note="one fp32 scale per tensor (4 bytes) left out"))
_add(Precision("fp8-block128", FP8_BLOCK128_BITS, "FP8 E4M3 weights, one fp32 scale per 128 x 128 block: "
               "DeepSeek-V3 as shipped", "DeepSeek-AI 2024, DeepSeek-V3 technical report (fine-grained quantization)",
               keeps=_KEEP16, is_float=True,
               overhead_note="a tensor side that is not a multiple of 128 stores a partial block more, left out"))

_GROUP_RE = re.compile(r"^(gptq|awq)-(\d)bit-g(\d+)$")
_SYM_RE = re.compile(r"^int(\d)-sym-g(\d+)$")


def _sym_precision(nbits: int, group: int) -> Precision:
    # compressed-tensors' pack-quantized W4A16 / W8A16: codes packed into int32, one scale per group in the weights'
    # 16-bit dtype, no zero point for a symmetric scheme (PackedQuantizationCompressor); the 8-byte weight_shape
    # tensor each layer stores is left out
    return Precision(f"int{nbits}-sym-g{group}", Fraction(nbits) + Fraction(16, group),
                     f"symmetric int{nbits}, group size {group}: one 16-bit scale per group, no zero point "
                     f"(compressed-tensors W{nbits}A16)", "compressed-tensors (neuralmagic), pack-quantized format",
                     keeps=_KEEP16)


def _group_precision(kind: str, nbits: int, group: int) -> Precision:
    # GPTQ (AutoGPTQ/Optimum): int32-packed qweight, fp16 scales and packed zero points per group and
    # output column; AWQ (AutoAWQ GEMM) stores the same. Embeddings, LM head and norms stay fp16.
    src = ("Frantar et al. 2023 (GPTQ); AutoGPTQ packing" if kind == "gptq"
           else "Lin et al. 2024 (AWQ); AutoAWQ packing")
    return Precision(f"{kind}-{nbits}bit-g{group}", group_quant_bits(nbits, group),
                     f"{kind.upper()} {nbits}-bit, group size {group}: fp16 scale + {nbits}-bit zero per group",
                     src, keeps=_KEEP16)


def precision_names() -> list[str]:
    """All catalogue names (group formats also accept any group size: ``gptq-4bit-g32``)."""
    return sorted(list(_BASE) + ["gptq-4bit-g128", "awq-4bit-g128", "int4-sym-g128"])


def get_precision(name: str | Precision, field: str = "precision") -> Precision:
    """Look up a format by name (case-insensitive; ``_`` and ``-`` equivalent for GGUF names)."""
    if isinstance(name, Precision):
        return name
    if not isinstance(name, str):
        raise InvalidValueError(field, name, "give a format name such as 'fp16', 'int4', 'nf4-dq', 'q4_k_m'")
    key = name.strip().lower()
    if key in _BASE:
        return _BASE[key]
    alt = key.replace("-", "_") if key.startswith("q") else key.replace("_", "-")
    if alt in _BASE:
        return _BASE[alt]
    m = _GROUP_RE.match(key)
    if m:
        nbits, group = int(m.group(2)), int(m.group(3))
        if nbits not in (2, 3, 4, 8) or group <= 0:
            raise InvalidValueError(field, name, "group formats take 2, 3, 4 or 8 bits and a positive group size")
        return _group_precision(m.group(1), nbits, group)
    m = _SYM_RE.match(key)
    if m:
        nbits, group = int(m.group(1)), int(m.group(2))
        if nbits not in (4, 8) or group <= 0:
            raise InvalidValueError(field, name, "symmetric int group formats take 4 or 8 bits and a positive group "
                                                 "size")
        return _sym_precision(nbits, group)
    raise UnknownNameError(field, name, precision_names())


# --- llama.cpp's per-layer GGUF types (llama_tensor_get_type_impl, src/llama-quant.cpp), as expressions ------------
i_l = sp.Symbol("i_l", integer=True, nonnegative=True)   # layer index
n_l = sp.Symbol("n_l", integer=True, positive=True)      # layers
gqa = sp.Symbol("gqa", integer=True, positive=True)      # query heads per KV head
n_x = sp.Symbol("n_x", integer=True, nonnegative=True)   # experts (0: dense)
z_70 = sp.Symbol("z_70", integer=True, nonnegative=True)  # 1: llama.cpp classifies the model as LLM_TYPE_70B

USE_MORE_BITS = sp.Or(i_l < sp.floor(n_l / 8), i_l >= sp.floor(7 * n_l / 8),
                      sp.Eq(sp.Mod(i_l - sp.floor(n_l / 8), 3), 2))
"""llama.cpp's use_more_bits: first and last eighth of the layers, and every third in between."""


def _gguf_layer_rule(mix: str, kind: str) -> sp.Expr:
    """Bits per element of one ``kind`` tensor of layer i_l under GGUF ``mix``: the type llama.cpp's
    llama_tensor_get_type_impl picks, its branches in their order (first true wins). Not modelled, and named in the
    module docstring: an importance matrix (it changes the Q4_0/Q5_0/IQ4_XS ffn_down rules), Falcon's own rules
    (refused), rows that are not a multiple of the block (refused by weights_parts)."""
    t = {k: sp.Rational(v.numerator, v.denominator) for k, v in GGML_BITS.items()}
    base = t[GGUF_BASE_TYPE[mix]]
    eight = sp.Eq(n_x, 8)  # "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
    rules: list[tuple[sp.Expr, Any]] = []
    if mix == "iq2_xxs":  # the IQ2/IQ1 branch replaces every rule below
        if kind == "attn_v":
            rules += [(t["q4_k"], sp.Or(gqa >= 4, n_x >= 4)), (t["q2_k"], True)]
        elif kind == "attn_k":
            rules.append((t["q4_k"], eight))
        elif kind == "mlp_down":
            rules.append((t["q2_k"], i_l < sp.floor(n_l / 8)))
        elif kind == "attn_o":
            rules.append((t["q5_k"], eight))
        rules.append((base, True))
        return sp.Piecewise(*rules)
    if kind == "attn_v":
        rules.append((t["q8_0"], eight))  # applied last in llama.cpp, overriding every choice before it
        chosen = {"q2_k": [(t["q4_k"], gqa >= 4), (t["q3_k"], True)],
                  "q3_k_m": [(t["q5_k"], i_l < 2), (t["q4_k"], True)],
                  "q3_k_l": [(t["q5_k"], True)],
                  "iq4_xs": [(t["q5_k"], gqa >= 4)],
                  "q4_k_m": [(t["q6_k"], USE_MORE_BITS)],
                  "q5_k_m": [(t["q6_k"], USE_MORE_BITS)],
                  "q4_k_s": [(t["q5_k"], i_l < 4)]}.get(mix, [])
        # then the 70B rule lifts a Q3_K or Q4_K choice to Q5_K
        lift = (t["q3_k"], t["q4_k"])
        for bits, cond in chosen:
            if bits in lift:
                rules.append((t["q5_k"], sp.And(cond, sp.Eq(z_70, 1))))
            rules.append((bits, cond))
        if base in lift:
            rules.append((t["q5_k"], sp.Eq(z_70, 1)))
    elif kind == "attn_k":
        rules.append((t["q8_0"], eight))
    elif kind == "mlp_down":
        if mix in ("q4_k_m", "q5_k_m"):
            rules.append((base, n_x >= 8))  # expert ffn_down tensors are counted per expert, so few get the upgrade
        rules += {"q2_k": [(t["q3_k"], True)],
                  "q3_k_m": [(t["q5_k"], i_l < sp.floor(n_l / 16)), (t["q4_k"], True)],
                  "q3_k_l": [(t["q5_k"], True)],
                  "q4_k_m": [(t["q6_k"], USE_MORE_BITS)],
                  "iq4_xs": [(t["q5_k"], i_l < sp.floor(n_l / 8))],
                  "q5_k_m": [(t["q6_k"], USE_MORE_BITS)],
                  "q4_k_s": [(t["q5_k"], i_l < sp.floor(n_l / 8))]}.get(mix, [])
    elif kind == "attn_o":
        if mix in ("q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "iq4_xs"):
            rules.append((t["q5_k"], eight))
        rules += {"q2_k": [(t["q3_k"], sp.Not(eight))], "q3_k_m": [(t["q4_k"], sp.Not(eight))],
                  "q3_k_l": [(t["q5_k"], sp.Not(eight))]}.get(mix, [])
    rules.append((base, True))
    return sp.Piecewise(*rules)


GGUF_OUTPUT_TYPE = {mix: ("q8_0" if mix == "q8_0" else "q5_k" if mix == "iq2_xxs" else "q6_k")
                    for mix, _, _ in _GGUF_MIXES}
"""The GGML type of the LM head (and of tied embeddings, which llama.cpp quantizes as the output)."""
GGUF_EMBED_TYPE = {mix: ("q2_k" if mix == "iq2_xxs" else base) for mix, base, _ in _GGUF_MIXES}
"""The GGML type of untied token embeddings."""


GGUF_MIXES = tuple(sorted(GGUF_BASE_TYPE))
GGUF_LAYER_BITS: dict[tuple[str, str], sp.Expr] = {
    (mix, kind): _gguf_layer_rule(mix, kind) for mix in GGUF_MIXES for kind in WEIGHT_KINDS
    if kind not in ("embed", "pos_embed", "lm_head")}
"""Bits per element of a tensor of layer i_l (of n_l; gqa query heads per KV head, n_x experts) by GGUF mix and
tensor kind: llama.cpp's per-layer type rules (the static book's calculators print the same expressions). Chapters 5, 6."""


def tensor_bits(prec: Precision, kind: str, n_layers: int = 1, gqa: int = 1, n_experts: int = 0,
                type_70b: bool = False) -> Fraction:
    """Average bits per element for tensors of ``kind`` under ``prec`` (over all layers for GGUF mixes;
    ``type_70b``: llama.cpp classifies the model as a 70B, see gguf_type_70b)."""
    return bits_of(precision_view(prec), kind, n_layers, gqa, n_experts, 1 if type_70b else 0)


@lru_cache(maxsize=256)
def precision_view(prec: Precision) -> dict:
    """A format as portable code reads it (the browser's ``VL.data.precisions[name]`` has the same fields)."""
    return {"name": prec.name, "bits": prec.bits, "bits_floor": int(prec.bits.__floor__()), "keeps": dict(prec.keeps),
            "gguf": prec.gguf, "is_float": prec.is_float, "bytes_per_element": prec.bytes_per_element,
            "row_scale": prec.row_scale_bits}


share(GGUF_LAYER_BITS={f"{mix}|{kind}": e for (mix, kind), e in GGUF_LAYER_BITS.items()}, GGML_BITS=dict(GGML_BITS),
      GGML_BLOCK=dict(GGML_BLOCK), GGUF_BASE_TYPE=GGUF_BASE_TYPE, GGUF_OUTPUT_TYPE=GGUF_OUTPUT_TYPE,
      GGUF_EMBED_TYPE=GGUF_EMBED_TYPE, GGUF_UNMODELLED_KINDS=list(GGUF_UNMODELLED_KINDS))


@portable
def bits_of(p, kind, n_layers, gqa, n_experts, type_70b):
    """:func:`tensor_bits` of a format view: a kept tensor's own bits, the format's bits, or for a GGUF mix its
    LM-head type (GGUF_OUTPUT_TYPE), its embedding type (GGUF_EMBED_TYPE), or the mean over the layers of its
    per-layer rule (GGUF_LAYER_BITS)."""
    if kind in p["keeps"]:
        return q(p["keeps"][kind])
    if p["gguf"] is None:
        return q(p["bits"])
    if kind == "lm_head":
        return q(shared("GGML_BITS")[shared("GGUF_OUTPUT_TYPE")[p["gguf"]]])
    if kind in ("embed", "pos_embed"):
        return q(shared("GGML_BITS")[shared("GGUF_EMBED_TYPE")[p["gguf"]]])
    if kind in shared("GGUF_UNMODELLED_KINDS"):
        raise_problem(["weights", p["name"], "GGUF types of " + kind + " tensors (multi-head latent attention, "
                       "Mamba) are not modelled; pick a non-GGUF format"])
    return ev_mean("GGUF_LAYER_BITS", p["gguf"] + "|" + kind, n_layers,
                   {"n_l": n_layers, "gqa": gqa, "n_x": n_experts, "z_70": type_70b})


@portable
def layer_bits_of(p, kind, i, n_layers, gqa, n_experts, type_70b):
    """Bits per element of a ``kind`` tensor of layer ``i`` (of ``n_layers``): :func:`bits_of`, with a GGUF mix's
    per-layer rule (GGUF_LAYER_BITS) read at ``i`` rather than averaged over the layers."""
    if kind in p["keeps"] or p["gguf"] is None or kind in shared("GGUF_UNMODELLED_KINDS"):
        return bits_of(p, kind, n_layers, gqa, n_experts, type_70b)
    return ev("GGUF_LAYER_BITS", p["gguf"] + "|" + kind,
              {"i_l": i, "n_l": n_layers, "gqa": gqa, "n_x": n_experts, "z_70": type_70b})


@portable
def gguf_type_70b(s):
    """1 when llama.cpp classifies the model as LLM_TYPE_70B, which lifts Q3_K/Q4_K attn_v tensors to Q5_K: a llama-
    architecture model of 80 layers with fewer KV than query heads, or a Qwen2 model of 80 layers (the arch's
    load_hparams in llama.cpp)."""
    if s["n_layers"] != 80:
        return 0
    if s["family"] == "qwen2" or (s["family"] in ("llama", "mistral") and s["n_kv_heads"] < s["n_heads"]):
        return 1
    return 0


@portable
def gguf_problem(s, p):
    """Refuse (raise_problem) what a GGUF mix's rules do not model for the shape ``s``: llama.cpp's Falcon rules, and
    tensor rows that are not a multiple of a block (llama.cpp then falls back to another type for that tensor)."""
    if s["family"] == "falcon":
        raise_problem(["weights", p["name"], "llama.cpp's Falcon quantization rules are not modelled; pick a "
                       "non-GGUF format"])
    block = shared("GGML_BLOCK")[shared("GGUF_BASE_TYPE")[p["gguf"]]]
    head = shared("GGML_BLOCK")[shared("GGUF_OUTPUT_TYPE")[p["gguf"]]]
    widths = [["hidden", s["hidden"], head], ["n_heads x head_dim", s["n_heads"] * s["head_dim"], block],
              ["ffn", s["ffn"], block], ["moe_ffn", s["moe_ffn"], block], ["shared_ffn", s["shared_ffn"], block]]
    for w in widths:
        if w[1] % w[2] != 0:
            raise_problem(["weights", p["name"], "a row of " + str(w[1]) + " weights (" + w[0] + ") is not a "
                           "multiple of the " + str(w[2]) + "-weight GGUF block; llama.cpp then falls back to "
                           "another type for that tensor, which is not modelled"])


@portable
def row_scale_problem(s, p):
    """Refuse (raise_problem) what per-row scales (LLM.int8) are not priced for: a nominal size (no shapes, so no
    rows), and layers beyond dense GQA ones (experts, latent attention, Mamba: not measured)."""
    if s["nominal_params"] is not None:
        raise_problem(["weights", p["name"], "per-row scales need the tensors' shapes; " + s["name"] + " has only a "
                       "nominal size (pick int8 for the source's 1 byte per parameter)"])
    if s["n_experts"] or s["attention"] == "mla" or "mamba" in s["layer_types"] or "none" in s["layer_types"]:
        raise_problem(["weights", p["name"], "LLM.int8 is priced for dense attention layers; experts, latent "
                       "attention and Mamba layers are not measured"])


@portable
def row_length(s, kind):
    """Weights in one output row (the input features) of a dense GQA layer's Linear of ``kind``: the attention
    output reads the heads, the MLP's down projection the FFN, the others the hidden size."""
    if kind == "attn_o":
        return s["n_heads"] * s["head_dim"]
    if kind == "mlp_down":
        return s["ffn"]
    return s["hidden"]


def kv_bytes_per_element(dtype: str | Precision) -> Fraction:
    """Bytes per cached K/V element: float formats and plain int8/int4 only (KV caches are not GPTQ'd)."""
    p = get_precision(dtype, field="kv_dtype")
    if p.keeps or p.gguf or p.row_scale_bits:
        raise InvalidValueError("kv_dtype", p.name, "KV caches are stored as fp32, bf16, fp16, fp8-e4m3, fp8-e5m2, int8 or int4")
    return p.bytes_per_element
