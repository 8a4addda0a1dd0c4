"""The portable code (vramlib.core.portable) is one source: the compiled JavaScript (``VL.py``) and the exact JavaScript
expressions (``VL.exact``) give Python's numbers, to the byte, in Node.js."""
from __future__ import annotations

import re
from fractions import Fraction

import pytest

import vramlib as vl
from vramlib.core import portable as PT
from vramlib.memory import sharding as S
from vramlib.present.jsdata import model_json

from nodejs import js, run_js

MODELS = ["llama-2-7b", "llama-2-70b", "mixtral-8x7b", "gpt2", "falcon-7b", "gemma-2-9b", "source-175b", "phi-3-mini", "qwen2.5-7b"]


def _q(x) -> Fraction:
    return Fraction(int(x["n"]), int(x["d"]))


def _models():
    """Catalogue models, and a MoE with a shared expert (none is catalogued)."""
    specs = [vl.get_model(m) for m in MODELS if m in vl.catalogue()]
    return specs + [vl.get_model("mixtral-8x7b").with_(n_shared_experts=1)]


def test_largest_module_is_one_rule():
    reqs, want = [], []
    for spec in _models():
        for tp in (1, 2, 8):
            if spec.n_heads % tp:
                continue
            for ep in ((1, 2) if spec.is_moe else (1,)):
                for stage in ("all", "first", "middle", "last", "single"):
                    reqs.append(f"VL.py.largest_module(VL.model({js(model_json(spec))}), {tp}, {ep}, {js(stage)})")
                    want.append(S.largest_module_params(spec, tp, ep, stage))
    got = run_js(reqs)
    bad = [(r, g, w) for r, g, w in zip(reqs, got, want) if "ok" not in g or _q(g["ok"]) != w]
    assert len(reqs) > 50 and not bad, bad[:3]


def test_allocator_rules_are_one_rule():
    """The caching allocator's segments, rounding, best fit and splitting (memory.allocator.reserved_for) give the
    same bytes in the browser, for the model-loading sequences the book prices and edge cases around each limit."""
    from vramlib.memory import allocator as AL

    mib = 2 ** 20
    cases = [[16 * mib] * 8, [4 * mib] * 6, [10 * mib + 1] * 3, [1000] * 300, [0, 1, 511, 512, 513],
             [19 * mib + 512, 20 * mib], [mib, mib + 1, 10 * mib - 1, 10 * mib, 2 * mib + 3]]
    cases += [[v for _, v in AL.weight_tensors(m, "bf16")] for m in ("llama-3.1-8b", "qwen2.5-0.5b")]
    reqs = [f"VL.py.reserved_for({js(c)}, {js(e)})" for c in cases for e in (False, True)]
    want = [AL.reserved_for(c, e) for c in cases for e in (False, True)]
    got = run_js(reqs)
    assert [g.get("ok", g) for g in got] == want


PRIMES = [101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193, 197]


def test_every_shared_expression_is_exact_in_js():
    """VL.exact.<NAME> at a model's values equals Python's exact value (Fractions, not floats)."""
    from vramlib.web import portablegen

    portablegen._load_portable_modules()
    spec = vl.get_model("mixtral-8x7b")
    vals = {**spec.symbols(), "t": 2, "N_e": 2}
    reqs, want = [], []
    for name in sorted(PT.SHARED_EXPRESSIONS):
        value = PT.shared_expression(name)
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for key, expr in items:
            others = sorted(s.name for s in expr.free_symbols if s.name not in vals)
            here = dict(vals, **{n: p for n, p in zip(others, PRIMES)})  # distinct values: no difference vanishes
            reqs.append(f"VL.portable.ev({js(name)}, {js(key)}, {js(here)})")
            want.append(PT.ev(name, key, here))
    got = run_js(reqs)
    assert len(reqs) >= 100
    assert [_q(g["ok"]) if "ok" in g else g for g in got] == want


PLANS = [dict(), dict(dp=1, zero=2, convention="deepspeed"), dict(dp=1, zero=3, convention="deepspeed"),
         dict(dp=4, zero=3, offload_optimizer="cpu", offload_params="cpu"), dict(dp=2, zero=2, offload_optimizer="nvme"),
         dict(dp=4, zero=3, method="lora", seq=1024), dict(dp=2, zero=1, method="qlora", optimizer="adamw-8bit"),
         dict(tp=2, pp=4, dp=2, zero=1, n_micro=8, schedule="gpipe", sequence_parallel=True),
         dict(tp=1, pp=2, dp=2, zero=1, n_micro=4, virtual_stages=2), dict(dp=8, ep=8, zero=2),
         dict(dp=2, zero=3, gather_buffer=True, overlap_comm=True, buckets="hf-rule"), dict(dp=2, zero=0, buckets="ddp"),
         dict(tp=2, pp=3, dp=1, zero=0, recompute="full", reserve="1GB", precision="fp16")]
