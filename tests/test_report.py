"""vramlib.workshop.report: hardware specs, per-GPU inference memory under tensor parallelism, fits, and the papermill +
nbconvert reports (one HTML run and one two-participant CSV batch; about 25 s together)."""
from __future__ import annotations

import csv
import json
import re

import pytest
import sympy as sp

import vramlib as vl
from vramlib import cli, formulas as F, report as R
from vramlib.core.errors import VramlibError


@pytest.mark.parametrize("spec,count,per_gpu,key", [
    ("rtx-4090", 1, 24564 * 2**20, "rtx-4090"),
    ("RTX 4090", 1, 24564 * 2**20, "rtx-4090"),
    ("4xA100-80GB", 4, 80 * 2**30, "a100-80gb"),
    ("8 x h100-sxm-80gb", 8, 81559 * 2**20, "h100-sxm-80gb"),
    ("2x80GB", 2, 80 * 10**9, None),
    ("24GiB", 1, 24 * 2**30, None),
    ("3 * 0.5 TB", 3, 500 * 10**9, None),
])
def test_parse_hardware(spec, count, per_gpu, key):
    hw = R.parse_hardware(spec)
    assert (hw.count, hw.per_gpu_bytes, hw.gpu.key if hw.gpu else None) == (count, per_gpu, key)
    assert "GB" in hw.describe() and "GiB" in hw.describe()


@pytest.mark.parametrize("spec", ["", "24", "80XB", "0x80GB", "2x", "x80GB", "2x80XB", "rtx-5090", "a100", 24])
def test_parse_hardware_rejects(spec):
    with pytest.raises(VramlibError) as e:
        R.parse_hardware(spec)
    assert "\n" not in str(e.value) and str(e.value).startswith("gpu")


@pytest.mark.parametrize("model,weights,attention", [
    ("llama-2-13b", "int4", "sdpa"), ("llama-3.1-8b", "fp16", "eager"), ("mistral-7b", "awq-4bit-g128", "flash"),
    ("source-13b", "int8", "sdpa"), ("mixtral-8x7b", "q4_k_m", "sdpa"), ("gpt2", "fp32", "eager"),
])
def test_tp_one_gpu_is_inference_memory(model, weights, attention):
    a = R.inference_memory_tp(model, 1, weights, "fp16", 3000, 2, attention)
    b = vl.inference_memory(model, weights, "fp16", 3000, 2, attention)
    assert a.to_dict() == b.to_dict()


def test_tp_prefill_expression_reduces_to_the_single_gpu_one():
    n = sp.Symbol("n", integer=True, positive=True)
    assert sp.simplify(R.PREFILL_WORKSPACE_TP_BYTES.subs(n, 1) - F.PREFILL_WORKSPACE_BYTES) == 0


