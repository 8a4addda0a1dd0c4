"""Re-run the CPU measurements on small shapes (when torch, transformers and peft are installed) and fail if
vramlib or the stored JSON drifts from what the libraries really allocate."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import vramlib as vl
from measure_tool import tool

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

MEASURED = Path(vl.__file__).parent / "data" / "measured"


def _stored(name: str) -> dict:
    return {r.get("id", r.get("setup")): r for r in json.loads((MEASURED / f"{name}.json").read_text())["rows"]}


@pytest.fixture(scope="module")
def kv():
    return tool("kv_cache")


@pytest.mark.parametrize("name", ["llama-gqa", "llama-mqa", "gemma2", "phi3", "falcon-mqa", "gpt2"])
def test_kv_cache_tiny_models_live(kv, name):
    _, mt, kw = next(t for t in kv.TINY if t[0] == name)
    stored = _stored("kv_cache")
    for r in kv.measure_tiny(name, mt, kw, "bf16"):
        assert r["bytes"] == r["predicted"] == r["storage_bytes"], r["id"]
        assert stored[r["id"]]["bytes"] == r["bytes"], r["id"]


@pytest.mark.parametrize("key", ["llama-2-7b", "falcon-7b", "mixtral-8x7b", "source-13b"])
def test_kv_cache_catalogue_models_live(kv, key):
    stored = _stored("kv_cache")
    for r in kv.measure_catalogue(key):
        if r["part"] == "catalogue":
            assert r["bytes"] == vl.kv_cache_bytes(key, r["tokens"], r["batch"], "bf16")
        assert stored[r["id"]]["bytes"] == r["bytes"]
    row = kv.config_row(key)
    assert row["bytes"] == vl.kv_bytes_per_token(key, "fp16") == stored[row["id"]]["bytes"]


def test_kv_sliding_window_live(kv):
    name, mt, kw = kv.TINY_SLIDING[1]
    stored = _stored("kv_cache")
    rows = kv.measure_tiny_sliding(name, mt, kw)
    assert rows[0]["storage_bytes"] == rows[0]["predicted_every_token"] > rows[0]["bytes"] == rows[0]["predicted"]
    assert all(stored[r["id"]]["bytes"] == r["bytes"] for r in rows)


@pytest.fixture(scope="module")
def lora():
    pytest.importorskip("peft")
    return tool("lora")


@pytest.mark.parametrize("name", ["llama-gqa", "qwen2", "phi3", "mixtral"])
def test_lora_parameters_live(lora, name):
    stored = _stored("lora")
    for r in lora.tiny_param_rows(name, quick=True):
        if "skipped" in r:
            continue
        assert stored[r["id"]]["params"] == r["params"], r["id"]
        if name != "mixtral" or r["targets"] != "all-linear":
            assert r["params"] == r["predicted"], r["id"]


@pytest.mark.parametrize("pick", [("llama-a", "bf16", "sdpa", "none", "all-linear", "base"),
                                  ("llama-a", "bf16", "sdpa", "none", "qv", "base"),
                                  ("phi3-fused", "bf16", "sdpa", "none", "all-linear", "fp32")])
def test_lora_saved_bytes_live(lora, pick):
    cfg = lora.saved_config(*pick)
    m = lora.measure_saved(cfg)
    stored = _stored("lora")
    for scope in ("layer", "model"):
        assert stored[f"{lora.saved_id(cfg)}/{scope}"]["bytes"] == m[scope]
    assert m["adapters_with_grad"] > 0


def test_optimizer_live():
    opt = tool("optimizer")
    stored = _stored("optimizer")
    for setup in ("fp32", "bf16", "autocast", "adafactor-bf16"):
        r = opt.measure(setup)
        for k in ("param_bytes", "grad_bytes", "state_bytes", "weight_cast_bytes"):
            assert stored[setup][k] == r[k], (setup, k)
    assert opt.measure("bf16")["state_dtypes"]["exp_avg"] == "bfloat16"


def test_cuda_script_without_cuda_prints_its_plan_and_writes_nothing(capsys, tmp_path):
    cm = tool("cuda_memory")
    p = cm.plan()
    assert p["inference"]["weights_predicted"] == vl.weights_bytes(cm.cut(cm.INFER_LAYERS), "bf16")
    assert [r["tokens"] for r in p["inference"]["runs"]] == list(cm.INFER_TOKENS)
    assert {(r["precision"], r["recompute"]) for r in p["training"]["runs"]} == set(cm.TRAIN_SETUPS)
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the skip path is not taken")
    out = tmp_path / "cuda.json"
    assert cm.main(["--output", str(out)]) == 0
    assert "CUDA is not available" in capsys.readouterr().out and not out.exists()


def test_cuda_script_simulated_on_cpu():
    cm = tool("cuda_memory")
    result = cm.run(simulate=True)
    assert result["errors"] == {} and result["device"] == "cpu"
    assert len(result["inference"]["runs"]) == 2 and len(result["training"]["runs"]) == len(cm.TRAIN_SETUPS)
    sim = result["inference"]["runs"][0]
    assert sim["kv_cache_object"] == sim["kv_predicted"]  # the cache object's bytes, even without memory stats


def test_run_all_lists_every_script():
    ra = tool("run_all")
    cmds = [Path(c[1]).stem for c in ra.commands(cuda=False)]
    optional = [name for name, package in ra.OPTIONAL.items() if ra.installed(package)]
    assert cmds == list(ra.CPU_SCRIPTS) + optional + ["cuda_memory"]
    assert set(ra.OPTIONAL) <= {p.stem for p in Path(ra.__file__).parent.glob("*.py")}
    assert [Path(c[1]).stem for c in ra.commands(quick=True, cuda=False)] == list(ra.CPU_SCRIPTS) + ["cuda_memory"]
    assert ra.commands(cuda=False)[-1][-1] == "--plan"
    assert ra.commands(cuda=True)[-1][-1].endswith("cuda_memory.py")
    assert ra.commands(cuda=True)[-2][-1] == "--real-cuda"
    assert all("--check" in c for c in ra.commands(check=True, cuda=False)[:-1])


def test_lora_on_fused_moe_experts_saves_the_merged_expert_weights(lora):
    """The token-independent part of (all-linear - attention-only) saved bytes per layer is W + BA of every expert."""
    from vramlib import validation as V
    diff = {}
    for seq in (8, 24):
        cfgs = [dict(lora.saved_config("mixtral-moe", "bf16", "sdpa", "none", t, "base"), seq=seq)
                for t in ("all-linear", "attention")]
        a, b = (lora.measure_saved(c)["layer"] for c in cfgs)
        diff[seq] = a - b
    intercept = diff[8] - 8 * (diff[24] - diff[8]) // 16
    spec = lora.ST.spec_for(cfgs[0])
    expected = V.moe_lora_merged_bytes(spec, "bf16")
    assert expected <= intercept <= 1.02 * expected