"""Plans that reach every branch of plan_stages: offload to host and NVMe, LoRA/QLoRA, ZeRO 0-3 and their buckets, the
gather buffer, pipeline schedules, expert parallelism."""

_PLAN_FIELDS = ("tp", "pp", "dp", "zero", "ep", "sequence_parallel", "recompute", "micro_batch", "n_micro",
                "virtual_stages", "schedule", "offload_optimizer", "offload_params")


def _js_plan(spec, kw) -> str:
    plan = {k: v for k, v in kw.items() if k in _PLAN_FIELDS}
    rest = {k: v for k, v in kw.items() if k not in _PLAN_FIELDS and k != "seq"}
    return (f"(function () {{ var pm = VL.planMemory(VL.model({js(model_json(spec))}), VL.parallelPlan({js(plan)}), "
            f"{kw.get('seq', 2048)}, {js(rest)}); return [pm.stages.map(function (b) {{ return [b.title, b.parts]; }}), "
            "pm.host.map(function (b) { return b.parts; }), pm.nvme, pm.stage_layers]; })()")


def test_plan_memory_is_one_model():
    """VL.planMemory (the compiled plan_stages) gives plan_memory's stages, host memory and NVMe bytes to the byte."""
    reqs, want = [], []
    for spec in _models():
        for kw in PLANS:
            try:
                pm = vl.plan_memory(spec, **kw)
            except vl.VramlibError:
                continue
            reqs.append(_js_plan(spec, kw))
            want.append([[[bd.title, [[k, v] for k, v in bd.items()]] for bd in pm.stages],
                         [[[k, v] for k, v in bd.items()] for bd in pm.host], list(pm.nvme), list(pm.stage_layers)])
    got = run_js(reqs)
    bad = [(r[:200], g, w) for r, g, w in zip(reqs, got, want) if g.get("ok") != w]
    assert len(reqs) > 60 and not bad, bad[:2]


STEP_PLANS = [dict(dp=8, zero=3, convention="pure-bf16"), dict(dp=4, zero=3, convention="source-12", recompute="full"),
              dict(dp=2, zero=3, convention="pure-bf16", micro_batch=4, optimizer_impl="fused", seq=1024),
              dict(dp=16, zero=3, convention="pure-bf16", optimizer_impl="for-loop", reserve=0),
              dict(dp=8, zero=3, convention="pure-bf16", optimizer="sgd", recompute="full"),
              dict(dp=8, zero=2, convention="pure-bf16"), dict(dp=8, zero=3, convention="mixed-fp32-master"),
              dict(dp=8, zero=3, convention="pure-bf16", buckets="deepspeed"), dict(dp=4, zero=3, n_micro=4),
              dict(dp=8, zero=3, convention="pure-bf16", optimizer="adafactor")]
"""peak="step" plans: FSDP2's phases (ZeRO-3, each optimizer implementation, recomputation, micro-batches) and
the sums of parts they name (other stages, a master copy, DeepSpeed's buckets, gradient accumulation)."""


def test_plan_step_peak_is_one_model():
    """VL.planMemory with peak="step" (the compiled fsdp_problem, plan_step_values, fsdp_parts) gives plan_memory's
    stage, phases and peak phase to the byte, and the same sums of parts where the phases do not apply."""
    reqs, want, priced = [], [], 0
    for spec in _models():
        for kw in STEP_PLANS:
            kw = dict(kw, peak="step")
            try:
                pm = vl.plan_memory(spec, **kw)
            except vl.VramlibError as e:
                want.append(str(e))
            else:
                bd = pm.peak
                priced += bd.peak_phase is not None
                want.append([bd.title, [[k, v] for k, v in bd.items()], bd.phases or None, bd.peak_phase])
            plan = {k: v for k, v in kw.items() if k in _PLAN_FIELDS}
            rest = {k: v for k, v in kw.items() if k not in _PLAN_FIELDS and k != "seq"}
            reqs.append(f"(function () {{ var bd = VL.planMemory(VL.model({js(model_json(spec))}), VL.parallelPlan("
                        f"{js(plan)}), {kw.get('seq', 2048)}, {js(rest)}).peak; return [bd.title, bd.parts, bd.phases ? "
                        "(function () { var o = {}; bd.phases.forEach(function (p) { o[p[0]] = p[1]; }); return o; })()"
                        " : null, bd.peak_phase === undefined ? null : bd.peak_phase]; })()")
    got = run_js(reqs)
    bad = [(r[-160:], g, w) for r, g, w in zip(reqs, got, want) if g.get("ok", g.get("err")) != w]
    assert len(reqs) > 60 and priced > 15 and not bad, bad[:2]


