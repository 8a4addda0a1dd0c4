"""A hostile sweep of the public library: every exported function and settings class (Workload, ParallelPlan), every
argument, a battery of bad values.

Each call must either return or raise :class:`vramlib.VramlibError` whose message is one line naming the
argument -- never another exception (a traceback for the reader). Values that can never be right for an
argument (text where a number belongs, NaN, infinity, a list ...) must be refused, not silently used.
The count of cases is what the closing note of issue 10 reports (``pytest --collect-only -q`` on this file).
"""
from __future__ import annotations

import dataclasses
import inspect
import math

import tempfile
from pathlib import Path

import pytest

import vramlib as vl
from test_gguf_file import LLAMA, base_meta, model_tensors, write_gguf

TINY_GGUF = Path(tempfile.mkdtemp(prefix="vramlib-hostile-")) / "tiny-llama.gguf"
write_gguf(TINY_GGUF, "llama", base_meta(LLAMA), model_tensors(LLAMA), LLAMA["V"])

A100 = "a100-80gb"
M7 = "llama-2-7b"

# one valid call of every exported function: args, kwargs
BASE: dict[str, tuple[tuple, dict]] = {
    "activation_bytes": ((M7, 2048), {}),
    "fmt_bytes": ((10**9,), {}),
    "gb": ((10**9,), {}),
    "gib": ((2**30,), {}),
    "get_gpu": ((A100,), {}),
    "get_model": ((M7,), {}),
    "get_precision": (("int4",), {}),
    "inference_memory": ((M7,), dict(weights="int4", tokens=4096, batch=1, reserve="0.5GB", prefill_chunk=1024)),
    "kv_bytes_per_token": ((M7,), {}),
    "kv_budget_bytes": ((M7, "24GB"), {}),
    "kv_cache_bytes": ((M7, 4096), dict(batch=2)),
    "lora_params": ((M7,), dict(rank=16)),
    "max_batch": ((M7, "24GB", 2048), {}),
    "max_params": (("24GB",), {}),
    "max_tokens": ((M7, "24GiB"), dict(weights="int4", batch=1, attention="sdpa", prefill_chunk=1024)),
    "max_tokens_tp": (("llama-3.1-70b", "24GB", 8), {}),
    "min_gpus": ((10**11, "80GB"), dict(replicated_bytes="1GB")),
    "optimizer_state_bytes": ((M7,), dict(trainable=10**6)),
    "parse_memory": (("24GiB",), {}),
    "prefill_workspace_bytes": ((M7, 4096), dict(chunk=512)),
    "training_memory": ((M7,), dict(method="lora", seq=2048, micro_batch=1, lora_rank=8, optimizer_impl="fused",
                                    lora_dtype="bf16", peak="step")),
    "weights_bytes": ((M7,), dict(dtype="int4")),
    "weights_detail": ((M7,), dict(dtype="int4")),
    "bytes_per_param": ((), dict(convention="source-12")),
    "cost_per_million_tokens": ((1000.0, A100), dict(n_gpus=2)),
    "cuda_overheads": ((M7, A100), dict(dtype="bf16", seq=2048, batch=1, training=True, expandable_segments=False)),
    "decode_curve": ((M7, A100, [1, 8]), {}),
    "deepspeed_zero2_estimate": ((7 * 10**9,), dict(num_gpus_per_node=8)),
    "deepspeed_zero3_estimate": ((7 * 10**9,), dict(largest_layer_params=10**8, num_gpus_per_node=8)),
    "fit_inference": ((M7, "rtx-4090"), dict(weights="int4", tokens=4096)),
    "fit_training": ((M7, A100), dict(method="qlora", seq=2048)),
    "implied_coefficient": ((M7,), dict(seq=2048)),
    "inference_memory_tp": ((M7,), dict(n_gpus=2, tokens=2048)),
    "largest_module_params": ((M7,), dict(tp=2)),
    "linearity": (("llama-2-13b", M7), dict(seq=2048)),
    "llamacpp_memory": ((M7, "q4_k_m"), dict(n_ctx=4096, n_ubatch=512)),
    "llamacpp_max_ctx": ((M7, "rtx-4090", "q4_k_m"), dict(n_ubatch=512)),
    "offload_plan": ((M7, "rtx-4090", "q4_k_m"), dict(host_ram="64GB", n_gpu_layers=20)),
    "sglang_memory": ((M7, A100, "bf16"), dict(kv_cache_dtype="auto")),
    "device_plan": ((M7, "m4-max-64gb", "q4_k_m"), dict(host_ram="64GB")),
    "read_gguf": ((str(TINY_GGUF),), {}),
    "ollama_estimate": ((M7, "rtx-4090", "q4_k_m"), dict(num_ctx=4096)),
    "sglang_max_tokens": ((M7, A100, "bf16"), dict(kv_cache_dtype="fp8_e4m3")),
    "max_params_model_states": (("80GB",), dict(dp=8, stage=3)),
    "max_seq_for_plan": ((M7, A100), {}),
    "max_seq_for_training": ((M7, "80GB"), dict(method="lora")),
    "model_states_bytes": ((7 * 10**9,), {}),
    "parse_hardware": (("2x80GB",), {}),
    "plan_memory": ((M7,), dict(seq=2048, tp=2, dp=2, zero=1)),
    "roofline": ((M7, A100), dict(batch=8, context=2048)),
    "scaling_ratio": (("llama-2-13b", M7), dict(seq=2048)),
    "search_plans": ((M7, A100, 8), dict(seq=2048, global_batch=64, top=3)),
    "serving_kv_capacity": ((M7, A100), dict(gpu_memory_utilization=0.9, block_size=16)),
    "source_activation_bytes": ((M7, 2048), {}),
    "source_training_memory": ((M7,), dict(seq=2048)),
    "vllm_default_batch": ((A100,), {}),
    "zero_model_states": ((7 * 10**9,), dict(dp=8, stage=2)),
    "min_gpus_for_training": ((M7, A100), dict(seq=2048)),
    "recommend_gpus": ((M7,), dict(method="qlora", seq=1024, counts=(1, 2))),
    "balance_pipeline": ((M7,), dict(seq=2048, gpu=A100, pp=4)),
    "largest_trainable_model": ((A100, 8), dict(seq=2048, k_max=64)),
    "design_levers": ((M7, A100, 4096), dict(kv_heads=(8,))),
    "equal_params_shape": ((M7,), dict(hidden=3072)),
    "evaluate_design": ((M7, A100, 4096), {}),
    # the settings classes, swept as constructors too
    "PlanSpace": ((), {}),
    "ServingConfig": ((), {}),
    "Efficiency": ((), {}),
    # settings objects: their constructors are swept field by field too (the functions that take them accept the
    # same fields as keywords, and a ``workload=`` / ``plan=`` argument that is swept with the function)
    "Workload": ((), dict(method="lora", seq=2048, lora_rank=8)),
    "ParallelPlan": ((), dict(tp=2, dp=2, zero=1)),
    "OffloadConfig": ((), dict(host_ram="64GB")),
    "SGLangConfig": ((), {}),
    "OllamaConfig": ((), {}),
}
"""Functions left out of the argument sweep: no arguments, or plotting/figure helpers whose arguments are
objects the library itself made (they are swept through the functions that make them)."""
NO_ARGS = {"catalogue", "model_names", "list_gpus", "precision_names", "component_summary", "published_rows",
           "published_stats"}
