/* vramlib/web/js/recommend.js -- the GPU recommender calculator (chapter 9): mirrors vramlib.solve.recommend (recommend_gpus,
 * Recommendation, the ranking) and vramlib.present.widgets.recommend (recommend_rows, _verdict, recommend_compute). The
 * per-GPU memory of each count is VL.planMemory (parallel.js); the cost is the generated VL.recommend.COST_PER_HOUR. */
(function () {
  var C = VL.data.constants, MAX_GPUS = VL.data.recommend.MAX_GPUS;
  var DF = VL.data.defaults["widgets.recommend.recommend_rows"], ZERO = VL.data.defaults["recommend.recommend_gpus"].zero;
  var PLAN_FIELDS = ["recompute", "micro_batch"];  /* the panel's keywords that are ParallelPlan fields */

  /* hardware.list_gpus: smallest memory first, then cheapest (unpriced last), then key */
  VL.listGpus = function () {
    var cards = Object.keys(VL.data.gpus).map(function (k) { return VL.data.gpus[k]; });
    var price = function (g) { return g.price_per_hour_usd === null ? Infinity : g.price_per_hour_usd; };
    return cards.sort(function (a, b) {
      return (a.memory_bytes - b.memory_bytes) || (price(a) - price(b)) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
    });
  };

  /* Recommendation.cost_per_hour_usd: float(COST_PER_HOUR) at the exact decimal price */
  function cost(r) {
    if (r.gpu.price_per_hour_usd === null) { return null; }
    return Number(VL.recommend.COST_PER_HOUR({ n: r.count, p_h: r.gpu.price_per_hour_usd }).toFixed(10));
  }

  function rec(gpu, count, pm, headroom) {
    var r = { gpu: gpu, count: count, memory: pm, headroom: headroom, per_gpu_bytes: pm.total,
      capacity: gpu.memory_bytes, fits: pm.stages.every(function (bd) { return bd.total <= gpu.memory_bytes * (1 - headroom); }) };
    r.share = r.per_gpu_bytes / r.capacity;
    r.cost = cost(r);
    r.label = count + " x " + gpu.key;
    return r;
  }

  function rankCompare(a, b) { /* recommend._rank */
    var ka = [!a.fits ? 1 : 0, a.cost === null ? 1 : 0, a.cost === null ? Infinity : a.cost, a.count, a.share];
    var kb = [!b.fits ? 1 : 0, b.cost === null ? 1 : 0, b.cost === null ? Infinity : b.cost, b.count, b.share];
    for (var i = 0; i < ka.length; i++) {
      if (ka[i] < kb[i]) { return -1; }
      if (ka[i] > kb[i]) { return 1; }
    }
    return a.gpu.key < b.gpu.key ? -1 : a.gpu.key > b.gpu.key ? 1 : 0;
  }

  /* recommend.recommend_gpus with zero=3, fewest_only, include_unfit, every catalogue card */
  VL.recommendGpus = function (m, method, seq, counts, headroom, kw) {
    method = VL.checkChoice("method", method, C.METHODS);
    seq = VL.checkPositiveInt("seq", seq);
    if (!(headroom >= 0 && headroom < 1)) { throw VL.invalid("headroom", headroom, "must be a fraction in [0, 1)"); }
    var cards = VL.listGpus(), planFields = {}, training = {};
    Object.keys(kw).forEach(function (k) { (PLAN_FIELDS.indexOf(k) >= 0 ? planFields : training)[k] = kw[k]; });
    VL.getPrecision(training.precision === undefined ? DF.precision : training.precision, "precision");
    VL.checkChoice("attention", training.attention === undefined ? DF.attention : training.attention, C.ATTENTION);
    var perCount = {};
    counts.forEach(function (c) {
      var plan = VL.parallelPlan(Object.assign({ dp: c, zero: c === 1 ? 0 : ZERO }, planFields));
      perCount[c] = VL.planMemory(m, plan, seq, Object.assign({}, training, { method: method,
        buckets: c === 1 ? "none" : "auto" }));
    });
    var out = [];
    cards.forEach(function (g) {
      var rows = counts.map(function (c) { return rec(g, c, perCount[c], headroom); });
      var fitting = rows.filter(function (r) { return r.fits; }), unfit = rows.filter(function (r) { return !r.fits; });
      out = out.concat(fitting.length ? fitting.slice(0, 1) : unfit.slice(-1));
    });
    return out.sort(rankCompare);
  };

  /* widgets.recommend.recommend_rows */
  VL.recommendRows = function (a) {
    var m = VL.model(a.model);
    var nh = a.n_heads === undefined ? null : a.n_heads, nkv = a.n_kv_heads === undefined ? null : a.n_kv_heads;
    if (nh !== null || nkv !== null) { m = VL.withHeads(m, nh || m.spec.n_heads, nkv || m.spec.n_kv_heads); }
    var pct = a.headroom_pct === undefined ? DF.headroom_pct : a.headroom_pct;
    if (typeof pct !== "number" || !Number.isInteger(pct) || pct < 0 || pct >= 100) {
      throw VL.invalid("headroom_pct", pct, "must be a whole percentage in [0, 100)");
    }
    var maxGpus = a.max_gpus === undefined ? DF.max_gpus : a.max_gpus;
    if (MAX_GPUS.indexOf(maxGpus) < 0) {
      throw VL.invalid("max_gpus", maxGpus, "choose " + MAX_GPUS.slice(0, -1).join(", ") + " or " + MAX_GPUS.slice(-1));
    }
    var counts = MAX_GPUS.filter(function (c) { return c <= maxGpus; });
    var pick = function (k) { return a[k] === undefined ? DF[k] : a[k]; };
    return VL.recommendGpus(m, pick("method"), pick("seq"), counts, pct / 100, {
      precision: pick("precision"), optimizer: pick("optimizer"), convention: pick("convention"),
      recompute: pick("recompute"), attention: pick("attention"), lora_rank: pick("lora_rank"),
      micro_batch: pick("micro_batch"), reserve: pick("reserve") });
  };

  /* widgets.recommend._verdict */
  function verdict(recs) {
    var fit = recs.filter(function (r) { return r.fits; });
    if (!fit.length) {
      if (!recs.length) { return "No catalogue card to compare."; }
      return "Nothing in the catalogue fits under " + VL.toFixed(100 * (1 - recs[0].headroom), 0) + "% with up to " +
        Math.max.apply(null, recs.map(function (r) { return r.count; })) +
        " GPUs: shorten the sequence, recompute activations, use LoRA/QLoRA or more GPUs.";
    }
    var say = function (r) { return r.label + (r.cost !== null ? " ($" + VL.fixed(r.cost, 2) + "/h)" : " (no price)"); };
    var best = fit[0];
    var head = "Cheapest that fits: " + say(best) + ", " + VL.fmtBytes(best.per_gpu_bytes) + " of " +
      VL.fmtBytes(best.capacity) + " per GPU" + (best.gpu.price_date ? ", prices of " + best.gpu.price_date : "") + ".";
    if (fit.length > 1) {
      head += " Next: " + fit.slice(1, 4).map(say).join("; ") + ". " + fit.length + " cards fit in all.";
    }
    return head;
  }

  /* widgets.recommend.recommend_compute */
  VL.register("recommend", function (a) {
    var recs = VL.recommendRows(a);
    if (!recs.length) { throw new VL.VramlibError("gpu: no catalogue card to compare"); }
    var pick = recs[0];
    return [pick.memory.peak, pick.fits ? pick.capacity : null, verdict(recs)];
  });
})();
