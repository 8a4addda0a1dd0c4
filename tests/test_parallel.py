"""Parallel training memory and planning: ZeRO (paper Tables 1-2), DeepSpeed's estimators, TP/SP/PP/EP splits,
Korthikanti et al. Table 2 through the plan path, offload, buckets, the pipeline balancer, the vectorised plan
search, the inverse solvers and the source's cases (questions 3 and 12)."""
import itertools
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

import vramlib as vl
from vramlib import activations as A
from vramlib import parallel as P
from vramlib import planning as Q
from vramlib.core.errors import InvalidValueError, UnknownNameError, VramlibError
from costs import assert_warm_updates_compile_nothing, count_calls, counting

GB = 10**9
A100 = vl.get_gpu("a100-80gb")


def states(bd):
    """Model-state components of a GPU Breakdown (no activations, buffers, reserve)."""
    keep = ("weights", "gradients", "16-bit gradients (DeepSpeed)", "master weights (fp32)", "optimizer states")
    return sum(v for k, v in bd.items() if k in keep)


# --- ZeRO paper (Rajbhandari et al. 2020) --------------------------------------------------------------
# Table 1: per-device model-state memory (GB) for Psi = 7.5B, 128B, 1T, K = 12; columns P_os, P_os+g, P_os+g+p
TABLE_1 = {
    7.5e9: {1: (120, 120, 120), 4: (52.5, 41.3, 30), 16: (35.6, 21.6, 7.5), 64: (31.4, 16.6, 1.88),
            256: (30.4, 15.4, 0.47), 1024: (30.1, 15.1, 0.12)},
    128e9: {1: (2048, 2048, 2048), 4: (896, 704, 512), 16: (608, 368, 128), 64: (536, 284, 32),
            256: (518, 263, 8), 1024: (513, 257, 2)},
    1e12: {1: (16000, 16000, 16000), 4: (7000, 5500, 4000), 16: (4750, 2875, 1000), 64: (4187, 2218, 250),
           256: (4046, 2054, 62.5), 1024: (4011, 2013, 15.6)},
}


