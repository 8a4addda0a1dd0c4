"""Per-layer architectures (issue 12): every family's parameters, active parameters and KV cache equal what
transformers builds and holds (``vramlib/data/measured/architectures.json``, made by
``python tools/measure/architectures.py``; the small ones re-run here), the runtimes' KV rules, and the one-line
refusals of what is not modelled."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import vramlib as vl
from vramlib.core.errors import VramlibError
from vramlib.explain import validation as V

MEASURED = json.loads((Path(vl.__file__).parent / "data" / "measured" / "architectures.json").read_text())
ROWS = {r["id"]: r for r in MEASURED["rows"]}
UNMODELLED = {"jamba", "falcon_h1", "nemotron_h"}
"""Families refused in one line (an unknown model_type): Mamba-1 (Jamba), parallel hybrids (Falcon-H1), one-op
blocks with latent MoE (Nemotron-H)."""


_spec = V.architecture_spec              # the one reading of a row (chapter 16's table uses it too)
_cache_steps = V.architecture_cache_steps


MODELLED = [i for i, r in ROWS.items() if r["status"] == "ok" and r["model_type"] not in UNMODELLED]


def test_the_measurements_cover_every_family_the_issue_names():
    types = {r["model_type"] for r in ROWS.values()}
    assert {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
            "gemma", "gemma2", "gemma3_text", "gemma3", "llama4_text", "gpt_oss", "phi3", "phimoe", "olmo2",
            "cohere", "cohere2", "granite", "granitemoe", "falcon", "gpt_neox", "gpt2", "bamba"} <= types | {"mixtral"}
    assert all(r["status"] == "ok" for r in ROWS.values()), [i for i, r in ROWS.items() if r["status"] != "ok"]


@pytest.mark.parametrize("case", MODELLED)
def test_parameters_and_active_parameters_equal_transformers(case):
    row, m = ROWS[case], _spec(ROWS[case])
    parts = row["params"].get("components", {})
    other = sum(parts[k]["total"] for k in ("vision_tower", "multi_modal_projector") if k in parts)
    assert other == 0 or m.text_only_of  # an image-text model: the language model alone, and it says so
    assert m.n_params == row["params"]["total"] - other
    assert m.n_active_params == row["active"]["active"] - other
    assert sum(m.param_groups().values()) == m.n_params


@pytest.mark.parametrize("case", MODELLED)
def test_kv_cache_and_states_equal_what_transformers_holds(case):
    row, m = ROWS[case], _spec(ROWS[case])
    steps = list(_cache_steps(row))
    assert len(steps) >= 6
    for tokens, batch, dtype, held in steps:
        assert vl.kv_cache_bytes(m, tokens, batch, dtype) == held, (tokens, dtype)


@pytest.mark.parametrize("case", sorted(i for i, r in ROWS.items() if r["model_type"] in UNMODELLED))
def test_unmodelled_families_are_one_line_errors(case):
    with pytest.raises(VramlibError) as e:
        _spec(ROWS[case])
    assert "model_type" in str(e.value) and "\n" not in str(e.value)


def test_windows_chunks_latents_and_states_change_the_cache_as_the_runtime_holds_it():
    by = {r["model_type"]: _spec(r) for r in ROWS.values() if r["status"] == "ok"
          and r["model_type"] not in UNMODELLED and r["id"].count("-") == 0}
    gemma3, llama4, ds, bamba = by["gemma3_text"], by["llama4_text"], by["deepseek_v3"], by["bamba"]
    # past the window only the full layers grow
    w = gemma3.sliding_window
    per_full = vl.kv_cache_bytes(gemma3, 10 * w + 1) - vl.kv_cache_bytes(gemma3, 10 * w)
    n_full = sum(1 for t in gemma3.layer_types if t == "full")
    assert per_full * gemma3.n_layers == vl.kv_bytes_per_token(gemma3) * n_full
    assert vl.kv_cache_bytes(gemma3, 10 * w, runtime="every-token") > vl.kv_cache_bytes(gemma3, 10 * w)
    # chunked layers keep chunk - 1 tokens in transformers, chunk + one step (in blocks) in vLLM
    assert "chunked" in llama4.layer_types and llama4.attention_chunk
    # MLA caches the latent: (kv_lora_rank + rope) x layers per token, whatever the heads
    assert vl.kv_bytes_per_token(ds, "bf16") == 2 * ds.n_layers * (ds.kv_lora_rank + ds.rope_head_dim)
    assert vl.kv_bytes_per_token(ds.with_(n_heads=ds.n_heads * 2, n_kv_heads=ds.n_kv_heads * 2), "bf16") == \
        vl.kv_bytes_per_token(ds, "bf16")
    # a Mamba state does not grow with the sequence
    grow = vl.kv_cache_bytes(bamba, 1001) - vl.kv_cache_bytes(bamba, 1000)
    assert grow == vl.kv_bytes_per_token(bamba) and vl.kv_bytes_per_token(bamba) < vl.kv_cache_bytes(bamba, 1) // 2


def test_vllm_rule_follows_its_allocator():
    """vllm/v1/kv_cache_interface.py max_memory_usage_bytes with max_model_len = T: FullAttentionSpec
    cdiv(T, block) pages, SlidingWindowSpec cdiv(min(w - 1 + batched, T), block) + 1, ChunkedLocalAttentionSpec
    cdiv(min(chunk + batched, T), block); one page = block x 2 x KV heads x head dim x bytes (MLA: 1 x latent)."""
    m = vl.get_model("mistral-7b")  # 32 sliding layers of 4096
    page = 16 * 2 * m.n_kv_heads * m.head_dim * 2
    rule = vl.CacheRule(runtime="vllm", block_size=16, max_num_batched_tokens=2048)
    for T, pages in ((100, 8), (4096, 257), (5000, 314), (100_000, 385)):  # cdiv(min(4095 + 2048, T), 16) + 1
        assert vl.kv_cache_bytes(m, T, runtime=rule) == m.n_layers * pages * page, T
    full = vl.get_model("llama-3.1-8b")
    assert vl.kv_cache_bytes(full, 100, runtime="vllm") == vl.kv_cache_bytes(full, 112)
    assert vl.kv_cache_bytes(m, 100_000, runtime="every-token") == vl.kv_cache_bytes(full.with_(
        n_layers=m.n_layers, n_kv_heads=m.n_kv_heads, head_dim=m.head_dim), 100_000)


def test_max_tokens_follows_windows_exactly():
    gemma = vl.get_model("gemma-2-9b")
    t = vl.max_tokens(gemma, "24GiB", "bf16")
    fixed = vl.weights_bytes(gemma, "bf16") + vl.parse_memory("0.5GB")
    assert fixed + vl.kv_cache_bytes(gemma, t) <= vl.parse_memory("24GiB") < fixed + vl.kv_cache_bytes(gemma, t + 1)
    # every layer a window: the cache stops growing, the model's context is the limit
    assert vl.max_tokens("mistral-7b", "80GB") == vl.get_model("mistral-7b").max_context
    assert vl.max_batch("mistral-7b", "80GB", 100_000, attention=None) > vl.max_batch("mistral-7b", "80GB", 100_000,
                                                                                        attention=None,
                                                                                        runtime="every-token")


def test_uniform_calculations_refuse_what_they_do_not_model_in_one_line():
    for name in ("olmo-2-7b", "deepseek-v3", "bamba-9b", "gpt-oss-20b"):
        m = vl.get_model(name)
        assert m.uniform_problem()
        with pytest.raises(VramlibError) as e:
            vl.training_memory(m, method="lora", seq=1024)
        assert "\n" not in str(e.value) and "not modelled" in str(e.value)
        assert vl.inference_memory(m, m.default_weights, tokens=4096).total > vl.weights_bytes(m, m.default_weights)


def test_with_resizes_one_kind_and_refuses_to_invent_a_pattern():
    m = vl.get_model("mistral-7b")
    assert m.layer_types == m.with_(n_layers=8).layer_types == ("sliding",)  # one kind, stored once
    assert vl.ModelSpec("x", 3, 64, 4, 2, 16, 128, 256, layer_types=("full",) * 3).layer_types == ("full",)
    with pytest.raises(VramlibError, match="mixes layer kinds"):
        vl.get_model("gemma-2-9b").with_(n_layers=10)
    g = vl.get_model("gemma-2-9b")
    assert g.with_(n_layers=4, layer_types=("sliding", "full") * 2).n_layers == 4
    with pytest.raises(VramlibError, match="one per layer"):
        g.with_(layer_types=("full",) * 3)
    with pytest.raises(VramlibError, match="sliding"):
        vl.ModelSpec("x", 2, 64, 4, 2, 16, 128, 256, layer_types=("sliding", "full"))


def test_checkpoints_are_priced_as_they_ship():
    oss, ds = vl.get_model("gpt-oss-20b"), vl.get_model("deepseek-v3")
    assert (oss.checkpoint_format, ds.checkpoint_format) == ("mxfp4-moe", "fp8-block128")
    d = vl.weights_detail(oss, oss.default_weights)
    experts = sum(v for k, v in oss.param_groups().items() if k.startswith("mlp_"))
    assert d["weights"] == experts // 2 and d["quantization constants"] == experts // 32
    assert d["unquantized tensors"] == 2 * (oss.n_params - experts)
    cfg = json.loads((Path(vl.__file__).parent / "data" / "hf_configs" / "gpt-oss-20b.json").read_text())
    cfg["quantization_config"]["modules_to_not_convert"].append("model.layers.*.mlp.experts")
    with pytest.raises(VramlibError, match="modules_to_not_convert"):
        vl.ModelSpec.from_hf_config(cfg)
    cfg["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [64, 64]}
    with pytest.raises(VramlibError, match="fp8-block128"):
        vl.ModelSpec.from_hf_config(cfg)


def test_multimodal_configs_give_the_language_model_and_say_so():
    m = vl.get_model("gemma-3-4b")
    assert m.family == "gemma3_text" and "vision tower" in m.text_only_of
    assert "filled in from transformers' gemma3_text config class" in m.source


FULL = MEASURED.get("full_size", {})


@pytest.mark.parametrize("case", sorted(FULL))
def test_full_size_configs_on_the_meta_device(case):
    """The real configs at full size: parameters, active parameters and the cache of a meta-device prefill."""
    row = FULL[case]
    m = _spec(row)  # Kimi-K2: the shipped model_type kimi_k2, read as DeepSeek-V3
    parts = row["params"].get("components", {})
    other = sum(parts[k]["total"] for k in ("vision_tower", "multi_modal_projector") if k in parts)
    assert m.n_params == row["params"]["total"] - other
    assert m.n_active_params == row["active"]["active"] - other
    for tokens, batch, dtype, held in _cache_steps(row):
        assert vl.kv_cache_bytes(m, tokens, batch, dtype) == held, tokens


def test_kimi_k2_is_read_as_deepseek_v3_only_with_that_architecture():
    cfg = dict(FULL["kimi-k2"]["hf_config"], model_type="kimi_k2", architectures=["DeepseekV3ForCausalLM"])
    assert vl.ModelSpec.from_hf_config(cfg).family == "deepseek_v3"
    with pytest.raises(VramlibError, match="architectures"):
        vl.ModelSpec.from_hf_config(dict(cfg, architectures=["KimiLinearForCausalLM"]))


@pytest.fixture(scope="module")
def tool():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "tools" / "measure" / "architectures.py"
    spec = importlib.util.spec_from_file_location("measure_architectures", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["gemma3_text", "deepseek_v3", "bamba", "llama4_text", "qwen2_moe"])
def test_small_architectures_live(tool, name):
    """Re-measure a few small cases with the installed transformers: the stored row and vramlib still agree."""
    _, hf_config, opts = next(c for c in tool.CASES if c[0] == name)
    row = tool.measure_tiny(name, hf_config, opts)
    stored = ROWS[f"tiny/{name}"]
    assert row["params"]["total"] == stored["params"]["total"] and row["active"]["active"] == stored["active"]["active"]
    m = _spec(row)
    assert m.n_params == row["params"]["total"]
    got = list(_cache_steps(row))
    assert got == list(_cache_steps(stored))
    assert all(vl.kv_cache_bytes(m, t, b, d) == held for t, b, d, held in got)


def test_panels_keep_head_dim_when_the_heads_stay():
    """A panel's heads are the model's unless changed: Gemma-2's head_dim (256, not hidden / heads = 224) and an
    MLA model's stay; changing the query heads re-derives head_dim (with_heads)."""
    from vramlib.present.widgets.inference import inference_compute

    g = vl.get_model("gemma-2-9b")
    assert g.as_heads(g.n_heads, g.n_kv_heads) is g and g.as_heads(g.n_heads, 4).head_dim == 256
    assert g.as_heads(28, 4).head_dim == g.hidden // 28
    bd, _, _ = inference_compute("gemma-2-9b", g.n_heads, g.n_kv_heads, "bf16", "fp16", 8192, "h200")
    assert dict(bd)["kv cache"] == vl.kv_cache_bytes(g, 8192)
    ds = vl.get_model("deepseek-v3")
    assert ds.as_heads(ds.n_heads, ds.n_kv_heads) is ds


