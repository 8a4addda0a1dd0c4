"""Activation memory: Korthikanti et al. 2022 (style="megatron") and measured transformers behaviour (style="hf")."""
import importlib.util
import json
import statistics
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import assume, given, settings, strategies as st

import vramlib as vl
from vramlib import activations as A
from vramlib.explain import validation as VALIDATION
from vramlib.core.errors import VramlibError
from vramlib.core.formulas import evaluate
from vramlib.core.symbols import L, V, b, h, n_h, s
from costs import counting

ROOT = Path(__file__).resolve().parents[1]
MEASURED = json.loads((Path(vl.__file__).parent / "data/measured/saved_bytes.json").read_text())
TOOL = ROOT / "tools" / "measure" / "saved_tensors.py"


def spec(a, hidden, layers=1, vocab=51200, name="shape"):
    """A GPT-like shape for the Megatron formulas (only a, h, L, v matter)."""
    return vl.ModelSpec(name, layers, hidden, a, a, hidden // a, 4 * hidden, vocab)


# --- (a) Megatron: Table 2, section 4.3 and the paper's numbers ---------------------------------------
t, z_sp = A.t, A.z_sp
TABLE_2 = {  # (recompute, sequence parallel) -> the table's expression
    ("none", 0): s * b * h * (10 + 24 / t + 5 * n_h * s / (h * t)),           # tensor parallel (baseline)
    ("none", 1): s * b * h * (34 / t + 5 * n_h * s / (h * t)),                # tensor + sequence parallel
    ("selective", 0): s * b * h * (10 + 24 / t),                              # TP + selective recompute
    ("selective", 1): s * b * h * (34 / t),                                   # TP + SP + selective
}


@pytest.mark.parametrize("key", sorted(TABLE_2))
def test_megatron_closed_forms_equal_table_2(key):
    recompute, sp_flag = key
    expr = A.MEGATRON_LAYER_BY_RECOMPUTE[recompute].subs(z_sp, sp_flag)
    assert sp.simplify(expr - TABLE_2[key]) == 0


def test_megatron_no_parallelism_and_full_rows():
    assert sp.simplify(A.MEGATRON_LAYER.subs(t, 1) - s * b * h * (34 + 5 * n_h * s / h)) == 0
    assert sp.simplify(A.MEGATRON_LAYER_SELECTIVE.subs(t, 1) - 34 * s * b * h) == 0
    assert A.MEGATRON_LAYER_FULL == 2 * s * b * h


# Table 3 of the paper (s = 2048, v = 51200): a, h, L, t, micro-batch
TABLE_3 = {"22B": (64, 6144, 48, 8, 4), "175B": (96, 12288, 96, 8, 1), "530B": (128, 20480, 105, 8, 1),
           "1T": (160, 25600, 128, 8, 1)}


@pytest.mark.parametrize("name", sorted(TABLE_3))
@pytest.mark.parametrize("sp_flag", [False, True])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_megatron_numbers_match_table_2_arithmetic(name, sp_flag, recompute):
    a, hid, layers, tp, mb = TABLE_3[name]
    sq, tt = 2048, Fraction(tp)
    row = {("none", False): 10 + 24 / tt + Fraction(5 * a * sq, hid * tp),
           ("none", True): 34 / tt + Fraction(5 * a * sq, hid * tp),
           ("selective", False): 10 + 24 / tt, ("selective", True): 34 / tt}
    coeff = 2 if recompute == "full" else row[(recompute, sp_flag)]
    expected = -((-sq * mb * hid * coeff) // 1)
    got = vl.activation_bytes(spec(a, hid, layers), seq=sq, batch=mb, style="megatron", recompute=recompute,
                              tp=tp, sequence_parallel=sp_flag)
    assert got == expected


def test_megatron_paper_numbers():
    # section 5: 5as/h = 80 for GPT-3 and 64 for MT-NLG; selective recompute saves 70% and 65%
    for (a, hid), five_as_h, saved in [((96, 12288), 80, 70), ((128, 20480), 64, 65)]:
        assert Fraction(5 * a * 2048, hid) == five_as_h
        m = spec(a, hid)
        none = vl.activation_bytes(m, 2048, style="megatron")
        sel = vl.activation_bytes(m, 2048, style="megatron", recompute="selective")
        assert round(100 * (1 - sel / none)) == saved
    # Figure 7 / section 6.1: against the TP baseline (eq. 2) SP + selective is a ~5x cut, to about 20%,
    # and full recomputation sits at about 10% of the baseline
    for a, hid, layers, tp, mb in TABLE_3.values():
        m = spec(a, hid, layers)
        kw = dict(seq=2048, batch=mb, style="megatron", tp=tp)
        base = vl.activation_bytes(m, **kw)
        both = vl.activation_bytes(m, **kw, sequence_parallel=True, recompute="selective")
        full = vl.activation_bytes(m, **kw, recompute="full")
        assert 0.15 < both / base < 0.21 and 4.7 < base / both < 6.5
        assert 0.07 < full / base <= 0.10


def test_megatron_section_4_3_extras():
    # with SP and p = 1: (s b h L / t) (p / L + 4 / L (1 + v / h))
    paper = s * b * h * L / t * (1 / L + sp.Integer(4) / L * (1 + V / h))
    assert sp.simplify(A.MEGATRON_OUTSIDE_LAYERS.subs(z_sp, 1) - paper) == 0
    m = spec(64, 6144, layers=48)
    layer = vl.activation_bytes(m, 2048, batch=4, style="megatron", tp=8, sequence_parallel=True)
    model = vl.activation_bytes(m, 2048, batch=4, style="megatron", tp=8, sequence_parallel=True, scope="model")
    extra = 2048 * 4 * 6144 // 8 * (1 + 4 * (1 + Fraction(51200, 6144)))
    assert model == 48 * layer + extra


def test_megatron_ignores_dtype_and_attention():
    m = vl.get_model("llama-2-7b")
    ref = vl.activation_bytes(m, 4096, style="megatron")
    assert ref == 4096 * 4096 * (34 + 5 * 32)
    for dtype in ("fp32", "fp16"):
        for attention in A.ATTENTION:
            assert vl.activation_bytes(m, 4096, dtype=dtype, attention=attention, style="megatron") == ref


# --- (b) hf: every stored measurement ----------------------------------------------------------------
def _spec_for(cfg, name):
    return VALIDATION.saved_spec(cfg, name)


def _predict(row):
    cfg = row["config"]
    return vl.activation_bytes(_spec_for(cfg, row["shape"]), seq=cfg["seq"], batch=cfg["batch"], dtype=cfg["dtype"],
                               attention=cfg["attention"], recompute=cfg["recompute"], scope=row["scope"])


def test_measurements_file_is_complete():
    assert MEASURED["command"].startswith("python tools/measure/saved_tensors.py")
    rows = MEASURED["rows"]
    configs = {r["id"].rsplit("/", 1)[0] for r in rows}
    assert len(configs) >= 16
    fams = {r["config"]["family"] for r in rows}
    assert {"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "phi3", "mixtral"} <= fams
    seen = {(r["config"]["dtype"], r["config"]["attention"], r["config"]["recompute"], r["scope"]) for r in rows}
    for dtype in ("bf16", "fp32"):
        for attention in ("eager", "sdpa"):
            assert (dtype, attention, "none", "layer") in seen and (dtype, attention, "none", "model") in seen
    assert {r["config"]["recompute"] for r in rows} == set(A.RECOMPUTE)
    for r in rows:
        assert r["torch"] and r["transformers"] and r["bytes"] > 0


def test_hf_predictions_match_every_measurement():
    rows = MEASURED["rows"]
    errors = [abs(_predict(r) - r["bytes"]) / r["bytes"] for r in rows]
    assert statistics.median(errors) <= 0.05
    assert max(errors) <= 0.10


def test_hf_predictions_are_exact():
    misses = [(r["id"], r["bytes"], _predict(r)) for r in MEASURED["rows"] if _predict(r) != r["bytes"]]
    assert not misses


def test_flash_is_the_sdpa_expression():
    assert A.HF_LAYER_SAVED_FLASH == A.HF_LAYER_SAVED_SDPA
    assert A.HF_MODEL_SAVED_FLASH == A.HF_MODEL_SAVED_SDPA


# --- (c) re-measure the quick shapes live ------------------------------------------------------------
def test_quick_shapes_remeasured_live():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    spec_ = importlib.util.spec_from_file_location("saved_tensors", TOOL)
    tool = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(tool)
    for cfg in tool.all_configs(quick=True):
        m = tool.measure(cfg)
        for scope in ("layer", "model"):
            assert tool.predict(cfg, scope) == m[scope], (tool.config_id(cfg), scope)
        stored = {r["scope"]: r["bytes"] for r in MEASURED["rows"] if r["id"].startswith(tool.config_id(cfg) + "/")}
        assert stored == {"layer": m["layer"], "model": m["model"]}


# --- (d) properties and bad inputs -------------------------------------------------------------------
FAMILIES = {
    "llama": {}, "qwen2": dict(qkv_bias=True),
    "gemma2": dict(norms_per_layer=4, tied_embeddings=True),
    "phi3": dict(fused_qkv=True, fused_gate_up=True),
    "mixtral": dict(n_experts=8, experts_per_token=2),
}


@st.composite
def shapes(draw):
    fam = draw(st.sampled_from(sorted(FAMILIES)))
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv * draw(st.integers(1, 8))
    d = draw(st.sampled_from([32, 64, 80, 128, 256]))
    hidden = heads * d if fam != "gemma2" else draw(st.integers(heads * d // 2, heads * d))
    # L >= 2: with a single eager layer and a long sequence, full recomputation's backward peak (the layer input
    # + the whole re-run layer, s^2 scores included) can exceed what selective recomputation holds
    layers = draw(st.integers(2, 96))
    m = vl.ModelSpec("h", layers, hidden, heads, kv, d, draw(st.integers(hidden, 4 * hidden)),
                     draw(st.integers(1000, 256000)), family=fam, **FAMILIES[fam])
    # training lengths: below ~2 d_head Phi-3's selective run (which keeps the fused q|k|v storage that v
    # views) can hold more than its eager run (which copies q, k, v) -- physically so, see the module doc
    return m, draw(st.integers(512, 32768)), draw(st.integers(1, 16))


@settings(max_examples=300, deadline=None)
@given(shapes(), st.sampled_from(["bf16", "fp16", "fp32"]), st.sampled_from(A.ATTENTION),
       st.sampled_from(A.SCOPES), st.sampled_from(A.ACTIVATION_STYLES), st.sampled_from([1, 2, 4]),
       st.booleans())
def test_more_recompute_never_raises_activations(shape, dtype, attention, scope, style, tp, seqpar):
    m, seq, batch = shape
    if style == "hf":
        tp, seqpar = 1, False
    elif m.n_heads % tp:
        tp = 1
    kw = dict(seq=seq, batch=batch, dtype=dtype, attention=attention, scope=scope, style=style, tp=tp,
              sequence_parallel=seqpar)
    none, sel, full = (vl.activation_bytes(m, recompute=r, **kw) for r in A.RECOMPUTE)
    assert none >= sel >= full > 0


@settings(max_examples=100, deadline=None)
@given(shapes(), st.sampled_from(["bf16", "fp32"]))
def test_eager_keeps_at_least_what_sdpa_keeps(shape, dtype):
    m, seq, batch = shape
    # with a fused q|k|v (Phi-3) sdpa keeps the whole projection output alive; the eager s^2 tensors
    # outgrow that once s exceeds about 3 d_head (hypothesis found s = 512 = 2 d_head, then s = 513 in fp32 with one
    # head of 256: eager 95% of sdpa there, equal at s = 768)
    assume(seq > 3 * m.head_dim)
    for scope in A.SCOPES:
        eager = vl.activation_bytes(m, seq, batch, dtype, attention="eager", scope=scope)
        sdpa = vl.activation_bytes(m, seq, batch, dtype, attention="sdpa", scope=scope)
        assert eager >= sdpa * 0.99


def test_model_scope_adds_layers_and_head():
    m = vl.get_model("llama-3.1-8b")
    vals = dict(m.symbols(), s=4096, b=1, b_a=2, z_32=0, z_qkv=0, z_gemma=0, z_sc=0, z_fsc=0, z_moe=0, z_oc=0, k_e=1)
    layer = vl.activation_bytes(m, 4096)
    rope = evaluate(A.HF_ROPE_TABLES, **vals)
    head = evaluate(A.HF_LOSS_HEAD, **vals)
    model = vl.activation_bytes(m, 4096, scope="model")
    assert model == 8 * 4096 + m.n_layers * (layer - rope) + rope + head
    assert head > 4 * 4096 * m.vocab  # the fp32 log-softmax of 128k logits dominates the head


def test_full_recompute_peak_is_inputs_plus_one_layer():
    m = vl.get_model("llama-2-7b")
    layer = vl.activation_bytes(m, 4096, attention="eager")
    peak = vl.activation_bytes(m, 4096, attention="eager", recompute="full", scope="model")
    assert peak == 8 * 4096 + 32 * 2 * 4096 * 4096 + layer  # eager layer > loss head at s = 4096
    assert vl.activation_bytes(m, 4096, recompute="full") == 2 * 4096 * 4096


@pytest.mark.parametrize("kwargs,field", [
    (dict(style="foo"), "style"), (dict(seq=0), "seq"), (dict(seq=-5), "seq"), (dict(batch=0), "batch"),
    (dict(tp=3, style="megatron"), "tp"), (dict(tp=0, style="megatron"), "tp"), (dict(tp=2), "tp"),
    (dict(sequence_parallel=True), "sequence_parallel"), (dict(attention="paged"), "attention"),
    (dict(recompute="some"), "recompute"), (dict(scope="gpu"), "scope"), (dict(dtype="int4"), "dtype"),
    (dict(dtype="fp7"), "dtype"), (dict(seq=2.5), "seq"), (dict(sequence_parallel="yes", style="megatron"),
                                                           "sequence_parallel"),
])
def test_bad_inputs_raise_one_line_errors(kwargs, field):
    args = dict(model="llama-2-7b", seq=4096)
    args.update(kwargs)
    with pytest.raises(VramlibError) as err:
        vl.activation_bytes(**args)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(field)


def test_unmodelled_family_needs_megatron():
    with pytest.raises(VramlibError) as err:
        vl.activation_bytes("gpt2", 1024)
    assert "megatron" in str(err.value) and "\n" not in str(err.value)
    assert vl.activation_bytes("gpt2", 1024, style="megatron") > 0


def test_names_and_fast_numeric_path():
    assert A.ACTIVATION_STYLES == ("hf", "megatron")
    assert A.RECOMPUTE == ("none", "selective", "full")
    assert A.ATTENTION == ("eager", "sdpa", "flash")
    m = vl.get_model("mixtral-8x7b")
    vl.activation_bytes(m, 4096, scope="model", recompute="selective")
    # the numeric path: one evaluation of an already compiled expression per call (timed by tools/bench.py)
    with counting() as cost:
        for seq in range(1024, 1224):
            vl.activation_bytes(m, seq, scope="model", recompute="selective")
    assert (cost.compiles, cost.evaluations) == (0, 200), cost
