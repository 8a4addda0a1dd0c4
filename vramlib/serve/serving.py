"""Serving: vLLM's KV-cache budget, a roofline throughput model, cost per million tokens, fit maps.

Every formula is a sympy expression below, evaluated with :func:`vramlib.core.formulas.evaluate`;
chapters display the same expressions (``sp.latex(expr, order="none")`` keeps the written order). Used in: chapters 5 (fit map), 6 (fit map, roofline,
cost) and 8 (the vLLM budget against nvidia-smi).

**The vLLM budget** follows vLLM's own start-up code (vllm-project/vllm, V1 engine):

* ``vllm/v1/worker/gpu_worker.py`` (commit 35d5cda), ``Worker.init_device``: after the CUDA context
  and NCCL exist, a memory snapshot is taken and ``requested_memory = total_memory *
  gpu_memory_utilization``, where ``total_memory`` is ``torch.cuda.mem_get_info()``'s total (the card
  minus what the driver reserves); start-up fails if free memory is below that.
* ``Worker.determine_available_memory``: ``available_kv_cache_memory = requested_memory -
  non_kv_cache_memory``, with ``non_kv_cache_memory = weights_memory + torch_peak_increase +
  non_torch_increase`` measured by ``memory_profiling`` (``vllm/utils/mem_utils.py``, commit a6d5c39)
  around ``profile_run()``: a dummy forward pass over ``max_num_batched_tokens`` tokens followed by a
  dummy sampler run over ``min(max_num_seqs, max_num_batched_tokens)`` requests.
* ``vllm/v1/kv_cache_interface.py`` ``AttentionSpec.page_size_bytes = 2 * block_size * num_kv_heads *
  head_size * dtype_size`` per layer; ``vllm/v1/core/kv_cache_utils.py`` (commit bbf906a)
  ``get_num_blocks = available_memory // page_size // num_layers``; the log prints
  ``GPU KV cache size: num_blocks * block_size tokens`` and ``Maximum concurrency for max_model_len
  tokens per request: num_blocks / cdiv(max_model_len, block_size)``.
* Sliding-window and hybrid models (vLLM 0.11.0, ``vllm/v1/core/kv_cache_utils.py``; docs/runtime-rules.md 1.3): a
  model whose every layer slides with one window is one group (``is_kv_cache_spec_uniform``), blocks as above; a model
  of sliding and full layers is split by ``_get_kv_cache_groups_uniform_page_size`` into groups of ``group_size = min``
  (layers per type) layers (``layers[i::cdiv(n, group_size)]``), and ``get_kv_cache_config_from_groups`` makes
  ``num_blocks = available // page_size // max(len(group))`` (one pool for all groups), logging ``num_blocks //
  len(kv_cache_groups) * block_size`` tokens; a request holds per sliding group ``cdiv(min(window - 1 +
  max_num_batched_tokens, T), block) + 1`` blocks (``SlidingWindowSpec.max_memory_usage_bytes``), per full group
  ``cdiv(T, block)``, and the logged concurrency is ``num_blocks`` over their sum
  (``get_max_concurrency_for_kv_cache_config``). KV_GROUPS ... MAX_LEN_KV_BYTES. Mamba, chunked-local and MLA layers
  are refused in one line.
* CUDA graphs: up to vLLM 0.20 they were captured *after* the KV cache was allocated, in the
  ``1 - gpu_memory_utilization`` headroom ("``memory_profiling`` does not consider CUDAGraph memory
  size", gpu_worker.py); since v0.21 vLLM estimates the graph pool and takes it out of the KV budget
  ("CUDA graph memory profiling is enabled (default since v0.21.0)", start-up log of vLLM 0.27.1 in
  gpustack/runner PR #251). ``cuda_graph_accounting`` chooses.
* Tensor parallelism: ``ModelConfig.get_num_kv_heads`` gives ``max(1, total_num_kv_heads // tp)``:
  KV heads are *replicated* when tp exceeds them.

* Serving extras (docs/runtime-rules.md 1.5-1.7), all off by default: LoRA slots (``max_loras``, LORA_SLOT_BYTES,
  counted with the weights), a shared prompt prefix (``shared_prefix_tokens``, MAX_CONCURRENCY_SHARED: its whole
  blocks held once) and a drafter (``draft_model``, ``num_speculative_tokens``: vLLM 0.11 refuses separate draft
  models, so it is modelled EAGLE-style: its weights load with the model, its layers add DRAFT_BLOCK_BYTES to every
  block, each request holds the lookahead slots).

What vLLM measures (activation peak, non-torch memory, CUDA graphs, CUDA context) this module
estimates; see :data:`PUBLISHED_VLLM_PROFILES` for the published start-up logs it is checked against.

Settings: :class:`ServingConfig` holds vLLM's flags and those estimates (``serving_kv_capacity(m, gpu, config)``
or the same fields as keywords); :class:`Efficiency` the roofline's utilisations (``mfu``, ``mbu``,
``tp_overhead``).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import sympy as sp

from ..core import formulas as F
from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, UnknownNameError, as_sequence, check_choice, check_number, check_positive_int
from ..core.api import public_api
from ..solve.feasibility import largest_fitting, max_tokens
from ..core.settings import Settings, param_names, settings_class
from ..catalog.hardware import GPU, get_gpu
from ..memory import inference as _tp_rule
from ..memory.inference import DEFAULT_RESERVE, kv_bytes_per_token, kv_heads_per_gpu, weights_bytes
from ..catalog.models import ModelSpec, get_model, model_names
from ..catalog.precision import get_precision, kv_bytes_per_element
from ..core.symbols import B, L, M, T, V, W, b_kv, d, e_att, f, g, h, n_h, n_kv, r
from ..core.units import GiB, bytes_text, fmt_bytes, gb, gib, parse_memory
from ..core.portable import Fields, ev, fmt_fixed, fmt_g, portable, q_add, q_ceil, q_cmp, q_decimal, q_div, q_float, \
    q_floor, q_int, raise_problem, share, share_lazy, shared
from ..catalog.precision import precision_view

__all__ = [
    "Efficiency",
    "PUBLISHED_VLLM_PROFILES",
    "VLLM_BATCH_DEFAULTS",
    "Roofline",
    "ServingCapacity",
    "ServingConfig",
    "serving_refusal",
    "bits_per_weight",
    "cost_per_million_tokens",
    "crossover_batch",
    "decode_curve",
    "effective_precision",
    "fit_map",
    "plot_fit_map",
    "published_profile_check",
    "roofline",
    "serving_kv_capacity",
    "vllm_default_batch",
]

# --- symbols of this module ---------------------------------------------------------------------------
_pos, _nn = dict(positive=True), dict(nonnegative=True)
u = sp.Symbol("u", **_pos)                       # gpu_memory_utilization
R_drv = sp.Symbol("R_drv", **_nn)                # bytes the driver reserves (nvidia-smi -q "Reserved")
C_ctx = sp.Symbol("C_ctx", **_nn)                # CUDA context (+ NCCL) present before vLLM's snapshot
A_pk = sp.Symbol("A_peak", **_nn)                # profiled activation peak (torch_peak_increase)
N_nt = sp.Symbol("N_nt", **_nn)                  # non-torch memory added while profiling
G_cg = sp.Symbol("G_cg", **_nn)                  # CUDA graph pool
n_tp = sp.Symbol("n_tp", integer=True, **_pos)   # tensor-parallel degree
blk = sp.Symbol("b_blk", integer=True, **_pos)   # tokens per KV block (block_size)
N_bt = sp.Symbol("N_bt", integer=True, **_pos)   # max_num_batched_tokens
n_seq = sp.Symbol("n_seq", integer=True, **_pos)  # max_num_seqs
c_s = sp.Symbol("c_s", **_pos)                   # sampler bytes per (request, vocabulary entry)
K_av = sp.Symbol("K_avail", **_nn)               # bytes available for the KV cache
N_blk = sp.Symbol("N_blocks", integer=True, **_nn)  # KV blocks
T_req = sp.Symbol("T_req", integer=True, **_pos)  # tokens per request
g_cg = sp.Symbol("g_cg", integer=True, **_nn)    # 1 when the graph pool comes out of the KV budget (vLLM >= 0.21)
# roofline
N_a = sp.Symbol("N_active", **_pos)              # parameters used per token
N_w = sp.Symbol("N", **_pos)                     # all parameters
N_x = sp.Symbol("N_experts", **_nn)              # parameters in routed experts (MoE), 0 when dense
k_e = sp.Symbol("k", **_pos)                     # experts per token
E_x = sp.Symbol("E", **_pos)                     # routed experts
F_pk = sp.Symbol("F_peak", **_pos)               # dense tensor FLOP/s of one GPU
BW = sp.Symbol("BW", **_pos)                     # memory bandwidth of one GPU, bytes/s
eta_c = sp.Symbol("eta_c", **_pos)               # model FLOP utilisation (MFU)
eta_m = sp.Symbol("eta_m", **_pos)               # memory bandwidth utilisation (MBU)
sigma = sp.Symbol("sigma", **_nn)                # tensor-parallel overhead: share of a step that does not shrink
k_tok = sp.Symbol("k_kv", **_pos)                # KV bytes per token (all layers, whole model)
T_p = sp.Symbol("T_p", **_pos)                   # prompt tokens
P_h = sp.Symbol("P_h", **_pos)                   # price per GPU-hour, USD
tps = sp.Symbol("r_tok", **_pos)                 # tokens per second
n_g = sp.Symbol("n_gpu", integer=True, **_pos)   # GPUs billed

# --- the vLLM budget (chapter 8; chapters 5 and 6 through fit_map) ---------------------------------------
CUDA_TOTAL_BYTES = M - R_drv
"""What ``torch.cuda.mem_get_info()`` calls total: the card (nvidia-smi "Total") minus the driver's reservation."""

REQUESTED_BYTES = u * CUDA_TOTAL_BYTES
"""vLLM's ``requested_memory = total_memory * gpu_memory_utilization``."""

KV_HEADS_PER_GPU = _tp_rule.KV_HEADS_PER_GPU.subs(_tp_rule.n_gpu, n_tp)
"""inference.KV_HEADS_PER_GPU (the one tensor-parallel KV rule, vLLM's ``max(1, total_num_kv_heads //
tensor_parallel_size)``) in this module's tp symbol: replicated when tp > KV heads."""

WEIGHTS_PER_GPU = W / n_tp
"""Weights per GPU under tensor parallelism (vLLM shards every linear layer and the vocabulary)."""

FORWARD_WORKSPACE_BYTES = F.PREFILL_WORKSPACE_BYTES.subs({B: 1, T: N_bt, e_att: 0, f: f / n_tp}, simultaneous=True)
"""The dummy forward pass of ``profile_run``: vramlib's prefill workspace over ``max_num_batched_tokens``
tokens (fused attention, MLP sharded over tp)."""

SAMPLER_BYTES = sp.Min(n_seq, N_bt) * V * c_s
"""The dummy sampler run: ``min(max_num_seqs, max_num_batched_tokens)`` requests x vocabulary x c_s bytes."""

ACTIVATION_PEAK_BYTES = sp.Max(FORWARD_WORKSPACE_BYTES, SAMPLER_BYTES)
"""Estimated ``torch_peak_increase``: the larger of the forward pass and the sampler (they run one after
the other). Calibrated on :data:`PUBLISHED_VLLM_PROFILES`."""

AVAILABLE_KV_BYTES = sp.Add(u * (M - R_drv), -W / n_tp, -A_pk, -N_nt, -g_cg * G_cg, evaluate=False)
"""``available_kv_cache_memory = requested_memory - weights - activation peak - non-torch memory``
(``- CUDA graphs`` from vLLM 0.21)."""