def test_balancer_is_one_algorithm():
    """VL.balancePipeline (the compiled balanced_layers) picks balance_pipeline's split."""
    reqs, want = [], []
    for spec in _models():
        for pp in (2, 3, 4, 8):
            for kw in (dict(), dict(recompute="selective", n_micro=16), dict(zero=1, dp=2, convention="deepspeed")):
                tp = 2 if spec.n_heads % 2 == 0 and spec.n_kv_heads % 2 == 0 else 1
                plan = dict(pp=pp, tp=tp, **{k: v for k, v in kw.items() if k in _PLAN_FIELDS})
                rest = {k: v for k, v in kw.items() if k not in _PLAN_FIELDS}
                try:
                    res = vl.balance_pipeline(spec, vl.ParallelPlan(**plan), 2048, gpu="a100-80gb", **rest)
                except vl.VramlibError:
                    continue
                reqs.append(f"VL.balancePipeline(VL.model({js(model_json(spec))}), VL.parallelPlan({js(plan)}), 2048, "
                            f"{vl.get_gpu('a100-80gb').memory_bytes}, {js(rest)}).layers")
                want.append(list(res.layers))
    got = run_js(reqs)
    bad = [(r[-120:], g, w) for r, g, w in zip(reqs, got, want) if g.get("ok") != w]
    assert len(reqs) > 40 and not bad, bad[:3]


BAD_PLANS = [dict(dp=2, ep=4), dict(tp=1, sequence_parallel=True), dict(offload_optimizer="cpu"),
             dict(zero=2, offload_params="cpu"), dict(virtual_stages=2), dict(pp=2, virtual_stages=2, schedule="gpipe"),
             dict(pp=2, virtual_stages=2, n_micro=3), dict(tp=3), dict(pp=200), dict(pp=3, virtual_stages=2, n_micro=6),
             dict(dp=4, ep=4), dict(tp=16)]
"""Plans vramlib refuses: one of each rule of plan_problem and layout_problem."""


def test_plan_errors_are_one_set_of_rules():
    """The browser refuses the same plans with the same one-line messages (the compiled plan_problem / layout_problem)."""
    reqs, want = [], []
    for spec in _models():
        for kw in BAD_PLANS:
            try:
                vl.plan_memory(spec, **kw)
                continue
            except vl.VramlibError as e:
                want.append(str(e))
            plan = {k: v for k, v in kw.items() if k in _PLAN_FIELDS}
            reqs.append(f"VL.planMemory(VL.model({js(model_json(spec))}), VL.parallelPlan({js(plan)}), 2048, {{}})")
    got = run_js(reqs)
    bad = [(g, w) for g, w in zip(got, want) if g.get("err") != w]
    assert len(reqs) > 60 and not bad, bad[:3]


def test_bookshelf_is_drawn_once():
    """The static book's bookshelf (the compiled layout_items, shelf_svg, shelves_html ...) is Python's, character for
    character: the SVG, the words and the tables of every shelf."""
    from vramlib.present.widgets import bookshelf as W

    data = W.bookshelf_js_data()
    reqs, want = [], []
    cases = [("llama-3.1-8b", p, g, t) for p in ("bf16", "fp32", "int8", "nf4-dq", "q4_k_m", "awq-4bit-g128")
             for g in ("rtx-4090", "t4", "a100-80gb") for t in ("inference", "both")]
    cases += [("gpt2", "fp16", "t4", "both"), ("llama-2-70b", "bf16", "a100-80gb", "training"),
              ("mixtral-8x7b", "int8", "h100-sxm-80gb", "inference"), ("qwen2.5-0.5b", "fp16", "rtx-4090", "both")]
    for model, prec, gpu, task in cases:
        m = vl.get_model(model)
        args = dict(model=model, n_heads=m.n_heads, n_kv_heads=m.n_kv_heads, weights=prec, tokens=4096, gpu=gpu,
                    task=task, batch=2)
        try:
            want.append(W.bookshelf_render(W.bookshelf_compute(**args)))
        except vl.VramlibError as e:
            want.append(str(e))
        reqs.append(f"VL.calcs.bookshelf({js(dict(args, js_data=data))}).render()")
    got = run_js(reqs)
    # the browser's tables carry data-component / data-bytes attributes for the browser tests: not part of the picture
    tag = re.compile(r" data-component='[^']*' data-bytes='[^']*'| data-total='[0-9]*'")
    bad = [(c, g.get("err"), w[:80]) for c, g, w in zip(cases, got, want) if tag.sub("", g.get("ok", g.get("err"))) != w]
    assert len(reqs) > 30 and not bad, bad[:3]


