/* vramlib/web/js/training.js -- the training calculator (chapters 2, 3, 4, 9, 10, 15): the glue of vramlib.memory.training
 * (lora_modules, lora_params, optimizer_state_bytes, training_memory), vramlib.memory.activations.activation_bytes,
 * vramlib.solve.training_feasibility.max_seq_for_training and vramlib.present.widgets.training.training_compute. The
 * rules are their @portable parts compiled for the page (VL.py: lora_target_modules, widest_lora_rank,
 * lora_rank_problem, lora_count, lora_optimizer_bytes, full_optimizer_bytes, small_state_params, saved_bytes, model_state_parts,
 * training_parts, largest_by_secant, training_verdict); this file checks inputs and reads the defaults from Python. */
(function () {
  var D = VL.data, C = VL.data.constants, PY = VL.py, DF = VL.data.defaults;

  /* training.lora_modules (named target sets: the panels offer those) */
  VL.loraModules = function (m, targets) {
    var got = PY.lora_target_modules(m.name, m.linear_modules, VL.checkChoice("lora_targets", targets, C.LORA_TARGETS));
    VL.raiseProblem(got[1]);
    return got[0];
  };

  /* training.lora_params (training.check_lora_rank, training.lora_count) */
  VL.loraParams = function (m, rank, targets) {
    var df = DF["training.lora_params"];
    rank = VL.checkPositiveInt("lora_rank", rank === undefined ? df.rank : rank);
    var mods = VL.loraModules(m, targets === undefined ? df.targets : targets);
    VL.raiseProblem(PY.lora_rank_problem(m.name, rank, PY.widest_lora_rank(m.sym, mods)));
    return PY.lora_count(m, rank, mods);
  };

  /* training.optimizer_state_bytes */
  VL.optimizerStateBytes = function (m, optimizer, trainable, loraRank, loraTargets, stateBytes) {
    var opt = PY.optimizer_view(D.optimizers[VL.checkChoice("optimizer", optimizer, Object.keys(D.optimizers))],
      stateBytes === undefined ? C.FP32_BYTES : stateBytes);
    loraTargets = loraTargets === undefined ? DF["training.lora_params"].targets : loraTargets;
    if (loraRank !== null && loraRank !== undefined) {
      return PY.lora_optimizer_bytes(m, opt, VL.loraParams(m, loraRank, loraTargets), loraRank, VL.loraModules(m, loraTargets));
    }
    VL.loraModules(m, loraTargets);
    var groups = VL.groupsDict(VL.paramGroups(m));
    return PY.full_optimizer_bytes(m, opt, trainable !== null && trainable !== undefined ? trainable : VL.weightParams(m),
      PY.small_state_params(m, groups, opt));
  };

  function activationDtypeBytes(dtype) {  /* activations._activation_dtype_bytes (activations.activation_width) */
    var got = PY.activation_width(VL.getPrecision(dtype, "dtype"), dtype);
    VL.raiseProblem(got[1]);
    return got[0];
  }
  VL.activationDtypeBytes = activationDtypeBytes;   /* the plan calculator's step reads it too */

  /* activations.activation_bytes (activations.saved_bytes) */
  VL.activationBytes = function (m, o) {
    var df = DF["activations.activation_bytes"], pick = function (k) { return o[k] === undefined ? df[k] : o[k]; };
    var seq = VL.checkPositiveInt("seq", o.seq);
    var batch = VL.checkPositiveInt("batch", pick("batch"));
    var style = VL.checkChoice("style", pick("style"), C.ACTIVATION_STYLES);
    var scope = VL.checkChoice("scope", pick("scope"), C.SCOPES);
    var recompute = VL.checkChoice("recompute", pick("recompute"), C.RECOMPUTE);
    var attention = VL.checkChoice("attention", pick("attention"), C.ATTENTION);
    var tp = VL.checkPositiveInt("tp", o.tp === undefined ? 1 : o.tp);
    var sp = o.sequence_parallel === undefined ? false : o.sequence_parallel;
    if (typeof sp !== "boolean") { throw VL.invalid("sequence_parallel", sp, "must be True or False"); }
    if (tp > 1) { VL.checkTp("tp", tp, m.name, m.spec.n_heads, m.spec.n_kv_heads); }
    var how = { style: style, scope: scope, recompute: recompute, attention: attention, tp: tp, sequence_parallel: sp, b_a: 0 };
    if (style === "megatron") {
      if (C.SCOPES.indexOf(scope) > 1) {
        throw VL.invalid("scope", scope, "style='megatron' gives 'layer' or 'model' (the paper's peak); the step's phases are style='hf'");
      }
      return PY.saved_bytes(m.sym, seq, batch, how, []);
    }
    if (tp !== 1 || sp) {
      throw VL.invalid(tp !== 1 ? "tp" : "sequence_parallel", tp !== 1 ? tp : sp,
        "style='hf' models one device; tensor/sequence parallelism is style='megatron'");
    }
    how.b_a = activationDtypeBytes(pick("dtype"));
    if (m.hf.error) { throw new VL.VramlibError(m.hf.error); }
    return PY.saved_bytes(m.sym, seq, batch, how, Object.keys(m.hf).map(function (k) { return [k, m.hf[k]]; }));
  };

  var TM_DEFAULTS = DF["training.training_memory"];
  function withDefaults(o) {
    var out = Object.assign({}, TM_DEFAULTS);
    Object.keys(o).forEach(function (k) { if (o[k] !== undefined) { out[k] = o[k]; } });
    return out;
  }

  /* training._model_state_parts (training.model_state_parts); dtype: the trainable parameters' */
  function modelStates(m, o, dtype, method) {
    var conv = D.conventions[o.convention];
    var setup = { method: method, dtype: dtype, conv: conv, fp32: C.FP32_BYTES, base: [], base_label: "" };
    var width = PY.state_width(conv, dtype);
    if (method === "full") {
      setup.n_t = VL.weightParams(m);
      setup.optimizer = VL.optimizerStateBytes(m, o.optimizer, null, null, undefined, width);
      if (conv.gather_buffer_per_param && dtype !== "fp32") { setup.largest = PY.largest_module(m, 1, 1, "all"); }
    } else {
      setup.base_label = PY.base_format_of(method, o.base_weights || null, VL.getPrecision(o.precision).name);
      setup.base = VL.weightsDetail(m, setup.base_label);
      setup.n_t = VL.loraParams(m, o.lora_rank, o.lora_targets);
      setup.optimizer = VL.optimizerStateBytes(m, o.optimizer, null, o.lora_rank, o.lora_targets, width);
    }
    return PY.model_state_parts(setup);
  }

  /* training.training_memory (step.step_settings, step_problem, step_parts; training.training_parts) */
  VL.trainingMemory = function (m, o) {
    o = withDefaults(o);
    var method = VL.checkChoice("method", o.method, C.METHODS);
    var autocast = o.convention === C.AUTOCAST;
    if (autocast) { o = Object.assign({}, o, { convention: "mixed-fp32-master" }); }
    VL.checkChoice("convention", o.convention, Object.keys(D.conventions));
    var prec = VL.getPrecision(o.precision, "precision");
    if (C.TRAINING_PRECISIONS.indexOf(prec.name) < 0) {
      throw VL.invalid("precision", o.precision, "training computes in bf16, fp16 or fp32");
    }
    VL.checkChoice("attention", o.attention, C.ATTENTION);
    var recompute = VL.checkChoice("recompute", o.recompute, C.RECOMPUTE);
    var batch = VL.checkPositiveInt("micro_batch", o.micro_batch);
    var loraDtype = VL.checkChoice("lora_dtype", o.lora_dtype, C.LORA_DTYPES);
    var peak = VL.checkChoice("peak", o.peak, C.PEAKS);
    var impl = o.optimizer_impl === undefined ? null : o.optimizer_impl;
    if (impl !== null) {
      VL.raiseProblem(PY.impl_problem(o.optimizer, impl));
      impl = VL.checkChoice("optimizer_impl", impl, VL.shared.STEP_IMPLS[o.optimizer]);
    }
    var style = VL.checkChoice("activation_style", o.activation_style, ["auto"].concat(C.ACTIVATION_STYLES));
    style = PY.activation_style_for(m.spec, style, true)[0];
    var st = PY.step_settings(o, prec.name, style, recompute, batch, autocast, loraDtype, impl);
    VL.raiseProblem(PY.autocast_problem(m.spec, st));
    var states = modelStates(m, o, st.trainable_dtype, method);
    var problem = peak === "step" ? PY.step_problem(m.spec, st) : null;
    var labels = [o.method, o.precision, o.optimizer, autocast ? C.AUTOCAST : o.convention, o.seq, batch, recompute];
    var reserve = VL.parseMemory(o.reserve, "reserve");
    var acts = function (scope) {
      return VL.activationBytes(m, { seq: o.seq, batch: batch, dtype: prec.name, attention: o.attention,
        recompute: recompute, style: style, scope: scope });
    };
    if (peak === "sum" || problem) {
      var act = acts("model") + (autocast ? PY.autocast_extra(m, VL.groupsDict(VL.paramGroups(m)), o.seq, batch,
        activationDtypeBytes(prec.name)) : 0);
      var got = PY.training_parts(m.name, states, act, reserve, labels);
      var sum = new VL.Breakdown(got[0], got[1]);
      sum.peak_phase = null;
      return sum;
    }
    st.act = acts("end-of-forward");
    st.rerun = acts("rerun");
    st.b_a = activationDtypeBytes(prec.name);
    st.reserve = reserve;
    st.n_t = method === "full" ? VL.weightParams(m) : VL.loraParams(m, o.lora_rank, o.lora_targets);
    st.width = PY.state_width(D.conventions[o.convention], st.trainable_dtype);
    st.lora = method === "full" ? null : PY.lora_step_values(m, VL.loraModules(m, o.lora_targets), o.lora_rank, loraDtype);
    var res = PY.step_parts(m, VL.groupsDict(VL.paramGroups(m)), states, st);
    var bd = new VL.Breakdown(res[0], PY.step_title(m.name, labels, st, res[2]));
    bd.phases = res[1];
    bd.peak_phase = res[2];
    return bd;
  };

  /* training_feasibility.max_seq_for_training (the secant search on the activations, then confirmed) */
  VL.maxSeqForTraining = function (m, memory, o, limit) {
    limit = VL.checkPositiveInt("limit", limit === undefined ? DF["training_feasibility.max_seq_for_training"].limit : limit);
    var cap = VL.budget(memory);
    var fits = function (n) { return VL.trainingMemory(m, Object.assign({}, o, { seq: n })).total <= cap; };
    var base = VL.trainingMemory(m, Object.assign({}, o, { seq: 1 }));
    if (base.total > cap) { return 0; }
    var kw = withDefaults(o), total;
    if (base.peak_phase !== null) {     /* priced by its phases: several terms grow with the sequence */
      total = function (n) { return VL.trainingMemory(m, Object.assign({}, o, { seq: n })).total; };
    } else {
      var fixed = base.total - base.get("activations"), dtype = VL.getPrecision(kw.precision).name;
      total = function (n) {
        return fixed + VL.activationBytes(m, { seq: n, batch: kw.micro_batch, dtype: dtype, attention: kw.attention,
          recompute: kw.recompute, style: kw.activation_style, scope: "model" });
      };
    }
    var n = PY.largest_by_secant(total, cap, limit, DF["training_feasibility._largest_by_secant"].probe);
    if (n === limit || (fits(n) && !fits(n + 1))) { return n; }
    return VL.largestFitting(fits, 1, null, limit);
  };

  /* widgets.training.training_compute */
  VL.register("training", function (a) {
    var df = DF["widgets.training.training_compute"], pick = function (k) { return a[k] === undefined ? df[k] : a[k]; };
    var m = VL.withHeads(VL.model(a.model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu);
    var seq = VL.checkPositiveInt("seq", a.seq);
    var kw = { method: a.method, precision: a.precision, optimizer: a.optimizer, convention: a.convention,
      recompute: a.recompute, attention: a.attention, lora_rank: a.lora_rank, lora_targets: pick("lora_targets"),
      micro_batch: a.micro_batch, activation_style: pick("activation_style"), reserve: pick("reserve"),
      peak: pick("peak"), lora_dtype: pick("lora_dtype"), optimizer_impl: pick("optimizer_impl") };
    var bd = VL.trainingMemory(m, Object.assign({ seq: seq }, kw));
    var longest = VL.maxSeqForTraining(m, card.memory_bytes, kw);
    return [bd, card.memory_bytes, PY.training_verdict(card.key, card.memory_bytes - bd.total, a.micro_batch, longest,
      m.spec.max_context)];
  });
})();
