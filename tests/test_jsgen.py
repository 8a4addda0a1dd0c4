"""vramlib.web.jsgen and the panels' static view (issue 7): generation from the sympy expressions, catalogues,
the text/html placeholder. The browser itself is tested in tests/browser after the book build; when Node.js
is installed, a quick equivalence run of the generated JS against vramlib happens here too."""
from __future__ import annotations

import html
import json
import random
import re
import shutil
import subprocess

import pytest
import sympy as sp

from vramlib import formulas as F
from vramlib import jsgen
from vramlib.present import jsdata
from vramlib.catalog.models import catalogue, get_model, model_names


def test_every_expression_prints_to_javascript():
    src, failed = jsgen.formulas_js()
    assert failed == []
    assert "VL.formulas = {" in src and "VL.activations = {" in src
    for name in ("KV_CACHE_BYTES", "WEIGHTS_BYTES", "PREFILL_WORKSPACE_BYTES", "MAX_TOKENS_KV_ONLY", "N_PARAMS",
                 "MODEL_STATES_BYTES", "LAYER_PARAMS", "MIN_GPUS"):
        assert f"  {name}: VL.fn(" in src, name
    assert '"sdpa|full": VL.fn(' in src  # activations.HF_MODEL[("sdpa", "full")]


def test_printer_handles_max_kronecker_and_rationals():
    b, x = sp.symbols("b x", positive=True)
    args, code = jsgen.js_expression(sp.Max(x, 3 * b) + sp.KroneckerDelta(b, 1) + sp.Rational(1, 2) * x)
    assert args == ["b", "x"]
    assert "Math.max" in code and " ? 1 : 0)" in code and "(1/2)*x" in code
    with pytest.raises(ValueError):
        jsgen.js_expression(sp.Symbol("values") + 1)  # the generated wrapper's own name
    with pytest.raises(ValueError):
        jsgen.js_expression(sp.besselj(1, x))


def test_generated_names_match_the_python_expressions():
    exprs = jsgen.collect_expressions()
    assert exprs["formulas"]["KV_CACHE_BYTES"] is F.KV_CACHE_BYTES
    assert set(exprs["formulas"]["LAYER_GROUPS"]) == set(F.LAYER_GROUPS)
    assert "widgets" not in exprs and "jsgen" not in exprs


def test_catalogues_come_from_vramlib():
    from vramlib.catalog.hardware import GPUS
    from vramlib.catalog.precision import precision_names

    cat = jsgen.catalogue_json()
    assert set(cat["gpus"]) == set(GPUS)
    assert cat["gpus"]["rtx-4090"]["memory_bytes"] == GPUS["rtx-4090"].memory_bytes
    assert cat["precision_names"] == precision_names()
    assert cat["precisions"]["nf4-dq"]["bits"] == pytest.approx(4 + 8 / 64 + 32 / (64 * 256))
    assert "fp16" in cat["kv_formats"] and "nf4" not in cat["kv_formats"]
    assert "kv_error" in cat["precisions"]["q4_k_m"]
    assert set(cat["models"]) == set(catalogue())
    for key in ("llama-2-13b", "gpt-oss-20b", "bamba-9b"):  # what VL.model reads: the inference panel's model control
        assert jsdata.from_js_value(cat["models"][key]) == get_model(key)
        assert cat["models"][key] == jsdata.model_json(get_model(key))
    json.dumps(cat)


@pytest.mark.parametrize("key", ["llama-2-13b", "source-13b", "mixtral-8x7b", "phi-3-mini", "falcon-7b"])
def test_model_round_trip(key):
    m = get_model(key)
    j = jsdata.to_js_value(m)
    assert jsdata.from_js_value(json.loads(json.dumps(j))) == m
    assert j["symbols"] == m.symbols()


def test_build_js_is_self_contained():
    js = jsgen.build_js()
    assert not re.search(r"""(src|href)\s*=\s*["']https?://""", js)
    assert "VL.register(\"inference\"" in js
    assert set(jsgen.js_calculators()) >= {"inference", "training", "serving", "design"}


