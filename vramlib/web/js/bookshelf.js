/* vramlib/web/js/bookshelf.js -- the bookshelf calculator (chapter 14). The picture is not drawn here: the layout, the
 * words and the SVG are vramlib.explain.bookshelf's @portable functions (layout_items, make_shelf, shelf_svg,
 * shelf_words ...) and the panel's HTML is widgets.bookshelf.shelves_html, compiled to JavaScript at build time
 * (VL.py). This file is widgets.bookshelf.bookshelf_compute's glue: the sizes from the inference and training
 * calculators (inference.js, training.js), the catalogue models from the panel's data-fixed
 * (widgets.bookshelf.bookshelf_js_data). */
(function () {
  var PY = VL.py;
  var has = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k); };
  var DF = VL.data.defaults["widgets.bookshelf.bookshelf_compute"];

  /* bookshelf.shelf_layout (capacity: bytes; precision given) */
  VL.shelfLayout = function (bd, capacity, precision, volumes) {
    volumes = VL.checkPositiveInt("volumes", volumes === undefined ? DF.volumes : volumes);
    var p = VL.getPrecision(precision, "precision");
    return PY.make_shelf(PY.layout_items(bd.parts), capacity, PY.quality_of(p.name, p.bits), volumes, bd.title);
  };

  function shelfBreakdown(s) { return new VL.Breakdown(s.items.map(function (i) { return [i.component, i.nbytes]; }), s.title); }

  /* widgets.bookshelf.bookshelf_compute; the result draws itself (VL.render calls result.render) */
  VL.register("bookshelf", function (a) {
    var T = a.js_data;
    if (!has(T.models, a.model)) { throw VL.unknown("model", a.model, Object.keys(T.models)); }
    var m = VL.withHeads(VL.model(T.models[a.model]), a.n_heads, a.n_kv_heads);
    var task = VL.checkChoice("task", a.task === undefined ? DF.task : a.task, T.tasks);
    var card = VL.getGpu(a.gpu), prec = VL.getPrecision(a.weights, "precision");
    var batch = a.batch === undefined ? DF.batch : a.batch;
    var chunk = a.prefill_chunk === undefined ? DF.prefill_chunk : a.prefill_chunk;
    var volumes = a.volumes === undefined ? DF.volumes : a.volumes, out = [], bd;
    if (task === "inference" || task === "both") {
      bd = VL.inferenceMemory(m, prec.name, PY.bookshelf_kv_format(prec), a.tokens, batch, "sdpa", undefined, null, chunk);
      out.push([PY.bookshelf_caption("inference", batch, a.tokens), VL.shelfLayout(bd, card.memory_bytes, prec.name, volumes)]);
    }
    if (task === "training" || task === "both") {
      VL.raiseProblem(PY.bookshelf_training_problem(prec.name));
      bd = VL.trainingMemory(m, { method: "full", seq: a.tokens, micro_batch: batch, precision: prec.name });
      out.push([PY.bookshelf_caption("training", batch, a.tokens), VL.shelfLayout(bd, card.memory_bytes, prec.name, volumes)]);
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
