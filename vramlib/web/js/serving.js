/* vramlib/web/js/serving.js -- the serving calculator (chapters 6, 8): the glue of vramlib.serve.serving
 * (ServingConfig, serving_kv_capacity) and vramlib.present.widgets.serving.serving_compute. The rules are their
 * @portable parts compiled for the page (VL.py: serving_activation_format, vllm_kv_format, kv_budget (with
 * serving_activation_peak, serving_extras, serving_concurrency: LoRA slots, prefix caching, a drafter), start_problems,
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

  function extras(o, tp) {  /* serving._check_extras; serving._kv_budget's drafter: null or {m, w} */
    ["max_loras", "shared_prefix_tokens", "num_speculative_tokens"].forEach(function (k) {
      VL.checkPositiveInt(k, o[k], true);
    });
    var ranks = VL.shared.VLLM_LORA_RANKS, dtypes = VL.shared.VLLM_LORA_DTYPES;
    if (typeof o.max_lora_rank !== "number" || ranks.indexOf(o.max_lora_rank) < 0) {
      throw VL.invalid("max_lora_rank", o.max_lora_rank, "vLLM allows " + ranks.join(", "));
    }
    if (typeof o.lora_dtype !== "string") { throw VL.invalid("lora_dtype", o.lora_dtype, "give 'auto', 'bf16' or 'fp16'"); }
    var lora = VL.checkChoice("lora_dtype", o.lora_dtype, Object.keys(dtypes));
    if (o.draft_model === null || o.draft_model === undefined) {
      if (o.num_speculative_tokens) {
        throw VL.invalid("num_speculative_tokens", o.num_speculative_tokens,
          "needs a draft_model (the drafter whose weights and KV are counted)");
      }
      return [dtypes[lora], null];
    }
    if (typeof o.draft_model !== "string") {
      throw VL.invalid("draft_model", o.draft_model, "must be None or a catalogue model name");
    }
    if (!Object.prototype.hasOwnProperty.call(VL.data.models, o.draft_model)) {
      throw VL.unknown("draft_model", o.draft_model, Object.keys(VL.data.models));
    }
    if (!o.num_speculative_tokens) {
      throw VL.invalid("num_speculative_tokens", 0, "a draft_model needs num_speculative_tokens >= 1");
    }
    var dm = VL.model(VL.data.models[o.draft_model]);
    VL.raiseProblem(PY.full_attention_problem(dm, dm.uniform_problem || null, "the drafter's KV cache"));
    VL.checkTp("tp", tp, dm.name, dm.spec.n_heads, dm.spec.n_kv_heads);
    return [dtypes[lora], { m: dm, w: VL.weightsBytes(dm, o.weights) }];
  }

  /* serving.serving_kv_capacity: the fields the calculator shows */
  VL.servingKvCapacity = function (m, gpu, o) {
    o = Object.assign({}, DEFAULTS, o);
    VL.raiseProblem(PY.serving_layers_problem(m, m.uniform_problem || null, "vLLM's KV budget"));  /* serving's rule */
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
    var x = extras(cfg, tp), loraName = x[0] === "auto" ? act : x[0];
    var b = PY.kv_budget(m, card, cfg, mem, [VL.weightsBytes(m, weights), VL.getPrecision(act).bytes_per_element,
      VL.kvBytesPerElement(kvName), VL.getPrecision(loraName).bytes_per_element], x[1]);
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