def test_panel_bundle_has_widget_and_static_views():
    pytest.importorskip("ipywidgets")
    from vramlib.present.widgets import inference_panel

    box = inference_panel("llama-2-13b", gpu="rtx-4090", weights="int4", tokens=4096)
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    view = bundle["text/html"]
    assert 'data-calc="inference"' in view and "vramlib-breakdown" in view and "Binder" in view
    attrs = dict(re.findall(r'data-(fixed|controls)="([^"]*)"', view))
    specs = json.loads(html.unescape(attrs["controls"]))
    assert [s["name"] for s in specs] == ["model", "n_heads", "n_kv_heads", "weights", "kv_dtype", "tokens", "batch",
                                          "attention", "gpu"]
    model = specs[0]  # every catalogue model, the chapter's first and chosen
    assert model["value"] == model["options"][0] == "llama-2-13b" and sorted(model["options"]) == model_names()
    assert jsdata.from_js_value(json.loads(html.unescape(attrs["fixed"]))["own_model"]) == get_model("llama-2-13b")
    assert view == inference_panel("llama-2-13b", gpu="rtx-4090", weights="int4")._repr_mimebundle_()["text/html"]


def test_a_lambda_panel_is_static_with_a_hint():
    w = pytest.importorskip("ipywidgets")
    from vramlib.present.widgets import inference_compute, panel

    m = get_model("source-7b")
    ctl = {"n_heads": w.BoundedIntText(value=32, min=1, max=64, description="heads"),
           "n_kv_heads": w.BoundedIntText(value=32, min=1, max=64, description="KV heads")}
    box = panel(lambda **v: inference_compute(m, weights="fp16", kv_dtype="fp16", tokens=1024, gpu="a100-80gb", **v),
                ctl)
    view = box._repr_mimebundle_()["text/html"]
    assert "data-calc" not in view and "vramlib-calc" in view and "Binder" in view and "heads <b>32</b>" in view


NODE = shutil.which("node")
RUNNER = r"""
global.window = global;
global.document = { readyState: "complete", querySelectorAll: function () { return []; } };
eval(require("fs").readFileSync(process.argv[2], "utf8"));
const qs = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(qs.map(function (q) {
  const r = VL.run(VL.calcs[q.calc], Object.assign({}, VL.fromFixed(q.fixed), q.values));
  if (r instanceof Error) return {error: r.message};
  return {parts: r[0].parts, total: r[0].total, capacity: r[1], verdict: r[2], title: r[0].title};
})));
"""


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (the browser test covers this after the build)")
@pytest.mark.parametrize("calc,model", [("inference", "llama-2-13b"), ("inference", "mixtral-8x7b"),
                                        ("training", "llama-3.1-8b"), ("training", "phi-3-mini"),
                                        ("serving", "llama-3.1-8b"), ("serving", "mixtral-8x7b"),
                                        ("design", "source-13b")])
