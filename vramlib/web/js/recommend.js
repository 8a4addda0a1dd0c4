/* vramlib/web/js/recommend.js -- the GPU recommender calculator (chapter 9): the glue of vramlib.solve.recommend
 * (recommend_gpus) and vramlib.present.widgets.recommend (recommend_rows, recommend_compute). The rules are
 * @portable Python compiled for the page (VL.py): the card order (hardware.gpu_order), each row's fit, cost and share
 * (recommend.row_view), which rows a card keeps (card_rows), the ranking (rank_order) and the verdict
 * (widgets.recommend.recommend_verdict); the per-GPU memory of each count is VL.planMemory (parallel.js). */
(function () {
  var C = VL.data.constants, MAX_GPUS = VL.data.recommend.MAX_GPUS, PY = VL.py;
  var DF = VL.data.defaults["widgets.recommend.recommend_rows"], ZERO = VL.data.defaults["recommend.recommend_gpus"].zero;
  var PLAN_FIELDS = ["recompute", "micro_batch"];  /* the panel's keywords that are ParallelPlan fields */

  /* hardware.list_gpus (hardware.gpu_order) */
  VL.listGpus = function () {
    var cards = Object.keys(VL.data.gpus).map(function (k) { return VL.data.gpus[k]; });
    return PY.gpu_order(cards).map(function (i) { return cards[i]; });
  };

  /* recommend.Recommendation: recommend.row_view plus the card and its plan memory */
  function rec(gpu, count, pm, headroom) {
    var r = PY.row_view(count, gpu, pm.stages.map(function (bd) { return bd.total; }), headroom);
    r.gpu = gpu;
    r.memory = pm;
    return r;
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
    counts.forEach(function (c) {  /* recommend._plan_for (recommend.count_layout); the panel offloads nothing */
      var layout = PY.count_layout(c, ZERO, false);
      var plan = VL.parallelPlan(Object.assign({ dp: layout[0], zero: layout[1] }, planFields));
      perCount[c] = VL.planMemory(m, plan, seq, Object.assign({}, training, { method: method, buckets: layout[2] }));
    });
    var out = [];
    cards.forEach(function (g) {
      var rows = counts.map(function (c) { return rec(g, c, perCount[c], headroom); });
      PY.card_rows(rows, true, true).forEach(function (i) { out.push(rows[i]); });
    });
    return PY.rank_order(out).map(function (i) { return out[i]; });
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

  /* widgets.recommend.recommend_compute */
  VL.register("recommend", function (a) {
    var recs = VL.recommendRows(a);
    if (!recs.length) { throw new VL.VramlibError("gpu: no catalogue card to compare"); }
    var pick = recs[0];
    return [pick.memory.peak, pick.fits ? pick.capacity : null, PY.recommend_verdict(recs)];
  });
})();
