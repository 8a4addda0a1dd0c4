/* vramlib/web/js/serving.js -- the serving calculator (chapters 6, 8): mirrors vramlib.serve.serving (serving_kv_capacity,
 * ServingCapacity.verdict and its helpers) and vramlib.present.widgets.serving.serving_compute. Every size comes from a
 * generated VL.serving / VL.formulas function; the constants are exported from vramlib.serve.serving. */
(function () {
  var S = VL.serving, K = VL.data.serving;
  if (!S || !K || !K.UNUSED_KEY) { return; }

  function fmtG(x) { return String(Number(x.toPrecision(6))); } /* Python f"{x:g}" for (0, 1e6) */

  function utilization(x) {
    if (typeof x !== "number" || !isFinite(x)) { throw VL.invalid("gpu_memory_utilization", x, "must be a number"); }
    if (!(x > 0 && x <= 1)) { throw VL.invalid("gpu_memory_utilization", x, "must be in (0, 1]"); }
    return x;
  }

  function activationDtype(weights, card) {
    var p = VL.getPrecision(weights, "weights");
    if (p.is_float && p.bits >= 16) { return p.name; }
    return card.supports_bf16 ? "bf16" : "fp16";
  }

  function kvDtype(kv, weights, card) {
    if (typeof kv !== "string") {
      throw VL.invalid("kv_dtype", kv, "give 'auto', 'fp8', 'fp8_e5m2' or a float format such as 'bf16'");
    }
    var key = kv.trim().toLowerCase();
    if (key === "auto") { return activationDtype(weights, card); }
    var name = Object.prototype.hasOwnProperty.call(K.VLLM_KV_NAMES, key) ? K.VLLM_KV_NAMES[key] : key;
    VL.kvBytesPerElement(name);
    return VL.getPrecision(name).name;
  }

  function checkTp(m, tp) { return VL.checkTp("tp", tp, m.name, m.spec.n_heads, m.spec.n_kv_heads); }

  /* serving.ServingConfig's fields and defaults, read from the Python class (jsgen.function_defaults) */
  var DEFAULTS = VL.data.defaults["serving.ServingConfig"];

  /* serving.serving_kv_capacity: the fields the calculator shows */
  VL.servingKvCapacity = function (m, gpu, o) {
    o = Object.assign({}, DEFAULTS, o);
    var card = VL.getGpu(gpu), util = utilization(o.gpu_memory_utilization), tp = checkTp(m, o.tp);
    var blockSize = VL.checkPositiveInt("block_size", o.block_size);
    var nBt = VL.checkPositiveInt("max_num_batched_tokens", o.max_num_batched_tokens);
    var nSq = VL.checkPositiveInt("max_num_seqs", o.max_num_seqs);
    var accounting = VL.checkChoice("cuda_graph_accounting", o.cuda_graph_accounting, K.GRAPH_ACCOUNTING);
    var maxLen = o.max_model_len === null ? m.spec.max_context : VL.checkPositiveInt("max_model_len", o.max_model_len);
    var req = o.request_tokens === null ? maxLen : VL.checkPositiveInt("request_tokens", o.request_tokens);
    var weights = VL.getPrecision(o.weights, "weights").name;
    var kvName = kvDtype(o.kv_dtype, weights, card);
    var cS = o.sampler_bytes_per_logit;
    if (typeof cS !== "number") { throw VL.invalid("sampler_bytes_per_logit", cS, "must be a number"); }
    if (cS <= 0) { throw VL.invalid("sampler_bytes_per_logit", cS, "must be positive"); }
    var cap = card.memory_bytes, rDrv = VL.parseMemory(o.driver_reserved, "driver_reserved");
    if (rDrv >= cap) { throw VL.invalid("driver_reserved", o.driver_reserved, "must be below the card's " + VL.fmtBytes(cap)); }
    var ctx = VL.parseMemory(o.cuda_context, "cuda_context");
    var nccl = tp > 1 ? VL.parseMemory(o.nccl_memory, "nccl_memory") : 0;
    var graphs = o.cuda_graphs ? VL.parseMemory(o.cuda_graph_memory, "cuda_graph_memory") : 0;
    var nt = VL.parseMemory(o.non_torch_memory, "non_torch_memory");
    var gIn = accounting === "budget" ? 1 : 0;
    var wTotal = VL.weightsBytes(m, weights);
    var wGpu = VL.toIntBytes(S.WEIGHTS_PER_GPU({ W: wTotal, n_tp: tp }));
    var bAct = VL.getPrecision(activationDtype(weights, card)).bytes_per_element;
    var act = o.activation_peak === null
      ? VL.toIntBytes(S.ACTIVATION_PEAK_BYTES({ N_bt: nBt, h: m.spec.hidden, f: m.spec.ffn, n_tp: tp, b_a: bAct,
        n_h: m.spec.n_heads, V: m.spec.vocab, n_seq: nSq, c_s: cS }))
      : VL.parseMemory(o.activation_peak, "activation_peak");
    var cudaTotal = VL.int(S.CUDA_TOTAL_BYTES({ M: cap, R_drv: rDrv }));
    var requested = VL.int(S.REQUESTED_BYTES({ u: util, M: cap, R_drv: rDrv }));
    var avail = VL.int(S.AVAILABLE_KV_BYTES({ u: util, M: cap, R_drv: rDrv, W: wTotal, n_tp: tp, A_peak: act, N_nt: nt,
      g_cg: gIn, G_cg: graphs }));
    var kvHeads = VL.int(S.KV_HEADS_PER_GPU({ n_kv: m.spec.n_kv_heads, n_tp: tp }));
    var shape = { b_blk: blockSize, n_kv: m.spec.n_kv_heads, n_tp: tp, d_head: m.spec.head_dim,
      b_kv: VL.kvBytesPerElement(kvName), L: m.spec.n_layers };
    var blkBytes = VL.toIntBytes(S.BLOCK_BYTES(shape));
    var blocks = Math.max(0, S.NUM_BLOCKS(Object.assign({ K_avail: Math.max(avail, 0) }, shape)));
    var tokens = VL.int(S.KV_TOKENS({ N_blocks: blocks, b_blk: blockSize }));
    var conc = S.MAX_CONCURRENCY({ N_blocks: blocks, T_req: req, b_blk: blockSize });
    var kvBytes = blocks * blkBytes;
    var headroom = S.UNUSED_BYTES({ u: util, M: cap, R_drv: rDrv, C_ctx: ctx + nccl, g_cg: gIn, G_cg: graphs });

    var problems = [], checks = [["weights", weights], ["kv_dtype", kvName], ["activations", activationDtype(weights, card)]];
    for (var i = 0; i < checks.length; i++) {
      if (checks[i][1] === "bf16" && !card.supports_bf16) {
        problems.push(checks[i][0] + ": bf16 needs compute capability >= 8.0 (" + card.key + " has " +
          card.compute_capability + "); use fp16");
        break;
      }
    }
    var freeAtStart = cudaTotal - ctx - nccl;
    if (freeAtStart < requested) {
      problems.push("free memory at start-up (" + VL.fmtBytes(freeAtStart, 2) + ") is below total x " +
        "gpu_memory_utilization (" + VL.fmtBytes(requested, 2) + ")");
    }
    if (wGpu > freeAtStart) {
      problems.push("the weights (" + VL.fmtBytes(wGpu, 2) + " per GPU) do not fit");
    } else if (blocks === 0) {
      problems.push("no available memory for the cache blocks (weights + activations exceed the budget)");
    }
    if (headroom < 0 && !gIn && !problems.length) {
      problems.push("CUDA graph capture needs " + VL.fmtBytes(graphs, 2) + " but the headroom is " +
        VL.fmtBytes(headroom + graphs, 2));
    }
    var starts = !problems.length;
    var parts = [["weights", wGpu], ["activations (profiled peak)", act], ["non-torch memory", nt], ["kv cache", kvBytes],
      ["cudagraph pool", graphs], ["cuda context", ctx]];
    if (tp > 1) { parts.push(["nccl (buffers)", nccl]); }
    parts.push([K.UNUSED_KEY, Math.max(0, cap - rDrv - VL.sum(parts.map(function (p) { return p[1]; })))]);
    parts.push([K.DRIVER_KEY, rDrv]);
    var title = m.name + " on " + card.key + (tp > 1 ? " (tp=" + tp + ", per GPU)" : "") + ": vLLM budget, utilization " +
      fmtG(util) + ", " + weights + " weights, " + kvName + " KV";
    return { model: m.name, gpu: card.key, tp: tp, block_size: blockSize, num_blocks: blocks, kv_tokens: tokens,
      kv_cache_bytes: kvBytes, max_model_len: maxLen, request_tokens: req, max_concurrency: conc,
      max_concurrent_requests: VL.floor(conc), starts: starts, fits_max_model_len: starts && tokens >= maxLen,
      problems: problems, kv_heads_per_gpu: kvHeads, breakdown: new VL.Breakdown(parts, title) };
  };

  /* ServingCapacity.verdict */
  VL.servingVerdict = function (c) {
    var head = c.tp > 1 ? c.model + " on " + c.tp + " x " + c.gpu : c.model + " on " + c.gpu;
    if (!c.starts) { return head + ": vLLM would not start: " + c.problems.join("; "); }
    var line = head + ": " + VL.commas(c.num_blocks) + " blocks of " + c.block_size + " tokens = " +
      VL.commas(c.kv_tokens) + " tokens of KV cache (" + VL.fmtBytes(c.kv_cache_bytes, 2) + " per GPU); " +
      VL.fixed(c.max_concurrency, 2) + "x concurrency for " + VL.commas(c.request_tokens) + "-token requests";
    if (!c.fits_max_model_len) {
      line += "; but max_model_len " + VL.commas(c.max_model_len) + " does not fit (vLLM refuses it: set " +
        "--max-model-len <= " + VL.commas(c.kv_tokens) + ")";
    }
    return line + ".";
  };

  /* widgets.serving.serving_compute */
  VL.register("serving", function (a) {
    var m = VL.withHeads(VL.model(a.model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu);
    var c = VL.servingKvCapacity(m, card.key, { gpu_memory_utilization: a.gpu_memory_utilization, tp: a.tp,
      block_size: a.block_size, max_num_batched_tokens: a.max_num_batched_tokens, weights: a.weights,
      kv_dtype: a.kv_dtype, request_tokens: a.request_tokens,
      max_num_seqs: a.max_num_seqs === undefined ? DEFAULTS.max_num_seqs : a.max_num_seqs,
      max_model_len: Math.max(a.request_tokens, 1) });
    var verdict = VL.servingVerdict(c);
    if (c.starts) {
      verdict += " At most " + VL.commas(c.max_concurrent_requests) + " requests of " + VL.commas(a.request_tokens) +
        " tokens at once.";
    }
    return [c.breakdown, card.memory_bytes, verdict];
  });
})();