BLOCK_BYTES = 2 * blk * KV_HEADS_PER_GPU * d * b_kv * L
"""One KV block on one GPU: ``2 * block_size * num_kv_heads * head_size * dtype_size * num_layers``."""

NUM_BLOCKS = sp.floor(K_av / BLOCK_BYTES)
"""vLLM's ``available_memory // page_size // num_layers``."""

KV_TOKENS = N_blk * blk
"""'GPU KV cache size: ... tokens'."""

MAX_CONCURRENCY = N_blk / sp.ceiling(T_req / blk)
"""'Maximum concurrency for T tokens per request: ...x' (a fraction; whole requests are its floor)."""

# --- sliding-window and hybrid models (vLLM 0.11 V1, vllm/v1/core/kv_cache_utils.py; docs/runtime-rules.md 1.3) -----
L_sw = sp.Symbol("L_sw", integer=True, **_nn)     # sliding-window attention layers
L_fa = sp.Symbol("L_fa", integer=True, **_nn)     # full-attention layers
L_grp = sp.Symbol("L_grp", integer=True, **_pos)  # layers per KV-cache group (vLLM's group_size)
W_sw = sp.Symbol("W_sw", integer=True, **_pos)    # sliding_window
T_mx = sp.Symbol("T_max", integer=True, **_pos)   # max_model_len (the same symbol as the extras' T_max)

KV_GROUP_LAYERS = sp.Min(L_sw, L_fa)
"""Layers per group of a hybrid model: ``_get_kv_cache_groups_uniform_page_size`` takes ``group_size = min(len(layers)
for each attention type)`` (the "1" of an n:1 pattern). A model of one type (all full, or all sliding with one window:
``is_kv_cache_spec_uniform``) is one group of all its layers (L_grp = L)."""

SLIDING_GROUPS = sp.ceiling(L_sw / L_grp)
"""Groups of sliding layers: ``num_groups = cdiv(len(layers), group_size)``, group i = ``layers[i::num_groups]`` (the
last groups one layer short: "padding layers")."""

FULL_GROUPS = sp.ceiling(L_fa / L_grp)
"""Groups of full-attention layers (same rule)."""

KV_GROUPS = SLIDING_GROUPS + FULL_GROUPS
"""``len(kv_cache_groups)``: Gemma-3-27B (52 sliding + 10 full) 6 + 1 = 7; Gemma-2 (21 + 21) 2; an all-sliding or
all-full model 1."""

PAGE_BYTES = 2 * blk * KV_HEADS_PER_GPU * d * b_kv
"""``AttentionSpec.page_size_bytes``: one layer's page of one block (the same for full and sliding layers)."""

GROUP_BLOCK_BYTES = PAGE_BYTES * L_grp
"""One block id across the ``group_size`` shared tensors (each holds one layer of every group): page x L_grp
(= BLOCK_BYTES for one group of all L layers)."""

GROUP_NUM_BLOCKS = sp.floor(K_av / GROUP_BLOCK_BYTES)
"""``get_num_blocks``: ``int(available_memory // page_size // group_size)``, one pool shared by every group."""

GROUP_KV_TOKENS = sp.floor(N_blk / KV_GROUPS) * blk
"""'GPU KV cache size: ... tokens': ``num_blocks // len(kv_cache_groups) * min_block_size``."""

SLIDING_REQUEST_BLOCKS = sp.ceiling(sp.Min(W_sw - 1 + N_bt, T_req) / blk) + 1
"""Blocks one request of T_req tokens holds in a sliding group at most (``SlidingWindowSpec.max_memory_usage_bytes`` /
page: the last ``sliding_window - 1`` computed tokens plus a chunk of ``max_num_batched_tokens``, +1 for a window that
starts inside a block)."""

REQUEST_BLOCKS = SLIDING_GROUPS * SLIDING_REQUEST_BLOCKS + FULL_GROUPS * sp.ceiling(T_req / blk)
"""Blocks one request holds over all groups (each group allocates its own from the shared pool):
``get_max_concurrency_for_kv_cache_config``'s ``num_block_per_request``."""

GROUP_CONCURRENCY = N_blk / REQUEST_BLOCKS
"""'Maximum concurrency for T tokens per request': ``num_blocks / num_block_per_request``."""

MAX_LEN_KV_BYTES = PAGE_BYTES * (L_sw * SLIDING_REQUEST_BLOCKS.subs(T_req, T_mx) + L_fa * sp.ceiling(T_mx / blk))
"""``check_enough_kv_cache_memory``: one max_model_len request's cache summed over the layers (vLLM refuses to start
when it exceeds the available memory)."""

UNUSED_BYTES = sp.Add((1 - u) * (M - R_drv), -C_ctx, -(1 - g_cg) * G_cg, evaluate=False)
"""The headroom left after the CUDA context, NCCL and (up to vLLM 0.20) the CUDA graphs: what
nvidia-smi shows as free. Negative: vLLM refuses to start (or graph capture runs out of memory)."""

# --- serving extras: LoRA slots, prefix caching, a drafter (vLLM 0.11; docs/runtime-rules.md 1.5-1.7) -------------
n_lora = sp.Symbol("n_lora", integer=True, **_nn)   # max_loras (0: LoRA off)
b_lora = sp.Symbol("b_lora", **_pos)                 # bytes per element of lora_dtype
X_lora = sp.Symbol("X_lora", **_nn)                  # LoRA slot bytes per GPU (LORA_SLOT_BYTES)
W_d = sp.Symbol("W_d", **_nn)                        # the drafter's weight bytes (all GPUs)
n_kv_d = sp.Symbol("n_kv_d", integer=True, **_pos)   # the drafter's KV heads
d_d = sp.Symbol("d_head_d", integer=True, **_pos)    # the drafter's head dimension
L_d = sp.Symbol("L_d", integer=True, **_nn)          # the drafter's attention layers
P_sh = sp.Symbol("P_shared", integer=True, **_nn)    # shared_prefix_tokens
k_sp = sp.Symbol("k_spec", integer=True, **_nn)      # num_speculative_tokens (lookahead slots per request)
z_d = sp.Symbol("z_d", integer=True, **_nn)          # 1 with a drafter (EAGLE-style), else 0
T_max = sp.Symbol("T_max", integer=True, **_pos)     # max_model_len

LORA_A_INPUTS = 3 * h + n_h * d / n_tp + (1 + g) * h + f / n_tp
"""Input sizes of the LoRA A slices of one layer on one GPU: q, k, v (QKVParallelLinear, 3 slices, column-parallel:
the input is whole), o (RowParallelLinear: input sharded), gate and up (MergedColumnParallelLinear, 2 slices; gate
only for a gated MLP, g = 1), down (row-parallel: input sharded)."""

LORA_B_OUTPUTS = n_h * d / n_tp + 2 * KV_HEADS_PER_GPU * d + h + (1 + g) * f / n_tp + h
"""Output sizes of the LoRA B slices of one layer on one GPU: column-parallel layers shard the output (q; k and v by
the KV heads each GPU keeps), row-parallel ones keep it whole (o, down)."""

LORA_SLOT_BYTES = L * n_lora * r * (LORA_A_INPUTS + LORA_B_OUTPUTS) * b_lora
"""vLLM's preallocated LoRA slots on one GPU: for every wrapped linear slice ``lora_a_stacked (max_loras, 1,
max_lora_rank, input_size)`` and ``lora_b_stacked (max_loras, 1, output_size, max_lora_rank)`` in lora_dtype
(vllm/lora/layers/base_linear.py; the rank is not sharded: fully_sharded_loras=False). Allocated at model load, so
counted in ``model_memory_usage`` with the weights."""

SERVING_WEIGHTS_PER_GPU = sp.Add(W / n_tp, X_lora, W_d / n_tp, evaluate=False)
"""What vLLM measures as the model's memory per GPU: the weights, the LoRA slots and the drafter's weights (all
loaded inside the same profiler block, vllm/v1/worker/gpu_model_runner.py ``load_model``)."""

AVAILABLE_KV_BYTES_EXTRAS = sp.Add(u * (M - R_drv), -SERVING_WEIGHTS_PER_GPU, -A_pk, -N_nt, -g_cg * G_cg,
                                   evaluate=False)
"""AVAILABLE_KV_BYTES with the model's memory of SERVING_WEIGHTS_PER_GPU (equal to it without LoRA or a drafter)."""

DRAFT_BLOCK_BYTES = BLOCK_BYTES.subs({n_kv: n_kv_d, d: d_d, L: L_d}, simultaneous=True)
"""The drafter's pages in one block: its attention layers get KV-cache specs like the target's (one block holds a
page of every layer: the block grows by the drafter's ``L_d x 2 x block_size x kv_heads x head_dim x kv bytes``)."""

NUM_BLOCKS_WITH_DRAFT = sp.floor(K_av / (BLOCK_BYTES + DRAFT_BLOCK_BYTES))
"""Blocks when every block also holds the drafter's pages."""

SHARED_PREFIX_BLOCKS = sp.Max(0, sp.floor(P_sh / blk) - z_d)
"""Blocks of a shared prompt prefix stored once: only whole blocks are hashed and shared (the partial block is each
request's own); with an EAGLE-style drafter vLLM drops the last hit block (``find_longest_cache_hit``: "Need to drop
the last matched block if eagle is enabled"), so that block is each request's own too."""

REQUEST_SLOTS = sp.Min(T_req + k_sp, sp.Max(T_req, T_max))
"""Token slots a request of T_req tokens holds: its tokens plus num_speculative_tokens lookahead slots, capped at
max_model_len (``KVCacheManager.allocate_slots``: ``min(num_tokens + num_lookahead_tokens, max_model_len)``)."""

MAX_CONCURRENCY_SHARED = sp.Max(0, (N_blk - SHARED_PREFIX_BLOCKS) / (sp.ceiling(REQUEST_SLOTS / blk)
                                                                      - SHARED_PREFIX_BLOCKS))
"""Concurrency with prefix caching and lookahead slots: the pool less the shared prefix blocks, over the blocks each
request holds beyond them, ``(N_blocks - S) / (ceil(slots / b) - S)`` with S = SHARED_PREFIX_BLOCKS
(= MAX_CONCURRENCY without a shared prefix or a drafter)."""

VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""``LoRAConfig.max_lora_rank``'s allowed values (vllm/config/lora.py, vLLM 0.11)."""

VLLM_LORA_DTYPES = {"auto": "auto", "fp16": "fp16", "bf16": "bf16", "float16": "fp16", "bfloat16": "bf16"}
"""``lora_dtype``: "auto" (the model's activation dtype), float16 or bfloat16."""

# --- roofline throughput (chapter 6) ---------------------------------------------------------------------
TP_SPEEDUP = n_tp / (1 + sigma * (n_tp - 1))
"""Tensor-parallel speed-up when a share sigma of each step (communication, replicated work) does not shrink."""

WEIGHTS_READ_BYTES = W * (N_w - N_x + N_x * sp.Min(1, B * k_e / E_x)) / N_w
"""Weight bytes one decode step reads: all of a dense model; for an MoE, the shared part plus the experts
the batch routes to (at most all of them; tokens assumed to pick distinct experts)."""

PREFILL_SECONDS = 2 * N_a * T_p / (eta_c * F_pk * TP_SPEEDUP)
"""Prefill is compute-bound: 2 FLOPs per active parameter per prompt token, at MFU eta_c."""

DECODE_MEMORY_SECONDS = (WEIGHTS_READ_BYTES + B * T * k_tok) / (eta_m * BW * TP_SPEEDUP)
"""One decode step, if memory-bound: read the weights once and every sequence's KV cache."""

DECODE_COMPUTE_SECONDS = 2 * N_a * B / (eta_c * F_pk * TP_SPEEDUP)
"""One decode step, if compute-bound: 2 FLOPs per active parameter per sequence of the batch."""