PANEL_CASES = [
    ("plan_stages", "plan_stages_compute", dict(gpu="a100-80gb", tp=2, pp=4, dp=2, zero=1, n_micro=8, seq=4096)),
    ("plan_stages", "plan_stages_compute", dict(gpu="h100-sxm-80gb", dp=8, zero=3, offload_optimizer="cpu",
                                                offload_params="nvme")),
    ("plan_stages", "plan_stages_compute", dict(gpu="rtx-4090", method="lora", zero=2, dp=2)),
    ("balance_stages", "balance_stages_compute", dict(gpu="a100-80gb", pp=4, tp=2, n_micro=8)),
    ("balance_stages", "balance_stages_compute", dict(gpu="a100-40gb", pp=8, recompute="selective", n_micro=16)),
    ("balance_stages", "balance_stages_compute", dict(gpu="a100-80gb", pp=2, n_micro=4, virtual_stages=2)),
    ("finetune", "finetune_compute", dict(gpu="v100-32gb", method="lora", precision="bf16", attention="flash")),
    ("finetune", "finetune_compute", dict(gpu="a100-80gb", method="full", dp=4, zero=3, compare_zero=True,
                                          offload_optimizer="cpu")),
    ("recommend", "recommend_compute", dict(method="qlora", seq=2048)),
    ("recommend", "recommend_compute", dict(method="full", seq=4096, headroom_pct=20, max_gpus=8)),
    ("recommend", "recommend_compute", dict(method="full", seq=65536, max_gpus=2)),
]
"""Panels whose verdicts are portable code (plan_verdict, balance_words, card_notes, zero_stage_text, row_view,
rank_order, recommend_verdict): one case per branch of their words."""


@pytest.mark.parametrize("model", ["llama-2-7b", "llama-2-70b", "mixtral-8x7b"])
def test_panel_verdicts_are_one_text(model):
    """The static plan, balance, fine-tuning and recommender panels print Python's verdicts word for word."""
    import importlib

    spec = vl.get_model(model)
    reqs, want = [], []
    for calc, fn, kw in PANEL_CASES:
        module = {"recommend": "recommend", "finetune": "finetune"}.get(calc, "parallel")
        compute = getattr(importlib.import_module(f"vramlib.present.widgets.{module}"), fn)
        try:
            out = compute(spec, **kw)
            stages = out[0] if isinstance(out[0], (list, tuple)) else [out[0]]
            want.append([[bd.total for bd in stages], out[1], out[2]])
        except vl.VramlibError as e:
            want.append(str(e))
        reqs.append(f"(function () {{ var r = VL.calcs[{js(calc)}]({js(dict(kw, model=model_json(spec)))}); "
                    "var st = Array.isArray(r[0]) ? r[0] : [r[0]]; "
                    "return [st.map(function (b) { return b.total; }), r[1], r[2]]; })()")
    got = run_js(reqs)
    bad = [(c[0], c[2], g, w) for c, g, w in zip(PANEL_CASES, got, want) if g.get("ok", g.get("err")) != w]
    assert not bad, bad[:2]


def _same_panel(calc: str, compute, runs, key: str = "model") -> int:
    """Run the static calculator ``calc`` and its Python ``compute`` on ``runs`` ([(model, arguments)]): the breakdown
    (parts and title), the card and the verdict -- or the one-line refusal -- must be the same. Returns the runs."""
    reqs, want = [], []
    for spec, args in runs:
        try:
            bd, cap, verdict = compute(spec, **args)
            want.append([[[k, v] for k, v in bd.items()], bd.title, cap, verdict])
        except vl.VramlibError as e:
            want.append(str(e))
        reqs.append(f"(function () {{ var r = VL.calcs[{js(calc)}]({js(dict(args, **{key: model_json(spec)}))}); "
                    "return [r[0].parts, r[0].title, r[1], r[2]]; })()")
    got = run_js(reqs)
    bad = [(r[-80:], g, w) for r, g, w in zip(reqs, got, want) if g.get("ok", g.get("err")) != w]
    assert not bad, bad[:2]
    return len(reqs)


