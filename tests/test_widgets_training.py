"""The training panel's compute function: results, in-place errors, and the cost of an update (counted; the
update time is measured by tools/bench.py)."""
import pytest

import vramlib as vl
from vramlib.solve.training_feasibility import max_seq_for_training
from vramlib.present.widgets import evaluate_panel
from vramlib.present.widgets.training import training_compute, training_panel
from costs import assert_warm_updates_compile_nothing

BASE = dict(n_heads=52, n_kv_heads=52, precision="bf16", method="qlora", lora_rank=16, optimizer="adamw",
            convention="mixed-fp32-master", recompute="full", attention="sdpa", seq=2048, micro_batch=1,
            gpu="rtx-a6000")


def compute(model="llama-33b", **changes):
    return training_compute(model, **(BASE | changes))


def html(model="llama-33b", **changes):
    return evaluate_panel(lambda **v: training_compute(model, **v), BASE | changes)


def test_qlora_33b_on_a6000():
    bd, cap, verdict = compute()
    ref = vl.training_memory("llama-33b", "qlora", seq=2048, recompute="full")
    assert bd.to_dict() == ref.to_dict()
    assert cap == vl.get_gpu("rtx-a6000").memory_bytes
    n = max_seq_for_training("llama-33b", cap, method="qlora", recompute="full")
    assert verdict.startswith("Fits on rtx-a6000") and f"{n:,} tokens" in verdict and "trained for 2,048" in verdict


@pytest.mark.parametrize("changes,needle", [
    (dict(method="full", gpu="h100-sxm-80gb", n_heads=32, n_kv_heads=32), "Not even one token"),
    (dict(method="full", recompute="none", seq=16384, optimizer="adamw-8bit", n_heads=32, n_kv_heads=8,
          gpu="h100-sxm-80gb", convention="source-12"), "Does not fit"),
    (dict(method="lora", precision="fp16", lora_rank=64, n_heads=32, n_kv_heads=8, gpu="a100-80gb",
          activation_style="megatron", attention="eager", micro_batch=2), "Fits on a100-80gb"),
])
def test_other_settings(changes, needle):
    model = "llama-2-7b" if changes.get("n_heads") == 32 else "llama-33b"
    bd, cap, verdict = compute(model, **changes)
    assert needle in verdict
    out = html(model, **changes)
    assert needle in out and "vramlib-error" not in out and "<svg" in out


def test_gqa_change_shrinks_nothing_but_attention_tensors():
    a, _, _ = compute("llama-2-7b", n_heads=32, n_kv_heads=32, method="full", gpu="h100-sxm-80gb")
    b, _, _ = compute("llama-2-7b", n_heads=32, n_kv_heads=8, method="full", gpu="h100-sxm-80gb")
    assert b["activations"] < a["activations"] and b["optimizer states"] < a["optimizer states"]


@pytest.mark.parametrize("changes,field", [
    (dict(n_kv_heads=5), "n_kv_heads"),                 # does not divide 52 heads
    (dict(n_heads=50), "n_heads"),                      # does not divide hidden 6656
    (dict(optimizer="adam9"), "optimizer"),
    (dict(method="prefix"), "method"),
    (dict(convention="source-13"), "convention"),
    (dict(precision="int8"), "precision"),
    (dict(seq=0), "seq"),
    (dict(micro_batch=-1), "batch"),
    (dict(lora_rank=0), "lora_rank"),
    (dict(gpu="rtx-9090"), "gpu"),
    (dict(recompute="some"), "recompute"),
])
def test_bad_input_shows_a_message_in_place(changes, field):
    out = html(**changes)
    assert "vramlib-error" in out and field in out and "Traceback" not in out
    assert out.count("\n") == 0


def test_warm_update_compiles_nothing():
    # the 50 ms target is checked by tools/bench.py; here the work: after one update, no lambdify or solve
    # new numbers, same formulas: nothing to compile (new heads: a new shape, so one weights_detail miss)
    assert_warm_updates_compile_nothing(html, misses_allowed=1, seq=4096, micro_batch=2, lora_rank=64, n_heads=64,
                                        n_kv_heads=8)


def test_panel_builds():
    pytest.importorskip("ipywidgets")
    box = training_panel("llama-33b")
    assert "Longest sequence" in box.children[-1].value


def test_integer_boxes_never_clamp_and_say_so_in_place():
    """ipywidgets' BoundedIntText silently turns 10^9 tokens into its maximum; the panels' boxes show a message."""
    pytest.importorskip("ipywidgets")
    from vramlib.present.widgets import inference_panel

    box = inference_panel("llama-2-13b")
    ctl = {c.description: c for row in box.children[:-1] for c in row.children}
    out = box.children[-1]
    ctl["context (tokens)"].value = 10**9
    assert ctl["context (tokens)"].value == 10**9                          # not clamped to 10,000,000
    assert "vramlib-error" in out.value and "context (tokens)" in out.value and "10,000,000" in out.value
    ctl["context (tokens)"].value = 0
    assert "vramlib-error" in out.value and "from 1 to" in out.value
    ctl["context (tokens)"].value = 4096
    assert "vramlib-error" not in out.value