DECODE_STEP_SECONDS = sp.Max(DECODE_MEMORY_SECONDS, DECODE_COMPUTE_SECONDS)
"""A decode step takes the longer of the two (the roofline)."""

DECODE_TOKENS_PER_SECOND = B / DECODE_STEP_SECONDS
"""Output tokens per second of the whole batch."""

COST_PER_MILLION_TOKENS = sp.Mul(P_h, n_g, sp.Pow(10, 6, evaluate=False),
                                 sp.Pow(sp.Mul(3600, tps, evaluate=False), -1, evaluate=False), evaluate=False)
"""USD per million tokens: GPU-hours billed per million tokens produced."""

_SOLVED = {
    # The batch where a dense model's decode step turns compute-bound (memory time = compute time).
    "CROSSOVER_BATCH": lambda: sp.solve(sp.Eq(DECODE_MEMORY_SECONDS.subs(N_x, 0), DECODE_COMPUTE_SECONDS), B)[0],
}


def __getattr__(name: str):
    if name in _SOLVED:
        value = _SOLVED[name]()
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vramlib.serve.serving' has no attribute {name!r}")


# --- defaults and their evidence --------------------------------------------------------------------------
SAMPLER_BYTES_PER_LOGIT = 39
"""c_s: bytes the V1 sampler's dummy run holds per (request, vocabulary entry) at its peak (bf16 logits, an
fp32 copy, sort values and int64 indices for top-k/top-p, softmax, cumulative sum, mask, noise).
Fitted to the published activation peaks in :data:`PUBLISHED_VLLM_PROFILES` (they imply 38.4-39.3)."""

DRIVER_RESERVED = "0.45GiB"
"""The driver's reservation assumed for a card without a published CUDA total (``GPU.cuda_total_bytes``, the
catalogue's published logs: 266-881 MiB across its cards): nvidia-smi -q 'FB Memory Usage / Reserved' shows
328-516 MiB on an H100 80GB across drivers (public logs); an RTX 3090 log of vLLM 0.27 shows 23.56 GiB total for
24576 MiB (451 MiB)."""

CUDA_CONTEXT = "0.5GiB"
"""CUDA context, cuBLAS workspace and loaded kernels before vLLM's snapshot (typically 0.3-0.6 GiB)."""

NCCL_MEMORY = "0.5GiB"
"""NCCL and custom all-reduce buffers when tp > 1 (0.42 GiB more non-torch memory at tp=2 in the llm-d
logs; 1.79 GiB in vLLM PR #10511's V0 logs)."""

NON_TORCH_MEMORY = "0.2GiB"
"""Non-torch memory added during profiling (0.09-0.35 GiB in published vLLM start-up logs)."""

CUDA_GRAPH_MEMORY = "0.5GiB"
"""CUDA graph pool ('Graph capturing finished ..., took 0.11-0.96 GiB' in published logs)."""

GRAPH_ACCOUNTING = ("budget", "headroom")
DRIVER_KEY = "reserved by the driver"
UNUSED_KEY = "unused (1 - utilization)"

PUBLISHED_VLLM_PROFILES: tuple[dict, ...] = (
    dict(model="llama-3.1-8b", gpu="h100-sxm-80gb", total_gib=79.22, max_num_seqs=256, max_num_batched_tokens=8192,
         weights_gib=14.96, activation_gib=1.26, non_torch_gib=1.79, kv_gib=53.29,
         source="vLLM PR #10511 (Meta-Llama-3-8B, same shape, on an 80 GB H100; vLLM V0, Dec 2024; non-torch "
                "memory then included the CUDA context)"),
    dict(model="llama-3.1-8b", gpu="h100-sxm-80gb", total_gib=79.18, max_num_seqs=1024, max_num_batched_tokens=8192,
         weights_gib=14.99, activation_gib=4.76, non_torch_gib=0.13, kv_gib=51.38,
         source="llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md (H100, vllm serve with "
                "vLLM's H100 defaults: 8192 batched tokens, 1024 sequences)"),
    dict(model="qwen3-0.6b", gpu="h100-sxm-80gb", total_gib=79.18, max_num_seqs=1024, max_num_batched_tokens=8192,
         weights_gib=1.12, activation_gib=5.56, non_torch_gib=0.13, kv_gib=64.45,
         spec=dict(name="qwen3-0.6b", n_layers=28, hidden=1024, n_heads=16, n_kv_heads=8, head_dim=128, ffn=3072,
                   vocab=151936, tied_embeddings=True, max_context=40960, family="qwen3",
                   source="Qwen/Qwen3-0.6B config.json"),
         source="llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md (H100)"),
)
"""Published vLLM start-up profiles (GiB as logged) that the activation estimate is checked against."""


def published_profile_check() -> list[dict]:
    """The activation-peak estimate next to each published vLLM start-up log (GiB), and the total memory vLLM
    saw next to the card's CUDA total (its smallest published one, ``GPU.cuda_total_bytes``)."""
    rows = []
    for p in PUBLISHED_VLLM_PROFILES:
        mm = ModelSpec(**p["spec"]) if "spec" in p else get_model(p["model"])
        cap = serving_kv_capacity(mm, p["gpu"], max_num_seqs=p["max_num_seqs"],
                                  max_num_batched_tokens=p["max_num_batched_tokens"], max_model_len=2048)
        rows.append({"model": mm.name, "max_num_seqs": p["max_num_seqs"],
                     "max_num_batched_tokens": p["max_num_batched_tokens"],
                     "logged activation GiB": p["activation_gib"], "estimated GiB": gib(cap.activation_peak_bytes),
                     "logged total GiB": p["total_gib"], "estimated total GiB": gib(cap.cuda_total_bytes),
                     "source": p["source"]})
    return rows


VLLM_ENTRYPOINTS = ("serve", "llm")
"""How vLLM is started: ``vllm serve`` (the OpenAI-compatible server) or the ``LLM`` class; their scheduler
defaults differ (:data:`VLLM_BATCH_DEFAULTS`)."""

VLLM_BATCH_DEFAULTS = {"serve": {"big": [8192, 1024], "small": [2048, 256]},
                       "llm": {"big": [16384, 1024], "small": [8192, 256]}}
"""vLLM's ``(max_num_batched_tokens, max_num_seqs)`` by entry point, for a GPU whose CUDA total is at least
``VLLM_BIG_GPU_BYTES`` (70 GiB) and that is not an A100 ("big"), and for the others (vllm/engine/arg_utils.py,
``EngineArgs.get_batch_defaults``, vLLM 0.11: ``device_memory >= 70 * GiB_bytes and "a100" not in device_name``)."""

VLLM_BIG_GPU_BYTES = 70 * GiB

share(VLLM_BATCH_DEFAULTS=VLLM_BATCH_DEFAULTS, VLLM_BIG_GPU_BYTES=VLLM_BIG_GPU_BYTES)


@portable
def vllm_batch_defaults(card, seen, entrypoint):
    """[max_num_batched_tokens, max_num_seqs] vLLM picks at start-up on ``card`` when CUDA reports ``seen`` bytes."""
    size = "big" if seen >= shared("VLLM_BIG_GPU_BYTES") and not ("a100" in card["key"]) else "small"
    return shared("VLLM_BATCH_DEFAULTS")[entrypoint][size]


def cuda_total(gpu: str | GPU) -> tuple[int, str]:
    """What CUDA reports as ``gpu``'s total (``torch.cuda.mem_get_info``) and how it is known: "published" (the
    card's logged figure) or "assumed" (nvidia-smi's total minus :data:`DRIVER_RESERVED`); ``driver_reserve``."""
    card = get_gpu(gpu)
    reserved, how = driver_reserve(Fields(card), None, parse_memory(DRIVER_RESERVED))
    return card.memory_bytes - reserved, how


def vllm_default_batch(gpu: str | GPU, entrypoint: str = "serve") -> tuple[int, int]:
    """vLLM's defaults ``(max_num_batched_tokens, max_num_seqs)`` on ``gpu`` (:data:`VLLM_BATCH_DEFAULTS`):
    ``vllm serve`` on a GPU with >= 70 GiB that is not an A100: (8192, 1024); otherwise (2048, 256);
    the ``LLM`` class: (16384, 1024) and (8192, 256)."""
    card = get_gpu(gpu)
    entrypoint = check_choice("entrypoint", entrypoint, VLLM_ENTRYPOINTS)
    got = vllm_batch_defaults(Fields(card), cuda_total(card)[0], entrypoint)
    return got[0], got[1]


# --- helpers ------------------------------------------------------------------------------------------------
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)
"""Block sizes vLLM accepts (``CacheConfig.block_size: Literal[1, 8, 16, 32, 64, 128]``, vllm/config/cache.py)."""


def _fraction(x, field_name: str) -> Fraction:
    check_number(field_name, x)  # no text, bool, NaN or infinity
    fr = Fraction(str(x)) if isinstance(x, float) else Fraction(x)
    return fr


def _utilization(x) -> Fraction:
    fr = _fraction(x, "gpu_memory_utilization")
    if not 0 < fr <= 1:
        raise InvalidValueError("gpu_memory_utilization", x, "must be in (0, 1]")
    return fr


_VLLM_KV_NAMES = {"fp8": "fp8-e4m3", "fp8_e4m3": "fp8-e4m3", "fp8_e5m2": "fp8-e5m2", "fp8-e4m3": "fp8-e4m3",
                  "fp8-e5m2": "fp8-e5m2"}


def _activation_dtype(weights: str, card: GPU) -> str:
    return serving_activation_format(precision_view(get_precision(weights, field="weights")), Fields(card))


@portable
def serving_activation_format(p, card):
    """vLLM's activation (and ``auto`` KV) dtype: the weights' float format of 16 bits or more, else bf16 where the
    card has it, else fp16."""
    if p["is_float"] and p["bits"] >= 16:
        return p["name"]
    return "bf16" if card["supports_bf16"] else "fp16"


BITS_PER_WEIGHT = 8 * W / N_w
"""Average stored bits per parameter of a checkpoint (scales, zeros and 16-bit tensors included)."""


def bits_per_weight(model: ModelSpec | str, weights: str) -> Fraction:
    """Effective bits per parameter of ``model`` stored as ``weights`` (chapter 5: Q4_K_M is ~4.8, not 4)."""
    mm = get_model(model)
    return F.evaluate(BITS_PER_WEIGHT, W=weights_bytes(mm, weights), N=mm.weight_params)


def effective_precision(model: ModelSpec | str, weights: str):
    """A plain :class:`~vramlib.catalog.precision.Precision` at ``bits_per_weight(model, weights)`` bits, for
    :func:`~vramlib.solve.feasibility.max_params` ("how many parameters at the bits a real format costs")."""
    from ..catalog.precision import Precision

    mm, p = get_model(model), get_precision(weights, field="weights")
    return Precision(f"{p.name} as in {mm.name}", bits_per_weight(mm, p.name),
                     f"{p.name} at the average bits it costs for {mm.name}", p.source)


def _kv_dtype(kv_dtype: str, weights: str, card: GPU | None) -> str:
    """vLLM's ``--kv-cache-dtype``: ``auto`` is the model's activation dtype; ``fp8`` means e4m3."""
    if not isinstance(kv_dtype, str):
        raise InvalidValueError("kv_dtype", kv_dtype, "give 'auto', 'fp8', 'fp8_e5m2' or a float format such as 'bf16'")
    key = kv_dtype.strip().lower()
    if key == "auto":
        return _activation_dtype(weights, card) if card is not None else "auto"  # no card: checked, not resolved
    name = vllm_kv_format(key)
    kv_bytes_per_element(name)  # validates
    return get_precision(name).name


@portable
def vllm_kv_format(key):
    """The format of vLLM's ``--kv-cache-dtype`` name (``fp8`` is e4m3); other names are formats already."""
    names = shared("VLLM_KV_NAMES")
    return names[key] if key in names else key