def _heads(spec) -> dict:
    return dict(n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads)


def test_inference_is_one_model():
    """The static inference calculator (the compiled weights_parts, kv_bytes, prefill_bytes, inference_parts,
    largest_true, inference_verdict) gives Python's breakdown, longest context and verdict, for every format."""
    from vramlib.present.widgets.inference import inference_compute

    runs = [(spec, dict(_heads(spec), weights=prec, kv_dtype=kv, tokens=8192, gpu=gpu, attention=attention, batch=2))
            for spec in _models()[:6] for prec in vl.precision_names()
            for kv, gpu, attention in (("fp16", "rtx-4090", "sdpa"), ("fp8-e4m3", "a100-80gb", "eager"))]
    assert _same_panel("inference", inference_compute, runs) > 100


def test_gguf_bits_follow_llama_cpp_rules_exactly():
    """VL.py.bits_of (GGUF per-layer rules averaged over the layers, exactly) equals precision.tensor_bits for every
    mix, tensor kind, a range of layer counts and GQA groups, and experts."""
    from vramlib.catalog.precision import WEIGHT_KINDS, get_precision, precision_names, precision_view, tensor_bits

    reqs, want = [], []
    for name in precision_names():
        p = get_precision(name)
        for kind in WEIGHT_KINDS:
            for n_layers, gqa, n_x, t70 in ((32, 1, 0, 0), (80, 8, 0, 1), (61, 4, 8, 0), (1, 2, 0, 0), (48, 8, 128, 0)):
                view = {k: (float(v) if isinstance(v, Fraction) else v) for k, v in precision_view(p).items()}
                reqs.append(f"VL.py.bits_of({js(view)}, {js(kind)}, {n_layers}, {gqa}, {n_x}, {t70})")
                want.append(tensor_bits(p, kind, n_layers, gqa, n_x, bool(t70)))
    got = run_js(reqs)
    assert len(reqs) > 500
    assert [_q(g["ok"]) if "ok" in g else g for g in got] == want


def test_training_is_one_model():
    """The static training calculator (the compiled LoRA, optimizer, activation, model-state and secant-search code)
    gives Python's breakdown, longest sequence and verdict."""
    from vramlib.present.widgets.training import training_compute

    cases = []
    for method, prec, opt, conv in (("full", "bf16", "adamw", "mixed-fp32-master"), ("lora", "fp16", "adamw-8bit", "source-12"),
                                    ("qlora", "bf16", "paged-adamw-8bit", "deepspeed"), ("full", "fp32", "sgd", "deepspeed"),
                                    ("full", "bf16", "adafactor", "deepspeed"), ("lora", "bf16", "adafactor", "mixed-fp32-master")):
        for recompute, attention, style in (("none", "sdpa", "hf"), ("selective", "eager", "hf"), ("full", "flash", "megatron")):
            cases.append(dict(method=method, precision=prec, optimizer=opt, convention=conv, recompute=recompute,
                              attention=attention, activation_style=style, lora_rank=16, seq=4096, micro_batch=2,
                              gpu="a100-80gb"))
    runs = [(spec, dict(kw, **_heads(spec))) for spec in _models()[:5] for kw in cases]
    assert _same_panel("training", training_compute, runs) > 60


