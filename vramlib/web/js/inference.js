/* vramlib/web/js/inference.js -- the inference calculator (chapters 1, 5, 7): the glue of vramlib.memory.inference
 * (weights_detail, kv_cache_bytes, prefill_workspace_bytes, inference_memory), vramlib.solve.feasibility (largest_fitting,
 * max_tokens) and vramlib.present.widgets.inference.inference_compute. The rules are their @portable parts compiled
 * for the page (VL.py: weights_parts, kv_bytes, prefill_bytes, activation_format, inference_parts, largest_true,
 * max_tokens_kv_only, inference_verdict); this file checks inputs and reads the defaults from Python's signatures.
 * The model control's keys are the page's catalogue (VL.data.models: jsgen.catalogue_json, every catalogue model)
 * and the panel's own model (data-fixed's own_model). */
(function () {
  var F = VL.formulas, C = VL.data.constants, PY = VL.py;
  var has = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k); };

  /* inference.weights_detail (inference.weights_parts) */
  VL.weightsDetail = function (m, dtype) { return PY.weights_parts(m, VL.getPrecision(dtype, "weights")); };

  VL.weightsBytes = function (m, dtype) {
    return VL.sum(VL.weightsDetail(m, dtype).map(function (p) { return p[1]; }));
  };

  /* inference.kv_cache_bytes (inference.kv_bytes) */
  VL.kvCacheBytes = function (m, tokens, batch, dtype) {
    tokens = VL.checkPositiveInt("tokens", tokens);
    batch = VL.checkPositiveInt("batch", batch);
    return PY.kv_bytes(m, tokens, batch, VL.kvBytesPerElement(dtype), VL.shared.DEFAULT_CACHE_RULE, true);
  };

  /* inference.prefill_workspace_bytes (inference.prefill_bytes) */
  VL.prefillWorkspaceBytes = function (m, tokens, batch, dtype, attention, chunk) {
    tokens = VL.checkPositiveInt("tokens", tokens);
    batch = VL.checkPositiveInt("batch", batch);
    attention = VL.checkChoice("attention", attention, C.ATTENTION);
    if (chunk !== null && chunk !== undefined) { chunk = VL.checkPositiveInt("chunk", chunk); } else { chunk = null; }
    return PY.prefill_bytes(m.spec, tokens, batch, VL.getPrecision(dtype, "activation_dtype"), VL.getPrecision("fp16"),
      attention, chunk);
  };

  /* inference.inference_memory (inference.inference_parts) */
  VL.inferenceMemory = function (m, weights, kvDtype, tokens, batch, attention, reserve, activationDtype, prefillChunk) {
    var df = VL.data.defaults["inference.inference_memory"], pick = function (x, d) { return x === undefined ? d : x; };
    weights = pick(weights, df.weights);
    kvDtype = pick(kvDtype, df.kv_dtype);
    tokens = pick(tokens, df.tokens);
    batch = pick(batch, df.batch);
    attention = pick(attention, df.attention);
    reserve = pick(reserve, df.reserve);
    var wparts = VL.weightsDetail(m, weights);
    var act = PY.activation_format(activationDtype || null, weights, VL.getPrecision(weights, "weights"));
    var got = PY.inference_parts(m.name, wparts, VL.kvCacheBytes(m, tokens, batch, kvDtype),
      VL.prefillWorkspaceBytes(m, tokens, batch, act, attention, prefillChunk), VL.parseMemory(reserve, "reserve"),
      [weights, kvDtype, batch, tokens, attention]);
    return new VL.Breakdown(got[0], got[1]);
  };

  /* feasibility.largest_fitting (feasibility.largest_true) */
  VL.largestFitting = function (fits, lo, hi, limit, field) {
    var df = VL.data.defaults["feasibility.largest_fitting"];
    var got = PY.largest_true(fits, lo === undefined ? df.lo : lo, hi === undefined ? null : hi,
      limit === undefined ? df.limit : limit, field === undefined ? df.field : field);
    VL.raiseProblem(got[1]);
    return got[0];
  };

  VL.budget = function (memory) { /* Breakdown.capacity */
    if (typeof memory === "string" && !/^[0-9]/.test(memory)) { return VL.getGpu(memory).memory_bytes; }
    return VL.parseMemory(memory, "memory");
  };

  VL.maxTokens = function (m, memory, weights, kvDtype, batch, reserve, attention, prefillChunk) {
    var df = VL.data.defaults["feasibility.max_tokens"];
    batch = VL.checkPositiveInt("batch", batch === undefined ? df.batch : batch);
    var cap = VL.budget(memory), res = VL.parseMemory(reserve === undefined ? df.reserve : reserve, "reserve");
    var w = VL.weightsBytes(m, weights);
    if (attention === null || attention === undefined) {
      return PY.max_tokens_kv_only(m, cap, res, w, batch, VL.kvBytesPerElement(kvDtype), VL.shared.DEFAULT_CACHE_RULE);
    }
    return VL.largestFitting(function (t) {
      return VL.inferenceMemory(m, weights, kvDtype, t, batch, attention, res, null, prefillChunk).total <= cap;
    });
  };

  /* widgets.inference.panel_model: the panel's own model when the key is its name, else a catalogue key of the page
   * data; a model given whole (a ModelSpec's JSON) as it is */
  VL.panelModel = function (key, own) {
    if (key && typeof key === "object") { return VL.model(key); }
    if (own && key === own.name) { return VL.model(own); }
    if (typeof key === "string" && has(VL.data.models, key)) { return VL.model(VL.data.models[key]); }
    throw VL.unknown("model", key, Object.keys(VL.data.models).concat(own ? [own.name] : []));
  };

  /* widgets.inference.inference_compute */
  VL.register("inference", function (a) {
    var df = VL.data.defaults["widgets.inference.inference_compute"];
    var m = VL.withHeads(VL.panelModel(a.model, a.own_model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu), pick = function (k) { return a[k] === undefined ? df[k] : a[k]; };
    var attention = pick("attention"), batch = pick("batch"), reserve = pick("reserve");
    var bd = VL.inferenceMemory(m, a.weights, a.kv_dtype, a.tokens, batch, attention, reserve);
    var longest = VL.maxTokens(m, card.memory_bytes, a.weights, a.kv_dtype, batch, reserve, attention);
    return [bd, card.memory_bytes, PY.inference_verdict(card.key, card.memory_bytes - bd.total, batch, longest,
      m.spec.max_context)];
  }, { linked: function (name, values) {  /* widgets.inference.inference_linked: a new model brings its own heads */
    if (name !== "model") { return {}; }
    var m;
    try { m = VL.panelModel(values.model, values.own_model); } catch (e) {
      if (e instanceof VL.VramlibError) { return {}; }  /* the update shows the one-line error */
      throw e;
    }
    return { n_heads: m.spec.n_heads, n_kv_heads: m.spec.n_kv_heads };
  } });
})();