def test_qwen3_trains_with_its_q_k_norms_counted():
    """Per-head q/k norms are modelled everywhere (parameters, plans, the hf activations measured on qwen3 shapes):
    Qwen3 is one uniform layer kind, so training and plans take it."""
    m = vl.get_model("qwen3-8b")
    assert m.uniform_problem() is None
    lora = vl.training_memory(m, method="lora", seq=4096)
    plain = vl.training_memory(m.with_(qk_norm="none"), method="lora", seq=4096)
    assert lora.total > plain.total  # the norms' saved tensors and parameters
    stage = vl.plan_memory(m, tp=2, pp=2, dp=2, zero=1, seq=4096)
    assert len(stage.stages) == 2


def test_qwen3_moe_trains_and_shards_its_experts():
    """Qwen3-MoE's block is in the hf expressions (measured with norm_topk_prob true, as it ships); expert
    parallelism divides its routed experts; a config with norm_topk_prob false refuses the hf style in one line."""
    m = vl.get_model("qwen3-30b-a3b")
    assert m.router_renorm and m.uniform_problem() is None
    assert vl.training_memory(m, method="lora", seq=2048).total > vl.weights_bytes(m, "bf16")
    per_gpu = [vl.plan_memory(m, dp=8, ep=ep, zero=1, seq=2048, recompute="full").stages[0].total for ep in (1, 8)]
    assert per_gpu[1] < per_gpu[0]
    cfg = json.loads((Path(vl.__file__).parent / "data" / "hf_configs" / "qwen3-30b-a3b.json").read_text())
    off = vl.ModelSpec.from_hf_config(dict(cfg, norm_topk_prob=False))
    with pytest.raises(VramlibError, match="norm_topk_prob"):
        vl.activation_bytes(off, seq=1024, style="hf")


def test_the_closing_table_reads_the_same_measurements():
    """Chapter 16's table: every modelled case exact on parameters, active parameters and every cache step; the
    refused families are the unmodelled ones, each with its one-line error."""
    table = V.architecture_table()
    assert len(table) == len(ROWS) + len(FULL)
    summary = V.architecture_summary()
    assert summary["refused"] == sorted(UNMODELLED)
    assert summary["exact"] == summary["cases"] == len(MODELLED) + len(FULL)
    assert summary["cache_steps"] == sum(len(_cache_steps(r)) for r in [*ROWS.values(), *FULL.values()]
                                         if r["model_type"] not in UNMODELLED)
    assert all(r["layers"].startswith("refused: ") and "\n" not in r["layers"] for r in table
               if r["model_type"] in UNMODELLED)