def test_training_step_peak_is_one_model():
    """The static training calculator prices a step by its phases (step_settings, step_problem, step_parts,
    autocast_extra, lora_step_values) exactly as training_memory(peak="step") does: every phase that can set the
    peak, the implementations, fp32-autocast, LoRA adapter dtypes, the named sum-of-parts fallbacks and refusals."""
    from vramlib.present.widgets.training import training_compute

    cases = []
    for method, conv, opt, impl, dtype, recompute in (
            ("full", "pure-bf16", "adamw", None, "fp32", "none"), ("full", "pure-bf16", "adamw", "fused", "fp32", "full"),
            ("full", "fp32-autocast", "adamw", "for-loop", "fp32", "none"), ("full", "fp32-autocast", "sgd", None, "fp32", "full"),
            ("full", "mixed-fp32-master", "adafactor", None, "fp32", "selective"),
            ("full", "deepspeed", "adamw-8bit", None, "fp32", "none"), ("lora", "pure-bf16", "adamw", None, "fp32", "none"),
            ("lora", "pure-bf16", "adamw", "fused", "bf16", "full"), ("qlora", "mixed-fp32-master", "adamw", None, "fp32", "full"),
            ("lora", "source-12", "adamw", None, "bf16", "selective"), ("qlora", "pure-bf16", "paged-adamw-8bit", None, "fp32", "none"),
            ("full", "pure-bf16", "paged-adamw", "fused", "fp32", "none")):
        for seq, mb in ((2048, 1), (512, 8)):
            cases.append(dict(method=method, precision="bf16", optimizer=opt, convention=conv, recompute=recompute,
                              attention="sdpa", activation_style="hf", lora_rank=16, seq=seq, micro_batch=mb,
                              gpu="a100-80gb", peak="step", lora_dtype=dtype, optimizer_impl=impl))
    specs = [vl.get_model(m) for m in ("llama-2-7b", "qwen2.5-0.5b", "qwen3-8b", "mixtral-8x7b")]
    runs = [(spec, dict(kw, **_heads(spec))) for spec in specs for kw in cases]
    assert _same_panel("training", training_compute, runs) == 96
    phases, refused = set(), 0
    for spec, kw in runs:
        try:
            phases.add(training_compute(spec, **kw)[0].peak_phase)
        except vl.VramlibError:
            refused += 1
    assert {"loss backward", "backward", "optimizer step", None} <= phases and 0 < refused < len(runs) // 2


def test_serving_is_one_budget():
    """The static serving calculator (the compiled kv_budget, start_problems, serving_parts, verdicts) gives Python's
    vLLM budget, problems and verdict."""
    from vramlib.present.widgets.serving import serving_compute

    settings = (("bf16", "auto", "a100-80gb", 1, 0.9, 16, 8192, 8192), ("int4", "fp8", "rtx-4090", 1, 0.95, 32, 2048, 4096),
                ("awq-4bit-g128", "auto", "t4", 8, 0.9, 16, 8192, 32768),
                ("fp16", "fp8_e5m2", "h100-sxm-80gb", 2, 0.5, 8, 512, 100), ("bf16", "auto", "v100-32gb", 4, 0.9, 16, 4096, 2048))
    runs = [(spec, dict(_heads(spec), weights=w, kv_dtype=kv, gpu=gpu, tp=tp, gpu_memory_utilization=util, block_size=blk,
                        max_num_batched_tokens=nbt, request_tokens=req))
            for spec in _models()[:6] for w, kv, gpu, tp, util, blk, nbt, req in settings]
    assert _same_panel("serving", serving_compute, runs) >= 30


def test_design_is_one_calculator():
    """The static design calculator (the compiled shape fields, symbols, checks, equal-parameter layers, fewest GPUs,
    batch closed form, verdict) gives Python's breakdown and verdict, refusals included."""
    from vramlib.present.widgets.design import design_compute

    base = vl.get_model("source-13b")
    cases = [dict(n_layers=40, hidden=5120, n_heads=40, n_kv_heads=40, ffn=13824, n_experts=0, experts_per_token=2,
                  equal_params=False), dict(n_layers=40, hidden=4096, n_heads=32, n_kv_heads=8, ffn=11008, n_experts=0,
                  experts_per_token=2, equal_params=True), dict(n_layers=32, hidden=5120, n_heads=40, n_kv_heads=8,
                  ffn=6912, n_experts=8, experts_per_token=2, equal_params=False), dict(n_layers=40, hidden=5120,
                  n_heads=40, n_kv_heads=3, ffn=13824, n_experts=0, experts_per_token=2, equal_params=False),
             dict(n_layers=40, hidden=5120, n_heads=48, n_kv_heads=8, ffn=13824, n_experts=0, experts_per_token=2,
                  equal_params=False), dict(n_layers=40, hidden=65536, n_heads=512, n_kv_heads=8, ffn=13824,
                  n_experts=0, experts_per_token=2, equal_params=True)]
    runs = [(base, dict(kw, weights=w, gpu=gpu, context=context)) for kw in cases
            for w, gpu, context in (("bf16", "h100-sxm-80gb", 131072), ("int4", "rtx-4090", 8192), ("fp16", "a100-40gb", 32768))]
    assert _same_panel("design", design_compute, runs, key="base") >= 18


