"""Reading a GGUF file into a ModelSpec and per-tensor bytes (vramlib.catalog.gguf_file, chapter 17).

Tiny GGUF files are written into ``tmp_path`` with ``gguf.GGUFWriter`` (as tools/measure/llamacpp_buffers.py writes
them: random weights, a minimal SPM tokenizer, Q8_0 / Q4_0 through ``gguf.quants.quantize``; K-quants, which gguf
cannot quantize, as raw blocks of the right size). The hyperparameters must come back as the ModelSpec that
transformers' config of the same model gives, the bytes as the file stores them, the parameter count as the tensors'
elements; bad files are one-line errors. ``gguf`` is a requirement: this module fails, never skips, without it.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf  # noqa: F401  - a hard requirement: an ImportError fails this module
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from vramlib.catalog.gguf_file import CONSTANT_TENSORS, SUPPORTED_ARCHS, GGUFModel
from vramlib.catalog.models import ModelSpec, read_gguf
from vramlib.core.errors import ConfigError, InvalidValueError, VramlibError

# bytes per block and elements per block of the ggml types written here (ggml.c type_traits), written out by hand
# so the test does not read the table the reader uses
BLOCK = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_K": (256, 144),
         "Q6_K": (256, 210)}
ALIGN = 32


def pad(x: int, n: int = ALIGN) -> int:
    return (x + n - 1) // n * n


# --- writing tiny files --------------------------------------------------------------------------------------------
def model_tensors(c: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, ggml shape ne0..., type) of a llama-lineage model ``c`` describes, in file order."""
    E, H, KV, hd, L, V, FF, w = c["E"], c["H"], c["KV"], c["hd"], c["L"], c["V"], c["FF"], c.get("w", "F16")
    emb = c.get("emb", w)
    out = [("token_embd.weight", (E, V), emb)]
    out += [(n, ne, "F32") for n, ne in c.get("constants", [])]
    for i in range(L):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (E,), "F32"))
        if c.get("fused"):
            out.append((b + "attn_qkv.weight", (E, (H + 2 * KV) * hd), w))
        else:
            out += [(b + "attn_q.weight", (E, H * hd), w), (b + "attn_k.weight", (E, KV * hd), w),
                    (b + "attn_v.weight", (E, KV * hd), w)]
        if c.get("qkv_bias"):
            out += [(b + "attn_q.bias", (H * hd,), "F32"), (b + "attn_k.bias", (KV * hd,), "F32"),
                    (b + "attn_v.bias", (KV * hd,), "F32")]
        if c.get("qk_norm"):
            out += [(b + "attn_q_norm.weight", (hd,), "F32"), (b + "attn_k_norm.weight", (hd,), "F32")]
        out.append((b + "attn_output.weight", (H * hd, E), w))
        if c.get("post_norms"):
            out.append((b + "post_attention_norm.weight", (E,), "F32"))
        out.append((b + "ffn_norm.weight", (E,), "F32"))
        out += mlp_tensors(c, i, b)
        if c.get("post_norms"):
            out.append((b + "post_ffw_norm.weight", (E,), "F32"))
    out.append(("output_norm.weight", (E,), "F32"))
    if not c.get("tied"):
        out.append(("output.weight", (E, V), c.get("out", emb)))
    return out + [(n, ne, t) for n, ne, t in c.get("extra", [])]


def mlp_tensors(c: dict, i: int, b: str) -> list[tuple[str, tuple[int, ...], str]]:
    E, FF, w = c["E"], c["FF"], c.get("w", "F16")
    if i not in c.get("moe_layers", ()):
        if c.get("fused"):
            return [(b + "ffn_up.weight", (E, 2 * FF), w), (b + "ffn_down.weight", (FF, E), w)]
        return [(b + "ffn_gate.weight", (E, FF), w), (b + "ffn_up.weight", (E, FF), w),
                (b + "ffn_down.weight", (FF, E), w)]
    X, F = c["n_exp"], c["moe_ff"]
    out = [(b + "ffn_gate_inp.weight", (E, X), "F32"), (b + "ffn_gate_exps.weight", (E, F, X), w),
           (b + "ffn_up_exps.weight", (E, F, X), w), (b + "ffn_down_exps.weight", (F, E, X), w)]
    if c.get("shared"):
        S = c["shared"]
        out += [(b + "ffn_gate_shexp.weight", (E, S), w), (b + "ffn_up_shexp.weight", (E, S), w),
                (b + "ffn_down_shexp.weight", (S, E), w)]
    if c.get("shared_gate"):
        out.append((b + "ffn_gate_inp_shexp.weight", (E,), "F32"))
    return out


