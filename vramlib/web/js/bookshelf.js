/* vramlib/web/js/bookshelf.js -- the bookshelf calculator (chapter 14): mirrors vramlib.present.widgets.bookshelf
 * (bookshelf_compute, bookshelf_render) and vramlib.explain.bookshelf (print_quality, shelf_layout, fmt_gb, verdict,
 * legend_rows, shelf_alt_text, item_labels, bookshelf_svg). The sizes come from the inference and training
 * calculators (inference.js, training.js: generated formulas); the furniture tables and the catalogue models come
 * from vramlib itself, in the panel's data-fixed (widgets.bookshelf.bookshelf_js_data). */
(function () {
  var C = VL.data.constants;
  var has = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k); };

  function roundHalfEven(x) { /* Python round() */
    var f = Math.floor(x), d = x - f;
    if (d === 0.5) { return f % 2 === 0 ? f : f + 1; }
    return Math.round(x);
  }
  function fmtG3(x) { /* Python f"{x:.3g}" for 0.001 <= x < 1000 */
    var e = Math.floor(Math.log10(Math.abs(x))), s = VL.toFixed(x, Math.max(0, 2 - e));
    return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
  }

  /* bookshelf.fmt_gb */
  function g(n) {
    var v = VL.gb(n);
    if (v >= 0.95) { return VL.fixed(v, 1) + " GB"; }
    return v >= 0.005 ? VL.toFixed(v, 2) + " GB" : "under 0.01 GB";
  }
  VL.shelfGb = g;

  /* bookshelf.print_quality */
  function printQuality(T, precision) {
    var p = VL.getPrecision(precision, "precision"), bits = p.bits;
    for (var i = 0; i < T.quality.length; i++) {
      var q = T.quality[i];
      if (bits >= q[0]) {
        var per = bits / 8, size = fmtG3(per) + " byte" + (per === 1 ? "" : "s");
        return { precision: p.name, bits: bits, name: q[1], plain: q[1] + " (" + p.name + ", " + size + " a number)",
          spine_colours: q[2] };
      }
    }
    throw new Error("unreachable");
  }

  function componentKind(T, name) { /* bookshelf.component_kind */
    var key = name.split(" (")[0].trim().toLowerCase();
    for (var i = 0; i < T.component_kind.length; i++) {
      var prefix = T.component_kind[i][0];
      if (key === prefix || key.indexOf(prefix + " ") === 0) { return T.component_kind[i][1]; }
    }
    return "other";
  }

  /* bookshelf.shelf_layout (capacity: bytes; precision given) */
  VL.shelfLayout = function (T, bd, capacity, precision, volumes) {
    volumes = VL.checkPositiveInt("volumes", volumes === undefined ? 12 : volumes);
    var quality = printQuality(T, precision);
    var comps = bd.parts.filter(function (p) { return p[1]; }).map(function (p, i) {
      return { name: p[0], kind: componentKind(T, p[0]), v: p[1], i: i };
    });
    comps.sort(function (a, b) { return (T.order.indexOf(a.kind) - T.order.indexOf(b.kind)) || (a.i - b.i); });
    var items = [], pos = 0;
    comps.forEach(function (c) {
      var f = T.furniture[c.kind];
      var technical = c.kind === "books" || c.kind === "other" ? c.name : T.technical[c.kind];
      var plain = f.plain;
      if (c.kind === "books") {
        var low = c.name.split(" (")[0].toLowerCase();
        if (has(T.book_plain, low)) { plain = T.book_plain[low]; }
      }
      items.push({ component: c.name, kind: c.kind, thing: f.thing, plain: plain, technical: technical, nbytes: c.v,
        start: pos, end: pos + c.v });
      pos += c.v;
    });
    var total = pos;
    return { items: items, capacity_bytes: capacity, quality: quality, volumes: volumes, title: bd.title,
      total_bytes: total, fits: total <= capacity, overflow_bytes: Math.max(0, total - capacity),
      free_bytes: Math.max(0, capacity - total), shelves_needed: total / capacity };
  };

  /* bookshelf.verdict */
  VL.shelfVerdict = function (s) {
    if (s.fits) {
      return "Fits: " + g(s.total_bytes) + " on a " + g(s.capacity_bytes) + " shelf, " + g(s.free_bytes) + " free.";
    }
    return "Does not fit: " + g(s.total_bytes) + " on a " + g(s.capacity_bytes) + " shelf; " + g(s.overflow_bytes) +
      " hangs off the end (" + VL.toFixed(s.shelves_needed, 1) + " shelves' worth).";
  };

  function isMainBooks(item) {
    var low = item.component.split(" (")[0].toLowerCase();
    return item.kind === "books" && (low === "weights" || low === "base weights");
  }

  function legendRows(s, plain) { /* bookshelf.legend_rows */
    return s.items.map(function (i) {
      var thing = isMainBooks(i) ? "books in " + s.quality.plain : i.thing;
      return [i.component, plain ? thing + ": " + i.plain + " (" + i.technical + ")" : i.technical, g(i.nbytes)];
    });
  }

  /* bookshelf.shelf_alt_text */
  VL.shelfAltText = function (s) {
    var cap = s.capacity_bytes;
    var parts = legendRows(s, true).map(function (r) { return r[2] + " of " + r[1]; });
    var head = "A bookshelf " + VL.fixed(VL.gb(cap), 1) + " GB long (" + VL.fixed(VL.gib(cap), 1) + " GiB), standing " +
      "for the GPU's memory. On it, from left to right: " + (parts.length ? parts.join("; ") : "nothing") +
      ". In all " + g(s.total_bytes) + ": ";
    if (s.fits) { return head + "it fits, with " + g(s.free_bytes) + " of shelf left empty."; }
    return head + "it does not fit; " + g(s.overflow_bytes) + " hangs off the end of the shelf, drawn in red: " +
      "the workload would fill " + VL.toFixed(s.shelves_needed, 1) + " such shelves.";
  };

  function itemColour(T, item, s) { /* bookshelf.item_colour */
    if (isMainBooks(item)) { return s.quality.spine_colours[0]; }
    if (item.kind === "books") {
      return item.component.toLowerCase().indexOf("unquantized") === 0 ? T.quality[1][2][0] : T.constants_colour;
    }
    return T.furniture[item.kind].colour;
  }

  function itemLabels(T, s, rightGb, gbPerChar, rows) { /* bookshelf.item_labels */
    rows = rows || 2;
    var runs = [];
    s.items.forEach(function (it) {
      if (runs.length && runs[runs.length - 1][0].kind === it.kind) { runs[runs.length - 1].push(it); } else { runs.push([it]); }
    });
    var lastEnd = [], out = [], r;
    for (r = 0; r < rows; r++) { lastEnd.push(-Infinity); }
    runs.forEach(function (run) {
      if (run[0].kind === "fittings" || run[0].kind === "reading") { return; }
      var start = VL.gb(run[0].start), end = VL.gb(run[run.length - 1].end);
      var text = T.short[run[0].kind] + " " + g(VL.sum(run.map(function (i) { return i.nbytes; })));
      var half = text.length * gbPerChar / 2;
      var centre = Math.min(Math.max((start + end) / 2, half - rightGb * 0.015), rightGb * 1.015 - half);
      for (r = 0; r < rows; r++) {
        if (centre - half > lastEnd[r] + gbPerChar) {
          out.push([centre, r, text]);
          lastEnd[r] = centre + half;
          break;
        }
      }
    });
    return out;
  }

  function tiles(width, unit, atLeast) { return width > 0 ? Math.max(atLeast || 1, roundHalfEven(width / unit)) : 0; }
  var f1 = function (x) { return VL.toFixed(x, 1); }, f2 = function (x) { return VL.toFixed(x, 2); };

  function svgTile(kind, x, w, base, h, colour, tip) { /* bookshelf._svg_tile */
    var t = "<title>" + tip + "</title>", y = base - h, out = "", j, r, c;
    if (kind === "notes") {
      for (j = 0; j < 3; j++) {
        out += "<rect x='" + f2(x + (j % 2) * w * 0.05) + "' y='" + f1(base - (j + 1) * h / 3) + "' width='" + f2(w * 0.95) +
          "' height='" + f1(h / 3 - 1) + "' fill='" + colour + "' stroke='#b8a600' stroke-width='0.5'>" + t + "</rect>";
      }
      return out;
    }
    var body = "<rect x='" + f2(x) + "' y='" + f1(y) + "' width='" + f2(w) + "' height='" + f1(h) + "' fill='" + colour +
      "' stroke='#333' stroke-width='0.5'>" + t + "</rect>";
    if (kind === "calculators") {
      out = body + "<rect x='" + f2(x + w * 0.15) + "' y='" + f1(y + h * 0.1) + "' width='" + f2(w * 0.7) + "' height='" +
        f1(h * 0.2) + "' fill='#b9d7a8'/>";
      for (r = 0; r < 3; r++) {
        for (c = 0; c < 3; c++) {
          out += "<rect x='" + f2(x + w * (0.15 + c * 0.25)) + "' y='" + f1(y + h * (0.42 + r * 0.18)) + "' width='" +
            f2(w * 0.18) + "' height='" + f1(h * 0.11) + "' fill='#d9d9d9'/>";
        }
      }
      return out;
    }
    if (kind === "scratch") {
      [1, 2, 3].forEach(function (k) {
        body += "<line x1='" + f2(x) + "' x2='" + f2(x + w) + "' y1='" + f1(y + h * k / 4) + "' y2='" + f1(y + h * k / 4) +
          "' stroke='#7aa6c2' stroke-width='0.6'/>";
      });
      return body;
    }
    if (kind === "ledger") {
      return body + "<rect x='" + f2(x + w * 0.15) + "' y='" + f1(y + h * 0.3) + "' width='" + f2(w * 0.7) + "' height='" +
        f1(h * 0.15) + "' fill='#f2e6c9'/>";
    }
    if (kind === "notebooks") {
      var m = x + w / 2;
      return "<polygon points='" + f2(x) + "," + base + " " + f2(m) + "," + f1(base - h * 0.15) + " " + f2(m) + "," + f1(y) +
        " " + f2(x) + "," + f1(y + h * 0.15) + "' fill='#e8f5ef' stroke='" + colour + "'>" + t + "</polygon><polygon points='" +
        f2(x + w) + "," + base + " " + f2(m) + "," + f1(base - h * 0.15) + " " + f2(m) + "," + f1(y) + " " + f2(x + w) + "," +
        f1(y + h * 0.15) + "' fill='#e8f5ef' stroke='" + colour + "'/>";
    }
    return body;
  }

  /* bookshelf.bookshelf_svg */
  VL.bookshelfSvg = function (T, s, width, xmax) {
    width = width || 720;
    var right = Math.max(s.total_bytes, s.capacity_bytes, xmax || 0) || 1, rightGb = VL.gb(right);
    var pad = 10, inner = width - 20, height = 176, base = 112, tall = 72;
    var X = function (n) { return pad + inner * n / right; };
    var unit = inner / 28, k;
    var parts = ["<rect x='" + f1(X(0)) + "' y='" + base + "' width='" + f1(X(s.capacity_bytes) - X(0)) + "' height='7' " +
      "fill='#b07d4f' stroke='#6d4c2f'/>"];
    [0, s.capacity_bytes].forEach(function (x) {
      parts.push("<rect x='" + f1(X(x) - 2) + "' y='" + (base - tall - 8) + "' width='4' height='" + (tall + 15) +
        "' fill='#8d6240'/>");
    });
    s.items.forEach(function (item) {
      var f = T.furniture[item.kind], x0 = X(item.start), x1 = X(item.end);
      var tip = VL.escape(item.thing + ": " + item.plain + " (" + item.technical + "), " + g(item.nbytes));
      if (item.kind === "books") {
        var n, colours;
        if (isMainBooks(item)) { n = s.volumes; colours = s.quality.spine_colours; }
        else if (item.component.toLowerCase().indexOf("unquantized") === 0) { n = tiles(x1 - x0, unit * 0.6); colours = T.quality[1][2]; }
        else { n = 1; colours = [T.constants_colour]; }
        var w = (x1 - x0) / n;
        for (k = 0; k < n; k++) {
          var hgt = tall * f.height * (0.9 + 0.1 * ((k * 7) % 5) / 4);
          parts.push("<rect x='" + f2(x0 + k * w) + "' y='" + f1(base - hgt) + "' width='" + f2(w) + "' height='" + f1(hgt) +
            "' fill='" + colours[k % colours.length] + "' stroke='white' stroke-width='0.5'><title>" + tip + "</title></rect>");
        }
        return;
      }
      var nt = tiles(x1 - x0, unit), tw = (x1 - x0) / nt, gap = Math.min(tw * 0.08, 2.0);
      for (k = 0; k < nt; k++) {
        parts.push(svgTile(item.kind, x0 + k * tw + gap, Math.max(tw - 2 * gap, 0.4), base, tall * f.height,
          item.kind !== "fittings" ? f.colour : "#8c8c8c", tip));
      }
    });
    var capX = X(s.capacity_bytes), endX = X(s.total_bytes), narrow = capX - X(0) < 0.45 * inner;
    parts.push("<text x='" + f1(narrow ? X(0) : (X(0) + capX) / 2) + "' y='16' font-size='12' fill='#6d4c2f' text-anchor='" +
      (narrow ? "start" : "middle") + "'>the shelf = the GPU's memory: " + VL.fixed(VL.gb(s.capacity_bytes), 1) + " GB (" +
      VL.fixed(VL.gib(s.capacity_bytes), 1) + " GiB)</text>");
    itemLabels(T, s, rightGb, 6.2 * rightGb / inner).forEach(function (l) {
      parts.push("<text x='" + f1(X(l[0] * 1e9)) + "' y='" + (base + 20 + 14 * l[1]) + "' text-anchor='middle' " +
        "font-size='11'>" + VL.escape(l[2]) + "</text>");
    });
    if (s.fits) {
      if (s.free_bytes) {
        parts.push("<text x='" + f1(Math.min((endX + capX) / 2, width - 60)) + "' y='" + (base + 50) + "' text-anchor='middle' " +
          "font-size='12' fill='#1b7837'>free: " + g(s.free_bytes) + "</text>");
      }
    } else {
      parts.push("<rect x='" + f1(capX) + "' y='" + (base - tall) + "' width='" + f1(endX - capX) + "' height='" + (tall + 7) +
        "' fill='" + T.red + "' fill-opacity='0.15' stroke='" + T.red + "' stroke-width='1.5'/>");
      parts.push("<text x='" + f1((capX + endX) / 2) + "' y='" + (base + 50) + "' text-anchor='middle' font-size='12' " +
        "font-weight='bold' fill='" + T.red + "'>does not fit: " + g(s.overflow_bytes) + " hangs off the end (" +
        VL.toFixed(s.shelves_needed, 1) + " shelves' worth)</text>");
    }
    var svg = "<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='" + VL.escape(VL.shelfVerdict(s)) +
      "' width='" + width + "' height='" + height + "' viewBox='0 0 " + width + " " + height +
      "' style='font-family:sans-serif'>" + parts.join("") + "</svg>";
    var legend = legendRows(s, true).map(function (r, i) {
      return "<div><span style='color:" + itemColour(T, s.items[i], s) + ";text-shadow:0 0 1px #000'>&#9632;</span> <b>" +
        r[2] + "</b> " + VL.escape(r[1]) + "</div>";
    });
    return svg + "<div style='font-size:85%;margin-top:4px'>" + legend.join("") + "</div>";
  };

  function shelfBreakdown(s) { return new VL.Breakdown(s.items.map(function (i) { return [i.component, i.nbytes]; }), s.title); }

  /* widgets.bookshelf.bookshelf_render */
  VL.bookshelfRender = function (T, shelves) {
    var xmax = Math.max.apply(null, shelves.map(function (c) { return Math.max(c[1].total_bytes, c[1].capacity_bytes); }));
    var blocks = shelves.map(function (c) {
      var s = c[1], colour = s.fits ? "#1b7837" : "#c62828";
      return "<p style='margin:6px 0 2px 0'><b>" + VL.escape(c[0]) + ".</b> <span style='color:" + colour + "'>" +
        VL.escape(VL.shelfVerdict(s)) + "</span></p>" + VL.bookshelfSvg(T, s, 720, xmax);
    }).join("");
    var words = shelves.map(function (c) { return VL.escape(VL.shelfAltText(c[1])); }).join("<br>");
    var tables = shelves.map(function (c, i) {
      var t = VL.breakdownTable(shelfBreakdown(c[1]));
      return i === 0 ? t : t.replace("<table class='vramlib-breakdown'>", "<table class='vramlib-breakdown-more'>");
    }).join("");
    return blocks + "<details><summary>the picture in words, and the numbers</summary><span class='vramlib-verdict'>" +
      words + "</span>" + tables + "</details>";
  };

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
    var task = VL.checkChoice("task", a.task === undefined ? "both" : a.task, T.tasks);
    var card = VL.getGpu(a.gpu), prec = VL.getPrecision(a.weights, "precision");
    var batch = a.batch === undefined ? 1 : a.batch, chunk = a.prefill_chunk === undefined ? 2048 : a.prefill_chunk;
    var volumes = a.volumes === undefined ? 12 : a.volumes, out = [], bd;
    if (task === "inference" || task === "both") {
      var kv = prec.is_float && prec.name !== "tf32" ? prec.name : "fp16";
      bd = VL.inferenceMemory(m, prec.name, kv, a.tokens, batch, "sdpa", undefined, null, chunk);
      out.push(["Using the model: " + batch + " x " + VL.commas(a.tokens) + " tokens of conversation",
        VL.shelfLayout(T, bd, card.memory_bytes, prec.name, volumes)]);
    }
    if (task === "training" || task === "both") {
      if (C.TRAINING_PRECISIONS.indexOf(prec.name) < 0) {
        throw VL.invalid("precision", prec.name, "teaching (training) needs bf16, fp16 or fp32 books; compact 8- and " +
          "4-bit books are for inference (task 'inference')");
      }
      bd = VL.trainingMemory(m, { method: "full", seq: a.tokens, micro_batch: batch, precision: prec.name });
      out.push(["Teaching the model: " + batch + " x " + VL.commas(a.tokens) + "-token sequences",
        VL.shelfLayout(T, bd, card.memory_bytes, prec.name, volumes)]);
    }
    var first = out[0][1];
    var result = [shelfBreakdown(first), first.capacity_bytes, ""];
    result.render = function () { return VL.bookshelfRender(T, out); };
    return result;
  }, { linked: function (name, values) {  /* widgets.bookshelf.bookshelf_panel's on_model: its own heads */
    var j = values.js_data && values.js_data.models[values.model];
    if (name !== "model" || !j) { return {}; }
    return { n_heads: j["$model"].n_heads, n_kv_heads: j["$model"].n_kv_heads };
  } });
})();