def paper_round(x: Fraction, shown: float) -> Decimal:
    """Round exact GB as the paper prints that cell: half up to the decimals shown; cells of 100 GB or more are
    truncated to whole GB (4187.5 -> 4187, 2218.75 -> 2218, 513.5 -> 513)."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    if shown >= 100:
        return d.to_integral_value(rounding=ROUND_FLOOR)
    return d.quantize(Decimal(str(shown)) if "." in str(shown) else Decimal(1), rounding=ROUND_HALF_UP)


@pytest.mark.parametrize("psi", sorted(TABLE_1))
@pytest.mark.parametrize("nd", [1, 4, 16, 64, 256, 1024])
def test_zero_paper_table_1(psi, nd):
    for stage, shown in zip((1, 2, 3), TABLE_1[psi][nd]):
        got = Fraction(vl.zero_model_states(int(psi), dp=nd, stage=stage, convention="mixed-fp32-master").total, GB)
        assert paper_round(got, shown) == Decimal(str(shown)), (psi, nd, stage, float(got))


def test_zero_paper_headline_numbers_and_units():
    base = vl.zero_model_states(7_500_000_000, dp=64, stage=0)
    assert base.total == 120 * GB  # 16 B/param baseline
    got = [vl.zero_model_states(7_500_000_000, dp=64, stage=s).total for s in (1, 2, 3)]
    assert got == [31_406_250_000, 16_640_625_000, 1_875_000_000]
    assert [round(x / GB, 1) for x in got] == [31.4, 16.6, 1.9]
    # the paper's GB are 10^9: in GiB the same bytes would print 29.2 / 15.5 / 1.7
    assert [round(x / 2**30, 1) for x in got] != [31.4, 16.6, 1.9]


def test_zero_paper_expressions():
    Psi, N_d, K = P.Psi, P.N_d, P.K
    paper = {0: (4 + K) * Psi, 1: 2 * Psi + 2 * Psi + K * Psi / N_d, 2: 2 * Psi + (2 + K) * Psi / N_d,
             3: (4 + K) * Psi / N_d}
    for stage, expr in paper.items():
        assert sp.simplify(P.ZERO_PAPER[stage] - expr) == 0


# Table 2: largest model (parameters) whose model states fit 32 GB V100s: MP, GPUs -> baseline, P_os, P_os+g, P_os+g+p
TABLE_2 = {(1, 64): (2, 7.6, 14.4, 128), (2, 128): (4, 15.2, 28.8, 256), (4, 256): (8, 30.4, 57.6, 512),
           (8, 512): (16, 60.8, 115.2, 1024), (16, 1024): (32, 121.6, 230.4, 2048)}


@pytest.mark.parametrize("mp,gpus", sorted(TABLE_2))
def test_zero_paper_table_2_max_model_size(mp, gpus):
    nd = gpus // mp
    got = [vl.max_params_model_states("32GB", nd, stage, model_parallel=mp) for stage in range(4)]
    base, pos, posg, posgp = TABLE_2[(mp, gpus)]
    assert got[0] == base * 10**9 and got[3] == posgp * 10**9          # exact cells
    # the paper rounds the MP = 1 value to 0.1B and multiplies it by MP
    assert round(got[1] / mp / 1e9, 1) * mp == pytest.approx(pos)
    assert round(got[2] / mp / 1e9, 1) * mp == pytest.approx(posg)
    for stage in range(4):  # the solution is the boundary: it fits, one more parameter per rank does not
        n = got[stage]
        assert vl.zero_model_states(n, nd, stage, tp=mp).total <= 32 * GB < \
            vl.zero_model_states(n + mp, nd, stage, tp=mp).total


# --- conventions side by side ---------------------------------------------------------------------------
@pytest.mark.parametrize("convention,per_param", [("source-12", 12), ("mixed-fp32-master", 16), ("deepspeed", 18)])
def test_conventions_unsharded_bytes_per_param(convention, per_param):
    assert vl.zero_model_states(10**9, stage=0, convention=convention).total == per_param * 10**9


def test_deepspeed_convention_stage_1_is_megatron_distributed_optimizer():
    # Megatron-LM README, distributed optimizer, "bf16 param, fp32 grads": 18 and 6 + 12/d bytes per parameter
    for d in (1, 2, 8, 64):
        got = vl.zero_model_states(10**9 * d, dp=d, stage=1, convention="deepspeed").total
        assert got == (6 * d + 12) * 10**9


def test_plan_memory_equals_training_memory_on_one_gpu():
    for conv in ("source-12", "mixed-fp32-master"):
        for rc in A.RECOMPUTE:
            pm = vl.plan_memory("llama-2-7b", seq=1024, convention=conv, recompute=rc, buckets="none")
            tm = vl.training_memory("llama-2-7b", seq=1024, convention=conv, recompute=rc)
            assert pm.total == tm.total
            assert pm.peak["activations"] == tm["activations"]


# --- DeepSpeed's estimators ------------------------------------------------------------------------------
def ds_zero2_reference(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, additional_buffer_factor=1.5):
    """Transcribed from deepspeedai/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py (after PR #5099)."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3_reference(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
                       cpu_offload_params=True, zero_init=True, additional_buffer_factor=1.5):
    """Transcribed from deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = (4 * largest_layer_params)
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


@settings(max_examples=60, deadline=None)
@given(n=st.integers(10**6, 10**12), largest=st.integers(0, 10**10), g=st.integers(1, 16), nodes=st.integers(1, 64),
       off=st.booleans(), offp=st.booleans(), zi=st.booleans(), f=st.sampled_from([1.0, 1.25, 1.5, 2.0, 1.3]))
def test_deepspeed_estimators_match_their_source(n, largest, g, nodes, off, offp, zi, f):
    ref2 = ds_zero2_reference(n, g, nodes, off, f)
    got2 = vl.deepspeed_zero2_estimate(n, g, nodes, off, f)
    ref3 = ds_zero3_reference(n, largest, g, nodes, off, offp, zi, f)
    got3 = vl.deepspeed_zero3_estimate(n, largest, g, nodes, off, offp, zi, f)
    # DeepSpeed multiplies floats before int(); ours is exact: equal, or 1 byte apart when a float rounds
    assert abs(got2.gpu_bytes - ref2[1]) <= 1 and abs(got2.cpu_bytes - ref2[0]) <= 1
    assert abs(got3.gpu_bytes - ref3[1]) <= 1 and abs(got3.cpu_bytes - ref3[0]) <= 1
    assert got3.largest_layer_bytes == ref3[2]
    if nodes & (nodes - 1) == 0 and f in (1.0, 1.5, 2.0):  # no float rounding on these inputs
        assert (got2.cpu_bytes, got2.gpu_bytes) == ref2 and (got3.cpu_bytes, got3.gpu_bytes) == ref3[:2]


# t5-3b (T5Model): 2,851,598,336 parameters, largest module the shared embedding 32128 x 1024 = 32,899,072;
# DeepSpeed PR #1536 (2021) printed for 1 node x 8 GPUs:
T5_3B, T5_LARGEST = 2_851_598_336, 32_899_072
PR_1536_ZERO3 = [("71.71", "0.12"), ("127.48", "0.12"), ("63.74", "0.79")]
PR_1536_ZERO2 = [("127.48", "5.31"), ("127.48", "15.93")]   # before PR #5099


def test_deepspeed_t5_3b_published_rows():
    rows = vl.parallel.deepspeed_estimate_table(T5_3B, T5_LARGEST, 8, 1, stage=3)
    for row, shown in zip(rows, PR_1536_ZERO3):
        assert tuple(x.strip().removesuffix("GB") for x in row.row().split("|")[:2]) == shown
    assert rows[0].row().startswith("   71.71GB |   0.12GB | ")   # DeepSpeed's f" {cpu:7.2f}GB | {gpu:6.2f}GB | "
    assert [r.options for r in rows[:3]] == ["offload_param=cpu, offload_optimizer=cpu, zero_init=1",
                                             "offload_param=cpu, offload_optimizer=cpu, zero_init=0",
                                             "offload_param=none, offload_optimizer=cpu, zero_init=1"]
    for off, (cpu, gpu) in zip((True, False), PR_1536_ZERO2):
        r = vl.deepspeed_zero2_estimate(T5_3B, 8, 1, off, version="pre-5099")
        assert (f"{r.cpu_bytes / 2**30:.2f}", f"{r.gpu_bytes / 2**30:.2f}") == (cpu, gpu)
    # PR #5099 changed the no-offload GPU line from 4N + 16N/g to 2N + 18N/g
    assert vl.deepspeed_zero2_estimate(T5_3B, 8, 1, False).gpu_bytes == 2 * T5_3B + 18 * T5_3B // 8


def test_largest_module_is_deepspeeds_model_to_params():
    assert vl.largest_module_params("llama-2-7b") == 32000 * 4096          # the embedding (and the LM head)
    assert vl.largest_module_params("mixtral-8x7b") == 8 * 3 * 4096 * 14336  # a layer's fused experts
    assert vl.largest_module_params("llama-2-7b", tp=2) == 32000 * 4096 // 2
    assert vl.largest_module_params("llama-2-7b", stage="middle") == 4096 * 11008
    assert vl.deepspeed_zero3_estimate("llama-2-7b", cpu_offload=False).largest_layer_bytes == 4 * 32000 * 4096


@pytest.mark.parametrize("stage,off,offp", [(2, False, False), (2, True, False), (3, False, False), (3, True, False),
                                            (3, True, True)])
def test_plan_memory_deepspeed_convention_is_the_estimator(stage, off, offp):
    m, g = vl.get_model("llama-2-7b"), 8
    pm = vl.plan_memory(m, dp=g, zero=stage, convention="deepspeed", buckets="none",
                        offload_optimizer="cpu" if off else "none", offload_params="cpu" if offp else "none")
    gpu = states(pm.peak) + pm.peak.get("ZeRO-3 gather buffer", 0)
    if stage == 2:
        est = vl.deepspeed_zero2_estimate(m, g, 1, off).gpu_bytes
    else:
        est = vl.deepspeed_zero3_estimate(m, None, g, 1, off, offp, True).gpu_bytes
    assert abs(gpu - est) <= 6  # per-component rounding up vs DeepSpeed's int()


# --- tensor, pipeline, expert parallel: parameters ------------------------------------------------------
def test_stage_params_expression_reduces_to_n_params():
    e = P.STAGE_PARAMS.subs({P.t: 1, P.N_e: 1, P.z_first: 1, P.z_last: 1, P.z_one: 1, P.L_i: vl.symbols.L})
    assert sp.simplify(e - vl.formulas.N_PARAMS_UNIFORM) == 0  # the one uniform layer kind plans model


def test_tensor_parallel_split_of_parameters():
    m = vl.get_model("llama-2-70b")
    g = m.param_groups()
    split = sum(g[k] for k in ("attn_q", "attn_k", "attn_v", "attn_o", "mlp_gate", "mlp_up", "mlp_down",
                               "embed", "lm_head"))
    rep = g["norm"] + g["bias"] + g["router"]
    (dense, expert), = P.stage_params(m, tp=8)
    assert expert == 0 and dense == Fraction(split, 8) + rep
    # tp = 16 > 8 KV heads: each rank keeps one whole KV head (replicated twice, vLLM's rule), q/o/MLP split by 16
    (d16, _), = P.stage_params(m, tp=16)
    kv_one_head = 2 * m.n_layers * m.hidden * m.head_dim
    assert d16 == Fraction(split - g["attn_k"] - g["attn_v"], 16) + kv_one_head + rep
    assert any("replicated 2x" in n for n in vl.plan_memory(m, tp=16, dp=1, seq=16).notes)
    with pytest.raises(InvalidValueError, match="tp"):
        vl.plan_memory(m, tp=12, dp=1)          # 12 neither divides 8 KV heads nor is a multiple of 8


def test_pipeline_puts_embedding_first_and_head_last():
    m = vl.get_model("llama-2-7b")
    (d0, _), (d1, _), (d2, _), (d3, _) = P.stage_params(m, pp=4)
    assert d0 - d1 == 32000 * 4096                    # embedding
    assert d3 - d2 == 32000 * 4096 + 4096             # LM head + final norm
    assert sum((d0, d1, d2, d3)) == m.n_params
    gpt2 = vl.get_model("gpt2")                       # tied: the last stage keeps its own copy of the matrix
    stages = P.stage_params(gpt2, pp=2)
    assert sum(d for d, _ in stages) == gpt2.n_params + 50257 * 768
    assert sum(d for d, _ in P.stage_params(gpt2, pp=1)) == gpt2.n_params


def test_nominal_shape_stores_its_nominal_size():
    assert sum(d for d, _ in P.stage_params(P.SOURCE_175B, tp=8, pp=4)) * 8 > 175 * 10**9  # TP replicates norms
    assert sum(d for d, _ in P.stage_params(P.SOURCE_175B)) == 175 * 10**9


def test_expert_parallel_splits_experts_and_shards_them_over_dp_over_ep():
    m = vl.get_model("mixtral-8x7b")
    (d1, e1), = P.stage_params(m, tp=1, ep=1)
    (d8, e8), = P.stage_params(m, tp=1, ep=8)
    assert d1 == d8 and e1 == 8 * e8 and e1 == 32 * 8 * 3 * 4096 * 14336
    pm = vl.plan_memory(m, dp=16, ep=8, zero=1, convention="mixed-fp32-master", buckets="none",
                        activation_style="megatron")
    expect = P.zero_parts(d8, 16, 1) | {}
    for k, val in P.zero_parts(e8, 2, 1).items():
        expect[k] += val
    assert states(pm.peak) == sum(vl.formulas.to_int_bytes(v) for v in expect.values() if v)
    with pytest.raises(InvalidValueError, match="ep"):
        vl.plan_memory(m, dp=12, ep=8)
    with pytest.raises(InvalidValueError, match="ep"):
        vl.plan_memory("llama-2-7b", dp=8, ep=2)


# --- activations through the plan path: Korthikanti et al. Table 2 -------------------------------------------
TABLE_3 = {"22B": (64, 6144, 48, 8, 4), "175B": (96, 12288, 96, 8, 1), "530B": (128, 20480, 105, 8, 1),
           "1T": (160, 25600, 128, 8, 1)}


def table_2_row(recompute, sp_flag, a, hid, s_, b_, t_):
    if recompute == "full":
        return Fraction(2 * s_ * b_ * hid)
    core = {("none", False): 10 + Fraction(24, t_) + Fraction(5 * a * s_, hid * t_),
            ("none", True): Fraction(34, t_) + Fraction(5 * a * s_, hid * t_),
            ("selective", False): 10 + Fraction(24, t_), ("selective", True): Fraction(34, t_)}[(recompute, sp_flag)]
    return s_ * b_ * hid * core


@pytest.mark.parametrize("name", sorted(TABLE_3))
@pytest.mark.parametrize("recompute,sp_flag", [("none", False), ("none", True), ("selective", False),
                                               ("selective", True), ("full", False), ("full", True)])
def test_korthikanti_table_2_through_the_plan(name, recompute, sp_flag):
    a, hid, layers, t_, mb = TABLE_3[name]
    spec = vl.ModelSpec(name, layers, hid, a, a, hid // a, 4 * hid, 51200)
    pp = 4 if layers % 4 == 0 else 3
    pm = vl.plan_memory(spec, seq=2048, tp=t_, pp=pp, micro_batch=mb, n_micro=2 * pp, recompute=recompute,
                        sequence_parallel=sp_flag, activation_style="megatron")
    # a middle stage holds p - 1 micro-batches of its layers, no embedding, no head
    row = table_2_row(recompute, sp_flag, a, hid, 2048, mb, t_)
    assert pm.stages[1]["activations"] == vl.formulas.to_int_bytes((pp - 1) * pm.stage_layers[1] * row)
    # one stage: the whole model as activations.activation_bytes(scope="model") has it
    one = vl.plan_memory(spec, seq=2048, tp=t_, micro_batch=mb, recompute=recompute, sequence_parallel=sp_flag,
                         activation_style="megatron")
    assert one.peak["activations"] == vl.activation_bytes(spec, 2048, mb, style="megatron", scope="model", tp=t_,
                                                          sequence_parallel=sp_flag, recompute=recompute)


def test_first_stage_holds_p_microbatches_korthikanti_4_2_3():
    a, hid, layers, t_, mb = TABLE_3["175B"]
    spec = vl.ModelSpec("gpt", layers, hid, a, a, hid // a, 4 * hid, 51200)
    for pp in (2, 4, 8):
        pm = vl.plan_memory(spec, seq=2048, tp=8, pp=pp, n_micro=16, sequence_parallel=True, recompute="selective",
                            activation_style="megatron")
        layer = vl.activation_bytes(spec, 2048, style="megatron", tp=8, sequence_parallel=True, recompute="selective")
        emb = Fraction(2048 * hid, 8)    # the embedding-dropout mask, / t with SP
        assert pm.stages[0]["activations"] == vl.formulas.to_int_bytes(layers * layer + pp * emb)  # = L layers
        assert [bd["activations"] for bd in pm.stages] == sorted((bd["activations"] for bd in pm.stages), reverse=True) \
            or pp == 2


def test_in_flight_micro_batches():
    for p_ in (1, 2, 4, 8):
        for i in range(p_):
            for m_ in (1, 2, 3, 8, 16):
                assert P.in_flight(p_, i, m_) == min(p_ - i, m_)          # 1F1B, 0-based stage i
                assert P.in_flight(p_, i, m_, schedule="gpipe") == m_
    for p_, v_ in [(2, 2), (4, 2), (8, 3), (8, 4)]:
        # interleaved: Korthikanti's first-stage factor p (1 + (p - 1) / (p v))
        assert P.in_flight(p_, 0, 64, virtual_stages=v_) == p_ * (1 + Fraction(p_ - 1, p_ * v_))
    uncapped = [x for x in P.IN_FLIGHT["interleaved"].atoms(sp.Min).pop().args if x.has(P.i_s)][0]
    assert sp.simplify(uncapped.subs(P.i_s, 0) / P.v - (P.p + (P.p - 1) / P.v)) == 0


def test_interleaving_and_gpipe_change_only_activations():
    m = vl.get_model("llama-2-13b")
    kw = dict(seq=2048, tp=2, pp=4, n_micro=8, sequence_parallel=True, activation_style="megatron")
    base = vl.plan_memory(m, **kw)
    inter = vl.plan_memory(m, virtual_stages=2, **kw)
    gpipe = vl.plan_memory(m, schedule="gpipe", **kw)
    assert states(base.stages[0]) == states(inter.stages[0]) == states(gpipe.stages[0])
    assert base.stages[0]["activations"] < inter.stages[0]["activations"] < gpipe.stages[0]["activations"]
    assert base.plan.bubble_fraction == Fraction(3, 11) and inter.plan.bubble_fraction == Fraction(3, 19)


# --- offload and buckets ------------------------------------------------------------------------------------
@pytest.mark.parametrize("zero,opt,par", [(1, "cpu", "none"), (2, "cpu", "none"), (3, "cpu", "none"),
                                          (3, "cpu", "cpu"), (3, "nvme", "nvme"), (3, "none", "cpu")])
def test_offload_moves_bytes_without_losing_any(zero, opt, par):
    kw = dict(seq=1024, dp=4, zero=zero, convention="deepspeed", buckets="none")
    on = vl.plan_memory("llama-2-7b", offload_optimizer=opt, offload_params=par, **kw)
    off = vl.plan_memory("llama-2-7b", **kw)
    moved = states(off.peak) - states(on.peak)
    assert moved > 0 and abs(on.host[0].total + on.nvme[0] - moved) <= 4
    if par != "none":
        assert "weights" not in on.peak
    if opt != "none":
        assert "optimizer states" not in on.peak and "master weights (fp32)" not in on.peak
        assert ("gradients" in on.peak) == (zero == 1)    # ZeRO-1 keeps every gradient on the GPU
    assert on.host_bytes_per_node(8) == 8 * on.host[0].total


def test_offload_rules():
    with pytest.raises(InvalidValueError, match="offload_params"):
        vl.ParallelPlan(dp=4, zero=2, offload_params="cpu")
    with pytest.raises(InvalidValueError, match="offload_optimizer"):
        vl.ParallelPlan(dp=4, zero=0, offload_optimizer="cpu")
    with pytest.raises(UnknownNameError, match="offload_optimizer"):
        vl.ParallelPlan(dp=4, zero=1, offload_optimizer="disk")


def test_communication_buckets():
    m = "llama-2-7b"
    assert P.DDP_BUCKET_CAP_MB == 25 and P.DEEPSPEED_REDUCE_BUCKET == P.DEEPSPEED_ALLGATHER_BUCKET == 5 * 10**8
    ddp = vl.plan_memory(m, dp=8, zero=0).peak            # PyTorch DDP: a second copy of the gradients
    assert ddp["communication buckets (ddp)"] == ddp["gradients"]
    z2 = vl.plan_memory(m, dp=8, zero=2).peak
    assert z2["communication buckets (deepspeed)"] == 10**9                  # 5e8 x 2 bytes
    assert vl.plan_memory(m, dp=8, zero=2, overlap_comm=True).peak["communication buckets (deepspeed)"] == 2 * 10**9
    assert vl.plan_memory(m, dp=8, zero=3).peak["communication buckets (deepspeed)"] == 11 * 10**8
    hf = vl.plan_memory(m, dp=8, zero=2, buckets="hf-rule", overlap_comm=True).peak
    assert hf["communication buckets (hf-rule)"] == 9 * 10**9                # "5e8 x 2 bytes x 2 x 4.5 = 9 GB"
    assert not any(k.startswith("communication") for k in vl.plan_memory(m, tp=2, pp=2, zero=0).peak)


def test_zero3_gather_buffer_follows_the_convention():
    m = vl.get_model("llama-2-7b")
    ds = vl.plan_memory(m, dp=8, zero=3, convention="deepspeed").peak
    assert ds["ZeRO-3 gather buffer"] == 4 * 32000 * 4096
    assert "ZeRO-3 gather buffer" not in vl.plan_memory(m, dp=8, zero=3).peak     # the ZeRO paper counts none
    forced = vl.plan_memory(m, dp=8, zero=3, gather_buffer=True).peak
    assert forced["ZeRO-3 gather buffer"] == 4 * 32000 * 4096
    pp = vl.plan_memory(m, dp=2, pp=2, zero=3, convention="deepspeed", activation_style="megatron")
    assert pp.stages[0]["ZeRO-3 gather buffer"] == 4 * 32000 * 4096


def test_lora_and_qlora_plans_shard_the_frozen_base_only_under_zero_3():
    for method in ("lora", "qlora"):
        z2 = vl.plan_memory("llama-2-13b", dp=4, zero=2, method=method).peak
        z3 = vl.plan_memory("llama-2-13b", dp=4, zero=3, method=method).peak
        base = [k for k in z2 if k.startswith("base weights")][0]
        assert z3[base] == -(-z2[base] // 4)
    with pytest.raises(InvalidValueError, match="method"):
        vl.plan_memory("llama-2-13b", tp=2, method="lora")


# --- bad inputs ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,field", [
    (dict(zero=4), "zero"), (dict(tp=0), "tp"), (dict(sequence_parallel=True), "sequence_parallel"),
    (dict(virtual_stages=2), "virtual_stages"), (dict(recompute="most"), "recompute"), (dict(dp=4, ep=3), "ep"),
    (dict(pp=2, virtual_stages=2, n_micro=3), "n_micro"), (dict(schedule="zb"), "schedule"),
])
def test_bad_plans(kwargs, field):
    with pytest.raises(VramlibError) as err:
        vl.ParallelPlan(**kwargs)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_bad_plan_memory_inputs():
    with pytest.raises(UnknownNameError, match="convention"):
        vl.plan_memory("llama-2-7b", convention="zero-paper")
    with pytest.raises(InvalidValueError, match="activation_style"):
        vl.plan_memory("llama-2-7b", tp=2, activation_style="hf")
    with pytest.raises(InvalidValueError, match="pp"):
        vl.plan_memory("llama-2-7b", pp=33)
    with pytest.raises(InvalidValueError, match="stage_layers"):
        vl.plan_memory("llama-2-7b", pp=2, stage_layers=(10, 10), activation_style="megatron")
    with pytest.raises(InvalidValueError, match="moe_layers"):
        vl.plan_memory("llama-2-7b", moe_layers=[0])


# --- pipeline balancer ----------------------------------------------------------------------------------------
def test_balancer_is_optimal_against_brute_force():
    m = vl.get_model("source-1b")
    plan = vl.ParallelPlan(pp=3, n_micro=6, recompute="selective")
    res = vl.balance_pipeline(m, plan, 2048, gpu="a100-40gb")
    best = min(max(bd.total for bd in vl.plan_memory(m, plan, 2048, activation_style="megatron",
                                                     stage_layers=(a, b_, 16 - a - b_)).stages)
               for a in range(1, 15) for b_ in range(1, 16 - a))
    assert abs(res.peak - best) <= 8
    assert res.peak <= res.even_peak and res.spread <= res.even_spread
    assert sum(res.layers) == 16 and res.boundaries[0] == 0
    assert res.layers[0] < res.layers[-1]      # 1F1B: the first stage holds 3 micro-batches, the last 1


def test_balancer_handles_moe_layers_and_reports_the_source_criterion():
    m = vl.get_model("mixtral-8x7b")
    plan = vl.ParallelPlan(tp=8, pp=4, dp=1, n_micro=8, sequence_parallel=True, recompute="selective")
    moe = list(range(0, 32, 2))                 # every other layer routed (the rest: one dense expert-size MLP)
    res = vl.balance_pipeline(m, plan, 4096, gpu=A100, moe_layers=moe)
    assert res.peak < res.even_peak and res.spread < res.even_spread
    assert res.verdict.startswith(("meets", "fails")) and "spread" in res.verdict
    bal = vl.plan_memory(m, plan, 4096, moe_layers=moe, stage_layers=res.layers, activation_style="megatron")
    assert [bd.total for bd in bal.stages] == [bd.total for bd in res.stages]


def test_balance_verdict_thresholds():
    assert Q.balance_verdict([100, 95], 200).startswith("meets") and "balanced" in Q.balance_verdict([100, 95], 200)
    assert "acceptable" in Q.balance_verdict([100, 85], 200) and Q.balance_verdict([100, 85], 200).startswith("meets")
    assert Q.balance_verdict([100, 70], 200).startswith("fails") and "unbalanced" in Q.balance_verdict([100, 70])
    assert Q.balance_verdict([95, 94], 100).startswith("fails")       # 95% > 90% of the card
    assert Q.spread([100, 80]) == Fraction(1, 5)


# --- plan search ------------------------------------------------------------------------------------------------
def test_search_1024_gpus_is_vectorised(monkeypatch):
    # the < 1 s target is tools/bench_plan.py's; here the work: a fixed number of numpy evaluations whatever the
    # number of candidate plans, the exact plan_memory for the ranked plans only, nothing compiled once warm
    small, args = (P.SOURCE_175B, "a100-80gb", 64, 2048, 512), (P.SOURCE_175B, "a100-80gb", 1024, 2048, 1536)
    Q.search_plans(*small), Q.search_plans(*args)            # warm-up: lambdify caches
    vector, exact = count_calls(monkeypatch, Q, "npeval"), count_calls(monkeypatch, Q, "plan_memory")
    res_small = Q.search_plans(*small, top=3)
    per_search = len(vector) - len(res_small.plans)          # npeval: a fixed set, plus one bubble per ranked plan
    del vector[:], exact[:]
    with counting() as cost:
        res = Q.search_plans(*args)
    assert res.n_candidates > 1000 and res.n_fitting > 100
    assert cost.compiles == 0, cost
    assert len(vector) == per_search + len(res.plans) and per_search < 40, (len(vector), per_search)
    assert len(exact) == len(res.plans) == 10
    best = res.best.plan
    assert best.n_gpus == 1024 and best.tp == 8 and best.pp >= 8      # 175B needs all of a node's NVLink for TP


def test_plan_space_is_the_keywords():
    kw = dict(seq=1024, global_batch=64, convention="source-12", zero_stages=(1, 3), recompute="full", top=3)
    by_keywords = Q.search_plans("llama-2-7b", "a100-80gb", 8, **kw)
    space = vl.PlanSpace(**kw)
    assert space.recompute == ("full",) and space.zero_stages == (1, 3)      # normalised when built
    rows = [(r.plan, r.peak_bytes, r.tokens_per_s) for r in by_keywords.plans]
    for res in (Q.search_plans("llama-2-7b", "a100-80gb", 8, space=space),
                Q.search_plans("llama-2-7b", "a100-80gb", 8, 1024, 64, space=space.with_(seq=4096, global_batch=8)),
                Q.search_plans("llama-2-7b", "a100-80gb", 8, space=vl.PlanSpace(top=3), **{**kw, "top": 3})):
        assert [(r.plan, r.peak_bytes, r.tokens_per_s) for r in res.plans] == rows
        assert (res.n_candidates, res.n_fitting) == (by_keywords.n_candidates, by_keywords.n_fitting)
    with pytest.raises(vl.UnknownNameError, match="did you mean 'zero_stages'"):
        Q.search_plans("llama-2-7b", "a100-80gb", 8, zero_stagse=(1,))
    with pytest.raises(vl.UnknownNameError, match="PlanSpace.*did you mean 'micro_batches'"):
        vl.PlanSpace(micro_batch=(1,))
    with pytest.raises(vl.InvalidValueError, match="space"):
        Q.search_plans("llama-2-7b", "a100-80gb", 8, space=dict(top=3))


def test_search_results_fit_exactly_and_are_ranked():
    res = Q.search_plans("llama-2-70b", "h100-sxm-80gb", 64, 4096, 512, top=40)
    cap = vl.get_gpu("h100-sxm-80gb").memory_bytes
    tps = [r.tokens_per_s for r in res.plans]
    assert tps == sorted(tps, reverse=True)
    for r in res.plans:
        assert r.peak_bytes == r.memory.total <= cap * 0.9
        assert r.plan.tp in (1, 2, 4, 8) and 64 % r.plan.tp == 0 and 8 % r.plan.tp == 0
        assert r.plan.global_batch == 512 and r.plan.n_gpus == 64
        assert r.bubble == pytest.approx((r.plan.pp - 1) / (r.plan.n_micro + r.plan.pp - 1))
        assert r.plan.sequence_parallel == (r.plan.tp > 1)


def test_search_fits_the_same_plans_as_plan_memory():
    spec = vl.get_model("source-7b")
    kw = dict(zero_stages=(0, 3), recompute=("none", "full"), micro_batches=(1, 2), top=10**6, headroom=0.1)
    res = Q.search_plans(spec, "a100-40gb", 8, 2048, 16, **kw)
    cap = vl.get_gpu("a100-40gb").memory_bytes * 0.9
    fitting = 0
    for t_, p_ in [(1, 1), (1, 2), (1, 4), (1, 8), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (8, 1)]:
        d_ = 8 // (t_ * p_)
        for z, rc, b_ in itertools.product((0, 3), ("none", "full"), (1, 2)):
            if 16 % (d_ * b_):
                continue
            plan = vl.ParallelPlan(tp=t_, pp=p_, dp=d_, zero=z, recompute=rc, micro_batch=b_, n_micro=16 // (d_ * b_),
                                   sequence_parallel=t_ > 1)
            fitting += vl.plan_memory(spec, plan, 2048, activation_style="megatron").total <= cap
    assert res.n_fitting == fitting == len(res.plans)


def test_throughput_model_terms():
    assert sp.simplify(Q.BUBBLE.subs(P.v, 1) - (P.p - 1) / (P.m + P.p - 1)) == 0
    z3 = Q.npeval(Q.T_DP, z_p=1, N_d=8, Psi_r=1e9, B_dp=1e11)
    z2 = Q.npeval(Q.T_DP, z_p=0, N_d=8, Psi_r=1e9, B_dp=1e11)
    assert z3 / z2 == pytest.approx(1.5)            # ZeRO-3 moves 3 Psi instead of 2 Psi
    full = Q.npeval(Q.FLOPS_PER_TOKEN, N=7e9, L=32, h=4096, s=2048, z_full=1, z_sel=0)
    none = Q.npeval(Q.FLOPS_PER_TOKEN, N=7e9, L=32, h=4096, s=2048, z_full=0, z_sel=0)
    assert full / none == pytest.approx(4 / 3)      # one more forward pass


def test_search_errors():
    with pytest.raises(InvalidValueError, match="headroom"):
        Q.search_plans("llama-2-7b", "a100-80gb", 8, headroom=1.0)
    with pytest.raises(InvalidValueError, match="zero_stages"):
        Q.search_plans("llama-2-7b", "a100-80gb", 8, zero_stages=(5,))
    with pytest.raises(UnknownNameError, match="gpu"):
        Q.search_plans("llama-2-7b", "a100-81gb", 8)


# --- inverse questions -------------------------------------------------------------------------------------------
def test_family_shapes():
    fam = Q.FAMILIES["llama-width"]
    seven, thirteen = fam.shape(32), fam.shape(40)
    assert (seven.hidden, seven.n_layers, seven.ffn) == (4096, 32, 11008)        # Llama-2-7B's shape
    assert seven.n_params == vl.get_model("llama-2-7b").n_params
    assert (thirteen.hidden, thirteen.ffn) == (5120, 13824) and thirteen.n_params == vl.get_model("llama-2-13b").n_params
    assert Q.get_family("depth:source-13b").shape(20).n_layers == 20
    with pytest.raises(UnknownNameError, match="family"):
        Q.get_family("llama-tall")


@settings(max_examples=12, deadline=None)
@given(gpu=st.sampled_from(["a100-80gb", "rtx-4090", "h100-sxm-80gb", "v100-32gb"]), n=st.sampled_from([1, 2, 4, 8]),
       zero=st.integers(0, 3), method=st.sampled_from(["full", "lora", "qlora"]),
       rc=st.sampled_from(["none", "full"]), conv=st.sampled_from(["source-12", "mixed-fp32-master", "deepspeed"]))
def test_largest_trainable_model_fits_and_the_next_does_not(gpu, n, zero, method, rc, conv):
    precision = "fp16" if gpu == "v100-32gb" else "bf16"
    r = vl.largest_trainable_model(gpu, n, 1024, method=method, zero=zero, recompute=rc, convention=conv,
                                   precision=precision)
    if r.k:
        assert r.memory.fits(gpu) and r.model.n_layers == r.k
    assert not r.next_memory.fits(gpu)
    assert r.next_model.n_params > r.n_params


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["llama-2-7b", "llama-2-13b", "source-30b", "mistral-7b"]),
       gpu=st.sampled_from(["a100-40gb", "a100-80gb", "rtx-4090", "l40s"]), zero=st.integers(1, 3),
       rc=st.sampled_from(["selective", "full"]), method=st.sampled_from(["full", "lora"]))
def test_min_gpus_fits_and_one_fewer_does_not(model, gpu, zero, rc, method):
    r = vl.min_gpus_for_training(model, gpu, 2048, zero=zero, recompute=rc, method=method)
    if r.n_gpus:
        assert r.memory.fits(gpu)
        assert r.memory_below is None or not r.memory_below.fits(gpu)
        assert r.n_gpus == r.dp
    else:
        assert not r.memory_below.fits(gpu)


# --- the source's cases ------------------------------------------------------------------------------------------
def test_source_q12_175b_example():
    m = P.SOURCE_175B
    assert vl.zero_model_states(175 * 10**9, convention="source-12").total == 2100 * GB       # 12 x 175B
    assert vl.zero_model_states(175 * 10**9, convention="source-12", tp=8, pp=4).total == 65_625_000_000  # "65.6 GB"
    assert vl.zero_model_states(175 * 10**9, convention="mixed-fp32-master", tp=8, pp=4).total == 87_500 * 10**6
    # the plan on real stages: the first stage carries the embedding, the last the head
    pm = vl.plan_memory(m, seq=2048, tp=8, pp=4, n_micro=8, sequence_parallel=True, recompute="full",
                        convention="source-12")
    st0 = [states(bd) for bd in pm.stages]
    assert st0[1] == st0[2] < 65_625_000_000 < st0[0] and st0[3] > st0[1]
    assert pm.fits(A100, headroom=0.1) and round(pm.total / GB, 1) == 72.0
    # "8 x 80 GB" cannot hold it at all; the planner needs 32 cards and picks the source's TP 8 x PP 4
    assert Q.search_plans(m, A100, 8, 2048, 64, convention="source-12", headroom=0.0).n_fitting == 0
    best = Q.search_plans(m, A100, 32, 2048, 64, convention="source-12").best.plan
    assert (best.tp, best.pp, best.dp, best.recompute) == (8, 4, 1, "full")
    need = vl.min_gpus_for_training(m, A100, 2048, zero=1, tp=None, pp=None, convention="source-12",
                                    recompute="full", sequence_parallel=True, n_micro=8, headroom=0.1)
    assert need.n_gpus == 32 and (need.memory.plan.tp, need.memory.plan.pp) == (8, 4)


def test_source_q12_175b_with_16_bytes_per_parameter_needs_more_gpus():
    need = vl.min_gpus_for_training(P.SOURCE_175B, A100, 2048, zero=1, tp=None, pp=None,
                                    convention="mixed-fp32-master", recompute="full", sequence_parallel=True,
                                    n_micro=8, headroom=0.1)
    assert need.n_gpus == 44 and (need.memory.plan.tp, need.memory.plan.pp) == (4, 11)


# 8 x A100-80GB, ZeRO-3 over 8 GPUs, seq 2048, micro-batch 1, HF (sdpa) activations, Llama-like width family:
# (convention, recompute) -> (scale index k, parameters)
Q3_LARGEST = {
    ("source-12", "none"): (54, 31_400_000_000), ("source-12", "full"): (64, 52_330_000_000),
    ("mixed-fp32-master", "none"): (50, 25_070_000_000), ("mixed-fp32-master", "full"): (58, 39_060_000_000),
    ("deepspeed", "none"): (49, 23_690_000_000), ("deepspeed", "full"): (56, 35_090_000_000),
}


@pytest.mark.parametrize("key", sorted(Q3_LARGEST))
def test_source_q3_largest_full_fine_tune_on_8_a100(key):
    conv, rc = key
    r = vl.largest_trainable_model(A100, 8, 2048, zero=3, convention=conv, recompute=rc)
    k, params = Q3_LARGEST[key]
    assert r.k == k and round(r.n_params / 1e9, 2) == params / 1e9
    assert r.memory.fits(A100) and not r.next_memory.fits(A100)


def test_source_q3_shapes_under_zero_3():
    # the source: 30B (h 6656, L 60): 1.5N = 45 GB + 32.7 GB activations = 77.7 GB "still under 80 GB"
    pm = vl.plan_memory("source-30b", seq=2048, dp=8, zero=3, convention="source-12")
    assert states(pm.peak) == 45 * GB
    assert pm.fits(A100) and not pm.fits(A100, headroom=0.1)       # measured activations: 37.6 GB, not 32.7
    assert round(pm.peak["activations"] / GB, 1) == 37.6


# --- widgets -----------------------------------------------------------------------------------------------------
def test_widget_compute_functions():
    from vramlib.present.widgets import evaluate_panel
    from vramlib.present.widgets import parallel as W

    bd, cap, verdict = W.plan_compute("llama-2-13b", "a100-80gb", dp=8, zero=3, recompute="full")
    assert isinstance(bd, vl.Breakdown) and cap == A100.memory_bytes and verdict.startswith("Fits")
    stages, cap, verdict = W.plan_stages_compute("llama-2-70b", "a100-80gb", tp=8, pp=4, dp=2, zero=1, n_micro=8,
                                                 sequence_parallel=True)
    assert len(stages) == 4 and "Stages:" in verdict
    html = W.evaluate_stages_panel(lambda **v: W.plan_stages_compute("llama-2-70b", **v),
                                   dict(gpu="a100-80gb", tp=8, pp=4, n_micro=8))
    assert html.count("<svg") == 4 and "(fullest)" in html
    err = evaluate_panel(lambda **v: W.plan_compute("llama-2-70b", **v), dict(gpu="a100-80gb", tp=3))
    assert "vramlib-error" in err and "tp" in err
    stages, _, verdict = W.balance_stages_compute("llama-2-70b", "a100-80gb", pp=6, tp=8, n_micro=12,
                                                  recompute="selective", sequence_parallel=True)
    assert len(stages) == 6 and "Balanced split" in verdict and "Even split" in verdict
    bd, _, verdict = W.search_compute("llama-2-13b", "a100-80gb", 16, 2048, 64)
    assert "plans fit; best:" in verdict


def test_widget_update_compiles_nothing():
    # the update time (< 50 ms) is measured by tools/bench.py; here the work after one update is counted
    from vramlib.present.widgets import parallel as W

    values = dict(gpu="a100-80gb", tp=8, pp=4, dp=2, zero=1, n_micro=8, sequence_parallel=True)
    update = lambda **changes: W.evaluate_stages_panel(  # noqa: E731
        lambda **v: W.plan_stages_compute("llama-2-70b", **v), values | changes)
    assert_warm_updates_compile_nothing(update, misses_allowed=10**6, n_micro=16, dp=4)  # same ZeRO stage


def test_bench_script_runs(capsys):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("bench_plan", Path(__file__).resolve().parents[1] / "tools" /
                                                  "bench_plan.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main(["--gpus", "64", "--batch", "512", "--repeat", "1", "--top", "3"])
    out = capsys.readouterr().out
    assert rc in (0, 1), out                        # 1: a ratio over its budget -- a figure to read, not a test
    assert "plans enumerated" in out and "warm median" in out and " cal " in out
    assert "lambdify cold/warm" in out and "when warm" not in out   # counted, not timed: a warm search compiles nothing


@settings(max_examples=6, deadline=None)
@given(pp=st.sampled_from([2, 3]), zero=st.integers(0, 3), conv=st.sampled_from(["source-12", "deepspeed"]),
       rc=st.sampled_from(["none", "selective", "full"]), n_micro=st.integers(1, 8), dp=st.sampled_from([1, 2]))
def test_balancer_optimal_for_any_plan(pp, zero, conv, rc, n_micro, dp):
    m = vl.get_model("source-1b")
    plan = vl.ParallelPlan(pp=pp, dp=dp, zero=zero, n_micro=n_micro, recompute=rc)
    res = vl.balance_pipeline(m, plan, 1024, convention=conv)
    splits = [c for c in itertools.product(range(1, 16), repeat=pp) if sum(c) == 16]
    best = min(max(bd.total for bd in vl.plan_memory(m, plan, 1024, convention=conv, activation_style="megatron",
                                                     stage_layers=c).stages) for c in splits)
    assert abs(res.peak - best) <= 8 and res.peak <= res.even_peak


# --- settings objects (issue 11): a Workload and PlanOptions beside the ParallelPlan -----------------------------
def test_plan_memory_takes_a_workload_or_its_fields():
    plan = vl.ParallelPlan(dp=4, zero=3, recompute="full")
    w = vl.Workload(method="qlora", seq=1024, optimizer="paged-adamw-8bit", lora_rank=8)
    by_kw = vl.plan_memory("llama-2-7b", plan, 1024, method="qlora", optimizer="paged-adamw-8bit", lora_rank=8)
    by_w = vl.plan_memory("llama-2-7b", plan, workload=w)
    assert [dict(s) for s in by_w.stages] == [dict(s) for s in by_kw.stages] and by_w.notes == by_kw.notes
    # fields given beside the workload override it; the plan_memory default activation_style stays "auto"
    assert vl.plan_memory("llama-2-7b", plan, 2048, workload=w).total == \
        vl.plan_memory("llama-2-7b", plan, 2048, method="qlora", optimizer="paged-adamw-8bit", lora_rank=8).total
    with pytest.raises(InvalidValueError, match="workload"):
        vl.plan_memory("llama-2-7b", workload="qlora")
    with pytest.raises(UnknownNameError, match="overlap_comm"):
        vl.plan_memory("llama-2-7b", overlap_com=True)
    with pytest.raises(UnknownNameError, match="buckets"):
        P.PlanOptions(buckets="dpp")


def test_zero_model_states_takes_a_plan():
    plan = vl.ParallelPlan(tp=8, pp=2, dp=4, zero=2)
    assert vl.zero_model_states(70 * 10**9, plan=plan).total == vl.zero_model_states(70 * 10**9, 4, 2, tp=8, pp=2).total
    assert vl.zero_model_states(70 * 10**9, plan=plan, stage=3).total == \
        vl.zero_model_states(70 * 10**9, 4, 3, tp=8, pp=2).total
    with pytest.raises(InvalidValueError, match="stage"):
        vl.zero_model_states(10**9, stage=4)
    with pytest.raises(InvalidValueError, match="plan"):
        vl.zero_model_states(10**9, plan=(8, 2))


def test_zero_parts_are_linear_in_the_parameters():
    """plans.parallel.zero_rates reads every ZERO_PARTS entry at Psi = 1 and scales it: each must be Psi x (something
    without Psi)."""
    import sympy as sp

    from vramlib.plans.parallel import Psi, ZERO_PARTS

    for name, expr in ZERO_PARTS.items():
        assert sp.diff(expr, Psi, 2) == 0 and expr.subs(Psi, 0) == 0, name