def _check_tp(m: ModelSpec, tp: int) -> int:
    kv_heads_per_gpu(m, tp)  # validates: whole heads on every GPU
    return tp


# --- the vLLM budget -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServingCapacity:
    """vLLM's KV-cache budget on one GPU of a tensor-parallel group (all bytes per GPU, exact ints)."""

    model: str
    gpu: str
    tp: int
    gpu_memory_utilization: float
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    weights: str
    kv_dtype: str
    kv_heads_per_gpu: int
    kv_heads_replicated: bool
    card_bytes: int
    driver_reserved_bytes: int
    cuda_total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_peak_bytes: int
    non_torch_bytes: int
    cuda_context_bytes: int
    nccl_bytes: int
    cuda_graph_bytes: int
    cuda_graph_accounting: str
    available_kv_bytes: int
    block_bytes: int
    num_blocks: int
    kv_tokens: int
    kv_cache_bytes: int
    max_model_len: int
    request_tokens: int
    max_concurrency: float
    max_concurrent_requests: int
    starts: bool
    fits_max_model_len: bool
    breakdown: Breakdown = field(compare=False)
    problems: tuple[str, ...] = ()
    lora_slot_bytes: int = 0
    draft_weights_bytes: int = 0
    draft_block_bytes: int = 0
    kv_groups: int = 1
    kv_group_layers: int = 0
    sliding_layers: int = 0
    max_len_kv_bytes: int = 0

    @property
    def process_bytes(self) -> int:
        """What nvidia-smi lists for the vLLM process once it runs (the activation region counted: PyTorch's
        caching allocator keeps it after the first large batch): weights, activations, non-torch memory,
        KV cache, CUDA graphs, CUDA context and NCCL."""
        return sum(v for k, v in self.breakdown.items() if k not in (DRIVER_KEY, UNUSED_KEY))

    @property
    def headroom_bytes(self) -> int:
        """CUDA's total minus what vLLM requests: the ``1 - gpu_memory_utilization`` share vLLM leaves alone."""
        return self.cuda_total_bytes - self.requested_bytes

    @property
    def free_bytes(self) -> int:
        """What nvidia-smi shows as free next to that process: the unused headroom."""
        return self.breakdown[UNUSED_KEY]

    @property
    def serves(self) -> bool:
        """vLLM starts *and* its cache holds one ``max_model_len`` request (vLLM refuses a longer max_model_len)."""
        return self.starts and self.fits_max_model_len

    @property
    def verdict(self) -> str:
        """One line: blocks, tokens and concurrency, or why vLLM would not start (``serving_verdict``)."""
        return serving_verdict(Fields(self))


@portable
def serving_verdict(c):
    """The vLLM budget in one line: blocks, tokens and concurrency, or why vLLM would not start."""
    head = c["model"] + " on " + str(c["tp"]) + " x " + c["gpu"] if c["tp"] > 1 else c["model"] + " on " + c["gpu"]
    if not c["starts"]:
        return head + ": vLLM would not start: " + "; ".join(c["problems"])
    groups = " tokens = " if c["kv_groups"] == 1 else (" tokens shared by " + str(c["kv_groups"]) + " KV-cache groups = ")
    line = (head + ": " + fmt_fixed(c["num_blocks"], 0, True) + " blocks of " + str(c["block_size"]) + groups +
            fmt_fixed(c["kv_tokens"], 0, True) + " tokens of KV cache (" + bytes_text(c["kv_cache_bytes"], 2) +
            " per GPU); " + fmt_fixed(c["max_concurrency"], 2, True) + "x concurrency for " +
            fmt_fixed(c["request_tokens"], 0, True) + "-token requests")
    if not c["fits_max_model_len"] and c["sliding_layers"] > 0:
        line += ("; but max_model_len " + fmt_fixed(c["max_model_len"], 0, True) + " does not fit (vLLM refuses it: one "
                 "request's cache needs " + bytes_text(c["max_len_kv_bytes"], 2) + "; set a shorter --max-model-len)")
    elif not c["fits_max_model_len"]:
        line += ("; but max_model_len " + fmt_fixed(c["max_model_len"], 0, True) + " does not fit (vLLM refuses it: set "
                 "--max-model-len <= " + fmt_fixed(c["kv_tokens"], 0, True) + ")")
    return line + "."


@settings_class
@dataclass(frozen=True)
class ServingConfig(Settings):
    """vLLM's start-up settings and the memory it does not measure for :func:`serving_kv_capacity` (chapters 6, 8).

    The engine flags: ``gpu_memory_utilization``, ``tp`` (tensor-parallel size), ``block_size``,
    ``max_num_batched_tokens`` and ``max_num_seqs`` (None: what vLLM picks for the card and the ``entrypoint``,
    "serve" or "llm", :data:`VLLM_BATCH_DEFAULTS`), ``max_model_len`` (None: the model's trained context),
    ``weights`` (the checkpoint's format), ``kv_dtype`` (``--kv-cache-dtype``: "auto", "fp8", "fp8_e5m2" or a float
    format), ``cuda_graphs`` (False: ``--enforce-eager``). ``request_tokens`` (None: ``max_model_len``) sets the
    concurrency. ``cuda_graph_accounting``: "budget" (vLLM >= 0.21) or "headroom" (0.10-0.20). The estimates vLLM
    measures at start-up (bytes or sizes such as "0.5GiB"): ``activation_peak`` (None: estimated),
    ``non_torch_memory``, ``cuda_context``, ``nccl_memory`` (tp > 1), ``cuda_graph_memory``, ``driver_reserved``
    (None: the card's nvidia-smi total minus its published CUDA total, ``GPU.cuda_total_bytes``, or
    ``DRIVER_RESERVED`` where none is published, said in the result), and ``sampler_bytes_per_logit`` (c_s).
    The serving extras (defaults: off): ``max_loras`` (0: no LoRA), ``max_lora_rank`` (8 ... 512, vLLM's list) and
    ``lora_dtype`` ("auto": the activation dtype, "bf16", "fp16") price vLLM's LoRA slots; ``shared_prefix_tokens``
    the prompt prefix every request shares (prefix caching); ``draft_model`` (a catalogue name) and
    ``num_speculative_tokens`` an EAGLE-style drafter.
    Each field is checked here (one line naming it); what depends on the model or the card (tp against the KV
    heads, the driver's share of the card, a prefix shorter than the request) is checked by the call.
    """

    gpu_memory_utilization: float = 0.9
    tp: int = 1
    block_size: int = 16
    max_num_batched_tokens: int | None = None
    weights: str = "bf16"
    kv_dtype: str = "auto"
    request_tokens: int | None = None
    cuda_graphs: bool = True
    max_num_seqs: int | None = None
    entrypoint: str = "serve"
    max_model_len: int | None = None
    cuda_graph_accounting: str = "budget"
    activation_peak: int | str | None = None
    non_torch_memory: int | str = NON_TORCH_MEMORY
    cuda_context: int | str = CUDA_CONTEXT
    nccl_memory: int | str = NCCL_MEMORY
    cuda_graph_memory: int | str = CUDA_GRAPH_MEMORY
    driver_reserved: int | str | None = None
    sampler_bytes_per_logit: float = SAMPLER_BYTES_PER_LOGIT
    max_loras: int = 0
    max_lora_rank: int = 16
    lora_dtype: str = "auto"
    shared_prefix_tokens: int = 0
    draft_model: str | None = None
    num_speculative_tokens: int = 0

    def __post_init__(self) -> None:
        _utilization(self.gpu_memory_utilization)
        fix = functools.partial(object.__setattr__, self)
        fix("tp", check_positive_int("tp", self.tp))
        fix("block_size", check_choice("block_size", self.block_size, VLLM_BLOCK_SIZES))
        fix("entrypoint", check_choice("entrypoint", self.entrypoint, VLLM_ENTRYPOINTS))
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            if getattr(self, name) is not None:
                fix(name, check_positive_int(name, getattr(self, name)))
        fix("cuda_graph_accounting", check_choice("cuda_graph_accounting", self.cuda_graph_accounting,
                                                  GRAPH_ACCOUNTING))
        for name in ("max_model_len", "request_tokens"):
            if getattr(self, name) is not None:
                fix(name, check_positive_int(name, getattr(self, name)))
        fix("weights", get_precision(self.weights, field="weights").name)
        _kv_dtype(self.kv_dtype, self.weights, None)
        if _sampler_bytes(self.sampler_bytes_per_logit) <= 0:
            raise InvalidValueError("sampler_bytes_per_logit", self.sampler_bytes_per_logit, "must be positive")
        if not isinstance(self.cuda_graphs, bool) and type(self.cuda_graphs).__name__ != "bool_":
            raise InvalidValueError("cuda_graphs", self.cuda_graphs, "must be True or False")
        fix("cuda_graphs", bool(self.cuda_graphs))
        self.memory_bytes()  # parses (checks) every size
        _check_extras(self, fix)

    def memory_bytes(self) -> dict[str, int]:
        """The estimated memory fields in bytes (NCCL only when ``tp > 1``, the graph pool only with CUDA graphs;
        ``activation_peak`` absent when it is to be estimated, ``driver_reserved`` when it is the card's)."""
        out = {name: parse_memory(getattr(self, name), field=name) for name in _MEMORY_FIELDS
               if getattr(self, name) is not None or name not in ("activation_peak", "driver_reserved")}
        out["nccl_memory"] *= self.tp > 1
        out["cuda_graph_memory"] *= self.cuda_graphs
        return out


def _check_extras(cfg: ServingConfig, fix) -> None:
    """The serving extras' fields, one line each: LoRA slots, the shared prefix, the drafter."""
    for name in ("max_loras", "shared_prefix_tokens", "num_speculative_tokens"):
        fix(name, check_positive_int(name, getattr(cfg, name), allow_zero=True))
    try:
        fix("max_lora_rank", check_choice("max_lora_rank", cfg.max_lora_rank, VLLM_LORA_RANKS))
    except UnknownNameError:
        raise InvalidValueError("max_lora_rank", cfg.max_lora_rank, "vLLM allows " +
                                ", ".join(map(str, VLLM_LORA_RANKS))) from None
    if not isinstance(cfg.lora_dtype, str):
        raise InvalidValueError("lora_dtype", cfg.lora_dtype, "give 'auto', 'bf16' or 'fp16'")
    fix("lora_dtype", VLLM_LORA_DTYPES[check_choice("lora_dtype", cfg.lora_dtype.strip().lower(), VLLM_LORA_DTYPES)])
    if cfg.draft_model is not None:
        if not isinstance(cfg.draft_model, str):
            raise InvalidValueError("draft_model", cfg.draft_model, "must be None or a catalogue model name")
        try:
            fix("draft_model", get_model(cfg.draft_model).name)
        except UnknownNameError:
            raise UnknownNameError("draft_model", cfg.draft_model, model_names()) from None
        if cfg.num_speculative_tokens == 0:
            raise InvalidValueError("num_speculative_tokens", 0, "a draft_model needs num_speculative_tokens >= 1")
    elif cfg.num_speculative_tokens:
        raise InvalidValueError("num_speculative_tokens", cfg.num_speculative_tokens,
                                "needs a draft_model (the drafter whose weights and KV are counted)")


_MEMORY_FIELDS = ("driver_reserved", "cuda_context", "nccl_memory", "cuda_graph_memory", "non_torch_memory",
                  "activation_peak")


def _sampler_bytes(x) -> Fraction:
    return _fraction(x, "sampler_bytes_per_logit")


