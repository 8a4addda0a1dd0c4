/* vramlib/web/js/parallel.js -- the pipeline calculators (chapters 11, 12) and the plan model every training panel uses.
 * The rules are not written here: a plan's stages (VL.py.plan_stages), its activations, its label, the largest module
 * and the pipeline balancer (VL.py.layer_costs, VL.py.balanced_layers) are vramlib's @portable Python functions compiled
 * to JavaScript at build time (vramlib/web/portablegen.py), computing exactly with VL.Q. This file checks the inputs
 * (the messages of vramlib.plans.parallel), gathers what those functions read and draws the panels
 * (vramlib.present.widgets.parallel: plan_stages_compute, balance_stages_compute). */
(function () {
  var F = VL.formulas, D = VL.data, C = VL.data.constants, DP = VL.data.parallel, DF = VL.data.defaults, PY = VL.py;
  var Q = VL.Q;

  /* ---- the plan (parallel.ParallelPlan) ---- */
  VL.parallelPlan = function (o) {
    var plan = Object.assign({}, DF["parallel.ParallelPlan"], o);
    ["tp", "pp", "dp", "ep", "micro_batch", "n_micro", "virtual_stages"].forEach(function (k) {
      plan[k] = VL.checkPositiveInt(k, plan[k]);
    });
    if (DP.ZERO_STAGES.indexOf(plan.zero) < 0) { throw VL.invalid("zero", plan.zero, "ZeRO stage must be 0, 1, 2 or 3"); }
    if (typeof plan.sequence_parallel !== "boolean") {
      throw VL.invalid("sequence_parallel", plan.sequence_parallel, "must be True or False");
    }
    plan.recompute = VL.checkChoice("recompute", plan.recompute, C.RECOMPUTE);
    plan.schedule = VL.checkChoice("schedule", plan.schedule, DP.SCHEDULES);
    plan.offload_optimizer = VL.checkChoice("offload_optimizer", plan.offload_optimizer, DP.OFFLOAD);
    plan.offload_params = VL.checkChoice("offload_params", plan.offload_params, DP.OFFLOAD);
    VL.raiseProblem(PY.plan_problem(plan));
    plan.n_gpus = plan.tp * plan.pp * plan.dp;
    plan.global_batch = plan.micro_batch * plan.n_micro * plan.dp;
    return plan;
  };

  VL.checkLayout = function (m, plan) { VL.raiseProblem(PY.layout_problem(m, plan)); };  /* parallel.check_layout */
  VL.evenSplit = function (n, pp) { return PY.even_layers(n, pp); };

  function stageLayers(m, pp, layers) {
    pp = VL.checkPositiveInt("pp", pp);
    if (pp > m.spec.n_layers) { throw VL.invalid("pp", pp, "at most one stage per layer: pp <= " + m.spec.n_layers); }
    if (!layers) { return VL.evenSplit(m.spec.n_layers, pp); }
    layers.forEach(function (x) { VL.checkPositiveInt("stage_layers", x, true); });
    if (layers.length !== pp || VL.sum(layers) !== m.spec.n_layers) {
      throw VL.invalid("stage_layers", "(" + layers.join(", ") + ")", "give " + pp + " layer counts summing to " + m.spec.n_layers);
    }
    return layers.slice();
  }

  function convBytes(convention, precision, zero) { /* parallel._conv_bytes, exported as a table */
    var conv = VL.checkChoice("convention", convention, Object.keys(DP.CONV_BYTES));
    var prec = VL.getPrecision(precision, "precision");
    if (!Object.prototype.hasOwnProperty.call(DP.CONV_BYTES[conv], prec.name)) {
      throw VL.invalid("precision", precision, "training computes in " + Object.keys(DP.CONV_BYTES[conv]).join(", ").replace(/, ([^,]*)$/, " or $1"));
    }
    return DP.CONV_BYTES[conv][prec.name][zero];
  }

  function activationStyle(m, plan, style) { /* training.resolve_activation_style */
    style = VL.checkChoice("activation_style", style, ["auto"].concat(C.ACTIVATION_STYLES));
    var got = PY.activation_style_for(m.spec, style, plan.tp === 1 && plan.pp === 1);
    VL.raiseProblem(got[1]);
    return got[0];
  }

  function moeFlags(m) { var out = []; for (var j = 0; j < m.spec.n_layers; j++) { out.push(m.spec.n_experts > 0); } return out; }

  /* parallel.plan_memory (moe_layers=None): the inputs checked and resolved as plan_memory does, the stages from
   * VL.py.plan_stages, each component rounded up once as vramlib does. */
  VL.planMemory = function (m, plan, seq, o) {
    o = Object.assign({}, DF["parallel.plan_memory"], o || {});
    seq = VL.checkPositiveInt("seq", seq);
    if (typeof o.overlap_comm !== "boolean") { throw VL.invalid("overlap_comm", o.overlap_comm, "must be True or False"); }
    var method = VL.checkChoice("method", o.method, C.METHODS);
    VL.checkLayout(m, plan);
    var style = activationStyle(m, plan, o.activation_style);
    VL.checkChoice("attention", o.attention, C.ATTENTION);
    if (method !== "full" && (plan.tp > 1 || plan.pp > 1)) {
      throw VL.invalid("method", method, "LoRA/QLoRA plans are modelled with tp=1 and pp=1 (data parallel + ZeRO)");
    }
    var layers = stageLayers(m, plan.pp, o.stage_layers);
    if (o.base_weights !== null && o.base_weights !== undefined) { VL.getPrecision(o.base_weights, "base_weights"); }
    var cb = convBytes(o.convention, o.precision, plan.zero);
    var prec = VL.getPrecision(o.precision, "precision").name;
    var g = o.gather_buffer;
    var setup = { layers: layers, moe: moeFlags(m), method: method, cb: cb, base: [], base_label: "", n_trainable: 0,
      buckets: VL.checkChoice("buckets", o.buckets, DP.BUCKETS), overlap_comm: o.overlap_comm,
      reserve: VL.parseMemory(o.reserve, "reserve"), convention: o.convention,
      gather: g === null || g === undefined ? cb.gather : (g ? DP.GATHER_BYTES_PER_PARAM : 0) };
    setup.acts = style === "hf" ? [VL.activationBytes(m, { seq: seq, batch: plan.micro_batch, dtype: prec,
      attention: o.attention, recompute: plan.recompute, style: "hf", scope: "model" })]
      : PY.megatron_stage_activations(m, plan, seq, layers);
    var width = PY.state_width(D.conventions[o.convention], prec);
    if (method === "full") {
      setup.b_o = Q(VL.optimizerStateBytes(m, o.optimizer, null, null, undefined, width), VL.weightParams(m));
    } else {
      setup.base_label = o.base_weights || (method === "qlora" ? "nf4-dq" : prec);
      setup.base = VL.weightsDetail(m, setup.base_label);
      setup.n_trainable = VL.loraParams(m, o.lora_rank, o.lora_targets);
      setup.b_o = Q(VL.optimizerStateBytes(m, o.optimizer, null, o.lora_rank, o.lora_targets, width), setup.n_trainable);
    }
    var ints = function (list) { return list.map(function (p) { return [p[0], Q.ceil(p[1])]; }); };
    var st = PY.plan_stages(m, plan, setup);
    var peak = VL.checkChoice("peak", o.peak, C.PEAKS), impl = o.optimizer_impl === undefined ? null : o.optimizer_impl;
    var problem = peak === "step" ? stepProblem(m, plan, o, style, method, cb, setup, impl) : null;
    var gpuStages = st.map(function (x) {
      return new VL.Breakdown(ints(x.gpu), peak === "step" ? x.title + " (sum of parts)" : x.title);
    });
    if (peak === "step" && !problem) { gpuStages = [stepStage(m, plan, seq, o, prec, setup, width, impl, st[0].title)]; }
    var totals = gpuStages.map(function (bd) { return bd.total; });
    var peakStage = totals.indexOf(Math.max.apply(null, totals));
    return { plan: plan, stage_layers: layers, stages: gpuStages,
      host: st.map(function (x) { return new VL.Breakdown(ints(x.host), x.host_title); }),
      nvme: st.map(function (x) { return Q.ceil(x.nvme); }),
      peak_stage: peakStage, peak: gpuStages[peakStage], total: totals[peakStage], spread: spreadOf(totals).value };
  };

  /* parallel._fsdp_problem: why FSDP2's phases do not price the plan, or null (an unknown implementation refuses) */
  function stepProblem(m, plan, o, style, method, cb, setup, impl) {
    if (impl !== null) {
      VL.raiseProblem(PY.impl_problem(o.optimizer, impl));
      VL.checkChoice("optimizer_impl", impl, VL.shared.STEP_IMPLS[o.optimizer]);
    }
    var g = o.gather_buffer === undefined ? null : o.gather_buffer;
    return PY.fsdp_problem(m.spec, plan, { style: style, method: method, optimizer: o.optimizer,
      recompute: plan.recompute, buckets: setup.buckets, gather_buffer: g, b_w: cb.b_w, b_g: cb.b_g, b_m: cb.b_m });
  }

  /* parallel._fsdp_stage: the one stage priced by FSDP2's phases (VL.py.plan_step_stage) */
  function stepStage(m, plan, seq, o, prec, setup, width, impl, title) {
    var acts = function (scope) {
      return VL.activationBytes(m, { seq: seq, batch: plan.micro_batch, dtype: prec, attention: o.attention,
        recompute: plan.recompute, style: "hf", scope: scope });
    };
    impl = PY.resolve_impl(o.optimizer, impl);        /* step.resolve_impl: the optimizer's default */
    var st = { act: acts("end-of-forward"), rerun: acts("rerun"), a_head: acts("loss-head"),
      a_done: acts("layer-freed"), batch: plan.micro_batch, seq: seq, b_a: VL.activationDtypeBytes(prec), impl: impl,
      width: width };
    var res = PY.plan_step_stage(m, VL.groupsDict(VL.paramGroups(m)), plan,
      Object.assign({}, setup, { optimizer: o.optimizer }), st);
    var bd = new VL.Breakdown(res[0], PY.fsdp_title(title, impl, res[2]));   /* whole bytes already */
    bd.phases = res[1];
    bd.peak_phase = res[2];
    return bd;
  }

  function spreadOf(totals) { return { value: Q.num(PY.spread_q(totals)) }; }  /* parallel.spread_q */
  /* planning.balance_verdict (planning.balance_words, the thresholds exported as exact fractions) */
  VL.balanceVerdict = function (totals, capacity) {
    var B = D.planning.BALANCE, lim = function (f, x) { return [f[0], f[1], x]; }, df = DF["planning.balance_verdict"];
    return PY.balance_words(totals, capacity === undefined ? null : capacity,
      [lim(B.peak_share, df.peak_share), lim(B.good_spread, df.good_spread), lim(B.ok_spread, df.ok_spread)]);
  };

  /* planning.balance_pipeline: the even split, then VL.py.balanced_layers (the exact DP over the stage boundaries),
   * the stages computed again by the plan model */
  VL.balancePipeline = function (m, plan, seq, capacity, o) {
    VL.checkLayout(m, plan);
    if (plan.virtual_stages > 1) {
      throw VL.invalid("virtual_stages", plan.virtual_stages, "the balancer splits contiguous stages (no interleaving)");
    }
    var pp = plan.pp, df = DF["planning.balance_pipeline"];
    var common = Object.assign({ convention: df.convention, precision: df.precision, optimizer: df.optimizer }, o,
      { activation_style: "megatron" });
    var even = VL.planMemory(m, plan, seq, common);
    var tot = function (pm) { return pm.stages.map(function (bd) { return bd.total; }); };
    var out = function (bal) {
      return { layers: bal.stage_layers, stages: bal.stages, even_layers: even.stage_layers, even_stages: even.stages,
        peak: bal.total, even_peak: even.total, verdict: VL.balanceVerdict(tot(bal), capacity),
        even_verdict: VL.balanceVerdict(tot(even), capacity) };
    };
    if (pp === 1) { return out(even); }
    var cb = convBytes(common.convention, common.precision, plan.zero);
    var bO = Q(VL.optimizerStateBytes(m, common.optimizer, null, null, undefined,
      PY.state_width(D.conventions[common.convention], VL.getPrecision(common.precision, "precision").name)), VL.weightParams(m));
    var lc = PY.layer_costs(m, plan, seq, cb, bO, moeFlags(m)), flights = [];
    for (var i = 0; i < pp; i++) { flights.push(Q.num(PY.in_flight_q(pp, i, plan.n_micro, plan.schedule, 1))); }
    var layers = PY.balanced_layers(tot(even), even.stage_layers, lc[0], lc[1], flights);
    var bal = VL.planMemory(m, plan, seq, Object.assign({}, common, { stage_layers: layers }));
    if (bal.total > even.total) { bal = even; }
    return out(bal);
  };

  function listRepr(xs) { return "[" + xs.join(", ") + "]"; }
  function gb1(n) { return VL.toFixed(VL.gb(n), 1); }

  /* widgets.parallel._model and _plan */
  function panelModel(a) {
    var m = VL.model(a.model);
    if ((a.n_heads !== undefined && a.n_heads !== null) || (a.n_kv_heads !== undefined && a.n_kv_heads !== null)) {
      m = VL.withHeads(m, a.n_heads || m.spec.n_heads, a.n_kv_heads || m.spec.n_kv_heads);
    }
    return m;
  }
  function dflt(x, d) { return x === undefined || x === null ? d : x; }
  function panelPlan(a, offload, df) { /* df: the panel function's defaults */
    var tp = dflt(a.tp, df.tp);
    return VL.parallelPlan({ tp: tp, pp: dflt(a.pp, df.pp), dp: dflt(a.dp, df.dp), zero: Number(dflt(a.zero, df.zero)),
      recompute: dflt(a.recompute, df.recompute), micro_batch: dflt(a.micro_batch, df.micro_batch),
      n_micro: dflt(a.n_micro, df.n_micro), sequence_parallel: !!a.sequence_parallel && tp > 1,
      offload_optimizer: offload ? dflt(a.offload_optimizer, df.offload_optimizer) : "none",
      offload_params: offload ? dflt(a.offload_params, df.offload_params) : "none",
      virtual_stages: dflt(a.virtual_stages, df.virtual_stages), schedule: dflt(a.schedule, df.schedule) });
  }

  /* widgets.parallel._verdict (widgets.parallel.plan_verdict of the plan's view) */
  VL.planVerdict = function (pm, cap) {
    var tot = function (list) { return list.map(function (bd) { return bd.total; }); };
    return PY.plan_verdict({ total: pm.total, peak_stage: pm.peak_stage, stage_totals: tot(pm.stages), spread: pm.spread,
      host_totals: tot(pm.host), nvme: pm.nvme, n_gpus: pm.plan.n_gpus, global_batch: pm.plan.global_batch }, cap);
  };

  /* widgets.parallel.plan_stages_compute */
  VL.register("plan_stages", function (a) {
    var df = DF["widgets.parallel.plan_memory_compute"];
    var card = VL.getGpu(a.gpu), m = panelModel(a), plan = panelPlan(a, true, df);
    var pm = VL.planMemory(m, plan, dflt(a.seq, df.seq), { method: dflt(a.method, df.method),
      convention: dflt(a.convention, df.convention), precision: dflt(a.precision, df.precision) });
    return [pm.stages, card.memory_bytes, VL.planVerdict(pm, card.memory_bytes)];
  });

  /* widgets.parallel.balance_stages_compute */
  VL.register("balance_stages", function (a) {
    var df = DF["widgets.parallel.balance_stages_compute"], m = panelModel(a), card = VL.getGpu(a.gpu);
    var o = { convention: dflt(a.convention, df.convention), precision: dflt(a.precision, df.precision) };
    var plan = panelPlan(a, false, df), seq = dflt(a.seq, df.seq);
    if (plan.virtual_stages > 1) {
      var pm = VL.planMemory(m, plan, seq, Object.assign({ activation_style: "megatron" }, o));
      return [pm.stages, card.memory_bytes, "Interleaved 1F1B, " + plan.virtual_stages + " model chunks per GPU (the " +
        "balancer splits contiguous stages only): even split " + listRepr(pm.stage_layers) + ", peak " + gb1(pm.total) +
        " GB, " + VL.balanceVerdict(pm.stages.map(function (bd) { return bd.total; }), card.memory_bytes) + "."];
    }
    var res = VL.balancePipeline(m, plan, seq, card.memory_bytes, o);
    var balanced = a.balanced === undefined ? df.balanced : a.balanced;
    return [balanced ? res.stages : res.even_stages, card.memory_bytes, "Balanced split " + listRepr(res.layers) +
      ": peak " + gb1(res.peak) + " GB, " + res.verdict + ". Even split " + listRepr(res.even_layers) + ": peak " +
      gb1(res.even_peak) + " GB, " + res.even_verdict + "."];
  });
})();
