"""A model id in (issue 12): ``ModelSpec.from_pretrained`` and ``vramlib fit --model Org/Name`` read only
``config.json``, from a local cache laid out as the Hub client writes it; never the network (HF_HUB_OFFLINE=1)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import vramlib as vl
from vramlib.workshop import cli

pytest.importorskip("huggingface_hub")
CONFIGS = Path(vl.__file__).parent / "data" / "hf_configs"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A Hub cache (models--Org--Name/snapshots/<commit>/config.json, refs/main) and offline mode."""
    for repo, key in (("Qwen/Qwen3-8B", "qwen3-8b"), ("openai/gpt-oss-20b", "gpt-oss-20b")):
        d = tmp_path / ("models--" + repo.replace("/", "--"))
        (d / "snapshots" / COMMIT).mkdir(parents=True)
        (d / "refs").mkdir()
        (d / "refs" / "main").write_text(COMMIT)
        shutil.copy(CONFIGS / f"{key}.json", d / "snapshots" / COMMIT / "config.json")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    return tmp_path


def test_from_pretrained_reads_the_cached_config(cache):
    m = vl.ModelSpec.from_pretrained("Qwen/Qwen3-8B", cache_dir=cache)
    assert m.name == "Qwen/Qwen3-8B" and m.n_params == vl.get_model("qwen3-8b").n_params
    assert "Qwen/Qwen3-8B" in m.source
    oss = vl.ModelSpec.from_pretrained("openai/gpt-oss-20b", cache_dir=cache)
    assert oss.checkpoint_format == "mxfp4-moe"


@pytest.mark.parametrize("model_id,words", [
    ("Qwen/Qwen3-9B", "no cached config.json"), ("not an id", "owner/name"), ("a/b/c", "owner/name"),
])
def test_hub_failures_are_one_line(cache, model_id, words):
    with pytest.raises(vl.VramlibError) as e:
        vl.ModelSpec.from_pretrained(model_id, cache_dir=cache)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_revision_not_cached_is_one_line(cache):
    with pytest.raises(vl.ConfigError, match="Qwen/Qwen3-8B@v9"):
        vl.ModelSpec.from_pretrained("Qwen/Qwen3-8B", revision="v9", cache_dir=cache)


def test_cli_fit_takes_a_hub_id(cache, capsys):
    code = cli.main(["fit", "--model", "Qwen/Qwen3-8B", "--gpu", "rtx-4090", "--weights", "q4_k_m", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["model"] == "Qwen/Qwen3-8B" and out["fits"]
    code = cli.main(["fit", "--model", "Qwen/Qwen3-99B", "--gpu", "rtx-4090"])
    err = capsys.readouterr().err
    assert code == 2 and "no cached config.json" in err and len(err.strip().splitlines()) == 1