def serving_kv_capacity(m: ModelSpec | str, gpu: str | GPU, config: ServingConfig | None = None,
                        **settings) -> ServingCapacity:
    """vLLM's KV cache on each GPU: ``total x gpu_memory_utilization - weights - profiled activation peak -
    non-torch memory (- CUDA graphs)`` -> blocks of ``block_size`` tokens -> concurrency.

    ``config``: a :class:`ServingConfig`; its fields may be given as keywords instead (or on top of it):
    ``request_tokens`` (default ``max_model_len``, itself default the model's trained context) sets the
    concurrency; ``activation_peak`` replaces the estimate with a measured value; ``cuda_graph_accounting``
    is ``"budget"`` (vLLM >= 0.21) or ``"headroom"`` (vLLM 0.10-0.20). The Breakdown's components add up
    to the card's memory as nvidia-smi reports it. Sliding-window and hybrid models follow vLLM 0.11's KV-cache groups
    (``kv_groups``, ``kv_group_layers``; ``kv_tokens`` is what vLLM logs); Mamba, chunked-local and MLA layers are
    refused in one line (``serving_layers_problem``).
    """
    mm = get_model(m)
    card = get_gpu(gpu)
    cfg = ServingConfig.build("serving_kv_capacity", config, settings, field="config", also=("m", "gpu", "config"))
    raise_problem(serving_layers_problem(mm.view(), mm.uniform_problem(), "vLLM's KV budget"))
    _check_tp(mm, cfg.tp)
    kv_name = _kv_dtype(cfg.kv_dtype, cfg.weights, card)
    mem = cfg.memory_bytes()
    mem["driver_reserved"] = driver_reserve(Fields(card), mem.get("driver_reserved"),
                                            parse_memory(DRIVER_RESERVED))[0]
    if mem["driver_reserved"] >= card.memory_bytes:
        raise InvalidValueError("driver_reserved", cfg.driver_reserved,
                                f"must be below the card's {fmt_bytes(card.memory_bytes)}")
    picked = vllm_batch_defaults(Fields(card), card.memory_bytes - mem["driver_reserved"], cfg.entrypoint)
    cfg = cfg.with_(max_num_batched_tokens=cfg.max_num_batched_tokens or picked[0],
                    max_num_seqs=cfg.max_num_seqs or picked[1])
    budget = _kv_budget(mm, card, cfg, kv_name, mem)
    problems = _start_problems(card, cfg, kv_name, budget)
    return _capacity_result(mm, card, cfg, kv_name, budget, problems)


@portable
def driver_reserve(card, given, fallback):
    """[bytes, where from] of the driver's reservation on ``card``: ``given`` (bytes, or None), else the card's
    nvidia-smi total minus its published CUDA total, else ``fallback`` (``DRIVER_RESERVED``)."""
    if given is not None:
        return [given, "given"]
    if card["cuda_total_bytes"] is not None:
        return [card["memory_bytes"] - card["cuda_total_bytes"], "published"]
    return [fallback, "assumed"]


@portable
def cuda_total_note(card, seen, how):
    """The note that says what vLLM sees and where the figure comes from (``how``: ``driver_reserve``'s)."""
    if how == "published":
        why = "the smallest total CUDA reported for this card in published logs (" + card["cuda_total_source"] + ")"
    elif how == "given":
        why = "nvidia-smi total minus the driver_reserved given"
    else:
        why = ("nvidia-smi total " + bytes_text(card["memory_bytes"], 2) + " minus an assumed " +
               bytes_text(card["memory_bytes"] - seen, 2) + " driver reservation: no published CUDA total for this card")
    return "vLLM sees " + bytes_text(seen, 2) + ": " + why


def _kv_budget(mm: ModelSpec, card: GPU, cfg: ServingConfig, kv_name: str, mem: dict[str, int]) -> dict:
    """The budget's quantities (bytes, blocks, tokens, concurrency), each from its expression above (``kv_budget``)."""
    act_name = _activation_dtype(cfg.weights, card)
    b_lora = get_precision(act_name if cfg.lora_dtype == "auto" else cfg.lora_dtype).bytes_per_element
    draft = None
    if cfg.draft_model is not None:
        dm = get_model(cfg.draft_model)
        _require_uniform_full_attention(dm, "the drafter's KV cache")
        _check_tp(dm, cfg.tp)
        draft = {"m": dm.view(), "w": weights_bytes(dm, cfg.weights)}
    return kv_budget(mm.view(), Fields(card), Fields(cfg), mem, [weights_bytes(mm, cfg.weights),
                     get_precision(act_name).bytes_per_element, kv_bytes_per_element(kv_name), b_lora], draft)


share(WEIGHTS_PER_GPU=WEIGHTS_PER_GPU, ACTIVATION_PEAK_BYTES=ACTIVATION_PEAK_BYTES, CUDA_TOTAL_BYTES=CUDA_TOTAL_BYTES,
      REQUESTED_BYTES=REQUESTED_BYTES, AVAILABLE_KV_BYTES=AVAILABLE_KV_BYTES, SERVING_KV_HEADS=KV_HEADS_PER_GPU,
      BLOCK_BYTES=BLOCK_BYTES, BLOCKS_EXACT=NUM_BLOCKS.args[0], KV_TOKENS=KV_TOKENS,
      UNUSED_BYTES=UNUSED_BYTES,
      VLLM_KV_NAMES=dict(_VLLM_KV_NAMES), SERVING_DRIVER_KEY=DRIVER_KEY, SERVING_UNUSED_KEY=UNUSED_KEY)
share(LORA_SLOT_BYTES=LORA_SLOT_BYTES, AVAILABLE_KV_BYTES_EXTRAS=AVAILABLE_KV_BYTES_EXTRAS,
      DRAFT_BLOCK_BYTES=DRAFT_BLOCK_BYTES, BLOCKS_WITH_DRAFT_EXACT=NUM_BLOCKS_WITH_DRAFT.args[0],
      SHARED_PREFIX_BLOCKS=SHARED_PREFIX_BLOCKS, MAX_CONCURRENCY_SHARED=MAX_CONCURRENCY_SHARED,
      VLLM_LORA_RANKS=list(VLLM_LORA_RANKS), VLLM_LORA_DTYPES=dict(VLLM_LORA_DTYPES))
share(KV_GROUP_LAYERS=KV_GROUP_LAYERS, KV_GROUPS=KV_GROUPS, GROUP_BLOCK_BYTES=GROUP_BLOCK_BYTES,
      GROUP_BLOCKS_EXACT=GROUP_NUM_BLOCKS.args[0], GROUP_KV_TOKENS=GROUP_KV_TOKENS, GROUP_CONCURRENCY=GROUP_CONCURRENCY,
      MAX_LEN_KV_BYTES=MAX_LEN_KV_BYTES)
share_lazy(CONCURRENCY_AT=lambda: MAX_CONCURRENCY.subs(sp.ceiling(T_req / blk), sp.Symbol("B_req")))


@portable
def serving_activation_peak(s, cfg, mem, b_act):
    """The profiled activation peak: ``activation_peak`` when measured, else ACTIVATION_PEAK_BYTES."""
    if "activation_peak" in mem:
        return mem["activation_peak"]
    return q_ceil(ev("ACTIVATION_PEAK_BYTES", None, {"N_bt": cfg["max_num_batched_tokens"], "h": s["hidden"],
                                                     "f": s["ffn"], "n_tp": cfg["tp"], "b_a": b_act,
                                                     "n_h": s["n_heads"], "V": s["vocab"], "n_seq": cfg["max_num_seqs"],
                                                     "c_s": q_decimal(cfg["sampler_bytes_per_logit"])}))


@portable
def serving_extras(m, draft, cfg, sizes):
    """{lora, draft_w, draft_blk}: the LoRA slots (LORA_SLOT_BYTES), the drafter's weights and its pages in one KV
    block (DRAFT_BLOCK_BYTES) on one GPU; ``draft`` is {m: the drafter's view, w: its weight bytes} or None. Refuses in
    one line what is not modelled: LoRA on routed experts, a drafter with another vocabulary."""
    s = m["spec"]
    out = {"lora": 0, "draft_w": 0, "draft_blk": 0}
    if cfg["max_loras"] > 0:
        if s["n_experts"] > 0:
            raise_problem(["max_loras", cfg["max_loras"], "LoRA slots are modelled for dense models; " + s["name"] +
                           " routes " + str(s["n_experts"]) + " experts (vLLM's MoE LoRA layers are not modelled)"])
        y = m["sym"]
        out["lora"] = q_ceil(ev("LORA_SLOT_BYTES", None, {"L": y["L"], "n_lora": cfg["max_loras"],
                                                          "r": cfg["max_lora_rank"], "b_lora": sizes[3], "h": y["h"],
                                                          "n_h": y["n_h"], "n_kv": y["n_kv"], "d_head": y["d_head"],
                                                          "f": y["f"], "g": y["g"], "n_tp": cfg["tp"]}))
    if draft is not None:
        ds = draft["m"]["spec"]
        if ds["vocab"] != s["vocab"]:
            raise_problem(["draft_model", ds["name"], "the drafter proposes the target's tokens: its vocabulary (" +
                           str(ds["vocab"]) + ") must be " + s["name"] + "'s (" + str(s["vocab"]) + ")"])
        out["draft_w"] = q_ceil(ev("WEIGHTS_PER_GPU", None, {"W": draft["w"], "n_tp": cfg["tp"]}))
        out["draft_blk"] = q_ceil(ev("DRAFT_BLOCK_BYTES", None, {"b_blk": cfg["block_size"], "n_kv_d": ds["n_kv_heads"],
                                                                 "n_tp": cfg["tp"], "d_head_d": ds["head_dim"],
                                                                 "b_kv": sizes[2], "L_d": ds["n_layers"]}))
    return out


@portable
def serving_concurrency(cfg, blocks, req, max_len, drafter):
    """Requests of ``req`` tokens the blocks hold: CONCURRENCY_AT, or MAX_CONCURRENCY_SHARED with a shared prefix or
    lookahead slots (``drafter``: 1 with a drafter). A shared prefix as long as the request is refused in one line."""
    p = cfg["shared_prefix_tokens"]
    k = cfg["num_speculative_tokens"]
    if p >= req:
        raise_problem(["shared_prefix_tokens", p, "must be below the request length (" + str(req) + " tokens)"])
    if p == 0 and k == 0:
        return ev("CONCURRENCY_AT", None, {"N_blocks": blocks, "B_req": q_ceil(q_div(req, cfg["block_size"]))})
    return ev("MAX_CONCURRENCY_SHARED", None, {"N_blocks": blocks, "P_shared": p, "b_blk": cfg["block_size"],
                                               "z_d": drafter, "T_req": req, "k_spec": k, "T_max": max_len})


