"""vramlib: the computations behind *vram-book* -- does this model fit on this card, how long a context,
can I fine-tune it, at what cost.

Every size is an exact int of bytes; :mod:`vramlib.core.units` prints GB (10^9) and GiB (2^30). Every formula is a
sympy expression (:mod:`vramlib.core.formulas`, :mod:`vramlib.memory.activations`, ...).

Layers, lower never importing upper (``tests/test_layers.py`` enforces it; docs/ARCHITECTURE.md draws it):
``core`` -> ``catalog`` -> ``memory`` -> ``plans`` -> ``solve`` -> ``serve`` -> ``explain`` -> ``present`` -> ``web``
-> ``workshop``.

The public API is ``__all__`` below. Names load on first use (PEP 562), so ``import vramlib`` imports neither sympy
nor the catalogues; where each name is defined is the generated ``vramlib/_index.py`` (``tools/gen_index.py``).
``vl.<module>`` (``vl.viz``, ``vl.parallel``, ``vl.exercises`` ...) is the layer module of that name.
"""
from __future__ import annotations

from .core.api import public_api
from .core.errors import ConfigError, InvalidValueError, UnknownNameError, VramlibError

__version__ = "0.1.0"

__all__ = [
    "Breakdown", "CONVENTIONS", "CacheRule", "ConfigError", "DeepSpeedEstimate", "DevicePlan", "Efficiency", "Fit", "GB", "GPU", "GiB",
    "Hardware", "InvalidValueError", "LlamaCppConfig", "METHODS", "ModelFamily", "ModelSpec", "OPTIMIZERS", "OffloadConfig", "OffloadPlan", "OllamaConfig",
    "ParallelPlan",
    "PipelineBalance", "PlanMemory", "PlanSearch", "PlanSpace", "Precision", "Recommendation", "Roofline", "SGLangConfig",
    "ServingCapacity", "ServingConfig", "UnknownNameError", "VramlibError", "Workload", "activation_bytes", "balance_pipeline",
    "bookshelf_alt_text", "bookshelf_pair", "bookshelf_stack",
    "bytes_per_param", "catalogue", "component_summary", "cost_per_million_tokens", "cuda_overheads", "decode_curve",
    "deepspeed_zero2_estimate", "deepspeed_zero3_estimate", "design_levers", "device_plan", "draw_bookshelf", "equal_params_shape",
    "equal_params_shapes", "evaluate_design", "fit_inference", "fit_map", "fit_training", "fmt_bytes", "gb",
    "get_gpu", "get_model", "get_precision", "gib", "implied_coefficient", "inference_memory", "inference_memory_tp",
    "kv_budget_bytes", "kv_bytes_per_token", "kv_cache_bytes", "largest_module_params", "largest_trainable_model",
    "linear_until", "linearity", "list_gpus", "llamacpp_max_ctx", "llamacpp_memory", "lora_params", "max_batch", "max_params", "max_params_model_states",
    "max_seq_for_plan", "max_seq_for_training", "max_tokens", "max_tokens_tp", "min_gpus", "min_gpus_for_training",
    "model_names", "model_states_bytes", "offload_plan", "ollama_estimate", "optimizer_state_bytes", "parse_hardware", "parse_memory", "plan_memory",
    "plot_fit_map", "precision_names", "prefill_workspace_bytes", "published_rows", "published_stats",
    "read_gguf", "real_setup_bytes", "recommend_gpus", "recommendation_table", "roofline", "scaling_ratio", "search_plans",
    "serving_kv_capacity", "sglang_max_tokens", "sglang_memory", "shelf_layout", "size_ratio", "source_activation_bytes", "source_training_memory",
    "training_memory", "vllm_default_batch", "weights_bytes", "weights_detail", "zero_model_states",
]


def __getattr__(name: str):
    import importlib
    import inspect

    from ._index import DEFINED_IN, MODULES

    if name in MODULES:
        value = importlib.import_module(MODULES[name])
    elif name in DEFINED_IN:
        value = getattr(importlib.import_module(DEFINED_IN[name]), name)
        if inspect.isfunction(value):  # every exported function checks its arguments (core.api.public_api)
            value = public_api(value)
    else:
        raise AttributeError(f"module 'vramlib' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    from ._index import MODULES

    return sorted(set(globals()) | set(__all__) | set(MODULES))
