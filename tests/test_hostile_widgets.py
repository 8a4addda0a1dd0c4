"""A hostile sweep of every chapter's panel: each control of each calculator, fed values a person could type.

The panels' compute functions (what Jupyter, Binder and the static calculators run) are taken from the chapters'
stored placeholders, with the chapter's own initial values; one control at a time gets a bad value. Each update
must give a result or a one-line VramlibError message naming the control -- never another exception, never
"internal error". Values outside a box's allowed range are the panel's business (``widgets.range_problem``, see
tests/test_widgets_training.py); here the compute functions must still refuse what no box could hold.
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from cases import python_result  # noqa: E402

PLACEHOLDER = re.compile(r'class="vramlib-calc"[^>]*?data-calc="([^"]+)" data-fixed="([^"]*)" data-controls="([^"]*)"')
INT_BAD = {"zero": 0, "negative": -1, "half": 2.5, "text": "abc", "none": None, "nan": float("nan"),
           "inf": float("inf"), "huge": 10**15, "bool": True}
SELECT_BAD = {"unknown": "no-such-option", "none": None, "number": 3, "empty": ""}
NEVER = {"half", "text", "none", "nan", "inf", "bool", "unknown", "number", "empty"}


def _panels():
    seen = set()
    for nb in sorted((ROOT / "book").glob("ch*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        pages = ["".join(o.get("data", {}).get("text/html", "")) for c in cells for o in c.get("outputs", [])]
        for calc, fixed, controls in PLACEHOLDER.findall("\n".join(pages)):
            key = (calc, fixed)
            if key in seen:
                continue
            seen.add(key)
            yield nb.stem[:4], calc, json.loads(html.unescape(fixed)), json.loads(html.unescape(controls))


def _cases():
    for chapter, calc, fixed, specs in _panels():
        values = {s["name"]: s["value"] for s in specs}
        for s in specs:
            bad = INT_BAD if s["kind"] in ("int", "float") else SELECT_BAD if s["kind"] == "select" else {}
            for label, v in bad.items():
                if (s["kind"] == "float" and label == "half") or (s["kind"] == "select" and v in s["options"]):
                    continue
                if label == "none" and s["name"] in ("n_heads", "n_kv_heads"):
                    continue  # None: the model's own heads (the compute functions' documented default)
                yield pytest.param(calc, fixed, values, s["name"], label, v, id=f"{chapter}-{calc}-{s['name']}-{label}")


CASES = list(_cases())
OPTIONS = {(calc, s["name"]): s.get("options", []) for _, calc, _, specs in _panels() for s in specs}


def test_every_chapter_panel_is_swept():
    assert len({c.values[0] for c in CASES}) >= 10 and len(CASES) > 500, (len({c.values[0] for c in CASES}), len(CASES))


@pytest.mark.parametrize("calc,fixed,values,name,label,value", CASES)
def test_bad_control_value_gives_one_line(calc, fixed, values, name, label, value):
    out = python_result(calc, fixed, {**values, name: value})  # any exception but VramlibError fails here
    if "error" in out:
        msg = out["error"]
        assert "\n" not in msg and "internal error" not in msg, msg
        return
    numeric_select = label == "number" and not all(isinstance(o, str) for o in OPTIONS.get((calc, name), ["x"]))
    assert label not in NEVER or numeric_select, f"{calc}: {name}={value!r} was silently accepted"


# --- the inference panel's model control (chapters 1, 5, 7): any catalogue model, its own heads -----------------

def _inference_panel(model, **kwargs):
    pytest.importorskip("ipywidgets")
    from vramlib.present.widgets import inference_panel

    box = inference_panel(model, **kwargs)
    out = box.children[-1]
    updates: list[str] = []
    out.observe(lambda change: updates.append(change["new"]), names="value")
    return {c.description: c for row in box.children[:-1] for c in row.children}, out, updates


@pytest.mark.parametrize("order", [("gpt-oss-20b", "qwen3-30b-a3b"),
                                   ("qwen3-30b-a3b", "gemma-3-27b", "deepseek-v3", "bamba-9b", "gpt-oss-20b")])
def test_inference_panel_switches_to_any_catalogue_model(order):
    """Choosing a model sets its heads and KV heads, then updates once, to vramlib's own numbers for that model."""
    import vramlib as vl

    ctl, out, updates = _inference_panel("llama-2-13b", gpu="h200", weights="bf16", kv_dtype="fp16", tokens=8192)
    assert ctl["model"].value == ctl["model"].options[0] == "llama-2-13b"
    assert sorted(ctl["model"].options) == vl.model_names()
    for name in order:
        del updates[:]
        ctl["model"].value = name
        spec = vl.get_model(name)
        assert (ctl["heads"].value, ctl["KV heads"].value) == (spec.n_heads, spec.n_kv_heads)
        assert len(updates) == 1, f"{name}: {len(updates)} updates (the heads must be set before the one update)"
        bd = vl.inference_memory(spec, "bf16", "fp16", 8192, 1, "sdpa")
        longest = vl.max_tokens(spec, "h200", "bf16", "fp16", attention="sdpa")
        assert "vramlib-error" not in out.value and bd._repr_html_() in out.value, name
        assert f"Longest context at batch 1: {longest:,} tokens" in out.value, name


@pytest.mark.parametrize("model,heads,kv_heads,words", [
    ("deepseek-v3", 256, 128, "attention: got 'mla'; needs kv_lora_rank"),   # MLA: rope part > hidden / 256
    ("gpt-oss-20b", 128, 8, "n_heads: got 128; must divide hidden=2880"),
    ("qwen3-30b-a3b", 32, 3, "n_kv_heads: got 3; must divide n_heads=32")])
def test_inference_panel_refused_head_change_is_one_line(model, heads, kv_heads, words):
    """A head change the chosen model's shape refuses (ModelSpec.as_heads) shows its one line in place; choosing the
    model again brings back its own heads and a result."""
    ctl, out, _ = _inference_panel("llama-2-13b", gpu="h200", weights="bf16")
    ctl["model"].value = model
    ctl["heads"].value, ctl["KV heads"].value = heads, kv_heads
    assert "vramlib-error" in out.value and words in out.value and "\n" not in out.value
    assert "internal error" not in out.value and "Traceback" not in out.value
    ctl["model"].value = "llama-2-13b"
    ctl["model"].value = model
    assert "vramlib-error" not in out.value and "Longest context" in out.value


def test_inference_panel_keeps_a_model_outside_the_catalogue():
    """The chapter's own shape (not in the catalogue) is the first choice under its name, and comes back with its
    own heads after another model was chosen."""
    import vramlib as vl

    own = vl.get_model("llama-2-13b").with_(name="my-13b", n_kv_heads=8)
    ctl, out, _ = _inference_panel(own, gpu="rtx-4090", weights="int4")
    assert ctl["model"].options[0] == "my-13b" and "my-13b" not in vl.model_names()
    first = out.value
    ctl["model"].value = "gpt-oss-20b"
    ctl["model"].value = "my-13b"
    assert (ctl["heads"].value, ctl["KV heads"].value) == (40, 8) and out.value == first
    assert vl.inference_memory(own, "int4", "fp16", 4096)._repr_html_() in out.value