@portable
def kv_budget(m, card, cfg, mem, sizes, draft):
    """vLLM's KV budget on one GPU (``sizes`` = [all the weights' bytes, activation bytes per element, KV bytes per
    element, LoRA bytes per element]; ``draft``: ``serving_extras``'): the weights per GPU (with the LoRA slots and the
    drafter), the profiled activation peak (estimated unless measured), CUDA's total and what vLLM requests, the memory
    left for the KV cache, its blocks, tokens and concurrency, the unused headroom."""
    s = m["spec"]
    cap = card["memory_bytes"]
    tp = cfg["tp"]
    r_drv = mem["driver_reserved"]
    blk = cfg["block_size"]
    util = q_decimal(cfg["gpu_memory_utilization"])
    graphs = mem["cuda_graph_memory"]
    g_in = 1 if cfg["cuda_graph_accounting"] == "budget" else 0
    w_total = sizes[0]
    act = serving_activation_peak(s, cfg, mem, sizes[1])
    x = serving_extras(m, draft, cfg, sizes)
    shape = {"b_blk": blk, "n_kv": s["n_kv_heads"], "n_tp": tp, "d_head": s["head_dim"], "b_kv": sizes[2],
             "L": s["n_layers"]}
    avail = q_int(ev("AVAILABLE_KV_BYTES_EXTRAS", None, {"u": util, "M": cap, "R_drv": r_drv, "W": w_total, "n_tp": tp,
                                                          "X_lora": x["lora"], "W_d": 0 if draft is None else draft["w"],
                                                          "A_peak": act, "N_nt": mem["non_torch_memory"], "g_cg": g_in,
                                                          "G_cg": graphs}))
    max_len = s["max_context"] if cfg["max_model_len"] is None else cfg["max_model_len"]
    req = max_len if cfg["request_tokens"] is None else cfg["request_tokens"]
    lay = serving_layout(m)
    if lay[0] > 0:
        kv = sliding_group_blocks(s, cfg, shape, max(avail, 0), lay, [req, max_len])
    else:
        kv = full_attention_blocks(cfg, shape, max(avail, 0), draft, x, [req, max_len])
    blocks = kv["blocks"]
    return {"util": util, "r_drv": r_drv, "ctx": mem["cuda_context"], "nccl": mem["nccl_memory"], "graphs": graphs,
            "nt": mem["non_torch_memory"], "g_in_budget": g_in, "lora": x["lora"], "draft_w": x["draft_w"],
            "w_gpu": q_ceil(ev("WEIGHTS_PER_GPU", None, {"W": w_total, "n_tp": tp})), "act": act,
            "cuda_total": q_int(ev("CUDA_TOTAL_BYTES", None, {"M": cap, "R_drv": r_drv})),
            "requested": q_int(ev("REQUESTED_BYTES", None, {"u": util, "M": cap, "R_drv": r_drv})), "avail": avail,
            "kv_heads": q_int(ev("SERVING_KV_HEADS", None, {"n_kv": s["n_kv_heads"], "n_tp": tp})),
            "blk_bytes": kv["blk_bytes"], "blocks": blocks, "draft_blk": x["draft_blk"], "tokens": kv["tokens"],
            "max_len": max_len, "req": req, "conc": kv["conc"], "kv_bytes": blocks * kv["blk_bytes"], "fits": kv["fits"],
            "groups": kv["groups"], "grp": kv["grp"], "sliding": lay[0], "need": kv["need"],
            "headroom": ev("UNUSED_BYTES", None, {"u": util, "M": cap, "R_drv": r_drv,
                                                  "C_ctx": mem["cuda_context"] + mem["nccl_memory"], "g_cg": g_in,
                                                  "G_cg": graphs})}


@portable
def serving_layout(m):
    """[sliding-window layers, full-attention layers] of a model (its layer kinds, ``m["layers"]``; the budget's layer
    check, ``serving_layers_problem``, let through only those two mixers)."""
    n_sw = 0
    n_fa = 0
    for k in m["layers"]:
        if k[1] == "sliding":
            n_sw += k[0]
        else:
            n_fa += k[0]
    return [n_sw, n_fa]


@portable
def full_attention_blocks(cfg, shape, k_avail, draft, x, lens):
    """{blocks, blk_bytes, tokens, conc, fits, groups, grp, need} of a full-attention model (``lens`` = [request tokens,
    max_model_len]): one group of all its layers (and the drafter's, whose pages join every block), NUM_BLOCKS,
    KV_TOKENS, ``serving_concurrency``; ``need`` is one max_model_len request's cache (``check_enough_kv_cache_memory``),
    it fits when the tokens reach max_model_len."""
    k_shape = dict(shape)
    k_shape["K_avail"] = k_avail
    if draft is None:
        blocks = max(0, q_floor(ev("BLOCKS_EXACT", None, k_shape)))
    else:
        ds = draft["m"]["spec"]
        k_shape["n_kv_d"] = ds["n_kv_heads"]
        k_shape["d_head_d"] = ds["head_dim"]
        k_shape["L_d"] = ds["n_layers"]
        blocks = max(0, q_floor(ev("BLOCKS_WITH_DRAFT_EXACT", None, k_shape)))
    blk_bytes = q_ceil(ev("BLOCK_BYTES", None, shape)) + x["draft_blk"]
    tokens = q_int(ev("KV_TOKENS", None, {"N_blocks": blocks, "b_blk": cfg["block_size"]}))
    return {"blocks": blocks, "blk_bytes": blk_bytes, "tokens": tokens,
            "conc": serving_concurrency(cfg, blocks, lens[0], lens[1], 0 if draft is None else 1),
            "fits": tokens >= lens[1], "groups": 1, "grp": shape["L"],
            "need": blk_bytes * q_ceil(q_div(lens[1], cfg["block_size"]))}


@portable
def sliding_group_blocks(s, cfg, shape, k_avail, lay, lens):
    """The same for a model with sliding-window layers (``lay``: ``serving_layout``), as vLLM 0.11's hybrid KV-cache
    manager (on by default) allocates it: layers in KV_GROUPS groups of L_grp layers (KV_GROUP_LAYERS; one group of all
    layers when every layer slides), one pool of GROUP_NUM_BLOCKS blocks, GROUP_KV_TOKENS logged, GROUP_CONCURRENCY,
    MAX_LEN_KV_BYTES against the available memory. A shared prefix or a drafter is refused in one line."""
    if cfg["shared_prefix_tokens"] > 0:
        raise_problem(["shared_prefix_tokens", cfg["shared_prefix_tokens"], "prefix caching is modelled for "
                       "full-attention models; " + s["name"] + " has sliding-window layers (their cache hits keep only "
                       "the window's blocks, not modelled)"])
    if cfg["draft_model"] is not None:
        raise_problem(["draft_model", cfg["draft_model"], "a drafter is modelled for full-attention targets; " +
                       s["name"] + " has sliding-window layers (the drafter's layers would form their own KV-cache "
                       "groups, not modelled)"])
    v = dict(shape)
    v["K_avail"] = k_avail
    v["L_sw"] = lay[0]
    v["L_fa"] = lay[1]
    v["L_grp"] = q_int(ev("KV_GROUP_LAYERS", None, v)) if lay[1] > 0 else lay[0]
    v["W_sw"] = s["sliding_window"]
    v["N_bt"] = cfg["max_num_batched_tokens"]
    v["T_req"] = lens[0]
    v["T_max"] = lens[1]
    v["N_blocks"] = max(0, q_floor(ev("GROUP_BLOCKS_EXACT", None, v)))
    need = q_int(ev("MAX_LEN_KV_BYTES", None, v))
    return {"blocks": v["N_blocks"], "blk_bytes": q_int(ev("GROUP_BLOCK_BYTES", None, v)),
            "tokens": q_int(ev("GROUP_KV_TOKENS", None, v)), "conc": ev("GROUP_CONCURRENCY", None, v),
            "fits": need <= k_avail, "groups": q_int(ev("KV_GROUPS", None, v)), "grp": v["L_grp"], "need": need}


def _start_problems(card: GPU, cfg: ServingConfig, kv_name: str, b: dict) -> list[str]:
    """Why vLLM would not start with this budget (empty: it starts)."""
    return start_problems(Fields(card), [cfg.weights, kv_name, _activation_dtype(cfg.weights, card)], b)


@portable
def start_problems(card, formats, b):
    """Why vLLM would not start (``formats`` = [weights, kv, activations]; ``b``: ``kv_budget``): bf16 on a card
    without it, too little free memory at start-up, weights that do not fit, no cache blocks, CUDA graphs that do not
    fit the headroom. Empty: it starts."""
    problems = []
    what = ["weights", "kv_dtype", "activations"]
    for j in range(3):
        if formats[j] == "bf16" and not card["supports_bf16"]:
            problems.append(what[j] + ": bf16 needs compute capability >= 8.0 (" + card["key"] + " has " +
                            str(card["compute_capability"]) + "); use fp16")
            break
    free_at_start = b["cuda_total"] - b["ctx"] - b["nccl"]
    if free_at_start < b["requested"]:
        problems.append("free memory at start-up (" + bytes_text(free_at_start, 2) + ") is below total x "
                        "gpu_memory_utilization (" + bytes_text(b["requested"], 2) + ")")
    model_bytes = b["w_gpu"] + b["lora"] + b["draft_w"]
    if model_bytes > free_at_start:
        what = "the weights" if model_bytes == b["w_gpu"] else "the weights, LoRA slots and drafter"
        problems.append(what + " (" + bytes_text(model_bytes, 2) + " per GPU) do not fit")
    elif b["blocks"] == 0:
        problems.append("no available memory for the cache blocks (weights + activations exceed the budget)")
    if q_cmp(b["headroom"], 0) < 0 and not b["g_in_budget"] and not len(problems):
        problems.append("CUDA graph capture needs " + bytes_text(b["graphs"], 2) + " but the headroom is " +
                        bytes_text(q_float(q_add(b["headroom"], b["graphs"])), 2))
    return problems


def _serving_breakdown(mm: ModelSpec, card: GPU, cfg: ServingConfig, kv_name: str, b: dict) -> Breakdown:
    """One GPU's memory as nvidia-smi counts it, with the notes on what vLLM sees and measures."""
    parts, title = serving_parts(mm.name, Fields(card), cfg.tp, [cfg.weights, kv_name], b)
    util = b["util"]
    how = driver_reserve(Fields(card), None if cfg.driver_reserved is None else b["r_drv"], 0)[1]
    notes = [cuda_total_note(Fields(card), b["cuda_total"], how) + f"; it requests {fmt_bytes(b['requested'], 2)} = "
             f"{float(util):g} x that."]
    if mm.n_kv_heads < cfg.tp:
        notes.append(f"tp={cfg.tp} exceeds the {mm.n_kv_heads} KV heads: each GPU keeps {b['kv_heads']} (replicated).")
    if cfg.activation_peak is None:
        notes.append("activation peak estimated (forward pass over max_num_batched_tokens vs. the sampler over "
                     "max_num_seqs requests); vLLM measures it.")
    notes += _sliding_notes(mm, cfg, b) + _extras_notes(cfg, card, b)
    return Breakdown(dict(parts), title=title, notes=tuple(notes))


def _sliding_notes(mm: ModelSpec, cfg: ServingConfig, b: dict) -> list[str]:
    """How vLLM 0.11 groups a model with sliding-window layers (none for a full-attention model)."""
    if not b["sliding"]:
        return []
    vals = dict(L_sw=b["sliding"], L_fa=mm.n_layers - b["sliding"], L_grp=b["grp"], W_sw=mm.sliding_window,
                N_bt=cfg.max_num_batched_tokens, T_req=b["req"], b_blk=cfg.block_size)
    per_req = F.evaluate(REQUEST_BLOCKS, **{k: vals[k] for k in F.argument_names(REQUEST_BLOCKS)})
    hybrid = b["sliding"] < mm.n_layers
    how = (f"{b['groups']} KV-cache groups of up to {b['grp']} layers (the hybrid KV-cache manager, on by default), one "
           f"pool of {b['blocks']:,} blocks of {b['grp']} pages; vLLM logs num_blocks // {b['groups']} x block_size "
           "tokens" if hybrid else "one KV-cache group of every layer")
    return [f"{b['sliding']} of {mm.n_layers} layers keep a {mm.sliding_window:,}-token sliding window: {how}; a "
            f"{b['req']:,}-token request holds up to {per_req:,} blocks (min(window - 1 + max_num_batched_tokens, "
            "request) tokens + 1 block per sliding group, the whole request per full group)."]