def test_generated_js_equals_vramlib_in_node(tmp_path, calc, model):
    """A quick check without a browser: 30 random sets through the generated JS under Node.js."""
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "browser"))
    try:
        cases = importlib.import_module("cases")
    finally:
        sys.path.pop(0)
    import vramlib.present.widgets as W
    from vramlib.present.widgets import control_spec

    mod = importlib.import_module(f"vramlib.present.widgets.{calc}")
    seen = {}
    original = mod.panel
    mod.panel = lambda compute, controls, fixed=None, **_: seen.update(
        specs=[control_spec(k, c) for k, c in controls.items()], fixed=fixed)
    try:
        getattr(mod, f"{calc}_panel")(model)
    finally:
        mod.panel = original
    assert W.panel is original
    js_file = tmp_path / "vramlib-calc.js"
    js_file.write_text(jsgen.build_js())
    runner = tmp_path / "run.js"
    runner.write_text(RUNNER)
    fixed = {k: jsdata.to_js_value(v) for k, v in seen["fixed"].items()}
    rng = random.Random(7)
    qs = [{"calc": calc, "fixed": fixed, "values": cases.random_values(seen["specs"], fixed, rng)} for _ in range(30)]
    out = subprocess.run([NODE, str(runner), str(js_file)], input=json.dumps(qs), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    diffs = []
    for q, js in zip(qs, json.loads(out.stdout)):
        diffs += cases.compare(cases.python_result(calc, fixed, q["values"]), js)
    assert not diffs, diffs[:5]


PARSE_RUNNER = r"""
global.window = global;
global.document = { readyState: "complete", querySelectorAll: function () { return []; } };
eval(require("fs").readFileSync(process.argv[2], "utf8"));
const qs = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(qs.map(function (q) {
  try { return {value: VL.parseTyped(q.text, q.spec)}; } catch (e) {
    return {error: e.message, vramlib: e instanceof VL.VramlibError};
  }
})));
"""
TOKENS = {"name": "tokens", "label": "context (tokens)", "kind": "int", "min": 1, "max": 10**7}
FRACTION = {"name": "gpu_memory_utilization", "label": "gpu_memory_utilization", "kind": "float", "min": 0.05, "max": 1.0}
PARSED = [("1e5", TOKENS, 100000), ("1E5", TOKENS, 100000), ("100,000", TOKENS, 100000), ("100_000", TOKENS, 100000),
          (" 4096 ", TOKENS, 4096), ("1,000,000", TOKENS, 10**6), ("+2048", TOKENS, 2048), ("1.0", TOKENS, 1),
          ("10000000", TOKENS, 10**7), ("0.9", FRACTION, 0.9), ("9e-1", FRACTION, 0.9), (".5", FRACTION, 0.5),
          ("1", FRACTION, 1)]
REFUSED = [("abc", TOKENS, ""), ("", TOKENS, ""), ("1e", TOKENS, ""), ("nan", TOKENS, ""), ("Infinity", TOKENS, ""),
           ("-1", TOKENS, ""), ("0", TOKENS, ""), ("2.5", TOKENS, ""), ("10000001", TOKENS, ""), ("0x10", TOKENS, ""),
           ("1e12", TOKENS, "(read as 1,000,000,000,000)"), ("1000000000", TOKENS, ""),
           ("4k", TOKENS, "(4,000 or 4,096?)"), ("128K", TOKENS, "(128,000 or 131,072?)"),
           ("1,00", TOKENS, "commas may only separate thousands"), ("0,9", FRACTION, "write decimals with a point"),
           ("1.01", FRACTION, ""), ("90%", FRACTION, "")]


@pytest.mark.skipif(NODE is None, reason="Node.js not installed (tests/browser/test_input_parsing.py covers this)")
def test_typed_numbers_are_read_as_written_or_refused_in_one_line(tmp_path):
    """core.js's VL.parseTyped (what a reader types in a number box): the number as written, or one line naming the
    field and the range -- never clamped, rounded or truncated ("100,000" is 100000, never 100)."""
    js_file = tmp_path / "vramlib-calc.js"
    js_file.write_text(jsgen.build_js())
    runner = tmp_path / "parse.js"
    runner.write_text(PARSE_RUNNER)
    cases = PARSED + REFUSED
    out = subprocess.run([NODE, str(runner), str(js_file)], input=json.dumps([{"text": t, "spec": s} for t, s, _ in cases]),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for (text, spec, want), r in zip(PARSED, got):
        assert r == {"value": want}, (text, r)
    for (text, spec, hint), r in zip(REFUSED, got[len(PARSED):]):
        rng = "an integer from 1 to 10,000,000" if spec["kind"] == "int" else "a number from 0.05 to 1"
        assert r.get("vramlib") and r["error"].startswith(f"{spec['label']}: got {text!r}"), (text, r)
        assert rng in r["error"] and hint in r["error"] and "\n" not in r["error"], (text, r)
