"""vramlib: the computations behind *vram-book* — does this model fit on this card, how long a context,
can I fine-tune it, at what cost.

Every size is an exact int of bytes; :mod:`vramlib.units` prints GB (10^9) and GiB (2^30).
Every formula is a sympy expression in :mod:`vramlib.formulas` / :mod:`vramlib.activations`.
"""
from __future__ import annotations

from .activations import activation_bytes
from .breakdown import Breakdown
from .errors import ConfigError, InvalidValueError, UnknownNameError, VramlibError
from .feasibility import kv_budget_bytes, max_batch, max_params, max_tokens, max_tokens_tp, min_gpus
from .hardware import GPU, get_gpu, list_gpus
from .inference import (
    inference_memory, kv_bytes_per_token, kv_cache_bytes, prefill_workspace_bytes, weights_bytes, weights_detail,
)
from .models import ModelSpec, catalogue, get_model, model_names
from .precision import Precision, get_precision, precision_names
from .training import CONVENTIONS, METHODS, OPTIMIZERS, lora_params, optimizer_state_bytes, training_memory
from .units import GB, GiB, fmt_bytes, gb, gib, parse_memory
from . import audit, exercises, formulas, symbols, units, viz, widgets  # noqa: E402,F401  (submodules as attributes)

__all__ = [
    "Breakdown", "CONVENTIONS", "ConfigError", "GB", "GPU", "GiB", "InvalidValueError", "METHODS", "ModelSpec",
    "OPTIMIZERS", "Precision", "UnknownNameError", "VramlibError", "activation_bytes", "catalogue", "fmt_bytes",
    "gb", "get_gpu", "get_model", "get_precision", "gib", "inference_memory", "kv_bytes_per_token",
    "kv_budget_bytes", "kv_cache_bytes", "list_gpus", "lora_params", "max_batch", "max_params", "max_tokens", "max_tokens_tp",
    "min_gpus", "model_names", "optimizer_state_bytes", "parse_memory", "precision_names",
    "prefill_workspace_bytes", "training_memory", "weights_bytes", "weights_detail",
]
__version__ = "0.1.0"
from .parallel import DeepSpeedEstimate, ParallelPlan, PlanMemory, deepspeed_zero2_estimate, deepspeed_zero3_estimate, largest_module_params, plan_memory, zero_model_states  # noqa: E402,F401
from .planning import ModelFamily, PipelineBalance, PlanSearch, balance_pipeline, largest_trainable_model, max_params_model_states, min_gpus_for_training, search_plans  # noqa: E402,F401
from .serving import ServingCapacity, Roofline, cost_per_million_tokens, decode_curve, fit_map, plot_fit_map, roofline, serving_kv_capacity, vllm_default_batch  # noqa: E402,F401
from .report import Fit, Hardware, fit_inference, fit_training, inference_memory_tp, parse_hardware  # noqa: E402,F401
