"""Activation memory: the bytes the forward pass saves for the backward pass (parameters excluded).

Two accountings, each written once as sympy expressions:

* ``style="megatron"``: Korthikanti et al. 2022, *Reducing Activation Recomputation in Large
  Transformer Models* (arXiv:2205.05198, MLSys 2023). Table 2 per layer, section 4.3 for the
  embeddings, the last layer norm, the output layer and the loss. GPT-style layer (LayerNorm,
  MHA, 4h GeLU MLP, dropout) with 16-bit activations and 1-byte dropout masks baked into the
  constants: ``dtype`` and ``attention`` are ignored (the paper's attention stores its s x s
  scores; what a fused kernel saves is what its selective row gives).
* ``style="hf"``: what PyTorch autograd actually keeps for a Hugging Face transformers 5.x
  Llama-family decoder (Llama, Mistral, Qwen2 with q/k/v biases, Gemma-2 with four norms,
  GeGLU and soft-capping, Phi-3 with fused qkv / gate_up, Mixtral MoE). Derived from the layers'
  code and checked tensor by tensor against ``torch.autograd.graph.saved_tensors_hooks`` on
  small random models (``tools/measure/saved_tensors.py`` ->
  ``vramlib/data/measured/saved_bytes.json``; the tests compare every row).

What the hf expressions count, per decoder layer (T = b s tokens, b_a bytes per activation):

* RMSNorm (Llama form ``w * (x.float() * rsqrt(mean(x^2) + eps)).to(dtype)``): the fp32 copy of
  its input (4Th; in fp32 that copy *is* the input), the fp32 rsqrt (4T), the normalised x in
  b_a (saved by the multiply by w) and its output (saved by the next linear): 4Th + 4T + 2 b_a Th.
  Gemma form ``(x.float() * rsqrt(..) * (1 + w.float())).type_as(x)``: 4Th + 4T, the fp32
  normalised x (4Th), the fp32 (1 + w) (4h), and the output (b_a Th) when a linear follows.
* RoPE: the cos and sin tables (s d b_a each, batch independent); one pair serves every layer.
* q, k, v projections save their (shared) input only; biases (Qwen2) save nothing.
* attention, ``"sdpa"``/``"flash"``: q (n_h heads), k and v (n_kv heads: GQA is native),
  the output (which ``o_proj`` saves too) and the fp32 log-sum-exp (b n_h s). With a fused qkv
  (Phi-3) v is a view of the q|k|v projection output, so that whole storage stays alive; and
  Phi-3's RoPE concatenates, leaving q head-major, so the kernel's output is head-major too and
  ``o_proj`` keeps a second, token-major copy of it.
* attention, ``"eager"``: q, k and v copied to n_h heads by the reshapes/``repeat_kv`` of the
  batched matmuls, the output copy ``o_proj`` keeps, the fp32 softmax (b n_h s^2 x 4), the
  probabilities cast back to b_a (the same storage in fp32) and, with logit soft-capping
  (Gemma-2), the tanh output (b n_h s^2 b_a).
* SwiGLU/GeGLU MLP: gate (act input), up, act(gate) and the product (down's input):
  4 b_a T f -- fused gate_up (Phi-3) keeps the same bytes. Residual adds save nothing.
* Mixtral MoE (transformers' default ``grouped_mm`` experts): the router's fp32 softmax (4TE),
  top-k indices (8Tk), the fp32 renormalisation (4T + 4Tk), three int64 permutations of the
  T k token-expert rows (24Tk), per-expert offsets (4E), and per row: the gathered input, the
  gate|up output (2f), act(gate), the product, the expert output (b_a (2h + 4f)) and its fp32
  routing weight (4). All T k rows go through one grouped GEMM, so the count depends on T and
  k only, not on how the router spreads the tokens (the per-expert loop, ``experts_implementation
  ="eager"``, adds a few index tensors per expert and is not modelled).

Outside the layers (``scope="model"``): the int64 input ids (embedding backward), Gemma's
embedding scale (b_a), the final norm and the LM head input, Gemma-2's final soft-cap tanh
(T V b_a), the fp32 log-softmax of the logits that cross-entropy keeps (4TV: ``ForCausalLMLoss``
upcasts with ``logits.float()``; neither the b_a logits nor their fp32 copy are *saved* -- the
copy is freed right away and the b_a logits live only as long as the caller holds the model
output), the int64 shifted labels and nll_loss's fp32 total weight (4 bytes).

``scope="model"`` reports the **peak** of saved bytes over the training step:

* ``recompute="none"``: everything saved when the forward ends (the backward only frees);
* ``recompute="full"`` (HF gradient checkpointing, every layer): the L layer inputs stay, and
  the backward re-runs one layer's forward, holding its activations again while the loss and
  head tensors are already freed: ``L C + max(head, one layer)``;
* ``recompute="selective"``: the attention core (QK^T, softmax, attention over V) is
  checkpointed per layer: q, k, v and the core's output stay; the backward re-runs one core
  after that layer's MLP and head tensors are freed: ``max(held, re-run core + what is still
  held)``. (With Phi-3's fused projection the kept v is a view of the whole q|k|v output, so
  for sequences shorter than about 2 d_head selective keeps more than eager, which copies v.)

CPU versus CUDA kernels: on CPU, ``attn_implementation="sdpa"`` dispatches to PyTorch's CPU
flash kernel (``_scaled_dot_product_flash_attention_for_cpu``; the measurements show it, for every
dtype), which saves q, k and v as given (GQA without repeating k/v), its output and an fp32
log-sum-exp of b n_h s. On CUDA in bf16/fp16 (causal, no padding mask, head_dim <= 256) SDPA runs
the FlashAttention-2 kernel (``_scaled_dot_product_flash_attention``) or cuDNN attention, which by
their backward signatures keep the same set -- q, k, v, output, fp32 log-sum-exp (b, n_h, s) -- as
does transformers' ``flash_attention_2``; only the two RNG scalars differ (host tensors). So "sdpa"
and "flash" are one expression, modelling the CUDA default and equal to the CPU measurements (the
CUDA side follows PyTorch's source; no GPU measurement is stored). Not modelled: CUDA SDPA in fp32,
or with a padding or active sliding-window mask, runs the memory-efficient kernel, whose
log-sum-exp is padded to a multiple of 32 rows (at most 124 b n_h bytes more per layer) and which
also keeps the mask (the CPU kernel keeps a mask too); dropout > 0 (these families default to 0)
adds masks; autocast (fp32 weights, bf16 compute) saves bf16 casts of the weights.

Used in: chapters 2, 3, 4, 9, 10, 12, 15.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ..core.errors import InvalidValueError, check_choice, check_positive_int, checked_call
from ..catalog.models import ModelSpec, get_model
from ..catalog.precision import FP32_BYTES, get_precision
from ..core.symbols import E, L, V, b, b_a, d, f, h, n_h, n_kv, n_norm, s
from ..core.signatures import arg, keywords_through, signature
from ..core.portable import Fields, ev, portable, q_ceil, q_floor, raise_problem, share, shared

ACTIVATION_STYLES = ("hf", "megatron")
RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("eager", "sdpa", "flash")
SCOPES = ("layer", "model")
STEP_SCOPES = ("end-of-forward", "rerun", "loss-head", "layer-freed")
"""Scopes of the hf accounting only, for the phases of a training step (:mod:`vramlib.memory.step`)."""

HF_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "phi3", "yi")
"""Families whose decoder layers the hf expressions follow (RMSNorm, RoPE, gated MLP)."""

# --- symbols of this module ---------------------------------------------------------------------
_ind = dict(integer=True, nonnegative=True)
z32 = sp.Symbol("z_32", **_ind)        # 1 when activations are fp32: .float()/.to(fp32) return the same storage
z_qkv = sp.Symbol("z_qkv", **_ind)     # 1 for a fused q|k|v projection (Phi-3): v is a view of its output
z_gemma = sp.Symbol("z_gemma", **_ind)  # 1 for Gemma-style norms (fp32 (1 + w) scale) and embedding scale
z_sc = sp.Symbol("z_sc", **_ind)       # 1 for attention-logit soft-capping (Gemma-2, eager)
z_fsc = sp.Symbol("z_fsc", **_ind)     # 1 for final-logit soft-capping (Gemma-2)
z_moe = sp.Symbol("z_moe", **_ind)     # 1 for a routed-experts MLP (Mixtral)
z_oc = sp.Symbol("z_oc", **_ind)       # 1 when RoPE concatenates (Phi-3): q and the kernel output are head-major,
#                                        so o_proj saves a contiguous copy of the output
z_qkn = sp.Symbol("z_qkn", **_ind)     # 1 for per-head RMSNorms on q and k before RoPE (Qwen3)
z_q3r = sp.Symbol("z_q3r", **_ind)     # 1 for Qwen3-MoE's router (top-k weights renormalised, kept in b_a)
k_e = sp.Symbol("k_e", integer=True, positive=True)  # experts per token (1 for a dense MLP)
t = sp.Symbol("t", integer=True, positive=True)      # tensor-parallel size
z_sp = sp.Symbol("z_sp", **_ind)       # 1 with Megatron sequence parallelism

_T = b * s  # tokens in the micro-batch

# --- hf: pieces (chapters display them one by one) ----------------------------------------------
HF_NORM_IN = 4 * _T * h + 4 * _T + 2 * b_a * _T * h + z_gemma * (4 * h + (4 - b_a) * _T * h)
"""An RMSNorm whose output feeds a linear layer (pre-attention, pre-MLP, final): fp32 input copy, fp32
rsqrt, and the output (saved by the linear), plus the normalised x -- in b_a before the multiply by w (Llama
form), or in fp32 with the fp32 (1 + w) (Gemma form). Chapters 9, 10."""

HF_NORM_POST = 4 * _T * h + 4 * _T + b_a * _T * h + z_gemma * (4 * h + (4 - b_a) * _T * h)
"""A post-norm feeding the residual add (Gemma-2's post-attention and post-feedforward norms). Chapter 10."""

HF_ROPE_TABLES = 2 * s * d * b_a
"""RoPE cos and sin tables, saved by the rotary multiplies; one pair is shared by all layers. Chapter 10."""

HF_QKV_HELD = b_a * _T * d * (n_h + 2 * n_kv + z_qkv * (n_h + n_kv))
"""q (after RoPE), k (after RoPE, n_kv heads) and v -- with a fused projection the whole q|k|v output
that v is a view of. The core inputs every attention kernel keeps. Chapters 10, 12."""

HF_QK_NORM = z_qkn * _T * (n_h + n_kv) * ((4 + b_a) * d + 4)
"""Qwen3's q_norm and k_norm (RMSNorm over each head's d): the fp32 input copy, the normalised x in b_a before the
weight, and an fp32 rsqrt per head and token -- the RoPE that follows saves what it saves without them (measured:
tools/measure/saved_tensors.py, qwen3 shapes). Chapter 10."""

HF_ATTN_OUT = b_a * _T * n_h * d
"""The attention core's output, kept by o_proj (and by the flash/SDPA kernel: the same storage, unless z_oc)."""

HF_LSE = 4 * b * n_h * s
"""The fp32 log-sum-exp (softmax statistics) of flash attention: b n_h s. Chapter 10."""

HF_SCORES_EAGER = b * n_h * s**2 * (4 + b_a * (1 - z32) + z_sc * b_a)
"""Eager attention's s x s tensors: fp32 softmax, probabilities cast back to b_a (the same storage in fp32),
the soft-cap tanh (Gemma-2). Chapters 3, 10, 12."""

HF_ATTN = {
    "eager": 4 * b_a * _T * n_h * d + HF_SCORES_EAGER,
    "sdpa": HF_QKV_HELD + (1 + z_oc) * HF_ATTN_OUT + HF_LSE,
    "flash": HF_QKV_HELD + (1 + z_oc) * HF_ATTN_OUT + HF_LSE,
    "selective": HF_QKV_HELD + HF_ATTN_OUT,
}
"""Attention block of one layer by kernel; 'selective' = core recomputed, only its inputs and output kept."""

HF_MLP_DENSE = 4 * b_a * _T * f
"""Gated MLP: gate, up, act(gate), act(gate) * up. Chapters 9, 10."""

HF_MLP_MOE = 4 * _T * E + 4 * _T + 40 * _T * k_e + 4 * E + b_a * _T * k_e * (2 * h + 4 * f)
"""Mixtral MoE block with grouped-GEMM experts (router, permutations, T k expert rows). Chapter 10."""

HF_MLP_MOE_Q3 = HF_MLP_MOE - z_q3r * _T * k_e * (4 - b_a)
"""Qwen3-MoE's block (norm_topk_prob true): Mixtral's, with the T k routing weights kept in b_a where Mixtral keeps
them in fp32 (measured: tools/measure/saved_tensors.py, qwen3-moe shapes). Chapter 10."""

HF_MLP = (1 - z_moe) * HF_MLP_DENSE + z_moe * HF_MLP_MOE_Q3
"""The MLP block: dense, or routed experts."""

HF_CKPT_INPUT = b_a * _T * h
"""What gradient checkpointing keeps per layer: the layer input. Chapters 4, 9, 10."""


def _layer(attn: sp.Expr) -> sp.Expr:
    return 2 * HF_NORM_IN + (n_norm - 2) * HF_NORM_POST + HF_ROPE_TABLES + HF_QK_NORM + attn + HF_MLP


HF_LAYER_SAVED_EAGER = _layer(HF_ATTN["eager"])
"""Bytes one HF decoder layer saves for backward with eager attention. Chapters 2, 3, 9, 10, 12."""

HF_LAYER_SAVED_SDPA = _layer(HF_ATTN["sdpa"])
"""Bytes one HF decoder layer saves with SDPA (the CPU flash kernel = CUDA flash/cuDNN). Chapters 2, 3, 9, 10, 12, 15."""

HF_LAYER_SAVED_FLASH = HF_LAYER_SAVED_SDPA
"""FlashAttention-2 (CUDA): the same tensors as SDPA's flash path -- one expression. Chapters 10, 12."""

HF_LAYER_SAVED_SELECTIVE = _layer(HF_ATTN["selective"])
"""Selective recomputation (attention core checkpointed): no scores, no softmax statistics. Chapters 4, 10."""

HF_LAYER_SAVED_FULL = HF_CKPT_INPUT
"""Full recomputation (HF gradient checkpointing): each layer keeps its input only. Chapters 4, 9, 10."""

HF_LAYER_SAVED = {"eager": HF_LAYER_SAVED_EAGER, "sdpa": HF_LAYER_SAVED_SDPA, "flash": HF_LAYER_SAVED_FLASH}
"""One layer without recomputation, by attention kernel."""

HF_LOSS_HEAD = HF_NORM_IN + z_fsc * b_a * _T * V + 4 * _T * V + 8 * _T + 8 * sp.KroneckerDelta(b, 1) + 4
"""Final norm, LM-head input, Gemma-2's soft-cap tanh, cross-entropy's fp32 log-softmax (4 T V),
int64 shifted labels (for b = 1, ``labels[..., 1:].contiguous()`` is already contiguous and keeps the
padded row: 8 bytes more), nll_loss's fp32 total weight. Chapters 2, 9, 10, 15."""

HF_OUTSIDE_LAYERS = 8 * _T + z_gemma * b_a
"""Input ids (int64, for the embedding backward) and Gemma's embedding-scale scalar."""


def _model_none(layer: sp.Expr) -> sp.Expr:
    return HF_OUTSIDE_LAYERS + L * (layer - HF_ROPE_TABLES) + HF_ROPE_TABLES + HF_LOSS_HEAD


HF_MODEL_SAVED_EAGER = _model_none(HF_LAYER_SAVED_EAGER)
"""Whole causal-LM step, eager attention, no recomputation: saved bytes at the end of the forward (= peak).
Chapters 2, 3, 9, 15."""

HF_MODEL_SAVED_SDPA = _model_none(HF_LAYER_SAVED_SDPA)
"""Whole causal-LM step with SDPA / flash attention, no recomputation (= peak). Chapters 2, 3, 9, 10, 15."""

HF_MODEL_SAVED_FLASH = HF_MODEL_SAVED_SDPA
"""FlashAttention-2: the SDPA expression. Chapters 10, 15."""

_CORE_RERUN = {
    "eager": 3 * b_a * _T * n_h * d + HF_SCORES_EAGER,  # q, k, v copies at n_h heads + the s x s tensors
    "sdpa": HF_ATTN_OUT + HF_LSE,                        # the kernel re-saves q, k, v (same storages) + out + lse
    "flash": HF_ATTN_OUT + HF_LSE,
}


def _model_selective(attn: str) -> sp.Expr:
    held = L * (HF_LAYER_SAVED_SELECTIVE - HF_ROPE_TABLES) + HF_ROPE_TABLES + HF_LOSS_HEAD
    rerun = ((L - 1) * (HF_LAYER_SAVED_SELECTIVE - HF_ROPE_TABLES) + HF_ROPE_TABLES + HF_NORM_IN + HF_QK_NORM
             + HF_QKV_HELD + _CORE_RERUN[attn])
    return HF_OUTSIDE_LAYERS + sp.Max(held, rerun, evaluate=False)


def _model_full(attn: str) -> sp.Expr:
    rerun = HF_LAYER_SAVED[attn] - z32 * HF_CKPT_INPUT  # in fp32 the re-run layer's norm keeps the input itself
    return HF_OUTSIDE_LAYERS + L * HF_CKPT_INPUT + sp.Max(HF_LOSS_HEAD, rerun, evaluate=False)


HF_MODEL_PEAK_SELECTIVE = {a: _model_selective(a) for a in ATTENTION}
"""Peak with the attention core checkpointed: max(held after the forward, one core re-run in backward). Chapters 4, 10."""

HF_MODEL_PEAK_FULL = {a: _model_full(a) for a in ATTENTION}
"""Peak with every layer checkpointed: L layer inputs + max(loss/head tensors, one re-run layer). Chapters 4, 9, 10, 15."""

N_c = sp.Symbol("N_c", integer=True, nonnegative=True)   # weight elements autocast casts (linear weights, LM head)
c_in = sp.Symbol("c_in", integer=True, nonnegative=True)  # per layer, linears beyond the first that read a norm output

HF_AUTOCAST_EXTRA = (L * ((4 - b_a) * 2 * _T * h + b_a * c_in * _T * h) + (4 - b_a) * _T * h
                     + 2 * s * d * (4 - b_a) + b_a * N_c)
"""What a step with fp32 weights under CUDA autocast saves beyond the same step in b_a (measured exact on Llama-2-7B
and Qwen2.5-0.5B at full size, ``tools/measure/step_peaks.py``): the residual stream stays fp32, so each norm keeps
its normalised x in fp32 ((4 - b_a) T h, two per layer and the final one); autocast casts a norm's fp32 output once
for *every* linear that reads it (q, k, v; gate, up: ``c_in`` = 3 extra b_a T h per Llama layer), the RoPE tables
are fp32, and each linear saves the b_a cast of its weight (``N_c`` elements: every linear weight and the LM head,
not the input embedding, norms or biases, whose casts die with the forward's autocast cache). Chapter 16."""

r_l = sp.Symbol("r", integer=True, positive=True)          # LoRA rank
I_in = sp.Symbol("I_in", integer=True, nonnegative=True)   # sum of the in-features of one layer's adapted linears
n_ad = sp.Symbol("n_ad", integer=True, nonnegative=True)   # adapters per layer
z_fp = sp.Symbol("z_fp", **_ind)                           # 1 for fp32 adapters (peft's default), 0 for b_a ones

HF_LORA_LAYER_DELTA = (z_fp * (4 * _T * I_in + 4 * _T * r_l * n_ad - 4 * b_a * _T * h - b_a * _T * f)
                       + (1 - z_fp) * (b_a * _T * r_l * n_ad - 2 * b_a * _T * h))
"""What one decoder layer of a LoRA step (every linear adapted, peft, ``lora_dropout=0``) saves beyond the same layer
fully fine-tuned (measured exact at full size, ``tools/measure/step_peaks.py``): frozen weights need no saved inputs,
so the norms keep neither their normalised x nor -- with fp32 adapters -- their output, and the MLP's product is no
longer kept for ``down_proj``; each adapter's ``lora_A`` keeps its input -- with fp32 adapters a new fp32 copy
(peft casts x to the adapter's dtype: 4 T in per adapter, q, k and v each making their own), with b_a adapters the
input itself -- and ``lora_B`` the rank-r intermediate. Chapter 16."""

HF_LORA_FINAL_NORM_DELTA = -2 * b_a * _T * h
"""The final norm of a LoRA step keeps neither its normalised x nor its output (the LM head is frozen, not adapted);
with or without recomputation (the final norm is never checkpointed)."""

HF_LORA_OUTSIDE_DELTA = -(4 * _T * h + 4 * _T) + HF_LORA_FINAL_NORM_DELTA
"""Outside the layers, without recomputation: the first layer's input norm records nothing (the frozen embedding's
output needs no gradient), and the final norm's :data:`HF_LORA_FINAL_NORM_DELTA`."""

HF_END_FORWARD = {(a, "none"): _model_none(HF_LAYER_SAVED[a]) for a in ATTENTION}
HF_END_FORWARD.update({(a, "selective"): HF_OUTSIDE_LAYERS + L * (HF_LAYER_SAVED_SELECTIVE - HF_ROPE_TABLES)
                       + HF_ROPE_TABLES + HF_LOSS_HEAD for a in ATTENTION})
HF_END_FORWARD.update({(a, "full"): HF_OUTSIDE_LAYERS + L * HF_CKPT_INPUT + HF_LOSS_HEAD for a in ATTENTION})
"""HF_END_FORWARD[(attention, recompute)]: what is saved when the forward ends -- every layer's activations, or the
checkpointed inputs (and the selective layers' kept tensors), and the loss/head tensors. The step's loss-backward
phase starts from it (:mod:`vramlib.memory.step`). Chapter 16."""

HF_RERUN = {(a, "none"): sp.Integer(0) for a in ATTENTION}
HF_RERUN.update({(a, "selective"): HF_NORM_IN + HF_QK_NORM + HF_QKV_HELD + _CORE_RERUN[a] for a in ATTENTION})
HF_RERUN.update({(a, "full"): HF_LAYER_SAVED[a] - z32 * HF_CKPT_INPUT for a in ATTENTION})
"""HF_RERUN[(attention, recompute)]: what the backward's re-run of one layer (full) or one attention core
(selective) holds again on top of what stays saved. Chapter 16."""

HF_LOSS_HEAD_SAVED = {(a, r): HF_LOSS_HEAD for a in ATTENTION for r in RECOMPUTE}
"""HF_LOSS_HEAD_SAVED[(attention, recompute)]: the loss and head tensors of :data:`HF_LOSS_HEAD`, the first the
backward frees (a table like the other step scopes). Chapter 16."""

HF_LAYER_FREED = {(a, "none"): HF_LAYER_SAVED[a] - HF_ROPE_TABLES for a in ATTENTION}
HF_LAYER_FREED.update({(a, "selective"): HF_LAYER_SAVED_SELECTIVE - HF_ROPE_TABLES for a in ATTENTION})
HF_LAYER_FREED.update({(a, "full"): HF_CKPT_INPUT for a in ATTENTION})
"""HF_LAYER_FREED[(attention, recompute)]: what one layer's finished backward frees -- its saved tensors (the RoPE
tables are shared and stay), or its checkpointed input. Chapter 16 (the FSDP2 step, :mod:`vramlib.memory.fsdp`)."""

HF_MODEL = {(a, "none"): _model_none(HF_LAYER_SAVED[a]) for a in ATTENTION}
HF_MODEL.update({(a, "selective"): HF_MODEL_PEAK_SELECTIVE[a] for a in ATTENTION})
HF_MODEL.update({(a, "full"): HF_MODEL_PEAK_FULL[a] for a in ATTENTION})
HF_LAYER = {(a, "none"): HF_LAYER_SAVED[a] for a in ATTENTION}
HF_LAYER.update({(a, "selective"): HF_LAYER_SAVED_SELECTIVE for a in ATTENTION})
HF_LAYER.update({(a, "full"): HF_LAYER_SAVED_FULL for a in ATTENTION})
"""HF_LAYER[(attention, recompute)], HF_MODEL[(attention, recompute)]: the expression activation_bytes evaluates
(scope 'layer' / 'model'). Chapters 2, 3, 4, 9, 10, 12, 15."""

# --- megatron (Korthikanti et al. 2022) -----------------------------------------------------------
_REPLICATED = 1 - z_sp + z_sp / t  # layer norms, dropouts: replicated over TP ranks unless sequence-parallel

MEGATRON_LAYER = s * b * h * (10 * _REPLICATED + sp.Integer(24) / t + 5 * n_h * s / (h * t))
"""Korthikanti et al. 2022, eq. 1/2/4 (Table 2 rows 1-3): 34 s b h + 5 a s^2 b bytes per layer with 16-bit
activations and 1-byte dropout masks; tensor parallelism divides 24 of the 34 and the scores by t; sequence
parallelism divides the other 10 too. Chapters 3, 4, 12, 15."""

MEGATRON_LAYER_SELECTIVE = s * b * h * (10 * _REPLICATED + sp.Integer(24) / t)
"""Table 2 rows 4-5: selective recomputation drops the 5as/h score term. Chapters 4, 12."""

MEGATRON_LAYER_FULL = 2 * s * b * h
"""Table 2 row 6: full recomputation keeps the 16-bit layer input (the paper does not split it over TP). Chapter 4."""

MEGATRON_OUTSIDE_LAYERS = 5 * s * b * h * _REPLICATED + 4 * s * b * V / t
"""Section 4.3 with p = 1: embedding dropout mask s b h, last layer norm 2 s b h, output-layer input 2 s b h
(each / t with sequence parallelism), fp32 logits for the cross entropy 4 s b v / t. With SP this is the paper's
(s b h L / t)(p/L + 4/L (1 + v/h)). Chapters 4, 15."""

MEGATRON_LAYER_BY_RECOMPUTE = {"none": MEGATRON_LAYER, "selective": MEGATRON_LAYER_SELECTIVE,
                               "full": MEGATRON_LAYER_FULL}
MEGATRON_MODEL = {k: L * v + MEGATRON_OUTSIDE_LAYERS for k, v in MEGATRON_LAYER_BY_RECOMPUTE.items()}
"""Whole model, first pipeline stage with p = 1: L layers (eq. 5/6) + section 4.3's extras."""

# --- numeric path -------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _hf_indicators(spec: ModelSpec) -> tuple[tuple[str, int], ...]:
    got = hf_indicators_of(Fields(spec), repr(spec.family))
    raise_problem(got[1])
    return tuple(tuple(x) for x in got[0])


@portable
def hf_indicators_of(s, family_repr):
    """[[indicator, value]] of the hf expressions for a shape (fused q|k|v, Gemma norms and soft-capping, experts,
    Phi-3's fused MLP output), or [[], problem] for a family they do not model (``family_repr``: the family as Python
    prints it)."""
    if (s["family"] not in shared("HF_FAMILIES") or s["norm"] != "rmsnorm" or not s["gated_mlp"] or
            s["n_shared_experts"]):
        return [[], ["model", s["name"], "style='hf' follows RMSNorm/RoPE/gated-MLP decoders (" +
                     ", ".join(shared("HF_FAMILIES")) + "); family " + family_repr + " is not modelled, use "
                     "style='megatron'"]]
    if s["family"] == "qwen3_moe" and not s["router_renorm"]:
        return [[], ["model", s["name"], "style='hf' models Qwen3-MoE's router with norm_topk_prob true (as it "
                     "ships); false is not measured, use style='megatron'"]]
    gemma = s["family"] in ("gemma", "gemma2")
    return [[["z_qkv", 1 if s["fused_qkv"] else 0], ["z_gemma", 1 if gemma else 0],
             ["z_sc", 1 if s["family"] == "gemma2" else 0], ["z_fsc", 1 if s["family"] == "gemma2" else 0],
             ["z_moe", 1 if s["n_experts"] > 0 else 0], ["z_oc", 1 if s["family"] == "phi3" else 0],
             ["z_qkn", 1 if s["qk_norm"] == "head" else 0], ["z_q3r", 1 if s["family"] == "qwen3_moe" else 0],
             ["k_e", s["experts_per_token"] or 1]], None]


def hf_activation_problem(model: ModelSpec | str) -> str | None:
    """Why ``style="hf"`` cannot price ``model``'s activations, in one line (what the shape has beyond the one
    uniform layer the expressions measure, or a family they do not follow), or None when it can. For callers that
    report such a model's other numbers and name the missing ones (chapter 13's design levers)."""
    spec = get_model(model)
    problem = spec.uniform_problem()
    if problem:
        return problem
    got = hf_indicators_of(Fields(spec), repr(spec.family))
    return got[1][2] if got[1] else None


def _activation_dtype_bytes(dtype: str) -> int:
    from ..catalog.precision import precision_view

    got = activation_width(precision_view(get_precision(dtype, field="dtype")), dtype)
    raise_problem(got[1])
    return got[0]


@portable
def activation_width(p, given):
    """[bytes per activation element, problem]: activations are kept in fp32 (or tf32), bf16 or fp16."""
    if p["name"] not in ("fp32", "tf32", "bf16", "fp16"):
        return [0, ["dtype", given, "activations are fp32, bf16 or fp16"]]
    return [q_floor(p["bytes_per_element"]), None]


def _check_layout(spec: ModelSpec, layout: dict) -> tuple[int, bool]:
    """``tp`` and ``sequence_parallel`` of a ``**layout`` (style megatron's tensor-parallel rank), checked: tp must
    divide the heads and divide (or be a multiple of) the KV heads."""
    tp = check_positive_int("tp", layout.get("tp", 1))
    sequence_parallel = layout.get("sequence_parallel", False)
    if not isinstance(sequence_parallel, bool):
        raise InvalidValueError("sequence_parallel", sequence_parallel, "must be True or False")
    if tp > 1:
        from .inference import kv_heads_per_gpu

        kv_heads_per_gpu(spec, tp)
    return tp, sequence_parallel


share(HF_FAMILIES=list(HF_FAMILIES), MEGATRON_LAYER_BY_RECOMPUTE=MEGATRON_LAYER_BY_RECOMPUTE, MEGATRON_MODEL=MEGATRON_MODEL,
      HF_LAYER={f"{a}|{r}": e for (a, r), e in HF_LAYER.items()}, HF_MODEL={f"{a}|{r}": e for (a, r), e in HF_MODEL.items()},
      HF_END_FORWARD={f"{a}|{r}": e for (a, r), e in HF_END_FORWARD.items()},
      HF_RERUN={f"{a}|{r}": e for (a, r), e in HF_RERUN.items()},
      HF_LOSS_HEAD_SAVED={f"{a}|{r}": e for (a, r), e in HF_LOSS_HEAD_SAVED.items()},
      HF_LAYER_FREED={f"{a}|{r}": e for (a, r), e in HF_LAYER_FREED.items()}, HF_AUTOCAST_EXTRA=HF_AUTOCAST_EXTRA,
      HF_LORA_LAYER_DELTA=HF_LORA_LAYER_DELTA, HF_LORA_OUTSIDE_DELTA=HF_LORA_OUTSIDE_DELTA,
      HF_LORA_FINAL_NORM_DELTA=HF_LORA_FINAL_NORM_DELTA, FP32_BYTES=FP32_BYTES)


@portable
def saved_bytes(sym, seq, batch, how, hf):
    """Activation bytes (rounded up) of a model with symbol values ``sym`` for ``batch`` sequences of ``seq`` tokens;
    ``how`` = {"style": megatron | hf, "scope": layer | model, "recompute", "attention", "tp", "sequence_parallel",
    "b_a": activation bytes}; ``hf``: the family indicators of the hf expressions."""
    vals = dict(sym)
    vals["s"] = seq
    vals["b"] = batch
    if how["style"] == "megatron":
        vals["t"] = how["tp"]
        vals["z_sp"] = 1 if how["sequence_parallel"] else 0
        table = "MEGATRON_LAYER_BY_RECOMPUTE" if how["scope"] == "layer" else "MEGATRON_MODEL"
        return q_ceil(ev(table, how["recompute"], vals))
    for pair in hf:
        vals[pair[0]] = pair[1]
    vals["b_a"] = how["b_a"]
    vals["z_32"] = 1 if how["b_a"] == shared("FP32_BYTES") else 0
    table = {"layer": "HF_LAYER", "model": "HF_MODEL", "end-of-forward": "HF_END_FORWARD", "rerun": "HF_RERUN",
             "loss-head": "HF_LOSS_HEAD_SAVED", "layer-freed": "HF_LAYER_FREED"}
    return q_ceil(ev(table[how["scope"]], how["attention"] + "|" + how["recompute"], vals))


_LAYOUT = [arg("tp", 1, "int", keyword_only=True), arg("sequence_parallel", False, "bool", keyword_only=True)]
"""The tensor-parallel rank of style megatron, keyword-only arguments of activation_bytes and recompute_note."""
_ACTIVATION_SIGNATURE = signature(
    arg("model", annotation="ModelSpec | str"), arg("seq", annotation="int"), arg("batch", 1, "int"),
    arg("dtype", "bf16", "str"), arg("attention", "sdpa", "str"), arg("recompute", "none", "str"),
    arg("style", "hf", "str"), arg("scope", "layer", "str"), _LAYOUT)


@checked_call
@keywords_through(_ACTIVATION_SIGNATURE)
def activation_bytes(model: ModelSpec | str, seq: int, batch: int = 1, dtype: str = "bf16", attention: str = "sdpa",
                     recompute: str = "none", style: str = "hf", scope: str = "layer", **layout) -> int:
    """Bytes saved for backward by the forward pass (parameters excluded), rounded up to a whole byte.

    ``scope="layer"``: one decoder layer; ``scope="model"``: the whole step (embeddings, all layers,
    final norm, LM head, cross-entropy), as the peak over forward and backward (see the module doc);
    ``scope="end-of-forward"``: what is saved when the forward ends (``HF_END_FORWARD``);
    ``scope="rerun"``: what the backward's recomputation of one layer or core holds again (``HF_RERUN``);
    ``scope="loss-head"``: the loss and head tensors (``HF_LOSS_HEAD``); ``scope="layer-freed"``: what one layer's
    finished backward frees (``HF_LAYER_FREED``).
    ``style="hf"``: measured transformers behaviour (single device: ``tp=1``); ``style="megatron"``:
    Korthikanti et al. 2022 (``dtype`` and ``attention`` ignored; keyword-only ``tp`` must divide the heads and
    divide or be a multiple of the KV heads, :func:`vramlib.memory.inference.kv_heads_per_gpu`, ``sequence_parallel``
    True or False; the paper's layer is multi-head attention, so K and V count n_h / t heads per rank -- an upper
    bound for GQA).

    >>> activation_bytes("llama-2-7b", seq=4096, style="megatron")  # s b h (34 + 5 a s / h)
    3254779904
    """
    spec = get_model(model)
    seq = check_positive_int("seq", seq)
    batch = check_positive_int("batch", batch)
    style = check_choice("style", style, ACTIVATION_STYLES)
    scope = check_choice("scope", scope, SCOPES + STEP_SCOPES)
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    attention = check_choice("attention", attention, ATTENTION)
    tp, sequence_parallel = _check_layout(spec, layout)
    how = {"style": style, "scope": scope, "recompute": recompute, "attention": attention, "tp": tp,
           "sequence_parallel": sequence_parallel, "b_a": 0}
    if style == "megatron":
        if scope not in ("layer", "model"):
            raise InvalidValueError("scope", scope, "style='megatron' gives 'layer' or 'model' (the paper's peak); "
                                    "the step's phases are style='hf'")
        return saved_bytes(spec.symbols(), seq, batch, how, [])
    if tp != 1 or sequence_parallel:
        raise InvalidValueError("tp" if tp != 1 else "sequence_parallel", tp if tp != 1 else sequence_parallel,
                                "style='hf' models one device; tensor/sequence parallelism is style='megatron'")
    how["b_a"] = _activation_dtype_bytes(dtype)
    return saved_bytes(spec.symbols(), seq, batch, how, [list(x) for x in _hf_indicators(spec)])


_NOTE_SIGNATURE = signature([x for x in _ACTIVATION_SIGNATURE.parameters.values() if x.name != "scope"])


@checked_call
@keywords_through(_NOTE_SIGNATURE)
def recompute_note(model: ModelSpec | str, seq: int, batch: int = 1, dtype: str = "bf16", attention: str = "sdpa",
                   recompute: str = "none", style: str = "hf", **layout) -> str | None:
    """A one-line note when ``recompute`` keeps *more* activation bytes (scope "model") than a lighter level
    (none < selective < full), else None. The one case the expressions produce: a fused q|k|v projection (Phi-3)
    with eager attention and short sequences, where selective recomputation keeps the whole q|k|v output that v is a
    view of while eager attention copies v -- measured behaviour, not a modelling slip. Arguments as
    :func:`activation_bytes` (``tp`` and ``sequence_parallel`` keyword-only). Chapters 4, 10."""
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    if recompute == "none":
        return None
    here = activation_bytes(model, seq, batch, dtype, attention, recompute, style, "model", **layout)
    for lighter in RECOMPUTE[:RECOMPUTE.index(recompute)]:
        other = activation_bytes(model, seq, batch, dtype, attention, lighter, style, "model", **layout)
        if here > other:
            spec = get_model(model)
            why = (" (fused q|k|v: the checkpointed attention core keeps the whole projection output v is a view of, "
                   "eager attention copies v)" if spec.fused_qkv and attention == "eager" else "")
            return (f"recompute={recompute!r} keeps {here - other:,} bytes more activations than {lighter!r} at seq "
                    f"{seq:,}{why}; {lighter!r} is the smaller choice here")
    return None


__all__ = [
    "ACTIVATION_STYLES", "ATTENTION", "HF_ATTN", "HF_AUTOCAST_EXTRA", "HF_LORA_FINAL_NORM_DELTA", "HF_LORA_LAYER_DELTA",
    "HF_LORA_OUTSIDE_DELTA", "HF_CKPT_INPUT", "HF_END_FORWARD", "HF_LAYER", "HF_LAYER_SAVED_EAGER",
    "HF_LAYER_SAVED_FLASH", "HF_LAYER_SAVED_FULL", "HF_LAYER_SAVED_SDPA", "HF_LAYER_SAVED_SELECTIVE",
    "HF_LOSS_HEAD", "HF_MLP", "HF_MODEL", "HF_MODEL_PEAK_FULL", "HF_MODEL_PEAK_SELECTIVE", "HF_MODEL_SAVED_EAGER",
    "HF_MODEL_SAVED_FLASH", "HF_MODEL_SAVED_SDPA", "HF_NORM_IN", "HF_NORM_POST", "HF_ROPE_TABLES",
    "MEGATRON_LAYER", "MEGATRON_LAYER_FULL", "MEGATRON_LAYER_SELECTIVE", "MEGATRON_MODEL",
    "MEGATRON_OUTSIDE_LAYERS", "HF_RERUN", "HF_LOSS_HEAD_SAVED", "HF_LAYER_FREED", "RECOMPUTE", "SCOPES", "STEP_SCOPES", "activation_bytes", "recompute_note",
]
