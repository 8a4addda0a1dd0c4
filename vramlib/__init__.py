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

__all__ = [
    "Breakdown", "CONVENTIONS", "ConfigError", "GB", "GPU", "GiB", "InvalidValueError", "METHODS", "ModelSpec",
    "OPTIMIZERS", "Precision", "UnknownNameError", "VramlibError", "activation_bytes", "catalogue", "fmt_bytes",
    "gb", "get_gpu", "get_model", "get_precision", "gib", "inference_memory", "kv_bytes_per_token",
    "kv_budget_bytes", "kv_cache_bytes", "list_gpus", "lora_params", "max_batch", "max_params", "max_tokens", "max_tokens_tp",
    "min_gpus", "model_names", "optimizer_state_bytes", "parse_memory", "precision_names",
    "prefill_workspace_bytes", "training_memory", "weights_bytes", "weights_detail",
]
__version__ = "0.1.0"


def _publish(names) -> None:
    """Every exported function checks its arguments' shape and simple types (errors.public_api)."""
    import inspect

    g = globals()
    for n in names:
        if inspect.isfunction(g.get(n)):
            g[n] = public_api(g[n])


from .errors import public_api  # noqa: E402

_publish(__all__)

# Heavier modules load on first use (PEP 562), so that `import vramlib` stays well under a second:
# `vl.serving_kv_capacity`, `vl.search_plans`, `vl.viz`, `vl.widgets` ... all work as attributes.
_LAZY_MODULES = {
    "audit", "bookshelf", "cli", "design", "exercises", "formulas", "jsgen", "parallel", "planning", "recommend",
    "report", "rules_of_thumb", "serving", "symbols", "training_feasibility", "units", "validation", "viz", "widgets",
}
_LAZY_ATTRS = {
    "bytes_per_param": ("training_feasibility", "bytes_per_param"),
    "linear_until": ("training_feasibility", "linear_until"),
    "linearity": ("training_feasibility", "linearity"),
    "max_seq_for_training": ("training_feasibility", "max_seq_for_training"),
    "model_states_bytes": ("training_feasibility", "model_states_bytes"),
    "scaling_ratio": ("training_feasibility", "scaling_ratio"),
    "size_ratio": ("training_feasibility", "size_ratio"),
    "source_activation_bytes": ("training_feasibility", "source_activation_bytes"),
    "source_training_memory": ("training_feasibility", "source_training_memory"),
    "ServingCapacity": ("serving", "ServingCapacity"),
    "Roofline": ("serving", "Roofline"),
    "cost_per_million_tokens": ("serving", "cost_per_million_tokens"),
    "decode_curve": ("serving", "decode_curve"),
    "fit_map": ("serving", "fit_map"),
    "plot_fit_map": ("serving", "plot_fit_map"),
    "roofline": ("serving", "roofline"),
    "serving_kv_capacity": ("serving", "serving_kv_capacity"),
    "vllm_default_batch": ("serving", "vllm_default_batch"),
    "DeepSpeedEstimate": ("parallel", "DeepSpeedEstimate"),
    "ParallelPlan": ("parallel", "ParallelPlan"),
    "PlanMemory": ("parallel", "PlanMemory"),
    "deepspeed_zero2_estimate": ("parallel", "deepspeed_zero2_estimate"),
    "deepspeed_zero3_estimate": ("parallel", "deepspeed_zero3_estimate"),
    "largest_module_params": ("parallel", "largest_module_params"),
    "plan_memory": ("parallel", "plan_memory"),
    "zero_model_states": ("parallel", "zero_model_states"),
    "ModelFamily": ("planning", "ModelFamily"),
    "PipelineBalance": ("planning", "PipelineBalance"),
    "PlanSearch": ("planning", "PlanSearch"),
    "balance_pipeline": ("planning", "balance_pipeline"),
    "largest_trainable_model": ("planning", "largest_trainable_model"),
    "max_params_model_states": ("planning", "max_params_model_states"),
    "min_gpus_for_training": ("planning", "min_gpus_for_training"),
    "search_plans": ("planning", "search_plans"),
    "Fit": ("report", "Fit"),
    "Hardware": ("report", "Hardware"),
    "fit_inference": ("report", "fit_inference"),
    "fit_training": ("report", "fit_training"),
    "inference_memory_tp": ("report", "inference_memory_tp"),
    "parse_hardware": ("report", "parse_hardware"),
    "bookshelf_alt_text": ("bookshelf", "alt_text"),
    "bookshelf_pair": ("bookshelf", "bookshelf_pair"),
    "bookshelf_stack": ("bookshelf", "bookshelf_stack"),
    "draw_bookshelf": ("bookshelf", "draw_bookshelf"),
    "shelf_layout": ("bookshelf", "shelf_layout"),
    "design_levers": ("design", "design_levers"),
    "equal_params_shape": ("design", "equal_params_shape"),
    "equal_params_shapes": ("design", "equal_params_shapes"),
    "evaluate_design": ("design", "evaluate_design"),
    "Recommendation": ("recommend", "Recommendation"),
    "max_seq_for_plan": ("recommend", "max_seq_for_plan"),
    "recommend_gpus": ("recommend", "recommend_gpus"),
    "recommendation_table": ("recommend", "recommendation_table"),
    "implied_coefficient": ("rules_of_thumb", "implied_coefficient"),
    "component_summary": ("validation", "component_summary"),
    "published_rows": ("validation", "published_rows"),
    "published_stats": ("validation", "published_stats"),
    "real_setup_bytes": ("validation", "real_setup_bytes"),
}


def __getattr__(name: str):
    import importlib
    import inspect

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_ATTRS:
        module, attr = _LAZY_ATTRS[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        if inspect.isfunction(value):
            value = public_api(value)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vramlib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY_MODULES | set(_LAZY_ATTRS))


__all__ += sorted(_LAZY_ATTRS)
