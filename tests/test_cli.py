"""The `vramlib` command line: golden outputs, exit codes (0 fits, 1 does not, 2 bad input) and one-line errors.

Regenerate the golden files after an intended change with ``VRAMLIB_UPDATE_GOLDEN=1 pytest tests/test_cli.py``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vramlib as vl
from vramlib import cli, report

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parents[1]


def run(argv, capsys) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("VRAMLIB_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with VRAMLIB_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from the golden file (VRAMLIB_UPDATE_GOLDEN=1 to accept)"


GOLDEN_CASES = [
    ("fit_llama-2-13b_rtx-4090_int4.txt", ["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--weights", "int4"], 0),
    ("fit_llama-2-13b_rtx-4090_fp16.txt", ["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090"], 1),
    ("fit_llama-2-70b_2x80GB.txt", ["fit", "--model", "llama-2-70b", "--gpu", "2x80GB", "--tokens", "8192"], 0),
    ("fit_llama-2-7b_24GiB_qlora.txt", ["fit", "--model", "llama-2-7b", "--gpu", "24GiB", "--task", "train",
                                        "--method", "qlora", "--seq", "2048"], 0),
    ("fit_llama-2-13b_a100-80gb_full.txt", ["fit", "--model", "llama-2-13b", "--gpu", "a100-80gb", "--task", "full",
                                            "--recompute", "full", "--convention", "source-12"], 1),
    ("fit_mistral-7b_l4_json.json", ["fit", "--model", "mistral-7b", "--gpu", "l4", "--weights", "awq-4bit-g128",
                                     "--kv-dtype", "fp8-e4m3", "--tokens", "32768", "--json"], 0),
    ("max-context_llama-3.1-8b_rtx-4090.txt", ["max-context", "--model", "llama-3.1-8b", "--gpu", "rtx-4090"], 0),
    ("max-context_llama-3.1-70b_4xh100_kv-only.txt", ["max-context", "--model", "llama-3.1-70b", "--gpu",
                                                     "4xh100-sxm-80gb", "--attention", "none", "--tokens", "131072"], 0),
    ("models_llama-2.txt", ["models", "--filter", "llama-2"], 0),
    ("gpus.txt", ["gpus"], 0),
]


@pytest.mark.parametrize("name,argv,code", GOLDEN_CASES, ids=[c[0] for c in GOLDEN_CASES])
def test_golden(name, argv, code, capsys):
    rc, out, err = run(argv, capsys)
    assert (rc, err) == (code, "")
    golden(name, out)


def test_models_lists_the_whole_catalogue(capsys):
    rc, out, err = run(["models"], capsys)
    names = [ln.split()[0] for ln in out.splitlines()[3:]]
    assert (rc, err) == (0, "") and names == vl.model_names()
    rc, out, _ = run(["models", "--json"], capsys)
    rows = {r["model"]: r for r in json.loads(out)}
    assert rows["llama-2-13b"]["parameters"] == vl.get_model("llama-2-13b").n_params
    rc, out, _ = run(["gpus", "--json"], capsys)
    assert [r["gpu"] for r in json.loads(out)] == [g.key for g in vl.list_gpus()]


def test_fit_text_labels_units_and_verdict(capsys):
    rc, out, _ = run(["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--weights", "int4"], capsys)
    head = [ln for ln in out.splitlines() if ln.startswith("component")][0]
    assert "GB" in head and "GiB" in head and "bytes" in head
    assert out.splitlines()[-1].startswith("Fits:")
    ft = report.fit_inference("llama-2-13b", "rtx-4090", "int4")
    assert f"{ft.breakdown.total:,}" in out and f"{vl.get_gpu('rtx-4090').memory_bytes:,}" in out


def test_fit_json_is_exact(capsys):
    rc, out, _ = run(["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--weights", "int4", "--json"], capsys)
    data = json.loads(out)
    bd = vl.inference_memory("llama-2-13b", "int4")
    assert data["per_gpu_bytes"] == bd.to_dict() and data["total_bytes"] == bd.total
    assert data["fits"] is True and rc == 0
    assert data["max_context_tokens"] == vl.max_tokens("llama-2-13b", "rtx-4090", "int4", attention="sdpa")
    assert data["hardware"] == {"spec": "rtx-4090", "gpu": "rtx-4090", "count": 1,
                                "per_gpu_bytes": 25757220864, "per_gpu_gb": 25.757220864,
                                "per_gpu_gib": 25757220864 / 2**30}


def test_fit_train_json_matches_training_memory(capsys):
    rc, out, _ = run(["fit", "--model", "llama-2-7b", "--gpu", "rtx-4090", "--task", "qlora", "--seq", "1024",
                      "--batch", "2", "--optimizer", "paged-adamw-8bit", "--lora-rank", "64", "--json"], capsys)
    data = json.loads(out)
    bd = vl.training_memory("llama-2-7b", "qlora", seq=1024, micro_batch=2, optimizer="paged-adamw-8bit", lora_rank=64)
    assert data["per_gpu_bytes"] == bd.to_dict()
    assert rc == (0 if bd.total <= vl.get_gpu("rtx-4090").memory_bytes else 1)


def test_fit_tensor_parallel_per_gpu(capsys):
    rc, out, _ = run(["fit", "--model", "llama-2-70b", "--gpu", "4xa100-80gb", "--json"], capsys)
    data = json.loads(out)
    assert data["hardware"]["count"] == 4
    whole = vl.weights_bytes("llama-2-70b", "fp16")
    assert data["per_gpu_bytes"]["weights"] == -(-whole // 4)
    assert data["per_gpu_bytes"]["kv cache"] == vl.kv_cache_bytes("llama-2-70b", 4096) // 4
    assert data["notes"] and "tensor parallel over 4 GPUs" in data["notes"][0]


def test_max_context_matches_library(capsys):
    rc, out, _ = run(["max-context", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"], capsys)
    data = json.loads(out)
    assert data["max_context_tokens"] == vl.max_tokens("llama-3.1-8b", "rtx-4090", attention="sdpa")
    assert data["settings"]["tokens"] == data["max_context_tokens"] and data["fits"] is True
    # a target longer than what fits: exit 1
    rc, out, _ = run(["max-context", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--tokens", "1000000"], capsys)
    assert rc == 1 and "does not fit" in out.splitlines()[-1]


def test_max_context_nothing_fits(capsys):
    rc, out, err = run(["max-context", "--model", "llama-2-70b", "--gpu", "rtx-4090"], capsys)
    assert rc == 1 and err == "" and "Not one token fits" in out


def test_model_from_config_json(tmp_path, capsys):
    src = Path(vl.models._config_dir()) / "llama-2-7b.json"
    (tmp_path / "my-llama").mkdir()
    cfg = tmp_path / "my-llama" / "config.json"
    shutil.copy(src, cfg)
    rc, out, _ = run(["fit", "--model", str(cfg), "--gpu", "rtx-4090", "--json"], capsys)
    data = json.loads(out)
    assert data["model"] == "my-llama"
    assert data["total_bytes"] == vl.inference_memory("llama-2-7b").total
    rc2, out2, _ = run(["fit", "--model", str(cfg.parent), "--gpu", "rtx-4090", "--json"], capsys)
    assert json.loads(out2)["total_bytes"] == data["total_bytes"]


def test_heads_and_kv_heads(capsys):
    rc, out, _ = run(["fit", "--model", "source-13b", "--gpu", "24GB", "--weights", "int8", "--kv-heads", "8",
                      "--json", "--attention", "none"], capsys)
    data = json.loads(out)
    m = vl.get_model("source-13b").with_(n_kv_heads=8)
    assert data["max_context_tokens"] == vl.max_tokens(m, "24GB", "int8")
    assert "prefill workspace" not in data["per_gpu_bytes"]


@pytest.fixture()
def bad_config(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{not json")
    return str(p)


BAD = [
    (["fit", "--model", "llama-2-13", "--gpu", "rtx-4090"], "did you mean 'llama-2-13b'"),
    (["fit", "--model", "lama-3.1-8b", "--gpu", "rtx-4090"], "did you mean 'llama-3.1-8b'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-409"], "did you mean 'rtx-4090'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "80XB"], "gpu: got '80XB'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "24"], "needs a unit"),
    (["fit", "--model", "llama-2-13b", "--gpu", "0x80GB"], "count must be at least 1"),
    (["fit", "--model", "llama-2-13b", "--gpu", "2x"], "gpu: got '2x'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "a100"], "did you mean"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--kv-heads", "7"], "n_kv_heads: got 7; must divide n_heads=40"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--heads", "33"], "n_heads: got 33; must divide hidden=5120"),
    (["fit", "--model", "llama-2-13b", "--gpu", "3xa100-80gb"], "gpu count: got 3"),
    (["fit", "--model", "llama-2-70b", "--gpu", "3xa100-80gb"], "gpu count: got 3"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--weights", "int3"], "weights: unknown name 'int3'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--kv-dtype", "fp7"], "unknown name 'fp7'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--batch", "0"], "batch: got 0"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--batch", "x"], "invalid int value: 'x'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--reserve", "lots"], "reserve: got 'lots'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--attention", "fast"], "attention: unknown name 'fast'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--task", "serve"], "invalid choice: 'serve'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--method", "lora"], "--method is for --task train"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--task", "train", "--optimizer", "adam"],
     "optimizer: unknown name 'adam'"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--task", "train", "--precision", "int8"], "precision"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--task", "train", "--recompute", "some"], "recompute"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--task", "train", "--attention", "none"], "training takes"),
    (["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--task", "full", "--weights", "int4"], "base weights"),
    (["fit", "--model", "missing/config.json", "--gpu", "rtx-4090"], "no such file"),
    (["fit", "--gpu", "rtx-4090"], "required: --model"),
    (["max-context", "--model", "llama-2-13b"], "required: --gpu"),
    (["max-context", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--weights", "q4km"], "did you mean"),
    (["models", "--filter", "no-such-model"], "no catalogue name contains"),
    (["frob"], "invalid choice: 'frob'"),
    ([], "choose a command"),
    (["report", "--model", "llama-2-7b"], "give --gpu and at least one --model"),
    (["report", "--participants", "nope.csv"], "participants: got 'nope.csv'; no such file"),
    (["exercises", "check", "ch01-1"], "give KEY ANSWER"),
    (["exercises", "check", "ch01-1", "lots"], "is not a number"),
    (["exercises", "check", "ch99-1", "3"], "exercise: unknown name 'ch99-1'"),
    (["exercises", "list", "--chapter", "ch99"], "chapter: unknown name 'ch99'"),
]


@pytest.mark.parametrize("argv,fragment", BAD, ids=[" ".join(a)[:60] or "no-command" for a, _ in BAD])
def test_bad_input_exit_2_one_line(argv, fragment, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2, (rc, out, err)
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert fragment in err, err


def test_bad_config_json_one_line(bad_config, capsys):
    rc, out, err = run(["fit", "--model", bad_config, "--gpu", "rtx-4090"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "not valid JSON" in err


def test_help_exits_0(capsys):
    for argv in (["--help"], ["fit", "--help"], ["report", "--help"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--participants" in out and "--kv-dtype" in out


def test_plan(capsys):
    argv = ["plan", "--model", "llama-2-7b", "--gpu", "8xa100-80gb", "--top", "3"]
    rc, out, err = run(argv, capsys)
    from vramlib.solve.planning import search_plans

    best = search_plans("llama-2-7b", "a100-80gb", 8, top=3).best
    assert rc == 0 and err == ""
    assert out.startswith("llama-2-7b on 8 x a100-80gb") and "GB per GPU" in out and "GiB per GPU" in out
    assert out.splitlines()[4].startswith(best.plan.label())
    rc, out, _ = run(argv + ["--json"], capsys)
    assert json.loads(out)["plans"][0]["peak_bytes"] == best.peak_bytes
    rc, out, err = run(["plan", "--model", "llama-2-70b", "--gpu", "2xrtx-4090"], capsys)
    assert rc == 1 and "No plan fits" in out
    for bad, fragment in ((["--gpu", "8x80GB"], "catalogue GPU"), (["--gpu", "8xa100-80gb", "--zero", "1,x"], "zero"),
                          (["--gpu", "8xa100-80gb", "--recompute", "most"], "recompute")):
        rc, out, err = run(["plan", "--model", "llama-2-7b", *bad], capsys)
        assert rc == 2 and out == "" and err.count("\n") == 1 and fragment in err, err


def test_exercises_commands(tmp_path, capsys):
    log = tmp_path / "answers.jsonl"
    right = vl.exercises.answer("ch01-1")
    rc, out, _ = run(["exercises", "check", "ch01-1", f"{right:.0f}", "--who", "ann", "--log", str(log)], capsys)
    assert rc == 0 and "right" in out
    rc, out, _ = run(["exercises", "check", "ch01-1", "1", "--who", "bo", "--log", str(log)], capsys)
    assert rc == 1 and "Hint:" in out
    rc, out, _ = run(["exercises", "summary", str(log)], capsys)
    assert rc == 0 and "ann" in out and "bo" in out
    rc, out, _ = run(["exercises", "summary", str(log), "--csv"], capsys)
    assert out.splitlines()[0].startswith("participant,solved,tried")
    rc, out, _ = run(["exercises", "list", "--chapter", "ch01"], capsys)
    assert rc == 0 and "ch01-1" in out and "ch07-1" not in out


def test_python_dash_m_and_console_script():
    argv = ["fit", "--model", "llama-2-13b", "--gpu", "rtx-4090", "--weights", "int4"]
    p = subprocess.run([sys.executable, "-m", "vramlib", *argv], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and p.stdout == (GOLDEN / "fit_llama-2-13b_rtx-4090_int4.txt").read_text()
    p = subprocess.run([sys.executable, "-m", "vramlib", "fit", "--model", "nope", "--gpu", "rtx-4090"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1
    script = Path(sys.executable).with_name("vramlib")
    if script.exists():  # installed with `pip install -e .` after [project.scripts] was added
        p = subprocess.run([str(script), *argv], capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout.startswith("llama-2-13b on 1 x rtx-4090")


def test_llamacpp_is_the_librarys(capsys):
    rc, out, _ = run(["llamacpp", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--n-ctx", "32768", "--json"], capsys)
    data = json.loads(out)
    bd = vl.llamacpp_memory("llama-3.1-8b", "q4_k_m", n_ctx=32768)
    assert rc == 0 and data["buffers"] == dict(bd) and data["fits"] is True
    assert data["longest_n_ctx"] == vl.llamacpp_max_ctx("llama-3.1-8b", "rtx-4090", "q4_k_m")
    rc, out, _ = run(["llamacpp", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--n-ctx", "400000"], capsys)
    assert rc == 1 and "does not fit" in out
    rc, _, err = run(["llamacpp", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--type-v", "q8_0",
                      "--no-flash-attn"], capsys)
    assert rc == 2 and "type_v" in err and len(err.strip().splitlines()) == 1


def test_offload_is_the_librarys(capsys):
    rc, out, _ = run(["offload", "--model", "llama-3.1-70b", "--gpu", "rtx-4090", "--ram", "64GB", "--json"], capsys)
    data = json.loads(out)
    p = vl.offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="64GB")
    assert rc == 0 and data["n_gpu_layers"] == p.n_gpu_layers and data["tokens_per_s"] == p.tokens_per_s
    assert data["gpu"] == "rtx-4090" and data["gpu_buffers"] == dict(p.gpu) and data["host_buffers"] == dict(p.host)
    rc, out, _ = run(["offload", "--model", "llama-3.1-70b", "--gpu", "rtx-4090", "--ram", "16GB"], capsys)
    assert rc == 1 and "Does not fit: host memory" in out
    rc, _, err = run(["offload", "--model", "llama-3.1-70b", "--gpu", "rtx-4090", "--host", "ddr5"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "ddr5-5600-2ch" in err


def test_a_gguf_file_is_priced_tensor_by_tensor(capsys, tmp_path):
    """--model file.gguf: the spec from the header, the model buffer and the split from the file's own tensors."""
    from test_gguf_file import LLAMA, base_meta, model_tensors, write_gguf

    path = tmp_path / "tiny.gguf"
    write_gguf(path, "llama", base_meta(LLAMA), model_tensors(LLAMA), LLAMA["V"])
    g = vl.read_gguf(str(path))
    rc, out, _ = run(["llamacpp", "--model", str(path), "--gpu", "rtx-4090", "--n-ctx", "512", "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["buffers"]["model buffer"] == g.weights_bytes == sum(t.n_bytes for t in g.tensors)
    rc, out, _ = run(["offload", "--model", str(path), "--gpu", "rtx-4090", "--n-gpu-layers", "2", "--json"], capsys)
    data = json.loads(out)
    lw = g.layer_weights()
    assert data["gpu_buffers"]["model buffer"] == lw[1][1][0] + dict(lw[0])["lm_head"] + dict(lw[0])["norm"]
    assert data["host_buffers"]["model buffer"] == lw[1][0][0] + dict(lw[0])["embed"]
