/* vramlib/js/finetune.js -- the fine-tuning plan calculator (chapters 3, 4): mirrors vramlib.parallel (ParallelPlan,
 * check_layout, stage_params, the stage activations, plan_memory), vramlib.widgets.parallel._verdict and
 * vramlib.widgets.finetune (finetune_plan, finetune_compute). Every size comes from a generated VL.parallel /
 * VL.formulas / VL.activations function; the training pieces (activations, LoRA, optimizer states, weights) are
 * the functions of training.js / inference.js / parallel.js, looked up when a calculator runs. Its plan model lives
 * in VL.ft (recommend.js uses it too): it covers what these panels need (full, LoRA and QLoRA, optimizer offload to
 * host or NVMe, communication buckets, host memory), so parallel.js's VL.planMemory can evolve on its own. */
(function () {
  var P = VL.parallel, A = VL.activations, D = VL.data, C = VL.data.constants;
  var FT = VL.ft = {};
  var has = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k); };

  /* parallel.ZERO_STAGE_FLAGS (stage -> z_os, z_g, z_p), BUCKETS and the DeepSpeed bucket defaults */
  var ZERO_FLAGS = { 0: { z_os: 0, z_g: 0, z_p: 0 }, 1: { z_os: 1, z_g: 0, z_p: 0 }, 2: { z_os: 1, z_g: 1, z_p: 0 },
    3: { z_os: 1, z_g: 1, z_p: 1 } };
  var BUCKETS = ["auto", "ddp", "deepspeed", "hf-rule", "none"];
  var DS_REDUCE = 500000000, DS_ALLGATHER = 500000000, DS_PREFETCH = 50000000;

  /* parallel.ParallelPlan, with the label the finetune verdict prints */
  FT.parallelPlan = function (o) {
    var p = VL.parallelPlan(o);   /* parallel.js: the same fields, defaults and checks as the Python class */
    p.label = function () { return VL.planLabel(p); };
    return p;
  };

  function isMoe(m) { return m.spec.n_experts > 0; }
  function scale(m) { return m.spec.nominal_params !== null ? m.spec.nominal_params / VL.nParams(m) : 1; }

  /* parallel.check_layout */
  FT.checkLayout = function (m, plan) { return VL.checkLayout(m, plan); };   /* parallel.js */

  /* parallel.even_split / _stage_layers (the even split) */
  FT.evenSplit = function (n, pp) {
    var q = Math.floor(n / pp), r = n % pp, out = [];
    for (var k = 0; k < pp; k++) { out.push(q + (k < r ? 1 : 0)); }
    return out;
  };

  /* parallel.stage_params: [non-expert, expert] parameters of one rank of each stage (the even split) */
  FT.stageParams = function (m, tp, pp, ep, layers) {
    var s = m.spec, vals = Object.assign({}, m.sym, { t: tp, N_e: ep, z_one: pp === 1 ? 1 : 0 });
    var denseVals = Object.assign({}, vals, { E: 0, n_mlp: 1 + s.n_shared_experts });
    var perMoe = [P.LAYER_PARAMS_RANK_DENSE(vals), P.LAYER_PARAMS_RANK_EXPERTS(vals)];
    var perDense = [P.LAYER_PARAMS_RANK_DENSE(denseVals), 0];
    var per = isMoe(m) ? perMoe : perDense;
    var first = P.FIRST_STAGE_PARAMS(vals), last = P.LAST_STAGE_PARAMS(vals), k = scale(m);
    return layers.map(function (n, i) {
      var dense = n * per[0] + (i === 0 ? first : 0) + (i === pp - 1 ? last : 0);
      return [dense * k, n * per[1] * k];
    });
  };

  function activationStyle(m, plan) { /* parallel._activation_style with "auto" */
    var s = m.spec;
    var hfOk = C.HF_FAMILIES.indexOf(s.family) >= 0 && s.norm === "rmsnorm" && s.gated_mlp && !s.n_shared_experts;
    return plan.tp === 1 && plan.pp === 1 && hfOk ? "hf" : "megatron";
  }

  function stageActivations(m, plan, seq, layers, style, prec, attention) { /* parallel._stage_activations */
    if (style === "hf") {
      return [VL.activationBytes(m, { seq: seq, batch: plan.micro_batch, dtype: prec, attention: attention,
        recompute: plan.recompute, style: "hf", scope: "model" })];
    }
    var vals = Object.assign({}, m.sym, { s: seq, b: plan.micro_batch, t: plan.tp, z_sp: plan.sequence_parallel ? 1 : 0 });
    var aLayer = A.MEGATRON_LAYER_BY_RECOMPUTE[plan.recompute](vals);
    var key = plan.schedule === "gpipe" ? "gpipe" : (plan.virtual_stages > 1 ? "interleaved" : "1f1b");
    return layers.map(function (n, i) {
      var fl = P.IN_FLIGHT[key]({ p: plan.pp, i: i, m: plan.n_micro, v: plan.virtual_stages });
      return VL.toIntBytes(P.STAGE_ACTIVATIONS(Object.assign({}, vals, { F_i: fl, L_i: n, A_layer: aLayer,
        z_first: i === 0 ? 1 : 0, z_last: i === plan.pp - 1 ? 1 : 0 })));
    });
  }

  function convBytes(convention, precision, zero) { /* parallel._conv_bytes */
    var conv = D.conventions[VL.checkChoice("convention", convention, Object.keys(D.conventions))];
    var prec = VL.getPrecision(precision, "precision");
    if (["bf16", "fp16", "fp32"].indexOf(prec.name) < 0) {
      throw VL.invalid("precision", precision, "training computes in bf16, fp16 or fp32");
    }
    if (prec.name === "fp32") { return { b_w: 4, b_g: 4, b_gh: 0, b_m: 0, gather: conv.gather_buffer_per_param ? 8 : 0 }; }
    return { b_w: conv.weight, b_g: conv.grad, b_gh: conv.name === "deepspeed" && zero === 2 ? 2 : 0, b_m: conv.master,
      gather: conv.gather_buffer_per_param };
  }

  function buckets(rule, zero, tp, pp, gradBytes, overlap) { /* parallel._buckets */
    rule = VL.checkChoice("buckets", rule, BUCKETS);
    if (rule === "auto") { rule = zero === 0 ? (tp === 1 && pp === 1 ? "ddp" : "none") : "deepspeed"; }
    if (rule === "none") { return [rule, 0]; }
    if (rule === "ddp") { return [rule, VL.toIntBytes(gradBytes)]; }
    if (rule === "hf-rule") { return [rule, 2 * (DS_REDUCE + DS_ALLGATHER) * (overlap ? 4.5 : 1)]; }
    if (zero === 3) { return [rule, 2 * (DS_REDUCE + DS_PREFETCH)]; }
    return [rule, 2 * DS_REDUCE * (overlap ? 2 : 1)];
  }

  /* parallel.plan_memory (the even split, every layer MoE for a MoE model, lora_targets "all-linear") */
  FT.planMemory = function (m, plan, seq, o) {
    o = Object.assign({ method: "full", precision: "bf16", optimizer: "adamw", convention: "mixed-fp32-master",
      attention: "sdpa", lora_rank: 16, lora_targets: "all-linear", base_weights: null, buckets: "auto",
      overlap_comm: false, reserve: C.DEFAULT_RESERVE }, o || {});
    seq = VL.checkPositiveInt("seq", seq);
    var method = VL.checkChoice("method", o.method, C.METHODS);
    FT.checkLayout(m, plan);
    var style = activationStyle(m, plan);
    VL.checkChoice("attention", o.attention, C.ATTENTION);
    if (method !== "full" && (plan.tp > 1 || plan.pp > 1)) {
      throw VL.invalid("method", method, "LoRA/QLoRA plans are modelled with tp=1 and pp=1 (data parallel + ZeRO)");
    }
    var layers = FT.evenSplit(m.spec.n_layers, VL.checkPositiveInt("pp", plan.pp));
    var cb = convBytes(o.convention, o.precision, plan.zero);
    var prec = VL.getPrecision(o.precision, "precision").name;
    var acts = stageActivations(m, plan, seq, layers, style, prec, o.attention);
    var res = VL.parseMemory(o.reserve, "reserve");
    var names = Object.keys(P.ZERO_PARTS);
    function states(n, dp, bO) {
      var vals = Object.assign({ Psi: n, N_d: dp, b_o: bO, b_w: cb.b_w, b_g: cb.b_g, b_gh: cb.b_gh, b_m: cb.b_m },
        ZERO_FLAGS[plan.zero]);
      return names.map(function (k) { return [k, P.ZERO_PARTS[k](vals)]; });
    }
    var perStage, bO, base, baseParts, nT;
    if (method === "full") {
      perStage = FT.stageParams(m, plan.tp, plan.pp, plan.ep, layers);
      bO = VL.optimizerStateBytes(m, o.optimizer) / VL.weightParams(m);
    } else {
      base = o.base_weights || (method === "qlora" ? "nf4-dq" : prec);
      baseParts = VL.weightsDetail(m, base);
      nT = VL.loraParams(m, o.lora_rank, o.lora_targets);
      perStage = [[nT, 0]];
      bO = VL.optimizerStateBytes(m, o.optimizer, null, o.lora_rank, o.lora_targets) / nT;
    }
    var stages = [], host = [], nvmes = [];
    perStage.forEach(function (ps, i) {
      var parts = states(ps[0], plan.dp, bO);
      if (ps[1]) {
        states(ps[1], Math.floor(plan.dp / plan.ep), bO).forEach(function (x, j) { parts[j][1] += x[1]; });
      }
      var gpu = [], hostParts = [], nvme = 0;
      if (method !== "full") {
        baseParts.forEach(function (bp) {
          gpu.push([bp[0] !== "weights" ? bp[0] : "base weights (" + base + ")", plan.zero === 3 ? bp[1] / plan.dp : bp[1]]);
        });
        parts = parts.map(function (x) { return [x[0] === "weights" ? "LoRA adapters" : x[0], x[1]]; });
      }
      parts.forEach(function (x) {
        var name = x[0], val = x[1];
        if (!val) { return; }
        var isGrad = name.indexOf("gradients") >= 0, isWeight = name === "weights" || name === "LoRA adapters";
        var where = "gpu";
        if (isWeight && plan.offload_params !== "none") {
          where = plan.offload_params;
        } else if ((name === "master weights (fp32)" || name === "optimizer states") && plan.offload_optimizer !== "none") {
          where = plan.offload_optimizer;
        } else if (isGrad && plan.offload_optimizer !== "none" && plan.zero >= 2) {
          where = "cpu";
        }
        if (where === "gpu") { gpu.push([name, val]); } else if (where === "cpu") { hostParts.push([name, val]); } else { nvme += val; }
      });
      if (plan.zero === 3 && cb.gather && method === "full") {
        var pos = plan.pp === 1 ? "single" : (i === 0 ? "first" : (i === plan.pp - 1 ? "last" : "middle"));
        gpu.push(["ZeRO-3 gather buffer", cb.gather * VL.largestModuleParams(m, plan.tp, plan.ep, pos) * scale(m)]);
      }
      var gradSum = function (xs) {
        return VL.sum(xs.filter(function (x) { return x[0].indexOf("gradients") >= 0; }).map(function (x) { return x[1]; }));
      };
      var gradGpu = gradSum(gpu), gradAll = gradSum(parts);
      var bk = buckets(o.buckets, plan.zero, plan.tp, plan.pp, gradGpu || gradAll, o.overlap_comm);
      if (bk[1]) { gpu.push(["communication buckets (" + bk[0] + ")", bk[1]]); }
      gpu.push(["activations", acts.length > 1 ? acts[i] : acts[0]]);
      gpu.push(["reserve (CUDA context, framework)", res]);
      var toInt = function (xs) { return xs.map(function (x) { return [x[0], VL.toIntBytes(x[1])]; }); };
      stages.push(new VL.Breakdown(toInt(gpu), m.name + ": " + plan.label() + ", stage " + i + " of " + plan.pp + " (" +
        layers[i] + " layers), " + method + ", " + o.convention));
      host.push(new VL.Breakdown(toInt(hostParts), m.name + ": host memory per rank, stage " + i));
      nvmes.push(VL.toIntBytes(nvme));
    });
    var totals = stages.map(function (bd) { return bd.total; }), mx = Math.max.apply(null, totals);
    var peakStage = totals.indexOf(mx), mn = Math.min.apply(null, totals);
    return { plan: plan, stage_layers: layers, stages: stages, host: host, nvme: nvmes, peak_stage: peakStage,
      peak: stages[peakStage], total: mx, spread: mx ? (mx - mn) / mx : 0 };
  };

  /* widgets.parallel._verdict */
  FT.planVerdict = function (pm, cap) {
    var free = cap - pm.total;
    var head = free >= 0 ? "Fits on every GPU: " + VL.fmtBytes(free) + " free on the fullest (stage " + pm.peak_stage + ")."
      : "Does not fit: the fullest GPU (stage " + pm.peak_stage + ") is short by " + VL.fmtBytes(-free) + ".";
    if (pm.stages.length > 1) {
      head += " Stages: " + pm.stages.map(function (bd) { return VL.toFixed(VL.gb(bd.total), 1); }).join(" / ") + " GB";
      head += " (spread " + VL.toFixed(100 * pm.spread, 0) + "%).";
    }
    var hostMax = Math.max.apply(null, pm.host.map(function (bd) { return bd.total; }));
    if (hostMax) { head += " Host memory per rank: " + VL.fmtBytes(hostMax) + "."; }
    var nvmeMax = Math.max.apply(null, pm.nvme);
    if (nvmeMax) { head += " NVMe per rank: " + VL.fmtBytes(nvmeMax) + "."; }
    return head + " " + VL.commas(pm.plan.n_gpus) + " GPUs, global batch " + VL.commas(pm.plan.global_batch) + " sequences.";
  };

  /* hardware.GPU.supports_flash_attention_2 (the catalogue exports supports_bf16 only) */
  FT.supportsFlashAttention2 = function (card) {
    if (has(card, "supports_flash_attention_2")) { return card.supports_flash_attention_2; }
    if (card.vendor === "amd") { return ["gfx90a", "gfx942"].indexOf(card.compute_capability) >= 0; }
    return Number(String(card.compute_capability).split(".")[0]) >= 8;
  };

  var FT_DEFAULTS = { n_heads: null, n_kv_heads: null, precision: "bf16", method: "full", lora_rank: 16,
    optimizer: "adamw", convention: "mixed-fp32-master", zero: 3, dp: 8, tp: 1, pp: 1, n_micro: 1, recompute: "none",
    attention: "sdpa", seq: 2048, micro_batch: 1, offload_optimizer: "none", sequence_parallel: false,
    reserve: C.DEFAULT_RESERVE };

  /* widgets.finetune.finetune_plan */
  FT.finetunePlan = function (model, gpu, values) {
    VL.getGpu(gpu);
    var a = Object.assign({}, FT_DEFAULTS);
    Object.keys(values).forEach(function (k) { if (values[k] !== undefined) { a[k] = values[k]; } });
    var m = VL.model(model);
    if (a.n_heads !== null || a.n_kv_heads !== null) {
      m = VL.withHeads(m, a.n_heads || m.spec.n_heads, a.n_kv_heads || m.spec.n_kv_heads);
    }
    var plan = FT.parallelPlan({ tp: a.tp, pp: a.pp, dp: a.dp, zero: Math.trunc(a.zero), recompute: a.recompute,
      micro_batch: a.micro_batch, n_micro: a.n_micro, sequence_parallel: !!a.sequence_parallel && a.tp > 1,
      offload_optimizer: a.offload_optimizer });
    return FT.planMemory(m, plan, a.seq, { method: a.method, precision: a.precision, optimizer: a.optimizer,
      convention: a.convention, attention: a.attention, lora_rank: a.lora_rank, reserve: a.reserve });
  };

  function cardNotes(gpu, precision, attention) { /* widgets.finetune._card_notes */
    var card = VL.getGpu(gpu), out = [];
    if (precision === "bf16" && !card.supports_bf16) {
      out.push(card.key + " has no bf16: use fp16 with loss scaling (same bytes)");
    }
    if (attention === "flash" && !FT.supportsFlashAttention2(card)) {
      out.push(card.key + " has no FlashAttention-2: 'sdpa' (memory-efficient kernel) keeps the same tensors");
    }
    return out.length ? " " + out.join("; ") + "." : "";
  }

  /* widgets.finetune.finetune_compute */
  VL.register("finetune", function (a) {
    var values = Object.assign({}, a);
    var model = values.model, gpu = values.gpu, compare = !!values.compare_zero;
    delete values.model; delete values.gpu; delete values.compare_zero;
    var card = VL.getGpu(gpu);
    var pm = FT.finetunePlan(model, gpu, values);
    var precision = values.precision === undefined ? "bf16" : values.precision;
    var attention = values.attention === undefined ? "sdpa" : values.attention;
    var verdict = FT.planVerdict(pm, card.memory_bytes) + cardNotes(gpu, precision, attention);
    if (compare) {
      var chosen = Math.trunc(values.zero === undefined ? 3 : values.zero), bits = [];
      [0, 1, 2, 3].forEach(function (z) {
        var pz;
        try {
          pz = FT.finetunePlan(model, gpu, Object.assign({}, values, { zero: z }));
        } catch (e) {
          if (!(e instanceof VL.VramlibError)) { throw e; }
          bits.push("ZeRO-" + z + ": " + e.message);
          return;
        }
        bits.push("ZeRO-" + z + (z === chosen ? " (selected)" : "") + " " + VL.fixed(VL.gb(pz.total), 2) + " GB");
      });
      verdict += " Fullest rank by ZeRO stage: " + bits.join("; ") + ".";
    }
    return [pm.peak, card.memory_bytes, verdict];
  });
})();
