/* vramlib/web/js/bookshelf.js -- the bookshelf calculator (chapter 14). The picture is not drawn here: the layout, the
 * words and the SVG are vramlib.explain.bookshelf's @portable functions (layout_items, make_shelf, shelf_svg,
 * shelf_words ...) and the panel's HTML is widgets.bookshelf.shelves_html, compiled to JavaScript at build time
 * (VL.py). This file is widgets.bookshelf.bookshelf_compute's glue: the sizes from the inference and training
 * calculators (inference.js, training.js), the catalogue models from the panel's data-fixed
 * (widgets.bookshelf.bookshelf_js_data). */
(function () {
  var C = VL.data.constants, PY = VL.py;
  var has = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k); };
  var DF = VL.data.defaults["widgets.bookshelf.bookshelf_compute"];

  /* bookshelf.shelf_layout (capacity: bytes; precision given) */
  VL.shelfLayout = function (bd, capacity, precision, volumes) {
    volumes = VL.checkPositiveInt("volumes", volumes === undefined ? DF.volumes : volumes);
    var p = VL.getPrecision(precision, "precision");
    return PY.make_shelf(PY.layout_items(bd.parts), capacity, PY.quality_of(p.name, p.bits), volumes, bd.title);
  };

  function shelfBreakdown(s) { return new VL.Breakdown(s.items.map(function (i) { return [i.component, i.nbytes]; }), s.title); }

  /* widgets.bookshelf._with_heads: the heads change only when asked (with_heads re-derives head_dim) */
  function withHeads(m, nHeads, nKvHeads) {
    if (nHeads === m.spec.n_heads) {
      if (nKvHeads === m.spec.n_kv_heads) { return m; }
      VL.checkPositiveInt("n_kv_heads", nKvHeads);
      if (m.spec.n_heads % nKvHeads) {
        var ds = [];
        for (var k = 1; k <= m.spec.n_heads; k++) { if (m.spec.n_heads % k === 0) { ds.push(k); } }
        throw VL.invalid("n_kv_heads", nKvHeads, "must divide n_heads=" + m.spec.n_heads + " (allowed: " + ds.join(", ") + ")");
      }
      return Object.assign({}, m, { spec: Object.assign({}, m.spec, { n_kv_heads: nKvHeads }),
        sym: Object.assign({}, m.sym, { n_kv: nKvHeads }), symActive: Object.assign({}, m.symActive, { n_kv: nKvHeads }) });
    }
    return VL.withHeads(m, nHeads, nKvHeads);
  }

  /* widgets.bookshelf.bookshelf_compute; the result draws itself (VL.render calls result.render) */
  VL.register("bookshelf", function (a) {
    var T = a.js_data;
    if (!has(T.models, a.model)) { throw VL.unknown("model", a.model, Object.keys(T.models)); }
    var m = withHeads(VL.model(T.models[a.model]), a.n_heads, a.n_kv_heads);
    var task = VL.checkChoice("task", a.task === undefined ? DF.task : a.task, T.tasks);
    var card = VL.getGpu(a.gpu), prec = VL.getPrecision(a.weights, "precision");
    var batch = a.batch === undefined ? DF.batch : a.batch;
    var chunk = a.prefill_chunk === undefined ? DF.prefill_chunk : a.prefill_chunk;
    var volumes = a.volumes === undefined ? DF.volumes : a.volumes, out = [], bd;
    if (task === "inference" || task === "both") {
      var kv = prec.is_float && prec.name !== "tf32" ? prec.name : "fp16";
      bd = VL.inferenceMemory(m, prec.name, kv, a.tokens, batch, "sdpa", undefined, null, chunk);
      out.push(["Using the model: " + batch + " x " + VL.commas(a.tokens) + " tokens of conversation",
        VL.shelfLayout(bd, card.memory_bytes, prec.name, volumes)]);
    }
    if (task === "training" || task === "both") {
      if (C.TRAINING_PRECISIONS.indexOf(prec.name) < 0) {
        throw VL.invalid("precision", prec.name, "teaching (training) needs bf16, fp16 or fp32 books; compact 8- and " +
          "4-bit books are for inference (task 'inference')");
      }
      bd = VL.trainingMemory(m, { method: "full", seq: a.tokens, micro_batch: batch, precision: prec.name });
      out.push(["Teaching the model: " + batch + " x " + VL.commas(a.tokens) + "-token sequences",
        VL.shelfLayout(bd, card.memory_bytes, prec.name, volumes)]);
    }
    var first = out[0][1];
    var result = [shelfBreakdown(first), first.capacity_bytes, ""];
    result.render = function () {
      return PY.shelves_html(out, out.map(function (c) { return VL.breakdownTable(shelfBreakdown(c[1])); }));
    };
    return result;
  }, { linked: function (name, values) {  /* widgets.bookshelf.bookshelf_panel's on_model: its own heads */
    var j = values.js_data && values.js_data.models[values.model];
    if (name !== "model" || !j) { return {}; }
    return { n_heads: j["$model"].n_heads, n_kv_heads: j["$model"].n_kv_heads };
  } });
})();
