/* vramlib/web/js/finetune.js -- the fine-tuning plan calculator (chapters 3, 4): mirrors vramlib.present.widgets.finetune
 * (finetune_plan, finetune_compute). The plan model is parallel.js's VL.planMemory (vramlib.plans.parallel.plan_memory:
 * full, LoRA and QLoRA, optimizer offload, buckets, host memory) and its verdict VL.planVerdict
 * (widgets.parallel.plan_verdict); the card notes and the ZeRO comparison's words are widgets.finetune's @portable
 * card_notes and zero_stage_text (VL.py). */
(function () {
  var FT = VL.ft = {};

  var FT_DEFAULTS = VL.data.defaults["widgets.finetune.finetune_plan"], ZERO_STAGES = VL.data.parallel.ZERO_STAGES;

  /* widgets.finetune.finetune_plan */
  FT.finetunePlan = function (model, gpu, values) {
    VL.getGpu(gpu);
    var a = Object.assign({}, FT_DEFAULTS);
    Object.keys(values).forEach(function (k) { if (values[k] !== undefined) { a[k] = values[k]; } });
    var m = VL.model(model);
    if (a.n_heads !== null || a.n_kv_heads !== null) {
      m = VL.withHeads(m, a.n_heads || m.spec.n_heads, a.n_kv_heads || m.spec.n_kv_heads);
    }
    var plan = VL.parallelPlan({ tp: a.tp, pp: a.pp, dp: a.dp, zero: Math.trunc(a.zero), recompute: a.recompute,
      micro_batch: a.micro_batch, n_micro: a.n_micro, sequence_parallel: !!a.sequence_parallel && a.tp > 1,
      offload_optimizer: a.offload_optimizer });
    return VL.planMemory(m, plan, a.seq, { method: a.method, precision: a.precision, optimizer: a.optimizer,
      convention: a.convention, attention: a.attention, lora_rank: a.lora_rank, reserve: a.reserve, peak: a.peak });
  };

  function cardNotes(gpu, precision, attention) { return VL.py.card_notes(VL.getGpu(gpu), precision, attention); }

  /* widgets.finetune.finetune_compute */
  VL.register("finetune", function (a) {
    var values = Object.assign({}, a);
    var model = values.model, gpu = values.gpu, compare = !!values.compare_zero;
    delete values.model; delete values.gpu; delete values.compare_zero;
    var card = VL.getGpu(gpu);
    var pm = FT.finetunePlan(model, gpu, values);
    var precision = values.precision === undefined ? FT_DEFAULTS.precision : values.precision;
    var attention = values.attention === undefined ? FT_DEFAULTS.attention : values.attention;
    var verdict = VL.planVerdict(pm, card.memory_bytes) + cardNotes(gpu, precision, attention);
    if (compare) {
      var chosen = Math.trunc(values.zero === undefined ? FT_DEFAULTS.zero : values.zero), bits = [];
      ZERO_STAGES.forEach(function (z) {
        var pz;
        try {
          pz = FT.finetunePlan(model, gpu, Object.assign({}, values, { zero: z }));
        } catch (e) {
          if (!(e instanceof VL.VramlibError)) { throw e; }
          bits.push("ZeRO-" + z + ": " + e.message);
          return;
        }
        bits.push(VL.py.zero_stage_text(z, chosen, pz.total));
      });
      verdict += " Fullest rank by ZeRO stage: " + bits.join("; ") + ".";
    }
    return [pm.peak, card.memory_bytes, verdict];
  });
})();
