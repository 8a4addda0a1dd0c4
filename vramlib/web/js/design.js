/* vramlib/web/js/design.js -- the design calculator (chapter 13): the glue of vramlib.present.widgets.design
 * (design_spec, design_compute), vramlib.explain.design (evaluate_design, _max_context) and vramlib.solve.feasibility
 * (min_gpus, max_batch). The rules are @portable Python compiled for the page (VL.py: symbols_of, heads_problem,
 * experts_problem, hf_indicators_of, fewest_gpus, max_batch_kv_only, design_fields, equal_layers, design_verdict). */
(function () {
  var PY = VL.py;
  if (!PY.design_fields) { return; }

  /* ModelSpec.symbols (models.symbols_of) */
  VL.specSymbols = function (s, active) { return PY.symbols_of(s, active); };

  /* ModelSpec.__post_init__: the counts, then the rules of models.heads_problem and models.experts_problem */
  VL.validateSpec = function (s) {
    ["n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "ffn", "vocab", "max_context"].forEach(function (k) {
      VL.checkPositiveInt(k, s[k]);
    });
    ["norms_per_layer", "n_experts", "experts_per_token", "n_shared_experts", "learned_positions"].forEach(function (k) {
      VL.checkPositiveInt(k, s[k], true);
    });
    VL.raiseProblem(PY.heads_problem(s));
    VL.raiseProblem(PY.experts_problem(s));
    return s;
  };

  /* activations._hf_indicators (activations.hf_indicators_of), as model_json exports them */
  function hfIndicators(s) {
    var got = PY.hf_indicators_of(s, VL.repr(s.family)), out = {};
    if (got[1]) { return { error: VL.invalid(got[1][0], got[1][1], got[1][2]).message }; }
    got[0].forEach(function (p) { out[p[0]] = p[1]; });
    return out;
  }

  /* a calculator model for a new shape (its linear modules are the base's: fused and gated flags do not change) */
  VL.modelFromSpec = function (s, base) {
    return { spec: s, name: s.name, sym: VL.specSymbols(s, false), symActive: VL.specSymbols(s, true),
      layers: PY.layer_kinds_of(s, false), linear_modules: base.linear_modules.slice(), hf: hfIndicators(s) };
  };

  /* feasibility.min_gpus (feasibility.fewest_gpus) */
  VL.minGpus = function (sharded, memory, replicated) {
    return PY.fewest_gpus(sharded, VL.budget(memory), VL.parseMemory(replicated === undefined ? 0 : replicated,
      "replicated_bytes"));
  };

  /* feasibility.max_batch (attention=None: feasibility.max_batch_kv_only) */
  VL.maxBatchKvOnly = function (m, memory, tokens, weights, kvDtype, reserve) {
    tokens = VL.checkPositiveInt("tokens", tokens);
    return PY.max_batch_kv_only(m, VL.budget(memory), VL.parseMemory(reserve, "reserve"), VL.weightsBytes(m, weights),
      tokens, VL.kvBytesPerElement(kvDtype), VL.shared.DEFAULT_CACHE_RULE);
  };

  /* widgets.design.design_spec (widgets.design.design_fields; design.equal_layers) */
  VL.designSpec = function (base, a) {
    var b = Object.assign({}, base.spec, { nominal_params: null });
    var hidden = VL.checkPositiveInt("hidden", a.hidden), nHeads = VL.checkPositiveInt("n_heads", a.n_heads);
    if (hidden % nHeads) { throw VL.invalid("n_heads", nHeads, "must divide hidden=" + hidden); }
    var nExperts = VL.checkPositiveInt("n_experts", a.n_experts, true);
    var k = VL.checkPositiveInt("experts_per_token", a.experts_per_token);
    var s = VL.validateSpec(Object.assign({}, b, PY.design_fields(hidden, nHeads, a.n_kv_heads,
      VL.checkPositiveInt("ffn", a.ffn), VL.checkPositiveInt("n_layers", a.n_layers), nExperts, k)));
    if (a.equal_params) {
      var target = VL.nParams({ layers: PY.layer_kinds_of(b, false) });
      var got = PY.equal_layers(VL.specSymbols(Object.assign({}, s, { n_layers: 1 }), false), target, s.hidden);
      VL.raiseProblem(got[1]);
      s = VL.validateSpec(Object.assign({}, s, { n_layers: got[0] }));
    }
    return VL.modelFromSpec(Object.assign({}, s, { name: b.name + " (designed)" }), base);
  };

  /* design._max_context */
  function maxContext(m, cap, weights, kv, reserve, chunk) {
    chunk = VL.checkPositiveInt("prefill_chunk", chunk);
    var workspace = VL.inferenceMemory(m, weights, kv, chunk, 1, "sdpa", reserve, null, chunk);
    var t = VL.maxTokens(m, cap, weights, kv, 1, reserve + workspace.get("prefill workspace"), null);
    if (t >= chunk) { return t; }
    return VL.maxTokens(m, cap, weights, kv, 1, reserve, "sdpa", chunk);
  }

  /* design.evaluate_design (the panel's defaults: bf16 AdamW training, no recompute, 0.5 GB reserve, chunks of 2048) */
  VL.evaluateDesign = function (m, gpu, context, o) {
    var df = VL.data.defaults["design.evaluate_design"];  /* its training settings, reserve and chunk */
    var cap = VL.budget(gpu);
    context = VL.checkPositiveInt("context", context);
    var nGpus = VL.checkPositiveInt("n_gpus", o.n_gpus), res = VL.parseMemory(df.reserve, "reserve");
    var chunk = df.prefill_chunk, trainSeq = o.train_seq;
    var inf = VL.inferenceMemory(m, o.weights, o.kv_dtype, context, 1, "sdpa", res, null, chunk);
    var train = VL.trainingMemory(m, { method: "full", seq: trainSeq, micro_batch: 1, precision: df.train_precision,
      optimizer: df.optimizer, convention: df.convention, recompute: df.recompute, reserve: res });
    var act = train.get("activations"), states = train.total - act - res;
    var trains = function (b) {
      var own = VL.activationBytes(m, { seq: trainSeq, batch: b, dtype: df.train_precision, recompute: df.recompute,
        scope: "model" });
      var need = VL.minGpus(states, cap, own + res);
      return need > 0 && need <= nGpus;
    };
    return { spec: m, kv_per_token: VL.kvCacheBytes(m, 1, 1, o.kv_dtype), inference: inf,
      max_context: maxContext(m, cap, o.weights, o.kv_dtype, res, chunk),
      max_sequences: VL.maxBatchKvOnly(m, cap, context, o.weights, o.kv_dtype, res),
      gpus_to_train: VL.minGpus(states, cap, act + res), max_micro_batch: VL.largestFitting(trains), capacity: cap,
      fits: inf.total <= cap };
  };

  /* widgets.design.design_compute */
  VL.register("design", function (a) {
    var m = VL.designSpec(VL.model(a.base), a);
    var df = VL.data.defaults["widgets.design.design_compute"];
    var trainSeq = a.train_seq === undefined ? df.train_seq : a.train_seq, nGpus = a.n_gpus === undefined ? df.n_gpus : a.n_gpus;
    var d = VL.evaluateDesign(m, a.gpu, a.context, { weights: a.weights, kv_dtype: PY.design_kv_format(a.weights),
      train_seq: trainSeq, n_gpus: nGpus });
    var s = m.spec, sym = { layers: PY.layer_kinds_of(m.spec, true) };
    var verdict = PY.design_verdict({ n_layers: s.n_layers, n_params: VL.nParams(m), n_active: VL.nParams(sym),
      moe: s.n_experts > 0, kv_per_token: d.kv_per_token, fits: d.fits, max_sequences: d.max_sequences,
      max_context: d.max_context, gpus_to_train: d.gpus_to_train, max_micro_batch: d.max_micro_batch }, a.gpu, a.context,
      trainSeq, nGpus);
    return [d.inference, d.capacity, verdict];
  });
})();