FIGURES = {"bookshelf_alt_text", "bookshelf_pair", "bookshelf_stack", "draw_bookshelf", "shelf_layout", "fit_map",
           "plot_fit_map", "recommendation_table", "size_ratio", "equal_params_shapes", "linear_until",
           "real_setup_bytes"}

# values that are never right for a numeric argument, nor for a name
NEVER = {"text": "abc", "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "list": [], "dict": {}, "set": {1}}
# values that may be right for some arguments and must otherwise give one line
MAYBE = {"zero": 0, "negative": -1, "huge": 10**30, "half": 0.5, "none": None, "true": True, "unitless": "24",
         "empty": "", "bigfloat": 1e300, "negfloat": -2.5}

FREE_TEXT = {"field", "title", "label", "setting", "caption", "lever"}  # arguments that are labels, any text

SETTINGS = {"search_plans": "PlanSpace", "serving_kv_capacity": "ServingConfig", "roofline": "Efficiency",
            "llamacpp_memory": "LlamaCppConfig", "llamacpp_max_ctx": "LlamaCppConfig",
            "offload_plan": "OffloadConfig", "device_plan": "OffloadConfig", "ollama_estimate": "OllamaConfig", "sglang_memory": "SGLangConfig", "sglang_max_tokens": "SGLangConfig"}
"""Functions that take a settings object and its fields as keywords (``**settings``): the sweep feeds every field
of the settings class through those keywords, as it does for the named arguments."""
THROUGH_KEYWORDS: dict[str, tuple[str, ...]] = {
    "balance_pipeline": ("moe_layers",),
    "largest_trainable_model": ("tp", "pp"),
    "min_gpus_for_training": ("tp", "pp"),
    "recommend_gpus": ("fewest_only", "include_unfit", "require_features"),
    "implied_coefficient": ("tp", "sequence_parallel"),
}
"""Other arguments that arrive through a function's ``**kwargs`` and are its own to check: swept the same way."""


def _swept_arguments(name: str) -> list[str]:
    """The arguments of ``name`` the sweep feeds bad values to: its signature's named arguments, then the fields
    of its settings class and the keywords of THROUGH_KEYWORDS."""
    sig = inspect.signature(getattr(vl, name))
    names = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    extra = [f.name for f in dataclasses.fields(getattr(vl, SETTINGS[name]))] if name in SETTINGS else []
    return names + [n for n in extra + list(THROUGH_KEYWORDS.get(name, ())) if n not in names]


def test_settings_keywords_reach_the_function():
    for name in {**SETTINGS, **THROUGH_KEYWORDS}:
        kinds = [p.kind for p in inspect.signature(getattr(vl, name)).parameters.values()]
        assert inspect.Parameter.VAR_KEYWORD in kinds, f"{name} takes no **keywords: sweep its arguments directly"


def _functions():
    names = sorted(n for n in vl.__all__ if inspect.isfunction(getattr(vl, n)))
    return names


def test_every_exported_function_is_swept_or_named():
    missing = [n for n in _functions() if n not in BASE and n not in NO_ARGS and n not in FIGURES]
    assert not missing, f"add a baseline call for {missing}"


@pytest.mark.parametrize("name", sorted(BASE))
def test_baseline_calls_work(name):
    args, kwargs = BASE[name]
    getattr(vl, name)(*args, **kwargs)


def _cases():
    for name in sorted(BASE):
        for i, pname in enumerate(_swept_arguments(name)):
            if pname in FREE_TEXT:
                continue
            for label, value in {**NEVER, **MAYBE}.items():
                yield pytest.param(name, i, pname, label, value, id=f"{name}-{pname}-{label}")
        yield pytest.param(name, -1, "unknown keyword", "kwarg", None, id=f"{name}-unknown-kwarg")


def _call(name, index, pname, value):
    fn = getattr(vl, name)
    args, kwargs = BASE[name]
    args, kwargs = list(args), dict(kwargs)
    if index < 0:
        kwargs["no_such_argument"] = 1
        return fn(*args, **kwargs)
    if index < len(args):
        args[index] = value
    else:
        kwargs[pname] = value
    return fn(*args, **kwargs)


@pytest.mark.parametrize("name,index,pname,label,value", list(_cases()))
def test_bad_argument_gives_one_line(name, index, pname, label, value):
    try:
        _call(name, index, pname, value)
    except vl.VramlibError as e:
        msg = str(e)
        assert "\n" not in msg and msg.strip() == msg and len(msg) < 600, msg
        if index >= 0:
            assert pname in msg or pname.replace("_", " ") in msg or ":" in msg, msg
        return
    # it returned: only values that can be right for this argument may be accepted
    assert label not in NEVER or (name, pname, label) in ACCEPTED, f"{name}({pname}={value!r}) was silently accepted"
    assert index >= 0, f"{name} accepted an unknown keyword"


ACCEPTED = {("design_levers", lever, "list") for lever in ("kv_heads", "hiddens", "ffn_ratios", "experts")}
"""(function, argument, value) triples that are right although the value is in NEVER: an empty list of lever
settings means "no variant of this lever"."""
