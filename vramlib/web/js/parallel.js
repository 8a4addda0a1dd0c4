/* vramlib/web/js/parallel.js -- the pipeline calculators (chapters 11, 12) and pieces of vramlib.plans.parallel others need.
 * Mirrors vramlib.plans.parallel (largest_module_params, ParallelPlan, check_layout, stage_params, in_flight,
 * plan_memory: the one plan model of the browser, fine-tuning and the recommender included), vramlib.solve.planning (balance_verdict, balance_pipeline: the exact dynamic programme
 * over stage boundaries) and vramlib.present.widgets.parallel (plan_stages_compute, balance_stages_compute).
 * Every count comes from a generated VL.parallel / VL.formulas / VL.activations function. */
(function () {
  var P = VL.parallel, F = VL.formulas, A = VL.activations, D = VL.data, C = VL.data.constants, DP = VL.data.parallel;
  var DF = VL.data.defaults;
  /* parallel.ZERO_STAGE_FLAGS: stage k shards optimizer states (z_os), gradients (z_g), weights (z_p) */
  var FLAGS = DP.ZERO_STAGE_FLAGS;

  /* parallel.largest_module_params */
  VL.largestModuleParams = function (m, tp, ep, stage) {
    tp = tp === undefined ? 1 : tp;
    ep = ep === undefined ? 1 : ep;
    stage = VL.checkChoice("stage", stage === undefined ? "all" : stage, ["all", "first", "middle", "last", "single"]);
    var vals = Object.assign({}, m.sym, { t: tp, N_e: ep }), moe = m.spec.n_experts > 0, cands = [];
    m.linear_modules.forEach(function (name) {
      if (!Object.prototype.hasOwnProperty.call(P.MODULE_PARAMS, name)) { return; }
      if (["gate_proj", "up_proj", "gate_up_proj", "down_proj"].indexOf(name) >= 0 && moe) { return; }
      cands.push(P.MODULE_PARAMS[name](vals) / tp);
    });
    if (moe) {
      cands.push(P.MODULE_PARAMS.experts(vals) / (tp * ep));
      cands.push(P.MODULE_PARAMS.router(vals));
      if (m.spec.n_shared_experts) { cands.push(F.MLP_PARAMS(vals) * m.spec.n_shared_experts / tp); }
    }
    var emb = P.MODULE_PARAMS.embed_tokens(vals) / tp;
    if (["all", "first", "single"].indexOf(stage) >= 0) { cands.push(emb); }
    if (stage === "all" || stage === "last" || (stage === "single" && !m.spec.tied_embeddings)) { cands.push(emb); }
    return Math.max.apply(null, cands);
  };

  /* ---- exact rationals (BigInt): vramlib sums these states as Fractions and rounds up once (formulas.to_int_bytes);
   * a float sum can land a byte away, which would move the balancer's near-ties. Values of the generated
   * expressions whose denominator is known (a division by t, N_d ...) are read back exactly: round(x * D) / D. ---- */
  function gcd(a, b) { while (b) { var r = a % b; a = b; b = r; } return a < 0n ? -a : a; }
  function Q(n, d) {
    n = BigInt(n); d = d === undefined ? 1n : BigInt(d);
    if (d < 0n) { n = -n; d = -d; }
    var g = gcd(n, d) || 1n;
    return { n: n / g, d: d / g };
  }
  Q.of = function (x, D) {  /* a generated value known to be an integer / D */
    var y = Math.round(x * D);
    if (!Number.isSafeInteger(y)) { throw new Error("exact value out of range: " + x); }
    return Q(y, D);
  };
  Q.add = function (a, b) { return Q(a.n * b.d + b.n * a.d, a.d * b.d); };
  Q.mul = function (a, b) { return Q(a.n * b.n, a.d * b.d); };
  Q.sum = function (xs) { return xs.reduce(Q.add, Q(0)); };
  Q.ceil = function (a) {  /* formulas.to_int_bytes */
    var q = a.n / a.d;
    if (q * a.d !== a.n && a.n > 0n) { q += 1n; }
    return Number(q);
  };
  Q.num = function (a) {  /* float(Fraction): correctly rounded */
    if (a.n === 0n) { return 0; }
    var neg = a.n < 0n, n = neg ? -a.n : a.n, k = 64 - (n.toString(2).length - a.d.toString(2).length), q, r;
    if (k >= 0) { q = (n << BigInt(k)) / a.d; r = (n << BigInt(k)) - q * a.d; } else {
      var dd = a.d << BigInt(-k);
      q = n / dd; r = n - q * dd;
    }
    if (r !== 0n) { q |= 1n; }  /* sticky bit below the 53 kept */
    var x = Number(q) * Math.pow(2, -k);
    return neg ? -x : x;
  };
  Q.cmp = function (a, b) { var x = a.n * b.d - b.n * a.d; return x > 0n ? 1 : (x < 0n ? -1 : 0); };

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
    if (plan.dp % plan.ep) {
      throw VL.invalid("ep", plan.ep, "expert parallel ranks come from the data-parallel group: must divide dp=" + plan.dp);
    }
    if (plan.sequence_parallel && plan.tp === 1) {
      throw VL.invalid("sequence_parallel", true, "sequence parallelism splits along the tensor-parallel group: needs tp > 1");
    }
    if (plan.offload_optimizer !== "none" && plan.zero === 0) {
      throw VL.invalid("offload_optimizer", plan.offload_optimizer, "optimizer offload needs ZeRO stage 1, 2 or 3");
    }
    if (plan.offload_params !== "none" && !FLAGS[plan.zero].z_p) {
      throw VL.invalid("offload_params", plan.offload_params, "parameter offload needs ZeRO stage 3");
    }
    if (plan.virtual_stages > 1) {
      if (plan.pp === 1) { throw VL.invalid("virtual_stages", plan.virtual_stages, "interleaving needs pp > 1"); }
      if (plan.schedule !== "1f1b") {
        throw VL.invalid("schedule", plan.schedule, "interleaving (virtual_stages > 1) is a 1F1B schedule");
      }
      if (plan.n_micro % plan.pp) {
        throw VL.invalid("n_micro", plan.n_micro, "interleaved 1F1B needs a multiple of pp=" + plan.pp + " micro-batches");
      }
    }
    plan.n_gpus = plan.tp * plan.pp * plan.dp;
    plan.global_batch = plan.micro_batch * plan.n_micro * plan.dp;
    return plan;
  };

  VL.planLabel = function (plan) { /* ParallelPlan.label */
    var parts = ["TP" + plan.tp, "PP" + plan.pp, "DP" + plan.dp, "ZeRO-" + plan.zero];
    if (plan.ep > 1) { parts.push("EP" + plan.ep); }
    if (plan.sequence_parallel) { parts.push("SP"); }
    if (plan.virtual_stages > 1) { parts.push("v" + plan.virtual_stages); }
    parts.push("mb" + plan.micro_batch + "x" + plan.n_micro);
    if (plan.recompute !== "none") { parts.push(plan.recompute + " recompute"); }
    if (plan.offload_optimizer !== "none") { parts.push("opt->" + plan.offload_optimizer); }
    if (plan.offload_params !== "none") { parts.push("params->" + plan.offload_params); }
    return parts.join(" ");
  };

  /* parallel.check_layout */
  VL.checkLayout = function (m, plan) {
    var s = m.spec;
    VL.checkTp("tp", plan.tp, m.name, s.n_heads, s.n_kv_heads);
    if (plan.pp > s.n_layers) { throw VL.invalid("pp", plan.pp, "at most one stage per layer: pp <= " + s.n_layers); }
    if (plan.virtual_stages > 1 && s.n_layers % (plan.pp * plan.virtual_stages)) {
      throw VL.invalid("virtual_stages", plan.virtual_stages,
        "interleaving needs n_layers=" + s.n_layers + " divisible by pp x virtual_stages");
    }
    if (plan.ep > 1 && (!(s.n_experts > 0) || s.n_experts % plan.ep)) {
      throw VL.invalid("ep", plan.ep, "must divide the experts of a MoE model (" + s.name + ": " + s.n_experts + ")");
    }
  };

  VL.evenSplit = function (n, pp) {
    var q = Math.floor(n / pp), r = n % pp, out = [];
    for (var k = 0; k < pp; k++) { out.push(q + (k < r ? 1 : 0)); }
    return out;
  };

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

  /* parallel.in_flight */
  VL.inFlight = function (pp, stage, nMicro, schedule, v) {
    var key = schedule === "gpipe" ? "gpipe" : (v > 1 ? "interleaved" : "1f1b");
    return P.IN_FLIGHT[key]({ p: pp, i: stage, m: nMicro, v: v });
  };

  function scaleQ(m) { /* parallel._scale: nominal / exact parameters */
    return m.spec.nominal_params !== null && m.spec.nominal_params !== undefined ? Q(m.spec.nominal_params, VL.nParams(m)) : Q(1);
  }

  /* one layer's (non-expert, expert) parameters on one rank, exact (LAYER_PARAMS_RANK_DENSE / _EXPERTS) */
  function layerParamsQ(m, tp, ep) {
    var vals = Object.assign({}, m.sym, { t: tp, N_e: ep }), moe = m.spec.n_experts > 0;
    var dense = moe ? P.LAYER_PARAMS_RANK_DENSE(vals)
      : P.LAYER_PARAMS_RANK_DENSE(Object.assign({}, vals, { E: 0, n_mlp: 1 + m.spec.n_shared_experts }));
    return [Q.of(dense, tp), moe ? Q.of(P.LAYER_PARAMS_RANK_EXPERTS(vals), tp * ep) : Q(0)];
  }

  /* parallel.stage_params for every layer dense or every layer MoE (moe_layers=None): exact [dense, expert] */
  VL.stageParamsQ = function (m, tp, pp, ep, layers) {
    var vals = Object.assign({}, m.sym, { t: tp, N_e: ep, z_one: pp === 1 ? 1 : 0 });
    var per = layerParamsQ(m, tp, ep), k = scaleQ(m);
    var first = Q.of(P.FIRST_STAGE_PARAMS(vals), tp), last = Q.of(P.LAST_STAGE_PARAMS(vals), tp);
    return layers.map(function (n, i) {
      var d = Q.mul(Q(n), per[0]);
      if (i === 0) { d = Q.add(d, first); }
      if (i === pp - 1) { d = Q.add(d, last); }
      return [Q.mul(d, k), Q.mul(Q.mul(Q(n), per[1]), k)];
    });
  };

  function convBytes(convention, precision, zero) { /* parallel._conv_bytes, exported as a table */
    var conv = VL.checkChoice("convention", convention, Object.keys(DP.CONV_BYTES));
    var prec = VL.getPrecision(precision, "precision");
    if (!Object.prototype.hasOwnProperty.call(DP.CONV_BYTES[conv], prec.name)) {
      throw VL.invalid("precision", precision, "training computes in " + Object.keys(DP.CONV_BYTES[conv]).join(", ").replace(/, ([^,]*)$/, " or $1"));
    }
    return DP.CONV_BYTES[conv][prec.name][zero];
  }

  /* ZERO_STATES[zero] evaluated exactly: [[name, Fraction]]. Each part is Psi (b_x + b_o) / N_d^z: read at Psi = 1
   * with b_o = 0 and with b_o = 1 (the b_x and the sharding exact over N_d), then scaled by Psi. */
  function zeroPartsQ(psi, dp, zero, cb, bO) {
    var base = Object.assign({ Psi: 1, N_d: dp, b_w: cb.b_w, b_g: cb.b_g, b_gh: cb.b_gh, b_m: cb.b_m, b_o: 0 }, FLAGS[zero]);
    var unit = Object.assign({}, base, { b_w: 0, b_g: 0, b_gh: 0, b_m: 0, b_o: 1 });
    return Object.keys(P.ZERO_PARTS).map(function (name) {
      var f = P.ZERO_PARTS[name], c = Q.add(Q.of(f(base), dp), Q.mul(Q.of(f(unit), dp), bO));
      return [name, Q.mul(psi, c)];
    });
  }

  function activationStyle(m, plan, style) { /* parallel._activation_style */
    style = VL.checkChoice("activation_style", style, ["auto"].concat(C.ACTIVATION_STYLES));
    var s = m.spec;
    var hfOk = C.HF_FAMILIES.indexOf(s.family) >= 0 && s.norm === "rmsnorm" && s.gated_mlp && !s.n_shared_experts;
    if (style === "auto") { return plan.tp === 1 && plan.pp === 1 && hfOk ? "hf" : "megatron"; }
    if (style === "hf" && (plan.tp > 1 || plan.pp > 1)) {
      throw VL.invalid("activation_style", "hf", "the hf accounting models one device per replica (HF Trainer with " +
        "DDP/ZeRO/FSDP): needs tp=1 and pp=1; use 'megatron'");
    }
    return style;
  }

  function megatronLayer(m, plan, seq) {
    var vals = Object.assign({}, m.sym, { s: seq, b: plan.micro_batch, t: plan.tp, z_sp: plan.sequence_parallel ? 1 : 0 });
    return { vals: vals, a: A.MEGATRON_LAYER_BY_RECOMPUTE[plan.recompute](vals) };
  }

  function stageActivations(m, plan, seq, layers, style, prec, attention) {
    if (style === "hf") {
      return [VL.activationBytes(m, { seq: seq, batch: plan.micro_batch, dtype: prec, attention: attention,
        recompute: plan.recompute, style: "hf", scope: "model" })];
    }
    var ml = megatronLayer(m, plan, seq);
    return layers.map(function (n, i) {
      var fl = VL.inFlight(plan.pp, i, plan.n_micro, plan.schedule, plan.virtual_stages);
      return VL.toIntBytes(P.STAGE_ACTIVATIONS(Object.assign({}, ml.vals, { F_i: fl, L_i: n, A_layer: ml.a,
        z_first: i === 0 ? 1 : 0, z_last: i === plan.pp - 1 ? 1 : 0 })));
    });
  }

  function buckets(rule, zero, tp, pp, gradBytes, overlap) { /* parallel._buckets: sizes from BUCKET_BYTES */
    rule = VL.checkChoice("buckets", rule, DP.BUCKETS);
    if (rule === "auto") { rule = zero === 0 ? (tp === 1 && pp === 1 ? "ddp" : "none") : "deepspeed"; }
    if (rule === "none") { return [rule, 0]; }
    if (rule === "ddp") { return [rule, Q.ceil(gradBytes)]; }
    var key = rule === "hf-rule" || !FLAGS[zero].z_p ? rule : "deepspeed-zero3";
    return [rule, VL.int(P.BUCKET_BYTES[key]({ z_ov: overlap ? 1 : 0 }))];
  }

  /* parallel.plan_memory (the convention's gather buffer): full, LoRA and QLoRA; optimizer offload to host or NVMe;
   * the communication buckets; host memory. Exact (Fractions), rounded up once per component as vramlib. */
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
    var acts = stageActivations(m, plan, seq, layers, style, prec, o.attention);
    var res = VL.parseMemory(o.reserve, "reserve");
    var perStage, bO, base, baseParts, k = scaleQ(m);
    if (method === "full") {
      perStage = VL.stageParamsQ(m, plan.tp, plan.pp, plan.ep, layers);
      bO = Q(VL.optimizerStateBytes(m, o.optimizer), VL.weightParams(m));
    } else {
      base = o.base_weights || (method === "qlora" ? "nf4-dq" : prec);
      baseParts = VL.weightsDetail(m, base);
      var nT = VL.loraParams(m, o.lora_rank, o.lora_targets);
      perStage = [[Q(nT), Q(0)]];
      bO = Q(VL.optimizerStateBytes(m, o.optimizer, null, o.lora_rank, o.lora_targets), nT);
    }
    var gpuStages = [], hostStages = [], nvmeStages = [];
    perStage.forEach(function (st, i) {
      var parts = zeroPartsQ(st[0], plan.dp, plan.zero, cb, bO);
      if (st[1].n !== 0n) {
        zeroPartsQ(st[1], Math.floor(plan.dp / plan.ep), plan.zero, cb, bO).forEach(function (p, j) {
          parts[j][1] = Q.add(parts[j][1], p[1]);
        });
      }
      var gpu = [], host = [], nvme = Q(0);
      if (method !== "full") {
        baseParts.forEach(function (bp) {
          gpu.push([bp[0] !== "weights" ? bp[0] : "base weights (" + base + ")", FLAGS[plan.zero].z_p ? Q(bp[1], plan.dp) : Q(bp[1])]);
        });
        parts = parts.map(function (p) { return [p[0] === "weights" ? "LoRA adapters" : p[0], p[1]]; });
      }
      parts.forEach(function (p) {
        var name = p[0], val = p[1];
        if (val.n === 0n) { return; }
        var isGrad = name.indexOf("gradients") >= 0, isWeight = name === "weights" || name === "LoRA adapters";
        var where = "gpu";
        if (isWeight && plan.offload_params !== "none") { where = plan.offload_params; }
        else if ((name === "master weights (fp32)" || name === "optimizer states") && plan.offload_optimizer !== "none") {
          where = plan.offload_optimizer;
        } else if (isGrad && plan.offload_optimizer !== "none" && plan.zero >= 2) { where = "cpu"; }
        if (where === "gpu") { gpu.push([name, val]); } else if (where === "cpu") { host.push([name, val]); } else { nvme = Q.add(nvme, val); }
      });
      if (FLAGS[plan.zero].z_p && cb.gather && method === "full") {
        var pos = plan.pp === 1 ? "single" : (i === 0 ? "first" : (i === plan.pp - 1 ? "last" : "middle"));
        var big = Q.of(VL.largestModuleParams(m, plan.tp, plan.ep, pos), plan.tp * plan.ep);
        gpu.push(["ZeRO-3 gather buffer", Q.mul(Q.mul(Q(cb.gather), big), k)]);
      }
      var gradOf = function (list) {
        return Q.sum(list.filter(function (p) { return p[0].indexOf("gradients") >= 0; }).map(function (p) { return p[1]; }));
      };
      var gg = gradOf(gpu);
      var b = buckets(o.buckets, plan.zero, plan.tp, plan.pp, gg.n !== 0n ? gg : gradOf(parts), o.overlap_comm);
      if (b[1]) { gpu.push(["communication buckets (" + b[0] + ")", Q(b[1])]); }
      gpu.push(["activations", Q(acts.length > 1 ? acts[i] : acts[0])]);
      gpu.push(["reserve (CUDA context, framework)", Q(res)]);
      var ints = function (list) { return list.map(function (p) { return [p[0], Q.ceil(p[1])]; }); };
      gpuStages.push(new VL.Breakdown(ints(gpu), m.name + ": " + VL.planLabel(plan) + ", stage " + i + " of " + plan.pp +
        " (" + layers[i] + " layers), " + method + ", " + o.convention));
      hostStages.push(new VL.Breakdown(ints(host), m.name + ": host memory per rank, stage " + i));
      nvmeStages.push(Q.ceil(nvme));
    });
    var totals = gpuStages.map(function (bd) { return bd.total; });
    var peakStage = totals.indexOf(Math.max.apply(null, totals));
    return { plan: plan, stage_layers: layers, stages: gpuStages, host: hostStages, nvme: nvmeStages,
      peak_stage: peakStage, peak: gpuStages[peakStage], total: totals[peakStage], spread: spreadOf(totals).value };
  };

  /* planning.spread and planning.balance_verdict (exact comparisons with the exported thresholds, as Fractions) */
  function spreadOf(totals) {
    var hi = Math.max.apply(null, totals), lo = Math.min.apply(null, totals);
    return { hi: hi, lo: lo, value: hi ? (hi - lo) / hi : 0 };
  }
  VL.balanceVerdict = function (totals, capacity) {
    var B = D.planning.BALANCE, pct = function (f) { return VL.toFixed(100 * f[0] / f[1], 0) + "%"; };
    var s = spreadOf(totals), hi = s.hi, parts = [], under = true;
    if (capacity !== null && capacity !== undefined) {
      under = B.peak_share[1] * hi <= B.peak_share[0] * capacity;
      parts.push("peak " + VL.toFixed(100 * (hi / capacity), 0) + "% of the card (" + (under ? "under" : "over") + " " +
        pct(B.peak_share) + ")");
    }
    var d = hi - s.lo;
    var word = B.good_spread[1] * d <= B.good_spread[0] * hi ? "balanced" :
      (B.ok_spread[1] * d <= B.ok_spread[0] * hi ? "acceptable" : "unbalanced");
    parts.push("spread " + VL.toFixed(100 * s.value, 1) + "%: " + word + " (source: under " + pct(B.good_spread) + "-" +
      pct(B.ok_spread) + ")");
    var ok = word !== "unbalanced" && under;
    return (ok ? "meets" : "fails") + " the source's criterion: " + parts.join("; ");
  };

  /* planning._layer_costs: per-layer model-state bytes of one rank (float of the exact value, as vramlib) and one
   * layer's activations for one micro-batch (megatron) */
  function layerCosts(m, plan, seq, cb, bO) {
    var per = layerParamsQ(m, plan.tp, plan.ep), k = scaleQ(m);
    var perBytes = function (dp) { return Q.sum(zeroPartsQ(Q(1), dp, plan.zero, cb, bO).map(function (p) { return p[1]; })); };
    var x = Q.num(Q.add(Q.mul(Q.mul(per[0], k), perBytes(plan.dp)),
      Q.mul(Q.mul(per[1], k), perBytes(Math.floor(plan.dp / plan.ep))))), states = [];
    for (var j = 0; j < m.spec.n_layers; j++) { states.push(x); }
    return { states: states, act: megatronLayer(m, plan, seq).a };
  }

  /* planning.balance_pipeline: the even split, then the exact DP over stage boundaries minimising the peak and,
   * among the optimal splits, maximising the smallest stage; the stages computed again by plan_memory */
  VL.balancePipeline = function (m, plan, seq, capacity, o) {
    VL.checkLayout(m, plan);
    if (plan.virtual_stages > 1) {
      throw VL.invalid("virtual_stages", plan.virtual_stages, "the balancer splits contiguous stages (no interleaving)");
    }
    var pp = plan.pp, common = Object.assign({}, o, { activation_style: "megatron" });
    var even = VL.planMemory(m, plan, seq, common);
    var out = function (bal) {
      var tot = function (pm) { return pm.stages.map(function (bd) { return bd.total; }); };
      return { layers: bal.stage_layers, stages: bal.stages, even_layers: even.stage_layers, even_stages: even.stages,
        peak: bal.total, even_peak: even.total, verdict: VL.balanceVerdict(tot(bal), capacity),
        even_verdict: VL.balanceVerdict(tot(even), capacity) };
    };
    if (pp === 1) { return out(even); }
    var cb = convBytes(common.convention, common.precision, plan.zero);
    var bO = Q(VL.optimizerStateBytes(m, common.optimizer || DF["parallel.plan_memory"].optimizer), VL.weightParams(m));
    var lc = layerCosts(m, plan, seq, cb, bO), act = lc.act, n = m.spec.n_layers, S = [0], i, a, b;
    for (i = 0; i < n; i++) { S.push(S[i] + lc.states[i]); }
    var flights = [], fixed = [];
    for (i = 0; i < pp; i++) { flights.push(VL.inFlight(pp, i, plan.n_micro, plan.schedule, 1)); }
    var start = 0;
    even.stages.forEach(function (bd, k) {
      var z = start + even.stage_layers[k];
      fixed.push(bd.total - (S[z] - S[start]) - flights[k] * act * (z - start));
      start = z;
    });
    var cost = function (k, x, y) { return fixed[k] + (S[y] - S[x]) + flights[k] * act * (y - x); };
    var best = [], arg = [], low = [], arg2 = [];
    for (b = 0; b <= n; b++) { best.push(b === 0 ? 0 : Infinity); }
    for (i = 0; i < pp; i++) {  /* np.argmin / np.min over a of max(best[a], cost) on a < b; first index on ties */
      var nb = [], ai = [];
      for (b = 0; b <= n; b++) {
        var bv = Infinity, ba = 0;
        for (a = 0; a <= n; a++) {
          var c = a < b ? Math.max(best[a], cost(i, a, b)) : Infinity;
          if (c < bv) { bv = c; ba = a; }
        }
        nb.push(bv);
        ai.push(ba);
      }
      arg.push(ai);
      best = nb;
    }
    var target = best[n] * (1 + 1e-12);
    for (b = 0; b <= n; b++) { low.push(b === 0 ? Infinity : -Infinity); }
    for (i = 0; i < pp; i++) {  /* among splits with peak <= target: maximise the smallest stage */
      var nl = [], ai2 = [];
      for (b = 0; b <= n; b++) {
        var lv = -Infinity, la = 0;
        for (a = 0; a <= n; a++) {
          var cc = cost(i, a, b);
          var c2 = (a < b && cc <= target) ? Math.min(low[a], cc) : -Infinity;
          if (c2 > lv) { lv = c2; la = a; }
        }
        nl.push(lv);
        ai2.push(la);
      }
      arg2.push(ai2);
      low = nl;
    }
    var bounds = [], z2 = n;
    for (i = pp - 1; i >= 0; i--) {
      a = isFinite(low[n]) ? arg2[i][z2] : arg[i][z2];
      bounds.push(z2 - a);
      z2 = a;
    }
    var bal = VL.planMemory(m, plan, seq, Object.assign({}, common, { stage_layers: bounds.reverse() }));
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

  /* widgets.parallel._verdict */
  VL.planVerdict = function (pm, cap) {
    var free = cap - pm.total;
    var head = free >= 0 ? "Fits on every GPU: " + VL.fmtBytes(free) + " free on the fullest (stage " + pm.peak_stage + ")."
      : "Does not fit: the fullest GPU (stage " + pm.peak_stage + ") is short by " + VL.fmtBytes(-free) + ".";
    if (pm.stages.length > 1) {
      head += " Stages: " + pm.stages.map(function (bd) { return gb1(bd.total); }).join(" / ") + " GB";
      head += " (spread " + VL.toFixed(100 * pm.spread, 0) + "%).";
    }
    var host = Math.max.apply(null, pm.host.map(function (bd) { return bd.total; }));
    if (host) { head += " Host memory per rank: " + VL.fmtBytes(host) + "."; }
    var nv = Math.max.apply(null, pm.nvme);
    if (nv) { head += " NVMe per rank: " + VL.fmtBytes(nv) + "."; }
    return head + " " + VL.commas(pm.plan.n_gpus) + " GPUs, global batch " + VL.commas(pm.plan.global_batch) + " sequences.";
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