def test_every_module_with_portable_code_is_compiled():
    """A module that defines a @portable function is in portablegen.PORTABLE_MODULES (else its functions would be
    missing from the page, and its callers would fail there only)."""
    from pathlib import Path

    from vramlib.web.portablegen import PORTABLE_MODULES

    root = Path(vl.__file__).parent
    have = {str(p.relative_to(root).with_suffix("")).replace("/", ".") for p in root.rglob("*.py")
            if "\n@portable\n" in p.read_text() and p.name != "portable.py"}
    assert have and have <= set(PORTABLE_MODULES), sorted(have - set(PORTABLE_MODULES))


def test_inference_calculator_follows_every_layer_kind():
    """2025-26 layer stacks (q/k norms, a 5:1 sliding pattern, sinks and MXFP4 experts, MLA with FP8 blocks, Mamba-2)
    in the static inference calculator: the same breakdown, longest context and verdict as Python, or the same
    one-line refusal (GGUF mixes of MLA and Mamba tensors)."""
    from vramlib.present.widgets.inference import inference_compute

    specs = [vl.get_model(m) for m in ("qwen3-8b", "gemma-3-27b", "gpt-oss-20b", "deepseek-v3", "bamba-9b")]
    runs = [(spec, dict(_heads(spec), weights=prec, kv_dtype="fp16", tokens=tokens, gpu="h200", attention="sdpa",
                        batch=1))
            for spec in specs for prec in ("bf16", "q4_k_m", "gptq-4bit-g128", "mxfp4-moe", "fp8-block128", "nvfp4")
            for tokens in (4096, 131072)]
    assert _same_panel("inference", inference_compute, runs) == 60


