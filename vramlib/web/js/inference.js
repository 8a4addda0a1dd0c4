/* vramlib/web/js/inference.js -- the inference calculator (chapters 1, 5, 7): mirrors vramlib.memory.inference
 * (weights_detail, kv_cache_bytes, prefill_workspace_bytes, inference_memory), vramlib.solve.feasibility (largest_fitting,
 * max_tokens) and vramlib.present.widgets.inference.inference_compute. Every size comes from a generated VL.formulas function. */
(function () {
  var F = VL.formulas, C = VL.data.constants;

  VL.weightsDetail = function (m, dtype) {
    var p = VL.getPrecision(dtype, "weights");
    if (m.spec.nominal_params !== null || (Object.keys(p.keeps).length === 0 && !p.gguf)) {
      return [["weights", VL.toIntBytes(F.WEIGHTS_BYTES({ N_q: VL.weightParams(m), b_q: p.bits, N_u: 0, b_u: 0 }))]];
    }
    var groups = VL.paramGroups(m).filter(function (g) { return g[1]; });
    var kept = groups.filter(function (g) { return Object.prototype.hasOwnProperty.call(p.keeps, g[0]); });
    var quant = groups.filter(function (g) { return !Object.prototype.hasOwnProperty.call(p.keeps, g[0]); });
    var nQ = VL.sum(quant.map(function (g) { return g[1]; })), nU = VL.sum(kept.map(function (g) { return g[1]; }));
    var bits = function (g) { return g[1] * VL.tensorBits(p, g[0], m); };
    var bQ = nQ ? VL.sum(quant.map(bits)) / nQ : 1;
    var bU = nU ? VL.sum(kept.map(bits)) / nU : 0;  /* no unquantized tensors: b_u multiplies 0 */
    var total = VL.toIntBytes(F.WEIGHTS_BYTES({ N_q: nQ, b_q: bQ, N_u: nU, b_u: bU }));
    var unq = VL.toIntBytes(F.WEIGHTS_BYTES({ N_q: 0, b_q: 1, N_u: nU, b_u: bU }));
    if (p.gguf) { return [["weights", total - unq], ["unquantized tensors", unq]]; }
    var raw = VL.toIntBytes(F.WEIGHTS_BYTES({ N_q: nQ, b_q: p.bits_floor, N_u: 0, b_u: 0 }));
    return [["weights", raw], ["quantization constants", total - raw - unq], ["unquantized tensors", unq]];
  };

  VL.weightsBytes = function (m, dtype) {
    return VL.sum(VL.weightsDetail(m, dtype).map(function (p) { return p[1]; }));
  };

  VL.kvCacheBytes = function (m, tokens, batch, dtype) {
    tokens = VL.checkPositiveInt("tokens", tokens);
    batch = VL.checkPositiveInt("batch", batch);
    return VL.toIntBytes(F.KV_CACHE_BYTES({ L: m.spec.n_layers, n_kv: m.spec.n_kv_heads, d_head: m.spec.head_dim,
      b_kv: VL.kvBytesPerElement(dtype), T: tokens, B: batch }));
  };

  VL.prefillWorkspaceBytes = function (m, tokens, batch, dtype, attention, chunk) {
    tokens = VL.checkPositiveInt("tokens", tokens);
    batch = VL.checkPositiveInt("batch", batch);
    attention = VL.checkChoice("attention", attention, C.ATTENTION);
    if (chunk !== null && chunk !== undefined) { tokens = Math.min(tokens, VL.checkPositiveInt("chunk", chunk)); }
    var bA = VL.getPrecision(dtype, "activation_dtype");
    if (!bA.is_float) { bA = VL.getPrecision("fp16"); }
    return VL.toIntBytes(F.PREFILL_WORKSPACE_BYTES({ B: batch, T: tokens, h: m.spec.hidden, f: m.spec.ffn,
      b_a: bA.bytes_per_element, e_att: attention === "eager" ? 1 : 0, n_h: m.spec.n_heads, V: m.spec.vocab }));
  };

  VL.inferenceMemory = function (m, weights, kvDtype, tokens, batch, attention, reserve, activationDtype, prefillChunk) {
    weights = weights === undefined ? "fp16" : weights;
    kvDtype = kvDtype === undefined ? "fp16" : kvDtype;
    tokens = tokens === undefined ? VL.data.defaults["inference.inference_memory"].tokens : tokens;
    batch = batch === undefined ? 1 : batch;
    attention = attention === undefined ? "sdpa" : attention;
    reserve = reserve === undefined ? C.DEFAULT_RESERVE : reserve;
    var parts = VL.weightsDetail(m, weights).slice();
    var act = activationDtype || (VL.getPrecision(weights, "weights").is_float ? weights : "fp16");
    parts.push(["kv cache", VL.kvCacheBytes(m, tokens, batch, kvDtype)]);
    parts.push(["prefill workspace", VL.prefillWorkspaceBytes(m, tokens, batch, act, attention, prefillChunk)]);
    parts.push(["reserve (CUDA context, framework)", VL.parseMemory(reserve, "reserve")]);
    return new VL.Breakdown(parts, m.name + ": " + weights + " weights, " + kvDtype + " KV, " + batch + " x " +
      VL.commas(tokens) + " tokens, " + attention);
  };

  /* feasibility.largest_fitting */
  VL.largestFitting = function (fits, lo, hi, limit) {
    lo = lo === undefined ? 1 : lo;
    limit = limit === undefined ? Math.pow(2, 40) : limit;
    if (!fits(lo)) { return 0; }
    hi = hi || lo * 2;
    while (fits(hi)) {
      lo = hi;
      hi = hi * 2;
      if (hi > limit) { return limit; }
    }
    while (hi - lo > 1) {
      var mid = Math.floor((lo + hi) / 2);
      if (fits(mid)) { lo = mid; } else { hi = mid; }
    }
    return lo;
  };

  VL.budget = function (memory) { /* Breakdown.capacity */
    if (typeof memory === "string" && !/^[0-9]/.test(memory)) { return VL.getGpu(memory).memory_bytes; }
    return VL.parseMemory(memory, "memory");
  };

  VL.maxTokens = function (m, memory, weights, kvDtype, batch, reserve, attention, prefillChunk) {
    batch = VL.checkPositiveInt("batch", batch === undefined ? 1 : batch);
    var cap = VL.budget(memory), res = VL.parseMemory(reserve === undefined ? C.DEFAULT_RESERVE : reserve, "reserve");
    var w = VL.weightsBytes(m, weights);
    if (attention === null || attention === undefined) {
      var t = F.MAX_TOKENS_KV_ONLY({ M: cap, R: res, W: w, B: batch, L: m.spec.n_layers, n_kv: m.spec.n_kv_heads,
        d_head: m.spec.head_dim, b_kv: VL.kvBytesPerElement(kvDtype) });
      return Math.max(0, VL.floor(t));
    }
    return VL.largestFitting(function (t) {
      return VL.inferenceMemory(m, weights, kvDtype, t, batch, attention, res, null, prefillChunk).total <= cap;
    });
  };

  /* widgets.inference.inference_compute */
  VL.register("inference", function (a) {
    var m = VL.withHeads(VL.model(a.model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu);
    var attention = a.attention === undefined ? "sdpa" : a.attention, batch = a.batch === undefined ? 1 : a.batch;
    var reserve = a.reserve === undefined ? "0.5GB" : a.reserve;
    var bd = VL.inferenceMemory(m, a.weights, a.kv_dtype, a.tokens, batch, attention, reserve);
    var longest = VL.maxTokens(m, card.memory_bytes, a.weights, a.kv_dtype, batch, reserve, attention);
    var free = card.memory_bytes - bd.total;
    var verdict = free >= 0 ? "Fits on " + card.key + ": " + VL.fmtBytes(free) + " free."
      : "Does not fit on " + card.key + ": short by " + VL.fmtBytes(-free) + ".";
    verdict += " Longest context at batch " + batch + ": " + VL.commas(longest) + " tokens" +
      (longest > m.spec.max_context ? " (the model was trained for " + VL.commas(m.spec.max_context) + ")." : ".");
    return [bd, card.memory_bytes, verdict];
  });
})();