def _extras_notes(cfg: ServingConfig, card: GPU, b: dict) -> list[str]:
    """What the result says about the serving extras it priced (none by default)."""
    notes = []
    if cfg.max_loras:
        dtype = _activation_dtype(cfg.weights, card) if cfg.lora_dtype == "auto" else cfg.lora_dtype
        notes.append(f"LoRA slots: {cfg.max_loras} x rank {cfg.max_lora_rank} in {dtype} on the q/k/v/o/gate/up/down "
                     f"slices of every layer ({fmt_bytes(b['lora'], 2)} per GPU), counted with the weights; no "
                     "embedding or lm_head adapter slots.")
    if cfg.shared_prefix_tokens:
        notes.append(f"prefix caching: the {cfg.shared_prefix_tokens:,}-token shared prefix holds its whole blocks once "
                     f"(the partial block{' and, with a drafter, the last whole one' if cfg.draft_model else ''} is each "
                     "request's own).")
    if cfg.draft_model:
        notes.append(f"drafter {cfg.draft_model} ({cfg.num_speculative_tokens} speculative tokens) modelled EAGLE-style: "
                     "vLLM 0.11 refuses a separate draft model ('Draft model speculative decoding is not supported "
                     "yet'); its weights load with the model and its attention layers add their pages to every KV block "
                     f"({b['draft_blk']:,} of the {b['blk_bytes']:,} bytes of a block); each request holds "
                     "num_speculative_tokens lookahead slots (capped at max_model_len); its profile-run activations "
                     "are not estimated.")
    return notes


@portable
def serving_parts(name, card, tp, formats, b):
    """[[component, bytes], title] of one GPU under vLLM as nvidia-smi counts it: weights, activations, non-torch
    memory, KV cache, CUDA graphs, CUDA context, NCCL (tp > 1), the unused headroom and the driver's reservation."""
    parts = [["weights", b["w_gpu"]], ["activations (profiled peak)", b["act"]], ["non-torch memory", b["nt"]],
             ["kv cache", b["kv_bytes"]], ["cudagraph pool", b["graphs"]], ["cuda context", b["ctx"]]]
    if b["lora"] > 0:
        parts.insert(1, ["LoRA slots", b["lora"]])
    if b["draft_w"] > 0:
        parts.insert(1, ["draft model", b["draft_w"]])
    if tp > 1:
        parts.append(["nccl (buffers)", b["nccl"]])
    used = 0
    for p in parts:
        used += p[1]
    parts.append([shared("SERVING_UNUSED_KEY"), max(0, card["memory_bytes"] - b["r_drv"] - used)])
    parts.append([shared("SERVING_DRIVER_KEY"), b["r_drv"]])
    title = (name + " on " + card["key"] + (" (tp=" + str(tp) + ", per GPU)" if tp > 1 else "") +
             ": vLLM budget, utilization " + fmt_g(q_float(b["util"]), 6) + ", " + formats[0] + " weights, " +
             formats[1] + " KV")
    return [parts, title]


def _capacity_result(mm: ModelSpec, card: GPU, cfg: ServingConfig, kv_name: str, b: dict,
                     problems: list[str]) -> ServingCapacity:
    c = capacity_summary(mm.name, card.key, cfg.tp, cfg.block_size, b, problems)
    return ServingCapacity(
        model=mm.name, gpu=card.key, tp=cfg.tp, gpu_memory_utilization=float(b["util"]), block_size=cfg.block_size,
        max_num_batched_tokens=cfg.max_num_batched_tokens, max_num_seqs=cfg.max_num_seqs, weights=cfg.weights,
        kv_dtype=kv_name, kv_heads_per_gpu=b["kv_heads"], kv_heads_replicated=mm.n_kv_heads < cfg.tp,
        card_bytes=card.memory_bytes, driver_reserved_bytes=b["r_drv"], cuda_total_bytes=b["cuda_total"],
        requested_bytes=b["requested"], weights_bytes=b["w_gpu"], activation_peak_bytes=b["act"],
        non_torch_bytes=b["nt"], cuda_context_bytes=b["ctx"], nccl_bytes=b["nccl"], cuda_graph_bytes=b["graphs"],
        cuda_graph_accounting=cfg.cuda_graph_accounting, available_kv_bytes=b["avail"], block_bytes=b["blk_bytes"],
        num_blocks=c["num_blocks"], kv_tokens=c["kv_tokens"], kv_cache_bytes=c["kv_cache_bytes"],
        max_model_len=c["max_model_len"], request_tokens=c["request_tokens"], max_concurrency=c["max_concurrency"],
        max_concurrent_requests=c["max_concurrent_requests"], starts=c["starts"],
        fits_max_model_len=c["fits_max_model_len"], breakdown=_serving_breakdown(mm, card, cfg, kv_name, b),
        problems=tuple(problems), lora_slot_bytes=b["lora"], draft_weights_bytes=b["draft_w"],
        draft_block_bytes=b["draft_blk"], kv_groups=c["kv_groups"], kv_group_layers=c["kv_group_layers"],
        sliding_layers=c["sliding_layers"], max_len_kv_bytes=c["max_len_kv_bytes"],
    )


@portable
def capacity_summary(model, gpu, tp, block_size, b, problems):
    """What the verdict reads of a budget (``kv_budget``): blocks, tokens, the cache's bytes, concurrency (and
    whole requests), whether vLLM starts and whether max_model_len fits; the KV-cache groups (groups, layers per group,
    sliding layers) and one max_model_len request's cache."""
    starts = not len(problems)
    return {"model": model, "gpu": gpu, "tp": tp, "block_size": block_size, "num_blocks": b["blocks"],
            "kv_tokens": b["tokens"], "kv_cache_bytes": b["kv_bytes"], "max_model_len": b["max_len"],
            "request_tokens": b["req"], "max_concurrency": q_float(b["conc"]),
            "max_concurrent_requests": q_floor(b["conc"]), "starts": starts,
            "fits_max_model_len": starts and b["fits"], "problems": problems, "kv_groups": b["groups"],
            "kv_group_layers": b["grp"], "sliding_layers": b["sliding"], "max_len_kv_bytes": b["need"]}


@dataclass(frozen=True)
class Roofline:
    """Throughput of one serving configuration from the roofline (upper bounds at the given utilisations)."""

    model: str
    gpu: str
    n_gpus: int
    weights: str
    batch: int
    context: int
    prompt_tokens: int
    peak_tflops: float
    bandwidth_gb_s: float
    mfu: float
    mbu: float
    tp_speedup: float
    prefill_tokens_per_s: float
    decode_step_s: float
    decode_tokens_per_s: float
    bound: str
    crossover_batch: int | None
    price_per_hour_usd: float | None
    price_date: str
    price_source: str
    cost_per_million_output_tokens_usd: float | None
    cost_per_million_prompt_tokens_usd: float | None


def _peak_tflops(card: GPU, weights: str) -> float:
    """Dense tensor TFLOP/s the matmuls run at: FP8 for FP8 weights on FP8 hardware, else BF16 (FP16 on pre-Ampere)."""
    p = get_precision(weights, field="weights")
    if p.name.startswith("fp8") and card.fp8_tflops:
        return card.fp8_tflops
    return card.bf16_tflops or card.fp16_tflops


def cost_per_million_tokens(tokens_per_s: float, gpu: str | GPU, n_gpus: int = 1) -> float | None:
    """USD per million tokens at ``tokens_per_s`` on ``n_gpus`` of the card's dated price (None if unpriced)."""
    card = get_gpu(gpu)
    if card.price_per_hour_usd is None:
        return None
    if isinstance(tokens_per_s, bool) or not isinstance(tokens_per_s, (int, float, Fraction)) or tokens_per_s <= 0:
        raise InvalidValueError("tokens_per_s", tokens_per_s, "must be a positive number")
    return float(F.evaluate(COST_PER_MILLION_TOKENS, P_h=Fraction(str(card.price_per_hour_usd)),
                            n_gpu=check_positive_int("n_gpus", n_gpus), r_tok=Fraction(str(float(tokens_per_s)))))


def _require_uniform_full_attention(mm: ModelSpec, what: str) -> None:
    """The roofline (and a drafter's KV pages) read one uniform full-attention layer (every layer's cache grows by the
    same bytes per token): a model with sliding, chunked, MLA or Mamba layers is one line, not a wrong number. The
    serving budget's own check is ``serving_layers_problem`` (sliding layers modelled)."""
    raise_problem(full_attention_problem(mm.view(), mm.uniform_problem(), what))


@portable
def full_attention_problem(m, uniform_problem, what):
    """None, or the error of a model beyond one uniform layer (``uniform_problem``, ModelSpec.uniform_problem) or whose
    layers are not all full attention (sliding or chunked layers): vLLM allocates those layer group by layer group,
    which the serving budget does not model yet."""
    if uniform_problem:
        return ["model", m["spec"]["name"], what + " reads uniform full-attention layers; " + m["spec"]["name"] +
                " has " + uniform_problem]
    for k in m["layers"]:
        if k[1] != "full":
            return ["model", m["spec"]["name"], what + " reads uniform full-attention layers; " + m["spec"]["name"] +
                    " has " + k[1] + " layers, which vLLM allocates by layer group (not modelled yet: "
                    "kv_cache_bytes(..., runtime='vllm') gives one sequence's cache)"]
    return None


def serving_refusal(model: ModelSpec | str) -> str | None:
    """Why :func:`serving_kv_capacity` refuses ``model`` (one line), or None when vLLM's budget covers its layers:
    what a chapter asks before it prices a model in vLLM."""
    mm = get_model(model)
    problem = serving_layers_problem(mm.view(), mm.uniform_problem(), "vLLM's KV budget")
    return None if problem is None else str(InvalidValueError(problem[0], problem[1], problem[2]))


@portable
def serving_layers_problem(m, uniform_problem, what):
    """None, or the one-line error of a model whose KV cache vLLM's budget does not model: Mamba-2, chunked-local or
    multi-head latent attention layers (their own KV-cache specs: MambaSpec, ChunkedLocalAttentionSpec, MLAAttentionSpec),
    else anything beyond one uniform layer (``full_attention_problem``). Full-attention and sliding-window layers are
    modelled (``kv_budget``: one group, or vLLM's hybrid groups)."""
    s = m["spec"]
    named = []
    for k in m["layers"]:
        if k[1] == "mamba" and not ("Mamba-2 layers (MambaSpec state pages)" in named):
            named.append("Mamba-2 layers (MambaSpec state pages)")
        if k[1] == "chunked" and not ("chunked-local layers" in named):
            named.append("chunked-local layers")
    if s["attention"] == "mla":
        named.append("multi-head latent attention (MLAAttentionSpec pages)")
    if len(named):
        return ["model", s["name"], what + " reads uniform full-attention layers and sliding-window groups; " + s["name"] +
                " has " + ", ".join(named) + ", which it does not model"]
    if uniform_problem:
        return full_attention_problem(m, uniform_problem, what)
    return None


def _roofline_values(mm: ModelSpec, card: GPU, weights: str, kv_name: str, tp: int, eff: Efficiency) -> dict:
    _require_uniform_full_attention(mm, "the roofline")
    mfu, mbu, tp_overhead = eff.exact()
    groups = mm.param_groups()
    n_exp = (groups["mlp_gate"] + groups["mlp_up"] + groups["mlp_down"]) if mm.is_moe else 0
    if mm.is_moe and mm.n_shared_experts:  # shared experts are always read
        n_exp = n_exp * mm.n_experts // (mm.n_experts + mm.n_shared_experts)
    return dict(W=weights_bytes(mm, weights), N=mm.n_params, N_experts=n_exp,
                k=mm.experts_per_token or 1, E=mm.n_experts or 1, N_active=mm.n_active_params,
                F_peak=Fraction(str(_peak_tflops(card, weights))) * 10**12,
                BW=Fraction(str(card.bandwidth_gb_s)) * 10**9, eta_c=mfu, eta_m=mbu, sigma=tp_overhead, n_tp=tp,
                k_kv=kv_bytes_per_token(mm, kv_name))


