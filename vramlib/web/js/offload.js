/* vramlib/web/js/offload.js -- the offload calculator (chapter 17): the glue of vramlib.serve.offload.offload_plan
 * and vramlib.present.widgets.offload.offload_compute. The rules are their @portable parts compiled for the page
 * (VL.py: layer_weights_of, llamacpp_buffers, llamacpp_split, most_gpu_layers, decode_kv_read, decode_rate,
 * offload_core, offload_verdict, gpu_budget_of, panel_type_v); this file checks the fields as OffloadConfig and LlamaCppConfig
 * do and reads the catalogue (VL.data.offload: hosts and their bandwidth). */
(function () {
  var K = VL.data.offload, PY = VL.py;
  if (!K || !K.HOSTS) { return; }

  function llamaConfig(a) {  /* llamacpp.LlamaCppConfig's checks for the fields the panel sets */
    var c = Object.assign({}, VL.data.defaults["llamacpp.LlamaCppConfig"]);
    c.n_ctx = VL.checkPositiveInt("n_ctx", a.n_ctx);
    c.flash_attn = !!a.flash_attn;
    c.type_k = VL.checkChoice("type_k", a.type_k, K.KV_TYPES);
    c.type_v = PY.panel_type_v(c.type_k, c.flash_attn);   /* widgets.offload.panel_type_v */
    return c;
  }

  VL.register("offload", function (a) {
    var m = VL.withHeads(VL.panelModel(a.model, a.own_model), a.n_heads, a.n_kv_heads);
    var card = VL.getGpu(a.gpu);
    var host = K.HOSTS[VL.checkChoice("host", a.host, Object.keys(K.HOSTS))];
    var ram = VL.parseMemory(a.host_ram, "host_ram");
    var reserved = VL.parseMemory(VL.data.defaults["offload.OffloadConfig"].host_reserved, "host_reserved");
    if (a.cpu_moe && !m.spec.n_experts) { throw VL.invalid("cpu_moe", true, m.name + " has no routed experts"); }
    var ngl = a.n_gpu_layers === K.AUTO ? null : VL.checkPositiveInt("n_gpu_layers", a.n_gpu_layers, true);
    var c = llamaConfig(a);
    var budget = PY.gpu_budget_of(card);
    var x = PY.offload_core(m, PY.layer_weights_of(m, VL.getPrecision(a.weights, "weights")), c, [ngl, !!a.cpu_moe, c.n_ctx],
      { budget: budget, gpu_gb_s: card.bandwidth_gb_s, host_gb_s: host.bandwidth_gb_s });
    return [new VL.Breakdown(x.gpu, m.name + " " + a.weights + " on " + card.key + " + " + a.host + ", -ngl " + x.ngl +
      ": GPU"), budget, PY.offload_verdict(x, m.spec.n_layers, budget, ram - reserved)];
  }, { linked: VL.calcs.inference.linked });   /* a new model brings its own heads, as in the inference panel */
})();