def write_gguf(path: Path, arch: str, meta: dict, tensors: list, vocab_tokens: int | None, seed: int = 0) -> dict:
    """Write a GGUF of ``tensors`` with ``meta`` (keys without the ``{arch}.`` prefix, except general./tokenizer.);
    returns {tensor name: bytes written}."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    for key, value in meta.items():
        full = key if key.startswith(("general.", "tokenizer.")) else f"{arch}.{key}"
        if isinstance(value, bool):
            w.add_bool(full, value)
        elif isinstance(value, int):
            w.add_uint32(full, value)
        elif isinstance(value, list):
            w.add_array(full, value)
        else:
            w.add_string(full, value)
    if vocab_tokens:
        toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
        toks += [f"t{i}" for i in range(vocab_tokens - len(toks))]
        w.add_tokenizer_model("llama")
        w.add_token_list(toks)
        w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab_tokens - 259))
    written = {}
    for name, ne, typ in tensors:
        written[name] = add_tensor(w, name, tuple(reversed(ne)), typ, rng)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return written


def add_tensor(w, name: str, shape: tuple[int, ...], typ: str, rng) -> int:
    a = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    if typ == "F32":
        data, raw = a, None
    elif typ == "F16":
        data, raw = a.astype(np.float16), None
    elif typ in ("Q8_0", "Q4_0", "BF16"):
        data, raw = gguf.quants.quantize(a, Q[typ]), Q[typ]
    else:  # K-quants: gguf cannot quantize them; blocks of the right size, any bytes
        raw = Q[typ]
        data = rng.integers(0, 256, gguf.quants.quant_shape_to_byte_shape(shape, raw), dtype=np.uint8)
    w.add_tensor(name, data, raw_dtype=raw)
    return int(data.nbytes)


def base_meta(c: dict, ctx: int = 8192, **extra) -> dict:
    meta = {"context_length": ctx, "embedding_length": c["E"], "block_count": c["L"], "feed_forward_length": c["FF"],
            "attention.head_count": c["H"], "attention.head_count_kv": c["KV"]}
    if c["hd"] != c["E"] // c["H"]:
        meta.update({"attention.key_length": c["hd"], "attention.value_length": c["hd"]})
    meta.update(extra)
    return meta


def tiny(tmp_path: Path, arch: str, c: dict, name: str = "m", tokens: int | None = -1,
         **extra) -> tuple[GGUFModel, dict]:
    path = tmp_path / f"{name}.gguf"
    written = write_gguf(path, arch, base_meta(c, **extra), model_tensors(c), c["V"] if tokens == -1 else tokens)
    return read_gguf(path), written


def same_shape(g: GGUFModel, hf: dict) -> None:
    """The GGUF's ModelSpec is the ModelSpec of transformers' config of the same model (names and sources aside)."""
    want = ModelSpec.from_hf_config(hf)
    got = replace(g.spec, name=want.name, source=want.source, checkpoint_format=want.checkpoint_format)
    assert got == want, {k: (getattr(got, k), getattr(want, k)) for k in got.__dataclass_fields__
                         if getattr(got, k) != getattr(want, k)}
    assert g.params_agree and g.spec.n_params == want.n_params == g.file_params


LLAMA = dict(E=256, H=8, KV=2, hd=32, L=2, V=1000, FF=512)


def llama_hf(c: dict, **kw) -> dict:
    return dict(model_type="llama", hidden_size=c["E"], num_hidden_layers=c["L"], num_attention_heads=c["H"],
                num_key_value_heads=c["KV"], intermediate_size=c["FF"], vocab_size=c["V"],
                max_position_embeddings=8192, tie_word_embeddings=bool(c.get("tied")), **kw)


# --- hyperparameters -----------------------------------------------------------------------------------------------
def test_llama_hyperparameters_round_trip(tmp_path):
    g, _ = tiny(tmp_path, "llama", LLAMA, **{"general.file_type": 1})
    s = g.spec
    assert (s.n_layers, s.hidden, s.n_heads, s.n_kv_heads, s.head_dim, s.ffn, s.vocab, s.max_context) == \
           (2, 256, 8, 2, 32, 512, 1000, 8192)
    assert s.family == "llama" and s.name == "tiny-llama" and not s.tied_embeddings and s.norms_per_layer == 2
    assert g.arch == "llama" and g.file_type == "MOSTLY_F16" and s.checkpoint_format is None
    assert g.notes == () and str(g.path) in s.source
    same_shape(g, llama_hf(LLAMA))


def test_uniform_per_layer_head_counts_are_read(tmp_path):
    g, _ = tiny(tmp_path, "llama", LLAMA, **{"attention.head_count_kv": [2, 2], "attention.head_count": [8, 8]})
    assert (g.spec.n_heads, g.spec.n_kv_heads) == (8, 2) and g.params_agree


def test_gemma2_sliding_layers_alternate(tmp_path):
    c = dict(E=256, H=8, KV=4, hd=64, L=4, V=1000, FF=512, tied=True, post_norms=True)
    g, _ = tiny(tmp_path, "gemma2", c, **{"attention.sliding_window": 128})
    s = g.spec
    assert s.layer_types == ("sliding", "full", "sliding", "full") and s.sliding_window == 128
    assert s.head_dim == 64 and s.norms_per_layer == 4 and s.tied_embeddings and s.family == "gemma2"
    assert g.notes == ()
    same_shape(g, dict(model_type="gemma2", hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                       num_key_value_heads=4, head_dim=64, intermediate_size=512, vocab_size=1000,
                       max_position_embeddings=8192, sliding_window=128))


def test_gemma2_without_a_window_key_takes_llama_cpps(tmp_path):
    c = dict(E=128, H=4, KV=2, hd=32, L=2, V=600, FF=256, tied=True, post_norms=True)
    g, _ = tiny(tmp_path, "gemma2", c)
    assert g.spec.sliding_window == 4096 and g.spec.layer_types == ("sliding", "full")
    assert any("4096" in n for n in g.notes) and g.params_agree


def test_gemma3_pattern_key_and_head_norms(tmp_path):
    c = dict(E=128, H=4, KV=1, hd=64, L=6, V=600, FF=256, tied=True, post_norms=True, qk_norm=True)
    g, _ = tiny(tmp_path, "gemma3", c, **{"attention.sliding_window": 64, "attention.sliding_window_pattern": 3})
    assert g.spec.layer_types == ("sliding", "sliding", "full") * 2 and g.spec.qk_norm == "head"
    same_shape(g, dict(model_type="gemma3_text", hidden_size=128, num_hidden_layers=6, num_attention_heads=4,
                       num_key_value_heads=1, head_dim=64, intermediate_size=256, vocab_size=600,
                       max_position_embeddings=8192, sliding_window=64, sliding_window_pattern=3))
    flags = [True, False, False, True, True, False]
    g2, _ = tiny(tmp_path, "gemma3", c, name="flags", **{"attention.sliding_window": 64,
                                                         "attention.sliding_window_pattern": flags})
    assert g2.spec.layer_types == tuple("sliding" if f else "full" for f in flags)
    with pytest.raises(ConfigError) as e:
        tiny(tmp_path, "gemma3", c, name="short", **{"attention.sliding_window": 64,
                                                     "attention.sliding_window_pattern": flags[:4]})
    assert "gemma3.attention.sliding_window_pattern" in one_line(e)
    g3, _ = tiny(tmp_path, "gemma3", c, name="default")  # no window: every layer full, as llama.cpp
    assert g3.spec.layer_types == () and g3.spec.sliding_window == 0


def test_qwen2_biases_and_tied_embeddings(tmp_path):
    c = dict(E=128, H=4, KV=2, hd=32, L=2, V=600, FF=384, tied=True, qkv_bias=True)
    g, _ = tiny(tmp_path, "qwen2", c)
    assert g.spec.qkv_bias and not g.spec.attn_out_bias and g.spec.tied_embeddings
    same_shape(g, dict(model_type="qwen2", hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=384, vocab_size=600, max_position_embeddings=8192,
                       tie_word_embeddings=True))


def test_qwen3_head_dim_from_key_length(tmp_path):
    c = dict(E=128, H=4, KV=2, hd=64, L=2, V=600, FF=384, qk_norm=True)
    g, _ = tiny(tmp_path, "qwen3", c)
    assert g.spec.head_dim == 64 and g.spec.qk_norm == "head"
    same_shape(g, dict(model_type="qwen3", hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=64, intermediate_size=384, vocab_size=600,
                       max_position_embeddings=8192, tie_word_embeddings=False))


def test_phi3_fused_tensors_window_and_rope_tables(tmp_path):
    c = dict(E=128, H=4, KV=4, hd=32, L=2, V=600, FF=256, fused=True,
             constants=[("rope_factors_long.weight", (16,)), ("rope_factors_short.weight", (16,))])
    g, _ = tiny(tmp_path, "phi3", c, **{"attention.sliding_window": 2047})
    s = g.spec
    assert s.fused_qkv and s.fused_gate_up and s.layer_types == () and s.sliding_window == 0
    assert any("disables Phi-3" in n for n in g.notes)
    assert sum("RoPE frequency table" in n for n in g.notes) == 2 and not any("differ" in n for n in g.notes)
    assert g.file_params == sum(t.n_elements for t in g.tensors) - 32 and g.params_agree
    assert {t.kind for t in g.tensors} >= set(CONSTANT_TENSORS[1:])
    same_shape(g, dict(model_type="phi3", hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=4, intermediate_size=256, vocab_size=600, max_position_embeddings=8192,
                       sliding_window=None))


def test_qwen3moe_experts_and_a_dense_layer(tmp_path):
    c = dict(E=128, H=4, KV=2, hd=32, L=3, V=600, FF=384, qk_norm=True, moe_layers={0, 2}, n_exp=4, moe_ff=64)
    g, _ = tiny(tmp_path, "qwen3moe", c, **{"expert_count": 4, "expert_used_count": 2,
                                             "expert_feed_forward_length": 64})
    s = g.spec
    assert (s.n_experts, s.experts_per_token, s.ffn, s.moe_ffn) == (4, 2, 384, 64)
    assert s.mlp_types == ("moe", "dense", "moe") and s.router_renorm
    same_shape(g, dict(model_type="qwen3_moe", hidden_size=128, num_hidden_layers=3, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=32, intermediate_size=384, moe_intermediate_size=64,
                       num_experts=4, num_experts_per_tok=2, mlp_only_layers=[1], norm_topk_prob=True,
                       vocab_size=600, max_position_embeddings=8192, tie_word_embeddings=False))


def test_llama4_chunks_interleaved_experts_and_a_shared_expert(tmp_path):
    c = dict(E=128, H=4, KV=2, hd=32, L=4, V=600, FF=512, moe_layers={1, 3}, n_exp=4, moe_ff=256, shared=256)
    g, _ = tiny(tmp_path, "llama4", c, **{"expert_count": 4, "expert_used_count": 1, "expert_feed_forward_length": 256,
                                           "interleave_moe_layer_step": 2})
    s = g.spec
    assert s.layer_types == ("chunked", "chunked", "chunked", "full") and s.attention_chunk == 8192
    assert s.mlp_types == ("dense", "moe", "dense", "moe") and s.n_shared_experts == 1 and s.shared_ffn == 0
    same_shape(g, dict(model_type="llama4_text", hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=32, intermediate_size=256, intermediate_size_mlp=512,
                       num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2,
                       attention_chunk_size=8192, vocab_size=600, max_position_embeddings=8192))


def test_qwen2moe_shared_expert_of_another_width_and_its_gate(tmp_path):
    c = dict(E=128, H=4, KV=2, hd=32, L=2, V=600, FF=384, qkv_bias=True, moe_layers={0, 1}, n_exp=4, moe_ff=64,
             shared=192, shared_gate=True)
    g, _ = tiny(tmp_path, "qwen2moe", c, **{"expert_count": 4, "expert_used_count": 2,
                                             "expert_feed_forward_length": 64})
    s = g.spec
    assert (s.ffn, s.moe_ffn, s.n_shared_experts, s.shared_ffn, s.shared_expert_gate) == (64, 0, 1, 192, True)
    same_shape(g, dict(model_type="qwen2_moe", hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=384, moe_intermediate_size=64,
                       shared_expert_intermediate_size=192, num_experts=4, num_experts_per_tok=2, vocab_size=600,
                       max_position_embeddings=8192, tie_word_embeddings=False))


def test_mixtral_in_the_llama_architecture(tmp_path):
    c = dict(LLAMA, moe_layers={0, 1}, n_exp=4, moe_ff=512)
    g, _ = tiny(tmp_path, "llama", c, **{"expert_count": 4, "expert_used_count": 2})
    s = g.spec
    assert (s.n_experts, s.experts_per_token, s.ffn, s.moe_ffn, s.mlp_types) == (4, 2, 512, 0, ())
    hf = llama_hf(LLAMA, num_local_experts=4, num_experts_per_tok=2, sliding_window=None)
    same_shape(replace(g, spec=s.with_(family="mixtral")), dict(hf, model_type="mixtral"))


def test_older_files_with_one_tensor_per_expert(tmp_path):
    c = dict(LLAMA, moe_layers={0, 1}, n_exp=2, moe_ff=512)
    per_expert = []
    for name, ne, typ in model_tensors(c):
        kind = name.split(".")[2] if name.startswith("blk.") else ""
        if kind.endswith("_exps"):
            i = name.split(".")[1]
            per_expert += [(f"blk.{i}.{kind[:-5]}.{x}.weight", ne[:2], typ) for x in range(2)]
        else:
            per_expert.append((name, ne, typ))
    path = tmp_path / "old.gguf"
    write_gguf(path, "llama", base_meta(c, expert_count=2, expert_used_count=2), per_expert, 1000)
    g = read_gguf(path)
    assert g.spec.n_experts == 2 and g.params_agree and g.notes == ()


def test_the_measurement_harness_models_read_back(tmp_path):
    """The tiny GGUFs tools/measure/llamacpp_buffers.py writes read back as the ModelSpec the validation uses."""
    from measure_tool import tool
    from vramlib.explain.validation import llamacpp_spec

    m = tool("llamacpp_buffers")
    for mid in ("A", "D", "G", "H"):
        info = m.write_gguf(mid, m.MODELS[mid], tmp_path / f"{mid}.gguf")
        g = read_gguf(tmp_path / f"{mid}.gguf")
        want = llamacpp_spec(info)
        assert replace(g.spec, name=want.name, source="", max_context=want.max_context, checkpoint_format=None) == \
               replace(want, source="")
        assert [(t.name, t.ggml_type.lower(), t.n_bytes) for t in g.tensors] == \
               [(t["name"], t["type"], t["nbytes"]) for t in info["tensors"]]
        assert g.params_agree and g.notes == ()


# --- bytes ---------------------------------------------------------------------------------------------------------
def test_tensor_bytes_are_the_files_data_section(tmp_path):
    g, written = tiny(tmp_path, "llama", dict(LLAMA, V=1001, w="Q8_0", emb="F16"))
    assert [t.name for t in g.tensors] == list(written)
    assert {t.name: t.n_bytes for t in g.tensors} == written
    assert g.weights_bytes == sum(written.values())
    size = Path(g.path).stat().st_size
    ts = sorted(g.tensors, key=lambda t: t.offset)
    assert all(t.offset % ALIGN == 0 for t in ts)
    for a, b in zip(ts, ts[1:]):
        assert b.offset == a.offset + pad(a.n_bytes)        # each tensor's data, then padding to 32 bytes
    assert size - ts[0].offset == sum(pad(t.n_bytes) for t in ts)  # the data section, to the last byte of the file


def test_mixed_types_priced_per_tensor(tmp_path):
    c = dict(LLAMA, w="Q8_0", emb="F16", out="Q6_K")
    tensors = model_tensors(c)
    tensors = [(n, ne, "Q4_K" if n == "blk.1.ffn_down.weight" else t) for n, ne, t in tensors]
    path = tmp_path / "mixed.gguf"
    written = write_gguf(path, "llama", base_meta(c, **{"general.file_type": 7}), tensors, 1000)
    g = read_gguf(path)
    types = {t.name: t.ggml_type for t in g.tensors}
    assert types["token_embd.weight"] == "F16" and types["output.weight"] == "Q6_K"
    assert types["blk.0.attn_q.weight"] == "Q8_0" and types["blk.1.ffn_down.weight"] == "Q4_K"
    assert types["blk.0.attn_norm.weight"] == "F32"
    for t in g.tensors:
        per, nbytes = BLOCK[t.ggml_type]
        assert t.n_elements == int(np.prod(t.shape)) and t.n_bytes == t.n_elements // per * nbytes == written[t.name]
    assert g.tensor("token_embd.weight").n_bytes == 256 * 1000 * 2
    assert g.tensor("blk.0.attn_q.weight").n_bytes == 256 * 256 // 32 * 34
    assert g.tensor("blk.1.ffn_down.weight").n_bytes == 512 * 256 // 256 * 144
    layers = g.layer_bytes()
    assert list(layers) == [0, 1] and layers[0] - layers[1] == 512 * 256 // 32 * 34 - 512 * 256 // 256 * 144
    assert set(g.non_layer_bytes()) == {"token_embd", "output_norm", "output"}
    assert sum(layers.values()) + sum(g.non_layer_bytes().values()) == g.weights_bytes
    assert sum(g.bytes_by_type().values()) == g.weights_bytes
    assert list(g.bytes_by_type()) == ["Q8_0", "F16", "Q6_K", "Q4_K", "F32"]  # largest first
    assert g.file_type == "MOSTLY_Q8_0" and g.spec.checkpoint_format == "q8_0" and g.params_agree
    assert g.tensor("blk.1.ffn_down.weight").layer == 1 and g.tensor("output.weight").layer is None


def test_file_type_names(tmp_path):
    g, _ = tiny(tmp_path, "llama", LLAMA, **{"general.file_type": 15})
    assert g.file_type == "MOSTLY_Q4_K_M" and g.spec.checkpoint_format == "q4_k_m"
    g2, _ = tiny(tmp_path, "llama", LLAMA, name="none")
    assert g2.file_type is None and g2.spec.checkpoint_format is None


# --- the parameter check -------------------------------------------------------------------------------------------
def test_a_tensor_modelspec_does_not_count_is_noted(tmp_path):
    c = dict(LLAMA, extra=[("blk.0.attn_gate.weight", (256, 256), "F16")])
    g, _ = tiny(tmp_path, "llama", c)
    assert not g.params_agree and g.file_params - g.spec.n_params == 256 * 256
    note = [n for n in g.notes if n.startswith("parameters differ")]
    assert len(note) == 1 and "other +65,536" in note[0] and "attn_gate" in note[0]


def test_partial_biases_are_noted_by_kind(tmp_path):
    c = dict(LLAMA, extra=[("blk.0.attn_q.bias", (256,), "F32"), ("blk.1.attn_q.bias", (256,), "F32")])
    g, _ = tiny(tmp_path, "llama", c)  # q bias without k and v biases: ModelSpec's qkv_bias counts all three
    assert g.spec.qkv_bias and not g.params_agree
    assert any("bias -256" in n for n in g.notes)      # 2 x 256 q biases in the file, 2 x 384 q/k/v counted


def test_tokenizer_shorter_than_the_embedding_is_noted(tmp_path):
    g, _ = tiny(tmp_path, "llama", LLAMA, tokens=990)
    assert g.spec.vocab == 1000 and any("990" in n and "1,000 rows" in n for n in g.notes) and g.params_agree


# --- one-line errors -----------------------------------------------------------------------------------------------
def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, VramlibError) and "Traceback" not in text
    return text


def test_unknown_architecture(tmp_path):
    path = tmp_path / "mamba.gguf"
    write_gguf(path, "mamba", {"block_count": 2}, [("token_embd.weight", (64, 300), "F16")], 300)
    with pytest.raises(InvalidValueError) as e:
        read_gguf(path)
    text = one_line(e)
    assert "'mamba'" in text and str(path) in text and all(a in text for a in SUPPORTED_ARCHS)


def test_missing_directory_and_corrupt_files(tmp_path):
    for target, words in ((tmp_path / "nope.gguf", "no such file"), (tmp_path, "directory")):
        with pytest.raises(ConfigError) as e:
            read_gguf(target)
        assert str(target) in one_line(e) and words in str(e.value)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all" * 10)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    tiny(tmp_path, "llama", LLAMA, name="whole")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes((tmp_path / "whole.gguf").read_bytes()[:5000])   # the header survives, the tensors do not
    for bad in (junk, empty, cut):
        with pytest.raises(ConfigError) as e:
            read_gguf(bad)
        assert str(bad) in one_line(e) and "not a readable GGUF file" in str(e.value)
    with pytest.raises(InvalidValueError) as e:
        read_gguf(None)
    one_line(e)


def test_per_layer_kv_heads_that_differ_are_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        tiny(tmp_path, "llama", LLAMA, **{"attention.head_count_kv": [2, 4]})
    text = one_line(e)
    assert "llama.attention.head_count_kv" in text and "1 x 2, 1 x 4" in text and "m.gguf" in text


@pytest.mark.parametrize("extra, words", [
    ({"attention.value_length": 64, "attention.key_length": 32}, "value_length"),
    ({"block_count": 0}, "block_count"),
    ({"feed_forward_length": [512, 256]}, "feed_forward_length"),
    ({"expert_count": 4, "expert_used_count": 2}, "router"),
    ({"attention.head_count_kv": 3}, "head_count_kv"),
    ({"attention.head_count_kv": [2, 2, 2]}, "3 entries for 2 layers"),
    ({"context_length": "long"}, "context_length"),
])
def test_headers_modelspec_cannot_express_are_refused(tmp_path, extra, words):
    with pytest.raises(VramlibError) as e:
        tiny(tmp_path, "llama", LLAMA, **extra)
    assert words in one_line(e) and "m.gguf" in str(e.value)


def test_missing_keys_and_latent_attention_are_refused(tmp_path):
    path = tmp_path / "nokey.gguf"
    meta = {k: v for k, v in base_meta(LLAMA).items() if k != "context_length"}
    write_gguf(path, "llama", meta, model_tensors(LLAMA), 1000)
    with pytest.raises(ConfigError) as e:
        read_gguf(path)
    assert "llama.context_length: missing" in one_line(e)
    c = dict(LLAMA, extra=[("blk.0.attn_kv_a_mqa.weight", (256, 96), "F16")])
    with pytest.raises(ConfigError) as e:
        tiny(tmp_path, "llama", c, name="mla")
    assert "multi-head latent attention" in one_line(e)
    good, _ = tiny(tmp_path, "llama", LLAMA, name="good")
    with pytest.raises(InvalidValueError) as e:
        good.tensor("nope")
    assert "good.gguf" in one_line(e)