def _head_changes(spec) -> list[tuple[int, int]]:
    """The model's own heads, twice the query heads (a new head_dim: MLA's rope part and hidden sizes refuse some),
    half the KV heads, and KV heads that do not divide the query heads."""
    return [(spec.n_heads, spec.n_kv_heads), (2 * spec.n_heads, spec.n_kv_heads),
            (spec.n_heads, max(1, spec.n_kv_heads // 2)), (spec.n_heads, spec.n_heads + 1)]


def test_inference_calculator_offers_every_catalogue_model():
    """The inference panel's model control: every catalogue key resolves through the page data (``VL.data.models``)
    to Python's breakdown, longest context and verdict -- with the model's own heads and with changed ones, whose
    refusals (a head count not dividing hidden, MLA's rope part larger than the new head_dim) are Python's one line;
    a key that names no model is refused in Python's words; the panel's own model (``own_model``) wins its name."""
    from vramlib.present.widgets.inference import inference_compute

    runs = [dict(model=name, n_heads=nh, n_kv_heads=nkv, weights="bf16", kv_dtype="fp16", tokens=4096, gpu="h200",
                 attention="sdpa", batch=1)
            for name in vl.model_names() for nh, nkv in _head_changes(vl.get_model(name))]
    runs += [dict(runs[0], model="no-such-model"), dict(runs[0], model="")]
    own = vl.get_model("llama-2-13b").with_(name="my-13b", n_kv_heads=8)
    runs += [dict(runs[0], model="my-13b", n_heads=40, n_kv_heads=8, own_model=own),
             dict(runs[0], model="gpt-oss-20b", n_heads=64, n_kv_heads=8, own_model=own)]
    reqs, want = [], []
    for args in runs:
        try:
            bd, cap, verdict = inference_compute(**args)
            want.append([[[k, v] for k, v in bd.items()], bd.title, cap, verdict])
        except vl.VramlibError as e:
            want.append(str(e))
        page = dict(args, own_model=model_json(args["own_model"])) if "own_model" in args else args
        reqs.append(f"(function () {{ var r = VL.calcs.inference(VL.fromFixed({js(page)})); "
                    "return [r[0].parts, r[0].title, r[1], r[2]]; })()")
    got = run_js(reqs)
    bad = [(a["model"], a["n_heads"], a["n_kv_heads"], g, w if isinstance(w, str) else w[3])
           for a, g, w in zip(runs, got, want) if g.get("ok", g.get("err")) != w]
    assert not bad, bad[:3]
    refused = [w for w in want if isinstance(w, str)]
    assert any(w.startswith("attention: got 'mla'") for w in refused)
    assert any("must divide hidden" in w for w in refused)
    assert sum(isinstance(w, list) for w in want) > 2 * len(vl.model_names())


def test_a_new_model_brings_its_own_heads_in_both_places():
    """The panel's linked controls: Python's inference_linked and the calculator's ``linked`` set the same heads for
    every catalogue model (and for the panel's own model under its name); other controls and bad keys set nothing."""
    from vramlib.present.widgets.inference import inference_linked

    own = vl.get_model("llama-2-13b").with_(name="my-13b", n_kv_heads=8)
    cases = [("model", {"model": name}) for name in vl.model_names()]
    cases += [("model", {"model": "my-13b", "own_model": own}), ("model", {"model": "llama-2-13b", "own_model": own}),
              ("model", {"model": "no-such-model"}), ("gpu", {"model": "gpt-oss-20b"})]
    want = [inference_linked(name, values) for name, values in cases]
    page = [dict(v, own_model=model_json(v["own_model"])) if "own_model" in v else v for _, v in cases]
    reqs = [f"VL.calcs.inference.linked({js(name)}, VL.fromFixed({js(values)}))" for (name, _), values in zip(cases, page)]
    got = run_js(reqs)
    assert [g.get("ok", g) for g in got] == want
    assert want[vl.model_names().index("gpt-oss-20b")] == {"n_heads": 64, "n_kv_heads": 8}
    assert want[-4] == {"n_heads": 40, "n_kv_heads": 8} and want[-2:] == [{}, {}]


def test_uniform_layer_calculators_refuse_other_shapes_as_python_does():
    """The training calculator reads one uniform layer: for OLMo-2 (full-width q/k norms) it refuses with Python's
    line; for Qwen3 (per-head q/k norms, modelled) it gives Python's numbers."""
    from vramlib.present.widgets.training import training_compute

    q3 = vl.get_model("qwen3-8b")
    _same_panel("training", training_compute, [(q3, dict(_heads(q3), method=meth, precision="bf16", optimizer="adamw",
                                                         convention="mixed-fp32-master", recompute=rc,
                                                         attention="sdpa", activation_style="hf", lora_rank=16,
                                                         seq=2048, micro_batch=1, gpu="a100-80gb"))
                                               for meth in ("full", "lora") for rc in ("none", "selective", "full")])
    spec = vl.get_model("olmo-2-7b")
    runs = [(spec, dict(_heads(spec), method="lora", precision="bf16", optimizer="adamw", convention="mixed-fp32-master",
                        recompute="none", attention="sdpa", activation_style=style, lora_rank=16, seq=2048,
                        micro_batch=1, gpu="a100-80gb")) for style in ("hf", "megatron")]
    _same_panel("training", training_compute, runs)
    with pytest.raises(vl.VramlibError, match="one uniform layer"):
        training_compute(spec, **runs[0][1])


def test_offload_is_one_split():
    """The static offload calculator (the compiled layer_weights_of, llamacpp_buffers, llamacpp_split,
    most_gpu_layers, decode_kv_read, decode_rate, offload_core, offload_verdict, gpu_budget_of) gives Python's GPU
    buffers, budget and verdict: -ngl auto and fixed, --cpu-moe, flash attention off, quantized caches, refusals."""
    from vramlib.present.widgets.offload import offload_compute

    settings = (("q4_k_m", "rtx-4090", "ddr5-5600-2ch", "64GB", 8192, "auto", False, True, "f16"),
                ("q5_k_m", "rtx-3090", "ddr4-3200-2ch", "32GB", 4096, 20, False, False, "f16"),
                ("q8_0", "l4", "ddr5-4800-8ch", "128GB", 32768, "auto", False, True, "q8_0"),
                ("q3_k_m", "t4", "ddr5-6000-2ch", "16GB", 2048, 0, False, True, "q4_0"),
                ("q4_k_m", "rtx-4090", "ddr5-5600-2ch", "64GB", 16384, "auto", True, True, "f16"),
                ("iq4_xs", "a100-40gb", "ddr5-4800-12ch", "256GB", 8192, 1, False, True, "f16"))
    specs = [vl.get_model(m) for m in ("llama-3.1-70b", "llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b",
                                       "mistral-7b", "deepseek-v3")]
    runs = [(spec, dict(_heads(spec), weights=w, gpu=g, host=h, host_ram=r, n_ctx=c, n_gpu_layers=n, cpu_moe=moe,
                        flash_attn=fa, type_k=k)) for spec in specs for w, g, h, r, c, n, moe, fa, k in settings]
    assert _same_panel("offload", offload_compute, runs) == 36
    ok = 0
    for spec, kw in runs:
        try:
            offload_compute(spec, **kw)
            ok += 1
        except vl.VramlibError:
            pass
    assert 12 < ok < 36        # refusals (no experts for --cpu-moe, MLA) are compared too
