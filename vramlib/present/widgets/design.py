"""The design-lever panel (chapter 13): shape knobs (layers, hidden, heads, KV heads, FFN, experts) against a
target GPU and context -> the inference breakdown at the target context, and a verdict with the longest context,
the sequences held at once and the GPUs needed to train."""
from __future__ import annotations

from ...explain.design import equal_params_shape, evaluate_design, exact
from ...core.errors import InvalidValueError, check_positive_int
from ...catalog.hardware import GPUS, get_gpu
from ...catalog.models import get_model
from ...catalog.precision import precision_names
from ...core.portable import fmt_fixed, portable
from .base import Computed, bounded_int, panel


def design_spec(base, n_layers: int, hidden: int, n_heads: int, n_kv_heads: int, ffn: int, n_experts: int = 0,
                experts_per_token: int = 2, equal_params: bool = False):
    """The shape the knobs describe; ``equal_params`` solves the layers for the base's parameter count."""
    b = exact(base)
    hidden, n_heads = check_positive_int("hidden", hidden), check_positive_int("n_heads", n_heads)
    if hidden % n_heads:
        raise InvalidValueError("n_heads", n_heads, f"must divide hidden={hidden}")
    n_experts = check_positive_int("n_experts", n_experts, allow_zero=True)
    experts_per_token = check_positive_int("experts_per_token", experts_per_token)  # checked even when dense
    spec = b.with_(**design_fields(hidden, n_heads, n_kv_heads, check_positive_int("ffn", ffn),
                                   check_positive_int("n_layers", n_layers), n_experts, experts_per_token))
    if equal_params:
        layers = equal_params_shape(spec.with_(n_layers=1), n_params=b.n_params, ffn=spec.ffn).n_layers
        spec = spec.with_(n_layers=layers)
    return spec.with_(name=f"{b.name} (designed)")


@portable
def design_kv_format(weights):
    """The design panel's KV cache format: fp16 with fp16 weights, bf16 otherwise."""
    return "fp16" if weights == "fp16" else "bf16"


@portable
def design_fields(hidden, n_heads, n_kv_heads, ffn, n_layers, n_experts, experts_per_token):
    """The shape fields the design knobs set: the head dimension follows hidden / heads; one expert or none is a dense
    MLP (no routed experts)."""
    moe = n_experts > 1
    return {"hidden": hidden, "n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": hidden // n_heads, "ffn": ffn,
            "n_layers": n_layers, "n_experts": n_experts if moe else 0, "experts_per_token": experts_per_token if moe else 0}


def design_compute(base, n_layers: int, hidden: int, n_heads: int, n_kv_heads: int, ffn: int, n_experts: int,
                   experts_per_token: int, equal_params: bool, weights: str, gpu: str, context: int,
                   train_seq: int = 4096, n_gpus: int = 8) -> Computed:
    """One update of the design panel: the inference breakdown at ``context`` on ``gpu`` and a verdict."""
    spec = design_spec(base, n_layers, hidden, n_heads, n_kv_heads, ffn, n_experts, experts_per_token, equal_params)
    gpu = get_gpu(gpu).key  # the panel's GPU menu: a card name (evaluate_design would read a number as bytes)
    d = evaluate_design(spec, gpu, context, weights=weights, kv_dtype=design_kv_format(weights),
                        train_seq=train_seq, n_gpus=n_gpus)
    m = d.spec
    summary = {"n_layers": m.n_layers, "n_params": m.n_params, "n_active": m.n_active_params, "moe": m.n_experts > 0,
               "kv_per_token": d.kv_per_token, "fits": d.fits, "max_sequences": d.max_sequences,
               "max_context": d.max_context, "gpus_to_train": d.gpus_to_train, "max_micro_batch": d.max_micro_batch}
    return d.inference, d.capacity, design_verdict(summary, gpu, context, train_seq, n_gpus)


@portable
def design_verdict(d, gpu, context, train_seq, n_gpus):
    """The design panel's verdict: the shape's size and KV cache per token, what fits on the GPU, the longest context,
    and the GPUs and micro-batch to train it."""
    active = ", " + fmt_fixed(d["n_active"] / 1e9, 2, False) + "B active" if d["moe"] else ""
    fit = ("one " + fmt_fixed(context, 0, True) + "-token sequence fits, " + fmt_fixed(d["max_sequences"], 0, True) +
           " at once" if d["fits"] else "one " + fmt_fixed(context, 0, True) + "-token sequence does not fit")
    train = (str(d["gpus_to_train"]) + " GPUs (ZeRO-3)" if d["gpus_to_train"] else "more than any number of such GPUs")
    return (str(d["n_layers"]) + " layers, " + fmt_fixed(d["n_params"] / 1e9, 2, False) + "B parameters" + active +
            "; KV cache " + fmt_fixed(d["kv_per_token"] / 1024, 0, True) + " KiB per token. On " + gpu + ": " + fit +
            "; longest context " + fmt_fixed(d["max_context"], 0, True) + " tokens. Training on " +
            fmt_fixed(train_seq, 0, True) + "-token sequences needs " + train + "; on " + str(n_gpus) + ": micro-batch " +
            str(d["max_micro_batch"]) + ".")


def design_panel(base="source-13b", gpu: str = "h100-sxm-80gb", context: int = 131072, weights: str = "bf16",
                 train_seq: int = 4096, n_gpus: int = 8):
    """Controls: layers (or solved at equal parameters), hidden, heads, KV heads, FFN, experts, experts per token,
    precision, GPU, target context, training sequence, GPUs for training."""
    import ipywidgets as w

    b = get_model(base)
    style = {"description_width": "initial"}
    controls = {
        "n_layers": bounded_int(value=b.n_layers, min=1, max=1024, description="layers", style=style),
        "equal_params": w.Checkbox(value=False, description="solve layers at the base's parameters", style=style),
        "hidden": bounded_int(value=b.hidden, min=64, max=65536, step=128, description="hidden", style=style),
        "n_heads": bounded_int(value=b.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=b.n_kv_heads, min=1, max=512, description="KV heads", style=style),
        "ffn": bounded_int(value=b.ffn, min=1, max=10**6, step=256, description="FFN size", style=style),
        "n_experts": bounded_int(value=b.n_experts, min=0, max=1024, description="experts (0 = dense)",
                                      style=style),
        "experts_per_token": bounded_int(value=b.experts_per_token or 2, min=1, max=64,
                                              description="experts per token", style=style),
        "weights": w.Dropdown(options=precision_names(), value=weights, description="weights", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="target GPU", style=style),
        "context": bounded_int(value=context, min=1, max=10**8, step=4096, description="target context",
                                    style=style),
        "train_seq": bounded_int(value=train_seq, min=1, max=10**6, step=1024, description="training sequence",
                                      style=style),
        "n_gpus": bounded_int(value=n_gpus, min=1, max=100000, description="training GPUs", style=style),
    }
    return panel(design_compute, controls, fixed={"base": b})
