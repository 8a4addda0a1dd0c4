/* vramlib/web/js/serving.js -- the serving calculator (chapters 6, 8): the glue of vramlib.serve.serving
 * (ServingConfig, serving_kv_capacity) and vramlib.present.widgets.serving.serving_compute. The rules are their
 * @portable parts compiled for the page (VL.py: serving_activation_format, vllm_kv_format, kv_budget, start_problems,
 * serving_parts, capacity_summary, serving_verdict, serving_panel_verdict); this file checks the fields as
 * ServingConfig does and parses the sizes. */
(function () {
  var K = VL.data.serving, PY = VL.py;
  if (!K || !K.UNUSED_KEY) { return; }

  /* serving.ServingConfig's fields and defaults, read from the Python class (jsgen.function_defaults) */
  var DEFAULTS = VL.data.defaults["serving.ServingConfig"];

  function utilization(x) {
    if (typeof x !== "number" || !isFinite(x)) { throw VL.invalid("gpu_memory_utilization", x, "must be a number"); }
    if (!(x > 0 && x <= 1)) { throw VL.invalid("gpu_memory_utilization", x, "must be in (0, 1]"); }
    return x;
  }

  function kvFormat(kv, weights, card) {  /* serving._kv_dtype */
    if (typeof kv !== "string") {
      throw VL.invalid("kv_dtype", kv, "give 'auto', 'fp8', 'fp8_e5m2' or a float format such as 'bf16'");
    }
    var key = kv.trim().toLowerCase();
    if (key === "auto") { return PY.serving_activation_format(VL.getPrecision(weights, "weights"), card); }
    var name = PY.vllm_kv_format(key);
    VL.kvBytesPerElement(name);
    return VL.getPrecision(name).name;
  }

  function memory(o, tp) {  /* ServingConfig.memory_bytes */
    var out = {};
    ["cuda_context", "nccl_memory", "cuda_graph_memory", "non_torch_memory"].forEach(function (k) {
      out[k] = VL.parseMemory(o[k], k);
    });
    if (o.driver_reserved !== null && o.driver_reserved !== undefined) {
      out.driver_reserved = VL.parseMemory(o.driver_reserved, "driver_reserved");
    }
    if (o.activation_peak !== null && o.activation_peak !== undefined) {
      out.activation_peak = VL.parseMemory(o.activation_peak, "activation_peak");
    }
    if (tp === 1) { out.nccl_memory = 0; }
    if (!o.cuda_graphs) { out.cuda_graph_memory = 0; }
    return out;
  }

  /* serving.serving_kv_capacity: the fields the calculator shows */
  VL.servingKvCapacity = function (m, gpu, o) {
    o = Object.assign({}, DEFAULTS, o);
    VL.raiseProblem(PY.full_attention_problem(m, m.uniform_problem || null, "vLLM's KV budget"));  /* serving's rule */
    var card = VL.getGpu(gpu), tp = VL.checkTp("tp", o.tp, m.name, m.spec.n_heads, m.spec.n_kv_heads);
    utilization(o.gpu_memory_utilization);
    VL.checkPositiveInt("block_size", o.block_size);
    VL.checkChoice("entrypoint", o.entrypoint, K.VLLM_ENTRYPOINTS);
    ["max_num_batched_tokens", "max_num_seqs"].forEach(function (k) {
      if (o[k] !== null && o[k] !== undefined) { VL.checkPositiveInt(k, o[k]); }
    });
    VL.checkChoice("cuda_graph_accounting", o.cuda_graph_accounting, K.GRAPH_ACCOUNTING);
    if (o.max_model_len !== null) { VL.checkPositiveInt("max_model_len", o.max_model_len); }
    if (o.request_tokens !== null) { VL.checkPositiveInt("request_tokens", o.request_tokens); }
    var weights = VL.getPrecision(o.weights, "weights").name, kvName = kvFormat(o.kv_dtype, weights, card);
    var cS = o.sampler_bytes_per_logit;
    if (typeof cS !== "number") { throw VL.invalid("sampler_bytes_per_logit", cS, "must be a number"); }
    if (cS <= 0) { throw VL.invalid("sampler_bytes_per_logit", cS, "must be positive"); }
    var mem = memory(o, tp);
    mem.driver_reserved = PY.driver_reserve(card, mem.driver_reserved === undefined ? null : mem.driver_reserved,
      VL.parseMemory(K.DRIVER_RESERVED, "driver_reserved"))[0];   /* serving.driver_reserve: the card's, published */
    if (mem.driver_reserved >= card.memory_bytes) {
      throw VL.invalid("driver_reserved", o.driver_reserved, "must be below the card's " + VL.fmtBytes(card.memory_bytes));
    }
    var act = PY.serving_activation_format(VL.getPrecision(weights, "weights"), card);
    var picked = PY.vllm_batch_defaults(card, card.memory_bytes - mem.driver_reserved, o.entrypoint);
    var cfg = Object.assign({}, o, { tp: tp, weights: weights,      /* serving_kv_capacity: the card's vLLM defaults */
      max_num_batched_tokens: o.max_num_batched_tokens || picked[0], max_num_seqs: o.max_num_seqs || picked[1] });
    var b = PY.kv_budget(m, card, cfg, mem, [VL.weightsBytes(m, weights), VL.getPrecision(act).bytes_per_element,
      VL.kvBytesPerElement(kvName)]);
    var problems = PY.start_problems(card, [weights, kvName, act], b);
    var c = PY.capacity_summary(m.name, card.key, tp, o.block_size, b, problems);
    var got = PY.serving_parts(m.name, card, tp, [weights, kvName], b);
    c.breakdown = new VL.Breakdown(got[0], got[1]);
    c.kv_heads_per_gpu = b.kv_heads;
    return c;
  };

  /* widgets.serving.serving_compute */
  VL.register("serving", function (a) {
    var m = VL.withHeads(VL.model(a.model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu);
    var c = VL.servingKvCapacity(m, card.key, { gpu_memory_utilization: a.gpu_memory_utilization, tp: a.tp,
      block_size: a.block_size, max_num_batched_tokens: VL.checkPositiveInt("max_num_batched_tokens", a.max_num_batched_tokens),
      weights: a.weights,
      kv_dtype: a.kv_dtype, request_tokens: a.request_tokens,
      max_num_seqs: a.max_num_seqs === undefined ? DEFAULTS.max_num_seqs : a.max_num_seqs,
      max_model_len: VL.checkPositiveInt("request tokens", a.request_tokens) });
    return [c.breakdown, card.memory_bytes, PY.serving_panel_verdict(c, a.request_tokens)];
  });
})();
