/* vramlib/web/js/training.js -- the training calculator (chapters 2, 3, 4, 9, 10, 15): mirrors vramlib.memory.training
 * (lora_modules, lora_params, optimizer_state_bytes, training_memory), vramlib.memory.activations.activation_bytes,
 * vramlib.solve.training_feasibility.max_seq_for_training and vramlib.present.widgets.training.training_compute.
 * Every size comes from a generated VL.formulas / VL.activations function; the ZeRO-3 gather buffer uses
 * VL.largestModuleParams (parallel.js). */
(function () {
  var F = VL.formulas, A = VL.activations, D = VL.data, C = VL.data.constants;
  var has = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k); };

  VL.loraModules = function (m, targets) {
    var have = m.linear_modules;
    var key = VL.checkChoice("lora_targets", targets, C.LORA_TARGETS);
    if (key === "all-linear") { return have.slice(); }
    if (key === "attention") {
      return have.filter(function (x) { return ["q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj"].indexOf(x) >= 0; });
    }
    if (have.indexOf("qkv_proj") >= 0) {
      throw VL.invalid("lora_targets", "qv", m.name + " fuses q, k and v into qkv_proj; use 'attention'");
    }
    return ["q_proj", "v_proj"];
  };

  /* training.check_lora_rank: a rank above min(in, out) of a targeted module is not low-rank (LORA_IN / LORA_OUT) */
  VL.checkLoraRank = function (m, rank, mods) {
    var T = VL.training, best = null;
    mods.forEach(function (mod) {
      var i = VL.int(T.LORA_IN[mod](m.sym)), o = VL.int(T.LORA_OUT[mod](m.sym));
      if (best === null || Math.min(i, o) < best[0]) { best = [Math.min(i, o), mod + " (" + VL.commas(i) + " -> " + VL.commas(o) + ")"]; }
    });
    if (best !== null && rank > best[0]) {
      throw VL.invalid("lora_rank", rank, "must be <= " + VL.commas(best[0]) + " = min(in, out) of " + best[1] + " in " +
        m.name + " (a rank above a layer's width is not low-rank)");
    }
    return rank;
  };

  VL.loraParams = function (m, rank, targets) {
    rank = VL.checkPositiveInt("lora_rank", rank === undefined ? VL.data.defaults["training.lora_params"].rank : rank);
    var total = 0, mods = VL.loraModules(m, targets === undefined ? "all-linear" : targets);
    VL.checkLoraRank(m, rank, mods);
    mods.forEach(function (mod) {
      var io = VL.int(F.LORA_IN_OUT[mod](m.sym));
      var copies = C.MLP_MODULES.indexOf(mod) >= 0 ? m.sym.n_mlp : 1;
      total += copies * VL.int(F.LORA_PARAMS_PER_MODULE({ r: rank, io: io }));
    });
    return m.spec.n_layers * total;
  };

  VL.optimizerStateBytes = function (m, optimizer, trainable, loraRank, loraTargets) {
    var opt = D.optimizers[VL.checkChoice("optimizer", optimizer, Object.keys(D.optimizers))];
    loraTargets = loraTargets === undefined ? "all-linear" : loraTargets;
    var v = m.sym;
    if (loraRank !== null && loraRank !== undefined) {
      var n = VL.loraParams(m, loraRank, loraTargets);
      if (opt.factored) {
        var rc = VL.sum(VL.loraModules(m, loraTargets).map(function (x) { return VL.int(F.LORA_IN_OUT[x](v)) + 2 * loraRank; }));
        return VL.int(opt.small_tensor_bytes) * m.spec.n_layers * rc;
      }
      return VL.toIntBytes(opt.bytes_per_param * n);
    }
    var groups = VL.groupsDict(VL.paramGroups(m));
    var nAll = trainable !== null && trainable !== undefined ? trainable : VL.weightParams(m);
    var small = groups.norm + groups.bias;
    if (opt.factored) {
      var rows = VL.sum(m.linear_modules.map(function (x) {
        return VL.int(F.LORA_IN_OUT[x](v)) * (C.MLP_MODULES.indexOf(x) >= 0 ? v.n_mlp : 1);
      })) * m.spec.n_layers;
      rows += (m.spec.vocab + m.spec.hidden) * (m.spec.tied_embeddings ? 1 : 2) + small;
      return VL.int(opt.small_tensor_bytes) * rows;
    }
    return VL.toIntBytes(opt.bytes_per_param * (nAll - small) + opt.small_tensor_bytes * small);
  };

  function activationDtypeBytes(dtype) {
    var p = VL.getPrecision(dtype, "dtype");
    if (["fp32", "tf32", "bf16", "fp16"].indexOf(p.name) < 0) {
      throw VL.invalid("dtype", dtype, "activations are fp32, bf16 or fp16");
    }
    return VL.int(p.bytes_per_element);
  }

  /* activations.activation_bytes */
  VL.activationBytes = function (m, o) {
    var seq = VL.checkPositiveInt("seq", o.seq);
    var batch = VL.checkPositiveInt("batch", o.batch === undefined ? 1 : o.batch);
    var style = VL.checkChoice("style", o.style === undefined ? "hf" : o.style, C.ACTIVATION_STYLES);
    var scope = VL.checkChoice("scope", o.scope === undefined ? "layer" : o.scope, ["layer", "model"]);
    var recompute = VL.checkChoice("recompute", o.recompute === undefined ? "none" : o.recompute, C.RECOMPUTE);
    var attention = VL.checkChoice("attention", o.attention === undefined ? "sdpa" : o.attention, C.ATTENTION);
    var tp = VL.checkPositiveInt("tp", o.tp === undefined ? 1 : o.tp);
    var sp = o.sequence_parallel === undefined ? false : o.sequence_parallel;
    if (typeof sp !== "boolean") { throw VL.invalid("sequence_parallel", sp, "must be True or False"); }
    if (tp > 1) { VL.checkTp("tp", tp, m.name, m.spec.n_heads, m.spec.n_kv_heads); }
    var values = Object.assign({}, m.sym, { s: seq, b: batch });
    if (style === "megatron") {
      values.t = tp;
      values.z_sp = sp ? 1 : 0;
      var mexpr = (scope === "layer" ? A.MEGATRON_LAYER_BY_RECOMPUTE : A.MEGATRON_MODEL)[recompute];
      return VL.toIntBytes(mexpr(values));
    }
    if (tp !== 1 || sp) {
      throw VL.invalid(tp !== 1 ? "tp" : "sequence_parallel", tp !== 1 ? tp : sp,
        "style='hf' models one device; tensor/sequence parallelism is style='megatron'");
    }
    var ba = activationDtypeBytes(o.dtype === undefined ? "bf16" : o.dtype);
    if (m.hf.error) { throw new VL.VramlibError(m.hf.error); }
    Object.assign(values, m.hf, { b_a: ba, z_32: ba === C.FP32_BYTES ? 1 : 0 });
    var expr = (scope === "layer" ? A.HF_LAYER : A.HF_MODEL)[attention + "|" + recompute];
    return VL.toIntBytes(expr(values));
  };

  var TM_DEFAULTS = VL.data.defaults["training.training_memory"];
  function withDefaults(o) {
    var out = Object.assign({}, TM_DEFAULTS);
    Object.keys(o).forEach(function (k) { if (o[k] !== undefined) { out[k] = o[k]; } });
    return out;
  }

  /* training.training_memory */
  VL.trainingMemory = function (m, o) {
    o = withDefaults(o);
    var method = VL.checkChoice("method", o.method, C.METHODS);
    var conv = D.conventions[VL.checkChoice("convention", o.convention, Object.keys(D.conventions))];
    var prec = VL.getPrecision(o.precision, "precision");
    if (C.TRAINING_PRECISIONS.indexOf(prec.name) < 0) {
      throw VL.invalid("precision", o.precision, "training computes in bf16, fp16 or fp32");
    }
    VL.checkChoice("attention", o.attention, C.ATTENTION);
    VL.checkChoice("recompute", o.recompute, C.RECOMPUTE);
    var half = prec.name !== "fp32";
    var bW = half ? conv.weight : C.FP32_BYTES, bG = half ? conv.grad : C.FP32_BYTES, bM = half ? conv.master : 0;
    var parts = [], nT, opt;
    if (method === "full") {
      nT = VL.weightParams(m);
      parts.push(["weights", VL.toIntBytes(F.MODEL_STATES_BYTES({ N_t: nT, b_w: bW, b_g: 0, b_m: 0, b_o: 0 }))]);
      opt = VL.optimizerStateBytes(m, o.optimizer);
    } else {
      var base = o.base_weights || (method === "qlora" ? "nf4-dq" : prec.name);
      VL.weightsDetail(m, base).forEach(function (p) {
        parts.push([p[0] !== "weights" ? p[0] : "base weights (" + base + ")", p[1]]);
      });
      nT = VL.loraParams(m, o.lora_rank, o.lora_targets);
      parts.push(["LoRA adapters", VL.toIntBytes(F.MODEL_STATES_BYTES({ N_t: nT, b_w: bW, b_g: 0, b_m: 0, b_o: 0 }))]);
      opt = VL.optimizerStateBytes(m, o.optimizer, null, o.lora_rank, o.lora_targets);
    }
    parts.push(["gradients", VL.int(F.MODEL_STATES_BYTES({ N_t: nT, b_w: 0, b_g: bG, b_m: 0, b_o: 0 }))]);
    if (bM) {
      parts.push(["master weights (fp32)", VL.int(F.MODEL_STATES_BYTES({ N_t: nT, b_w: 0, b_g: 0, b_m: bM, b_o: 0 }))]);
    }
    parts.push(["optimizer states", opt]);
    if (conv.gather_buffer_per_param && method === "full" && half) {
      parts.push(["ZeRO-3 gather buffer", VL.toIntBytes(conv.gather_buffer_per_param * VL.largestModuleParams(m))]);
    }
    parts.push(["activations", VL.activationBytes(m, { seq: o.seq, batch: o.micro_batch, dtype: prec.name,
      attention: o.attention, recompute: o.recompute, style: o.activation_style, scope: "model" })]);
    parts.push(["reserve (CUDA context, framework)", VL.parseMemory(o.reserve, "reserve")]);
    return new VL.Breakdown(parts, m.name + ": " + o.method + " fine-tuning, " + o.precision + ", " + o.optimizer + ", " +
      o.convention + ", seq " + VL.commas(o.seq) + " x " + o.micro_batch + ", recompute " + o.recompute);
  };

  /* training_feasibility.max_seq_for_training */
  VL.maxSeqForTraining = function (m, memory, o, limit) {
    limit = VL.checkPositiveInt("limit", limit === undefined ? VL.data.defaults["training_feasibility.max_seq_for_training"].limit : limit);
    var cap = VL.budget(memory);
    var fits = function (n) { return VL.trainingMemory(m, Object.assign({}, o, { seq: n })).total <= cap; };
    var base = VL.trainingMemory(m, Object.assign({}, o, { seq: 1 }));
    if (base.total > cap) { return 0; }
    var fixed = base.total - base.get("activations"), kw = withDefaults(o);
    var dtype = VL.getPrecision(kw.precision).name;
    var fitsFast = function (n) {
      return fixed + VL.activationBytes(m, { seq: n, batch: kw.micro_batch, dtype: dtype, attention: kw.attention,
        recompute: kw.recompute, style: kw.activation_style, scope: "model" }) <= cap;
    };
    var n = VL.largestFitting(fitsFast, 1, null, limit);
    if (n === limit || (fits(n) && !fits(n + 1))) { return n; }
    return VL.largestFitting(fits, 1, null, limit);
  };

  /* widgets.training.training_compute */
  VL.register("training", function (a) {
    var m = VL.withHeads(VL.model(a.model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu);
    var seq = VL.checkPositiveInt("seq", a.seq);
    var kw = { method: a.method, precision: a.precision, optimizer: a.optimizer, convention: a.convention,
      recompute: a.recompute, attention: a.attention, lora_rank: a.lora_rank,
      lora_targets: a.lora_targets === undefined ? "all-linear" : a.lora_targets, micro_batch: a.micro_batch,
      activation_style: a.activation_style === undefined ? "hf" : a.activation_style,
      reserve: a.reserve === undefined ? "0.5GB" : a.reserve };
    var bd = VL.trainingMemory(m, Object.assign({ seq: seq }, kw));
    var longest = VL.maxSeqForTraining(m, card.memory_bytes, kw);
    var free = card.memory_bytes - bd.total;
    var verdict = free >= 0 ? "Fits on " + card.key + ": " + VL.fmtBytes(free) + " free."
      : "Does not fit on " + card.key + ": short by " + VL.fmtBytes(-free) + ".";
    if (longest === 0) {
      verdict += " Not even one token fits at micro-batch " + a.micro_batch + ": the states alone are too large.";
    } else {
      verdict += " Longest sequence at micro-batch " + a.micro_batch + ": " + VL.commas(longest) + " tokens" +
        (longest > m.spec.max_context ? " (the model was trained for " + VL.commas(m.spec.max_context) + ")." : ".");
    }
    return [bd, card.memory_bytes, verdict];
  });
})();