@settings_class
@dataclass(frozen=True)
class Efficiency(Settings):
    """How close to the roofline the engine runs (chapter 6): ``mfu`` (share of the dense tensor FLOP/s the
    matmuls reach, in (0, 1]), ``mbu`` (share of the memory bandwidth, in (0, 1]) and ``tp_overhead`` (the share
    sigma of a step that tensor parallelism does not shrink, in [0, 1)). Used by :func:`roofline`,
    ``crossover_batch`` and :func:`decode_curve` (their ``mfu=``, ``mbu=``, ``tp_overhead=`` keywords, or
    ``efficiency=Efficiency(...)``)."""

    mfu: float = 0.5
    mbu: float = 0.7
    tp_overhead: float = 0.05

    def __post_init__(self) -> None:
        self.exact()

    def exact(self) -> tuple[Fraction, Fraction, Fraction]:
        """``(mfu, mbu, tp_overhead)`` as exact Fractions (a float by its decimal repr: 0.4 is 2/5)."""
        out = []
        for name in ("mfu", "mbu"):
            fr = _fraction(getattr(self, name), name)
            if not 0 < fr <= 1:
                raise InvalidValueError(name, getattr(self, name), "must be in (0, 1]")
            out.append(fr)
        ovh = _fraction(self.tp_overhead, "tp_overhead")
        if not 0 <= ovh < 1:
            raise InvalidValueError("tp_overhead", self.tp_overhead, "must be in [0, 1)")
        return out[0], out[1], ovh


def _efficiency(fn, speed: dict) -> Efficiency:
    """The Efficiency a call of ``fn`` asks for: ``efficiency=`` (an Efficiency) and/or its fields as keywords."""
    speed = dict(speed)
    return Efficiency.build(fn.__name__, speed.pop("efficiency", None), speed, field="efficiency",
                            also=(*param_names(fn), "efficiency"))


@public_api
def roofline(model: ModelSpec | str, gpu: str | GPU, weights: str = "bf16", kv_dtype: str = "auto", batch: int = 1,
             context: int = 2048, prompt_tokens: int | None = None, tp: int = 1, **efficiency) -> Roofline:
    """Prefill and decode throughput of ``batch`` sequences with ``context`` tokens each on ``tp`` GPUs.

    Prefill is compute-bound (PREFILL_SECONDS at MFU ``mfu``); a decode step reads the weights and every
    sequence's KV cache (DECODE_MEMORY_SECONDS at ``mbu`` of the bandwidth) unless its FLOPs take longer
    (DECODE_COMPUTE_SECONDS); tensor parallelism scales both by TP_SPEEDUP. Costs use the card's dated price.
    ``efficiency``: ``mfu`` (0.5), ``mbu`` (0.7), ``tp_overhead`` (0.05) as keywords, or ``efficiency=`` an
    :class:`Efficiency`.
    """
    mm, card = get_model(model), get_gpu(gpu)
    tp = _check_tp(mm, tp)
    batch, context = check_positive_int("batch", batch), check_positive_int("context", context)
    prompt = context if prompt_tokens is None else check_positive_int("prompt_tokens", prompt_tokens)
    eff = _efficiency(roofline, efficiency)
    mfu, mbu, ovh = eff.exact()
    weights = get_precision(weights, field="weights").name
    kv_name = _kv_dtype(kv_dtype, weights, card)
    vals = _roofline_values(mm, card, weights, kv_name, tp, eff)
    step_vals = {**vals, "B": batch, "T": context}
    mem_s = F.evaluate(DECODE_MEMORY_SECONDS, **{k: step_vals[k] for k in F.argument_names(DECODE_MEMORY_SECONDS)})
    cmp_s = F.evaluate(DECODE_COMPUTE_SECONDS, **{k: step_vals[k] for k in F.argument_names(DECODE_COMPUTE_SECONDS)})
    step = max(mem_s, cmp_s)
    pre_vals = {**vals, "T_p": prompt}
    pre_s = F.evaluate(PREFILL_SECONDS, **{k: pre_vals[k] for k in F.argument_names(PREFILL_SECONDS)})
    speedup = F.evaluate(TP_SPEEDUP, n_tp=tp, sigma=ovh)
    decode_tps = Fraction(batch) / step
    prefill_tps = Fraction(prompt) / pre_s
    cross = crossover_batch(mm, card, weights, kv_name, context, tp, efficiency=eff)
    price = card.price_per_hour_usd
    return Roofline(
        model=mm.name, gpu=card.key, n_gpus=tp, weights=weights, batch=batch, context=context, prompt_tokens=prompt,
        peak_tflops=_peak_tflops(card, weights), bandwidth_gb_s=card.bandwidth_gb_s, mfu=float(mfu),
        mbu=float(mbu), tp_speedup=float(speedup), prefill_tokens_per_s=float(prefill_tps),
        decode_step_s=float(step), decode_tokens_per_s=float(decode_tps),
        bound="compute" if cmp_s >= mem_s else "memory", crossover_batch=cross, price_per_hour_usd=price,
        price_date=card.price_date, price_source=card.price_source,
        cost_per_million_output_tokens_usd=cost_per_million_tokens(float(decode_tps), card, tp) if price else None,
        cost_per_million_prompt_tokens_usd=cost_per_million_tokens(float(prefill_tps), card, tp) if price else None,
    )


def crossover_batch(model: ModelSpec | str, gpu: str | GPU, weights: str = "bf16", kv_dtype: str = "auto",
                    context: int = 2048, tp: int = 1, **efficiency) -> int | None:
    """Smallest batch whose decode step is compute-bound (None when the KV reads keep it memory-bound).
    ``efficiency``: as for :func:`roofline` (``mfu``, ``mbu``, ``tp_overhead`` or ``efficiency=``)."""
    mm, card = get_model(model), get_gpu(gpu)
    weights = get_precision(weights, field="weights").name
    kv_name = _kv_dtype(kv_dtype, weights, card)
    vals = _roofline_values(mm, card, weights, kv_name, tp, _efficiency(crossover_batch, efficiency))
    vals["T"] = check_positive_int("context", context)
    mem_names = F.argument_names(DECODE_MEMORY_SECONDS)
    cmp_names = F.argument_names(DECODE_COMPUTE_SECONDS)

    def memory_bound(b: int) -> bool:
        v = {**vals, "B": b}
        return (F.evaluate(DECODE_MEMORY_SECONDS, **{k: v[k] for k in mem_names})
                > F.evaluate(DECODE_COMPUTE_SECONDS, **{k: v[k] for k in cmp_names}))

    # per-sequence KV reads alone outlast the per-sequence FLOPs: memory-bound at every batch
    per_seq_mem = vals["T"] * vals["k_kv"] / (vals["eta_m"] * vals["BW"])
    per_seq_cmp = 2 * vals["N_active"] / (vals["eta_c"] * vals["F_peak"])
    if per_seq_mem >= per_seq_cmp:
        return None
    last = largest_fitting(memory_bound, lo=1, limit=2**30)
    return last + 1


def decode_curve(model: ModelSpec | str, gpu: str | GPU, batches: Sequence[int], **kw) -> list[Roofline]:
    """:func:`roofline` at each batch size (for a tokens/s-against-batch plot)."""
    return [roofline(model, gpu, batch=b, **kw) for b in as_sequence("batches", batches, "(1, 8, 64)")]


# --- fit maps -----------------------------------------------------------------------------------------------
ENGINES = ("kv-only", "vllm")


def _fmt_ctx(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}K"
    if n >= 1000:
        return f"{n / 1024:.0f}K" if n >= 10 * 1024 else f"{n / 1024:.1f}K"
    return str(n)


def fit_map(models: Sequence[str], gpus: Sequence[str | tuple[str, int]], precisions: Sequence[str],
            kv_dtype: str = "fp16", engine: str = "kv-only", reserve: int | str = DEFAULT_RESERVE,
            **serving_kw) -> list[dict]:
    """Verdicts for every GPU (or ``(gpu, count)``) x model x weight format: does it fit, and the longest context.

    ``engine="kv-only"``: weights + KV cache + ``reserve`` (:func:`vramlib.solve.feasibility.max_tokens`; a count
    splits weights, KV and reserve over the GPUs). ``engine="vllm"``: :func:`serving_kv_capacity` with ``tp`` =
    count (``serving_kw`` passed on). ``usable context`` is capped at the model's trained context.
    """
    engine = check_choice("engine", engine, ENGINES)
    rows = []
    for entry in gpus:
        name, count = (entry, 1) if isinstance(entry, str) else entry
        card = get_gpu(name)
        count = check_positive_int("count", count)
        for model in models:
            mm = get_model(model)
            for prec in precisions:
                w = weights_bytes(mm, prec)
                if engine == "kv-only":
                    res = parse_memory(reserve, field="reserve")
                    ctx = max_tokens(mm, count * card.memory_bytes, prec, kv_dtype, 1, count * res)
                    why = "" if ctx else "weights + reserve exceed the memory"
                else:
                    kv = "auto" if kv_dtype in ("fp16", "bf16") else kv_dtype
                    try:
                        cap = serving_kv_capacity(mm, card, tp=count, weights=prec, kv_dtype=kv, **serving_kw)
                        ctx, why = (cap.kv_tokens, "") if cap.starts else (0, "; ".join(cap.problems))
                    except InvalidValueError as e:
                        ctx, why = 0, str(e)
                usable = min(ctx, mm.max_context)
                label = f"{count} x {card.key}" if count > 1 else card.key
                verdict = (f"fits: {usable:,} tokens" + (" (trained context)" if ctx >= mm.max_context else "")
                           if ctx else f"does not fit: {why}")
                rows.append({"gpu": label, "n_gpus": count, "model": mm.name, "precision": prec,
                             "weights GB": gb(w), "fits": bool(ctx), "max context": ctx,
                             "usable context": usable, "trained context": mm.max_context, "verdict": verdict})
    return rows


def plot_fit_map(rows: Sequence[dict], x: str | tuple[str, ...] = "model", y: str | tuple[str, ...] = ("gpu", "precision"),
                 ax=None, title: str | None = None, value: str = "usable context",
                 label: str = "longest context (tokens)"):
    """Heatmap of a :func:`fit_map`: colour = log2 of ``value`` (default the usable context; ``"max context"``
    for the KV capacity), text = tokens (K = 1024); a cell that does not fit is grey with a cross.
    ``x``/``y`` name the row keys (tuples are joined) for the axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    xk = (x,) if isinstance(x, str) else tuple(x)
    yk = (y,) if isinstance(y, str) else tuple(y)

    def key(r, ks):
        return " | ".join(str(r[k]) for k in ks)

    xs = list(dict.fromkeys(key(row, xk) for row in rows))
    ys = list(dict.fromkeys(key(row, yk) for row in rows))
    grid = np.full((len(ys), len(xs)), np.nan)
    text = [["" for _ in xs] for _ in ys]
    for row in rows:
        i, j = ys.index(key(row, yk)), xs.index(key(row, xk))
        v = row[value]
        grid[i, j] = math.log2(v) if v > 0 else np.nan
        text[i][j] = _fmt_ctx(v) if v > 0 else "\u2717"
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(xs) + 2.5), max(2.5, 0.38 * len(ys) + 1.2)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
    top = max([17] + [math.ceil(v) for v in grid.flatten() if not np.isnan(v)])
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto", vmin=9, vmax=top)
    for i in range(len(ys)):
        for j in range(len(xs)):
            colour = "black" if np.isnan(grid[i, j]) or grid[i, j] > 9 + 0.6 * (top - 9) else "white"
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=8, color=colour)
    ax.set_xticks(range(len(xs)), xs, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(ys)), ys, fontsize=8)
    bar = ax.figure.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    bar.set_ticks(list(range(9, top + 1, 2)), labels=[_fmt_ctx(2**k) for k in range(9, top + 1, 2)])
    bar.set_label(label)
    if title:
        ax.set_title(title, fontsize=10)
    ax.figure.tight_layout()
    return ax
