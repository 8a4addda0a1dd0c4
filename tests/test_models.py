import json
from pathlib import Path

import pytest

import vramlib as vl

MEASURED = json.loads((Path(vl.__file__).parent / "data/measured/param_counts.json").read_text())


@pytest.mark.parametrize("key", sorted(MEASURED["models"]))
def test_param_counts_equal_transformers(key):
    """Counts stored by `python tools/measure/param_counts.py` (transformers on the meta device)."""
    assert vl.get_model(key).n_params == MEASURED["models"][key]["n_params"]


def test_catalogue_covers_required_models():
    need = ["llama-7b", "llama-13b", "llama-33b", "llama-65b", "llama-2-7b", "llama-2-13b", "llama-2-70b",
            "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "mixtral-8x22b",
            "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "yi-34b", "codellama-34b", "gemma-2-9b",
            "gemma-2-27b", "falcon-7b", "phi-3-mini", "source-1b", "source-7b", "source-13b", "source-33b"]
    assert set(need) <= set(vl.model_names())
    assert len(MEASURED["models"]) >= 20


@pytest.mark.parametrize("key,published", [
    ("llama-2-7b", 6_738_415_616), ("llama-2-13b", 13_015_864_320), ("llama-2-70b", 68_976_648_192),
    ("mistral-7b", 7_241_732_096), ("mixtral-8x7b", 46_702_792_704), ("llama-3.1-8b", 8_030_261_248),
    ("falcon-7b", 6_921_720_704), ("gpt2", 124_439_808),
])
def test_published_totals(key, published):
    assert vl.get_model(key).n_params == published


def test_param_groups_sum_to_total():
    for key in vl.model_names():
        m = vl.get_model(key)
        assert sum(m.param_groups().values()) == m.n_params, key


def test_moe_active_params():
    m = vl.get_model("mixtral-8x7b")
    assert m.n_active_params == 12_879_925_248  # 12.9B active of 46.7B
    assert vl.get_model("llama-2-7b").n_active_params == vl.get_model("llama-2-7b").n_params


def test_case_insensitive_lookup():
    assert vl.get_model("Llama-2-13B") is vl.get_model("llama-2-13b")


def test_shapes_of_interest():
    assert vl.get_model("falcon-7b").n_kv_heads == 1
    assert vl.get_model("llama-2-70b").gqa_group == 8
    src = vl.get_model("source-13b")
    assert (src.n_layers, src.n_heads, src.n_kv_heads, src.head_dim) == (40, 40, 40, 128)
    assert src.weight_params == 13 * 10**9


def test_from_hf_config_dict_and_errors(tmp_path):
    cfg = json.loads((Path(vl.__file__).parent / "data/hf_configs/mistral-7b.json").read_text())
    m = vl.ModelSpec.from_hf_config(cfg)
    assert m.n_kv_heads == 8 and m.n_params == 7_241_732_096
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert vl.ModelSpec.from_hf_config(tmp_path).n_params == m.n_params
    bad = dict(cfg)
    del bad["hidden_size"]
    with pytest.raises(vl.ConfigError, match="hidden_size: missing"):
        vl.ModelSpec.from_hf_config(bad)
    with pytest.raises(vl.ConfigError, match="num_key_value_heads"):
        vl.ModelSpec.from_hf_config(dict(cfg, num_key_value_heads=3))
    with pytest.raises(vl.ConfigError, match="contradictory"):
        vl.ModelSpec.from_hf_config(dict(cfg, n_embd=1234))
    with pytest.raises(vl.UnknownNameError, match="model_type"):
        vl.ModelSpec.from_hf_config(dict(cfg, model_type="lama"))
    with pytest.raises(vl.ConfigError, match="no such file"):
        vl.ModelSpec.from_hf_config(tmp_path / "nope.json")


def test_with_heads_keeps_hidden():
    m = vl.get_model("llama-2-13b").with_heads(40, 8)
    assert m.head_dim == 128 and m.n_kv_heads == 8
    with pytest.raises(vl.InvalidValueError, match="n_heads"):
        vl.get_model("llama-2-13b").with_heads(48, 8)


def test_meta_device_counts_live():
    """Re-measure a few counts with transformers on the meta device when torch is installed."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "tools/measure/param_counts.py", "--check", "--only", "llama-2-13b",
                        "--only", "falcon-7b", "--only", "qwen2.5-7b", "--only", "gemma-2-9b"],
                       cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
