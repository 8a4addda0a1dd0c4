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
n_mlp = sp.Symbol("n_mlp", integer=True, **_nonneg)      # MLPs of width f per layer: 1 dense, E (or k) routed experts,
                                                         # 0 in a layer without an MLP (Nemotron-H's attention blocks)
E = sp.Symbol("E", integer=True, **_nonneg)              # routed experts (router width), 0 when dense
n_norm = sp.Symbol("n_norm", integer=True, **_nonneg)    # norms per layer
beta_qkv = sp.Symbol("beta_qkv", integer=True, **_nonneg)  # 1 if q/k/v projections have biases
beta_o = sp.Symbol("beta_o", integer=True, **_nonneg)      # 1 if the attention output projection has a bias
beta_mlp = sp.Symbol("beta_mlp", integer=True, **_nonneg)  # 1 if MLP projections have biases
beta_norm = sp.Symbol("beta_norm", integer=True, **_nonneg)  # 1 for LayerNorm (weight + bias), 0 for RMSNorm
tied = sp.Symbol("t_emb", integer=True, **_nonneg)       # 1 if the LM head shares the embedding matrix

# per-layer kinds (1 / 0 indicators and sizes; a classic GQA layer has z_att = 1 and every other one 0)
z_att = sp.Symbol("z_att", integer=True, **_nonneg)      # 1 if the layer has GQA/MHA/MQA attention projections
z_mla = sp.Symbol("z_mla", integer=True, **_nonneg)      # 1 if the layer has multi-head latent attention (DeepSeek)
q_r = sp.Symbol("q_r", integer=True, **_nonneg)          # MLA query LoRA rank (0: one q_proj)
z_qr = sp.Symbol("z_qr", integer=True, **_nonneg)        # 1 if q_r > 0
c_kv = sp.Symbol("c_kv", integer=True, **_nonneg)        # MLA latent (kv_lora_rank)
d_r = sp.Symbol("d_r", integer=True, **_nonneg)          # MLA decoupled RoPE key dimension (qk_rope_head_dim)
d_v = sp.Symbol("d_v", integer=True, **_nonneg)          # MLA value head dimension
beta_qkh = sp.Symbol("beta_qkh", integer=True, **_nonneg)  # 1 for per-head q/k RMSNorms (Qwen3, Gemma-3: 2 x d_head)
beta_qkf = sp.Symbol("beta_qkf", integer=True, **_nonneg)  # 1 for full-width q/k norms (OLMo-2, Cohere: (n_h + n_kv) d)
beta_sink = sp.Symbol("beta_sink", integer=True, **_nonneg)  # 1 for learned attention sinks, one per head (GPT-OSS)
n_s = sp.Symbol("n_s", integer=True, **_nonneg)          # shared-expert MLPs per layer (always used), width f_s
f_s = sp.Symbol("f_s", integer=True, **_nonneg)          # shared-expert MLP width
beta_rb = sp.Symbol("beta_rb", integer=True, **_nonneg)  # 1 if the router has a bias of E (GPT-OSS, DeepSeek's score bias)
beta_hb = sp.Symbol("beta_hb", integer=True, **_nonneg)  # 1 if the LM head has a bias of V (PhiMoE's lm_head_bias)
z_sg = sp.Symbol("z_sg", integer=True, **_nonneg)        # 1 for a shared-expert gate of h x 1 (Qwen2-MoE)
z_ssm = sp.Symbol("z_ssm", integer=True, **_nonneg)      # 1 for a Mamba-2 state-space mixer
d_in = sp.Symbol("d_in", integer=True, **_nonneg)        # Mamba inner width (expand x hidden, or mamba heads x head dim)
n_g = sp.Symbol("n_g", integer=True, **_nonneg)          # Mamba-2 B/C groups
d_s = sp.Symbol("d_s", integer=True, **_nonneg)          # Mamba state size per channel (d_state)
n_sh = sp.Symbol("n_sh", integer=True, **_nonneg)        # Mamba-2 heads
k_c = sp.Symbol("k_c", integer=True, **_nonneg)          # Mamba causal-convolution kernel width (d_conv)
beta_cb = sp.Symbol("beta_cb", integer=True, **_nonneg)  # 1 if the Mamba convolution has a bias
beta_pb = sp.Symbol("beta_pb", integer=True, **_nonneg)  # 1 if the Mamba in/out projections have biases
beta_mn = sp.Symbol("beta_mn", integer=True, **_nonneg)  # 1 if the Mamba-2 mixer has its gated RMSNorm (d_in)

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
w = sp.Symbol("w", integer=True, **_pos)                 # attention window or chunk, tokens
blk = sp.Symbol("blk", integer=True, **_pos)             # tokens per KV-cache block (vLLM's block_size)
b_ssm = sp.Symbol("b_ssm", **_pos)                       # bytes per element of a Mamba recurrent state
K_tok = sp.Symbol("K_tok", **_pos)                       # KV-cache bytes one token adds (all layers, one sequence)
K_seq = sp.Symbol("K_seq", **_pos)                       # KV-cache (and state) bytes of one whole sequence
n_bt = sp.Symbol("n_bt", integer=True, **_pos)           # tokens one engine step schedules (vLLM's max_num_batched_tokens)
