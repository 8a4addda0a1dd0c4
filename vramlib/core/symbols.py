"""The sympy symbols every formula shares, with the LaTeX names the chapters display.

One symbol per quantity of a model, a workload or a storage format. Formulas
live in :mod:`vramlib.core.formulas` (memory) and :mod:`vramlib.memory.activations`.
"""
from __future__ import annotations

import sympy as sp

_pos = dict(positive=True)
_nonneg = dict(nonnegative=True)

# model shape
L = sp.Symbol("L", integer=True, **_pos)                 # decoder layers
h = sp.Symbol("h", integer=True, **_pos)                 # hidden size
n_h = sp.Symbol("n_h", integer=True, **_pos)             # attention (query) heads
n_kv = sp.Symbol("n_kv", integer=True, **_pos)           # key/value heads (GQA/MQA)
d = sp.Symbol("d_head", integer=True, **_pos)            # head dimension
f = sp.Symbol("f", integer=True, **_pos)                 # MLP intermediate (FFN) size, per expert
V = sp.Symbol("V", integer=True, **_pos)                 # vocabulary size
P = sp.Symbol("P", integer=True, **_nonneg)              # learned position embeddings (GPT-2), else 0
g = sp.Symbol("g", integer=True, **_nonneg)              # 1 for a gated (SwiGLU/GeGLU) MLP, else 0
n_mlp = sp.Symbol("n_mlp", integer=True, **_pos)         # MLP copies per layer: 1 dense, E + shared for MoE
E = sp.Symbol("E", integer=True, **_nonneg)              # routed experts (router width), 0 when dense
n_norm = sp.Symbol("n_norm", integer=True, **_nonneg)    # norms per layer
beta_qkv = sp.Symbol("beta_qkv", integer=True, **_nonneg)  # 1 if q/k/v projections have biases
beta_o = sp.Symbol("beta_o", integer=True, **_nonneg)      # 1 if the attention output projection has a bias
beta_mlp = sp.Symbol("beta_mlp", integer=True, **_nonneg)  # 1 if MLP projections have biases
beta_norm = sp.Symbol("beta_norm", integer=True, **_nonneg)  # 1 for LayerNorm (weight + bias), 0 for RMSNorm
tied = sp.Symbol("t_emb", integer=True, **_nonneg)       # 1 if the LM head shares the embedding matrix

# counts of parameters and bytes per element
N = sp.Symbol("N", integer=True, **_pos)                 # parameters
N_q = sp.Symbol("N_q", integer=True, **_nonneg)          # parameters stored in the quantized format
N_u = sp.Symbol("N_u", integer=True, **_nonneg)          # parameters a format keeps unquantized
N_t = sp.Symbol("N_t", integer=True, **_nonneg)          # trainable parameters
N_f = sp.Symbol("N_f", integer=True, **_nonneg)          # frozen parameters
bits_q = sp.Symbol("b_q", **_pos)                        # bits per quantized weight, constants included
bits_u = sp.Symbol("b_u", **_pos)                        # bits per unquantized weight
b_kv = sp.Symbol("b_kv", **_pos)                         # bytes per cached K/V element
b_w = sp.Symbol("b_w", **_nonneg)                        # bytes per trainable weight (compute copy)
b_g = sp.Symbol("b_g", **_nonneg)                        # bytes per gradient
b_m = sp.Symbol("b_m", **_nonneg)                        # bytes per fp32 master weight
b_o = sp.Symbol("b_o", **_nonneg)                        # bytes of optimizer state per trainable parameter
b_f = sp.Symbol("b_f", **_nonneg)                        # bytes per frozen weight
b_a = sp.Symbol("b_a", **_pos)                           # bytes per activation element

# workload
T = sp.Symbol("T", integer=True, **_pos)                 # tokens per sequence (context length)
B = sp.Symbol("B", integer=True, **_pos)                 # batch (sequences)
s = sp.Symbol("s", integer=True, **_pos)                 # training sequence length
b = sp.Symbol("b", integer=True, **_pos)                 # micro-batch size
r = sp.Symbol("r", integer=True, **_pos)                 # LoRA rank
M = sp.Symbol("M", **_pos)                               # memory budget, bytes
R = sp.Symbol("R", **_nonneg)                            # reserved bytes (CUDA context, framework)
W = sp.Symbol("W", **_nonneg)                            # weight bytes
e_att = sp.Symbol("e_att", integer=True, **_nonneg)      # 1 for eager attention (scores materialised), else 0
n_gpu = sp.Symbol("n", integer=True, **_pos)             # GPUs
S_shard = sp.Symbol("S", **_nonneg)                      # bytes split evenly over the GPUs