@pytest.mark.parametrize("n", [2, 4, 8])
def test_tp_splits_weights_and_kv_heads(n):
    m = vl.get_model("llama-2-70b")  # 64 heads, 8 KV heads
    bd = R.inference_memory_tp(m, n, "fp16", "fp16", 4096, 1, "sdpa")
    w = vl.weights_bytes(m, "fp16")
    assert bd["weights"] == -(-w // n)
    assert bd["kv cache"] * n == vl.kv_cache_bytes(m, 4096)
    assert bd["prefill workspace"] < vl.prefill_workspace_bytes(m, 4096)
    assert bd["reserve (CUDA context, framework)"] == 500_000_000


def test_tp_replicates_kv_heads_beyond_their_count():
    m = vl.get_model("llama-3.1-8b")  # 32 heads, 8 KV heads
    assert R.kv_heads_per_gpu(m, 16) == 1 and R.kv_heads_per_gpu(m, 4) == 2
    bd = R.inference_memory_tp(m, 16, tokens=1000)
    assert bd["kv cache"] == vl.kv_cache_bytes(m.with_(n_kv_heads=1), 1000)
    with pytest.raises(VramlibError, match="gpu count"):
        R.kv_heads_per_gpu("llama-2-13b", 3)
    with pytest.raises(VramlibError, match="8 KV heads"):
        R.kv_heads_per_gpu(vl.get_model("llama-3.1-8b").with_(n_heads=48, n_kv_heads=8), 12)


@pytest.mark.parametrize("model,gpu,n", [("llama-3.1-70b", "h100-sxm-80gb", 4), ("llama-2-70b", "a100-80gb", 2),
                                         ("qwen2.5-7b", "rtx-4090", 2), ("source-13b", "24GB", 4)])
def test_max_context_tp_kv_only_matches_max_tokens_tp(model, gpu, n):
    got = R.max_context(model, f"{n}x{gpu}", attention=None)
    assert abs(got - vl.max_tokens_tp(model, gpu, n)) <= 1  # per-GPU weights rounded up to a byte


def test_max_context_tp_of_a_cache_that_stops_growing_is_the_model_context():
    assert R.max_context("mistral-7b", "2xrtx-4090", attention=None) == vl.get_model("mistral-7b").max_context


@pytest.mark.parametrize("attention", ["sdpa", "eager", None])
def test_max_context_tp_is_the_largest_that_fits(attention):
    hw = R.parse_hardware("4xa100-80gb")
    t = R.max_context("llama-2-70b", hw, attention=attention)
    total = lambda x: R.inference_memory_tp("llama-2-70b", 4, tokens=x, attention=attention).total  # noqa: E731
    assert total(t) <= hw.per_gpu_bytes < total(t + 1)


def test_max_context_one_gpu_is_max_tokens():
    assert R.max_context("llama-3.1-8b", "rtx-4090") == vl.max_tokens("llama-3.1-8b", "rtx-4090", attention="sdpa")
    assert R.max_context("llama-2-70b", "rtx-4090") == 0


def test_fit_verdicts_and_dict():
    ft = R.fit_inference("llama-2-13b", "rtx-4090", "int4")
    assert ft.fits and ft.verdict().startswith("Fits:") and "GiB" in ft.verdict()
    d = ft.to_dict()
    assert json.loads(json.dumps(d)) == d and d["total_bytes"] == sum(d["per_gpu_bytes"].values())
    bad = R.fit_inference("llama-2-13b", "rtx-4090")
    assert not bad.fits and bad.verdict().startswith("Does not fit: short by")
    tr = R.fit_training("llama-2-7b", "2xrtx-4090", "train")
    assert tr.settings["method"] == "full" and tr.notes and "data parallelism" in tr.notes[0]
    assert tr.breakdown.to_dict() == vl.training_memory("llama-2-7b").to_dict()


def test_breakdown_text_columns():
    bd = vl.inference_memory("llama-2-7b")
    text = R.breakdown_text(bd, 24 * 2**30)
    lines = text.splitlines()
    assert lines[0].split() == ["component", "bytes", "GB", "GiB", "share"]
    assert f"{bd.total:,}" in text and "25,769,803,776" in text
    assert len({len(x) for x in lines if not x.startswith("reserve")}) <= 3  # aligned columns


def test_load_model_variants(tmp_path):
    assert R.load_model("Llama-2-13B").name == "llama-2-13b"
    assert R.load_model("llama-2-13b", kv_heads=8).n_kv_heads == 8
    m = R.load_model("llama-2-13b", heads=20)
    assert (m.n_heads, m.head_dim, m.n_kv_heads) == (20, 256, 20)
    with pytest.raises(VramlibError, match="config.json: path"):
        R.load_model(str(tmp_path / "nothing" / "config.json"))


def test_report_spec_validation():
    spec = R.ReportSpec("Ann", "rtx-4090", "llama-3.1-8b; mistral-7b", "inference;train")
    assert spec.models == ("llama-3.1-8b", "mistral-7b") and spec.tasks == ("inference", "full")
    fits = R.report_fits(spec)
    assert len(fits) == 2 * (3 + 1)
    rows = R.summary_rows(fits, name="Ann")
    assert {r["fits"] for r in rows} <= {"yes", "no"} and rows[0]["name"] == "Ann"
    for kw, frag in ((dict(models=""), "models"), (dict(tasks="serve"), "task"), (dict(gpu="rtx-5090"), "gpu"),
                     (dict(models="llama-9"), "model")):
        with pytest.raises(VramlibError, match=frag):
            R.ReportSpec(**{**dict(name="A", gpu="rtx-4090", models="llama-3.1-8b"), **kw}).validate()


def test_report_spec_resolves_config_paths(tmp_path, monkeypatch):
    src = vl.models._config_dir() / "mistral-7b.json"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text(src.read_text())
    monkeypatch.chdir(tmp_path)
    spec = R.ReportSpec("A", "rtx-4090", "mine/config.json;llama-3.1-8b", "inference")
    assert spec.parameters()["models"] == [str(tmp_path / "mine" / "config.json"), "llama-3.1-8b"]
    fits = R.report_fits(spec)
    assert fits[0].model.name == "mine" and fits[0].breakdown.total == R.report_fits(
        R.ReportSpec("A", "rtx-4090", "mistral-7b", "inference"))[0].breakdown.total


def test_read_participants_errors(tmp_path):
    p = tmp_path / "people.csv"
    p.write_text("name,gpu\nA,rtx-4090\n")
    with pytest.raises(VramlibError, match="missing: models"):
        R.read_participants(p)
    p.write_text("name,gpu,models\nA,rtx-4090,llama-3.1-8b\nB,rtx-4090,llama-3.1-9b\n")
    with pytest.raises(VramlibError, match=r"people.csv line 3 \(B\): model: unknown name 'llama-3.1-9b'"):
        R.read_participants(p)
    p.write_text("name,gpu,models\nA,rtx-4090,llama-3.1-8b\na,rtx-4090,llama-3.1-8b\n")
    with pytest.raises(VramlibError, match="unique"):
        R.read_participants(p)
    p.write_text("name,gpu,models,tokens\nA,rtx-4090,llama-3.1-8b,lots\n")
    with pytest.raises(VramlibError, match="tokens"):
        R.read_participants(p)
    p.write_text("name,gpu,models\n")
    with pytest.raises(VramlibError, match="no participant rows"):
        R.read_participants(p)


def _images(html: str) -> list[tuple[str, str]]:
    """(base64 PNG, alt text) of every embedded image."""
    from html.parser import HTMLParser

    found = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "img" and (a.get("src") or "").startswith("data:image/png;base64,"):
                found.append((a["src"].split(",", 1)[1], a.get("alt") or ""))

    P().feed(html)
    return found


def test_report_html(tmp_path):
    out = tmp_path / "ann.html"
    nb = tmp_path / "ann.ipynb"
    rc = cli.main(["report", "--name", "Ann Lee", "--gpu", "2x24GiB", "--model", "mistral-7b", "--task", "inference",
                   "--task", "qlora", "--out", str(out), "--notebook", str(nb)])
    assert rc == 0
    html = out.read_text()
    assert "<title>vramlib report: Ann Lee</title>" in html
    assert "mistral-7b" in html and "Ann Lee" in html and "2 x 24GiB" in html
    assert re.search(r"<table class=.vramlib-table.", html) and re.search(r"<table class=.vramlib-breakdown.", html)
    images = _images(html)
    assert len(images) >= 3 and all(len(data) > 1000 and alt.strip() for data, alt in images)
    assert "Traceback" not in html
    executed = json.loads(nb.read_text())
    assert not [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("name") == "stderr"]


def test_report_batch(tmp_path, capsys):
    people = tmp_path / "people.csv"
    people.write_text("name,gpu,models,tasks\n"
                      "Ann Lee,rtx-4090,llama-3.1-8b,inference;qlora\n"
                      "Bo Chen,2xa100-80gb,llama-2-70b,inference\n")
    rc = cli.main(["report", "--participants", str(people), "--out-dir", str(tmp_path / "out"), "--tokens", "8192"])
    out, err = capsys.readouterr()
    assert rc == 0
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["ann-lee.html", "bo-chen.html", "summary.csv", "summary.html"]
    assert "reports" in err and "2/2" in err  # the progress bar
    assert "llama-2-70b" in (tmp_path / "out" / "bo-chen.html").read_text()
    rows = list(csv.DictReader((tmp_path / "out" / "summary.csv").open()))
    assert len(rows) == 4 + 3 and {r["name"] for r in rows} == {"Ann Lee", "Bo Chen"}
    bo = [r for r in rows if r["name"] == "Bo Chen" and r["setting"] == "inference, fp16"][0]
    ft = R.fit_inference("llama-2-70b", "2xa100-80gb", "fp16", tokens=8192)
    assert bo["fits"] == ("yes" if ft.fits else "no") and int(bo["longest context (tokens)"]) == ft.max_context
    assert bo["report"] == "bo-chen.html"
    summary = (tmp_path / "out" / "summary.html").read_text()
    assert "<a href='ann-lee.html'>Ann Lee</a>" in summary and summary.count("<tr>") == 3


def test_max_tokens_tp_keeps_whole_kv_heads_per_gpu():
    """Issue 10: 16 GPUs > 8 KV heads: each GPU keeps one whole head, not 1/16 of the cache (it was 716,835)."""
    m = vl.get_model("llama-3.1-70b")
    t = vl.max_tokens_tp(m, "24GB", 16)
    assert t == R.max_context(m, "16x24GB", attention=None) == 358_417
    per_gpu = lambda n: R.inference_memory_tp(m, 16, tokens=n, attention=None).total  # noqa: E731
    assert per_gpu(t) <= 24 * 10**9 < per_gpu(t + 1)
    # 8 and 16 GPUs hold the same one KV head per GPU: the same KV bytes per token on each GPU
    kv = lambda n: R.inference_memory_tp(m, n, tokens=1000, attention=None)["kv cache"]  # noqa: E731
    assert kv(16) == kv(8) == vl.kv_cache_bytes(m.with_(n_kv_heads=1), 1000) == kv(1) // 8
    with pytest.raises(VramlibError, match="allowed: 1, 2, 4, 8, 16, 32, 64"):
        vl.max_tokens_tp(m, "24GB", 3)
