/* vramlib/web/js/design.js -- the design calculator (chapter 13): mirrors vramlib.present.widgets.design (design_spec,
 * design_compute), vramlib.explain.design (exact, equal_params_shape, evaluate_design, _max_context), vramlib.solve.feasibility
 * (min_gpus, max_batch) and, for shapes no table was exported for, ModelSpec (validation, symbols) and
 * vramlib.catalog.precision's GGUF type rules. Every size and count comes from a generated VL.<module> function. */
(function () {
  var F = VL.formulas, D = VL.data, C = VL.data.constants;
  if (!VL.design || !VL.design.LAYERS_AT_EQUAL_PARAMS) { return; }

  /* ModelSpec.symbols */
  VL.specSymbols = function (s, active) {
    var experts = active ? s.experts_per_token : s.n_experts;
    return { L: s.n_layers, h: s.hidden, n_h: s.n_heads, n_kv: s.n_kv_heads, d_head: s.head_dim, f: s.ffn, V: s.vocab,
      P: s.learned_positions, g: s.gated_mlp ? 1 : 0, n_mlp: (experts || 1) + s.n_shared_experts, E: s.n_experts,
      n_norm: s.norms_per_layer, beta_qkv: s.qkv_bias ? 1 : 0, beta_o: s.attn_out_bias ? 1 : 0,
      beta_mlp: s.mlp_bias ? 1 : 0, beta_norm: s.norm === "layernorm" ? 1 : 0, t_emb: s.tied_embeddings ? 1 : 0 };
  };

  /* ModelSpec.__post_init__ */
  VL.validateSpec = function (s) {
    ["n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "ffn", "vocab", "max_context"].forEach(function (k) {
      VL.checkPositiveInt(k, s[k]);
    });
    ["norms_per_layer", "n_experts", "experts_per_token", "n_shared_experts", "learned_positions"].forEach(function (k) {
      VL.checkPositiveInt(k, s[k], true);
    });
    if (s.n_heads % s.n_kv_heads) {
      var ds = [];
      for (var k = 1; k <= s.n_heads; k++) { if (s.n_heads % k === 0) { ds.push(k); } }
      throw VL.invalid("n_kv_heads", s.n_kv_heads, "must divide n_heads=" + s.n_heads + " (allowed: " + ds.join(", ") + ")");
    }
    if (s.n_experts && !(s.experts_per_token >= 1 && s.experts_per_token <= s.n_experts)) {
      throw VL.invalid("experts_per_token", s.experts_per_token, "must be 1..n_experts=" + s.n_experts);
    }
    if (!s.n_experts && s.experts_per_token) {
      throw VL.invalid("experts_per_token", s.experts_per_token, "must be 0 for a dense model (n_experts=0)");
    }
    return s;
  };

  /* activations._hf_indicators */
  function hfIndicators(s) {
    if (C.HF_FAMILIES.indexOf(s.family) < 0 || s.norm !== "rmsnorm" || !s.gated_mlp || s.n_shared_experts) {
      return { error: "model: got " + VL.repr(s.name) + "; style='hf' follows RMSNorm/RoPE/gated-MLP decoders (" +
        C.HF_FAMILIES.join(", ") + "); family " + VL.repr(s.family) + " is not modelled, use style='megatron'" };
    }
    var gemma = s.family === "gemma" || s.family === "gemma2";
    return { z_qkv: s.fused_qkv ? 1 : 0, z_gemma: gemma ? 1 : 0, z_sc: s.family === "gemma2" ? 1 : 0,
      z_fsc: s.family === "gemma2" ? 1 : 0, z_moe: s.n_experts > 0 ? 1 : 0, z_oc: s.family === "phi3" ? 1 : 0,
      k_e: s.experts_per_token || 1 };
  }

  /* a calculator model for a new shape (its linear modules are the base's: fused and gated flags do not change) */
  VL.modelFromSpec = function (s, base) {
    return { spec: s, name: s.name, sym: VL.specSymbols(s, false), symActive: VL.specSymbols(s, true),
      linear_modules: base.linear_modules.slice(), gguf: null, hf: hfIndicators(s) };
  };

  /* feasibility.min_gpus */
  VL.minGpus = function (sharded, memory, replicated) {
    var cap = VL.budget(memory), rep = VL.parseMemory(replicated === undefined ? 0 : replicated, "replicated_bytes");
    if (cap <= rep) { return 0; }
    var n = F.MIN_GPUS({ S: sharded, M: cap, R: rep });
    return Math.max(1, -VL.floor(-n));
  };

  /* feasibility.max_batch (attention=None: the closed form) */
  VL.maxBatchKvOnly = function (m, memory, tokens, weights, kvDtype, reserve) {
    tokens = VL.checkPositiveInt("tokens", tokens);
    var cap = VL.budget(memory), res = VL.parseMemory(reserve, "reserve");
    var n = F.MAX_BATCH_KV_ONLY({ M: cap, R: res, W: VL.weightsBytes(m, weights), T: tokens, L: m.spec.n_layers,
      n_kv: m.spec.n_kv_heads, d_head: m.spec.head_dim, b_kv: VL.kvBytesPerElement(kvDtype) });
    return Math.max(0, VL.floor(n));
  };

  function roundHalfEven(x) {
    var f = Math.floor(x), d = x - f;
    if (Math.abs(d - 0.5) < 1e-9) { return f % 2 === 0 ? f : f + 1; }
    return Math.round(x);
  }

  /* design.equal_params_shape(spec with one layer, n_params=target, ffn=spec.ffn): the layers it solves */
  function equalParamsLayers(s, target) {
    target = VL.checkPositiveInt("n_params", target);
    var vals = VL.specSymbols(Object.assign({}, s, { n_layers: 1 }), false);
    delete vals.L;
    var layers = VL.int(roundHalfEven(VL.design.LAYERS_AT_EQUAL_PARAMS(Object.assign({ N: target }, vals))));
    if (layers < 1) {
      throw VL.invalid("hidden", s.hidden, "leaves no room for a layer within " + VL.commas(target) + " parameters");
    }
    return layers;
  }

  /* widgets.design.design_spec */
  VL.designSpec = function (base, a) {
    var b = Object.assign({}, base.spec, { nominal_params: null });
    var hidden = VL.checkPositiveInt("hidden", a.hidden), nHeads = VL.checkPositiveInt("n_heads", a.n_heads);
    if (hidden % nHeads) { throw VL.invalid("n_heads", nHeads, "must divide hidden=" + hidden); }
    var nExperts = VL.checkPositiveInt("n_experts", a.n_experts, true);
    var moe = nExperts > 1 ? { n_experts: nExperts, experts_per_token: VL.checkPositiveInt("experts_per_token",
      a.experts_per_token) } : { n_experts: 0, experts_per_token: 0 };
    var ffn = VL.checkPositiveInt("ffn", a.ffn), nLayers = VL.checkPositiveInt("n_layers", a.n_layers);
    var s = VL.validateSpec(Object.assign({}, b, { hidden: hidden, n_heads: nHeads, n_kv_heads: a.n_kv_heads,
      head_dim: Math.floor(hidden / nHeads), ffn: ffn, n_layers: nLayers }, moe));
    if (a.equal_params) {
      var target = VL.int(F.N_PARAMS(VL.specSymbols(b, false)));
      s = VL.validateSpec(Object.assign({}, s, { n_layers: equalParamsLayers(s, target) }));
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
    var cap = VL.budget(gpu);
    context = VL.checkPositiveInt("context", context);
    var nGpus = VL.checkPositiveInt("n_gpus", o.n_gpus), res = VL.parseMemory(C.DEFAULT_RESERVE, "reserve");
    var chunk = VL.data.defaults["design.evaluate_design"].prefill_chunk, trainSeq = o.train_seq;
    var inf = VL.inferenceMemory(m, o.weights, o.kv_dtype, context, 1, "sdpa", res, null, chunk);
    var train = VL.trainingMemory(m, { method: "full", seq: trainSeq, micro_batch: 1, precision: "bf16",
      optimizer: "adamw", convention: "mixed-fp32-master", recompute: "none", reserve: res });
    var act = train.get("activations"), states = train.total - act - res;
    var trains = function (b) {
      var own = VL.activationBytes(m, { seq: trainSeq, batch: b, dtype: "bf16", recompute: "none", scope: "model" });
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
    var d = VL.evaluateDesign(m, a.gpu, a.context, { weights: a.weights, kv_dtype: a.weights !== "fp16" ? "bf16" : "fp16",
      train_seq: trainSeq, n_gpus: nGpus });
    var s = m.spec, nParams = VL.int(F.N_PARAMS(m.sym)), nActive = VL.int(F.N_PARAMS(m.symActive));
    var active = s.n_experts ? ", " + VL.toFixed(nActive / 1e9, 2) + "B active" : "";
    var verdict = s.n_layers + " layers, " + VL.toFixed(nParams / 1e9, 2) + "B parameters" + active + "; KV cache " +
      VL.fixed(d.kv_per_token / 1024, 0) + " KiB per token. On " + a.gpu + ": " +
      (d.fits ? "one " + VL.commas(a.context) + "-token sequence fits, " + VL.commas(d.max_sequences) + " at once"
        : "one " + VL.commas(a.context) + "-token sequence does not fit") +
      "; longest context " + VL.commas(d.max_context) + " tokens. Training on " + VL.commas(trainSeq) +
      "-token sequences needs " + (d.gpus_to_train ? d.gpus_to_train + " GPUs (ZeRO-3)" : "more than any number of such GPUs") +
      "; on " + nGpus + ": micro-batch " + d.max_micro_batch + ".";
    return [d.inference, d.capacity, verdict];
  });
})();
