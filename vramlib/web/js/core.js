/* vramlib/web/js/core.js -- the calculators' shared part: errors, units, models, Breakdown, rendering, the UI.
 * Mirrors vramlib.core.errors, vramlib.core.units, vramlib.catalog.models.ModelSpec (with_heads, param_groups), vramlib.memory.breakdown,
 * vramlib.present.viz.breakdown_svg and vramlib.present.widgets.render/panel. Formulas are never written here: they are the
 * generated VL.<module>.<NAME> functions (vramlib/web/jsgen.py). */
var VL = { calcs: {} };
window.VL = VL;

/* ---- evaluation of generated expressions (the twin of formulas.evaluate) ---- */
VL.fn = function (label, args, f) {
  var g = function (values) {
    var a = new Array(args.length);
    for (var i = 0; i < args.length; i++) {
      var x = values[args[i]];
      if (x === undefined || x === null) { throw new Error("evaluate " + label + ": missing values for " + args[i]); }
      a[i] = x;
    }
    return f.apply(null, a);
  };
  g.args = args;
  g.label = label;
  return g;
};
VL.unavailable = function (label) {
  return function () { throw new Error(label + ": sympy could not print it to JavaScript"); };
};
VL.sum = function (xs) { var s = 0; for (var i = 0; i < xs.length; i++) { s += xs[i]; } return s; };

/* ---- exact rationals (BigInt numerator / denominator): the browser side of vramlib.core.portable's q_* runtime and of
 * the exact expressions VL.exact (vramlib/web/portablegen.py). vramlib sums bytes as Fractions and rounds up once
 * (formulas.to_int_bytes); a float sum can land a byte away. ---- */
function gcd(a, b) { while (b) { var r = a % b; a = b; b = r; } return a < 0n ? -a : a; }
function Q(n, d) {
  n = BigInt(n); d = d === undefined ? 1n : BigInt(d);
  if (d === 0n) { throw new Error("division by zero in an exact value"); }
  if (d < 0n) { n = -n; d = -d; }
  var g = gcd(n, d) || 1n;
  return { n: n / g, d: d / g, q: true };
}
VL.Q = Q;
Q.from = function (x) {  /* Fraction(x): a Q stays itself, a double is read exactly (its binary value) */
  if (x !== null && typeof x === "object" && x.q) { return x; }
  if (typeof x === "boolean") { return Q(x ? 1 : 0); }
  if (typeof x !== "number" || !isFinite(x)) { throw new Error("not an exact number: " + x); }
  var d = 1n;
  while (!Number.isInteger(x)) { x *= 2; d *= 2n; }
  return Q(BigInt(x), d);
};
Q.add = function (a, b) { return Q(a.n * b.d + b.n * a.d, a.d * b.d); };
Q.sub = function (a, b) { return Q(a.n * b.d - b.n * a.d, a.d * b.d); };
Q.mul = function (a, b) { return Q(a.n * b.n, a.d * b.d); };
Q.div = function (a, b) { return Q(a.n * b.d, a.d * b.n); };
Q.sum = function (xs) { return xs.reduce(Q.add, Q(0)); };
Q.prod = function (xs) { return xs.reduce(Q.mul, Q(1)); };
Q.pow = function (a, k) {
  var r = Q(1), b = k < 0 ? Q(a.d, a.n) : a;
  for (var j = 0; j < Math.abs(k); j++) { r = Q.mul(r, b); }
  return r;
};
Q.powq = function (a, e) {
  if (e.d !== 1n) { throw new Error("a fractional power has no exact value"); }
  return Q.pow(a, Number(e.n));
};
Q.cmp = function (a, b) { var x = a.n * b.d - b.n * a.d; return x > 0n ? 1 : (x < 0n ? -1 : 0); };
Q.min = function (xs) { return xs.reduce(function (a, b) { return Q.cmp(b, a) < 0 ? b : a; }); };
Q.max = function (xs) { return xs.reduce(function (a, b) { return Q.cmp(b, a) > 0 ? b : a; }); };
Q.floorq = function (a) { var f = a.n / a.d; if (f * a.d > a.n) { f -= 1n; } return Q(f); };
Q.mod = function (a, b) { return Q.sub(a, Q.mul(b, Q.floorq(Q.div(a, b)))); };  /* sympy Mod: the divisor's sign */
Q.ceilq = function (a) { var f = a.n / a.d; if (f * a.d < a.n) { f += 1n; } return Q(f); };
Q.ceil = function (a) { return Number(Q.ceilq(a).n); };  /* formulas.to_int_bytes */
Q.num = function (a) {  /* float(Fraction): correctly rounded */
  if (a.n === 0n) { return 0; }
  var neg = a.n < 0n, n = neg ? -a.n : a.n, k = 64 - (n.toString(2).length - a.d.toString(2).length), q, r;
  if (k >= 0) { q = (n << BigInt(k)) / a.d; r = (n << BigInt(k)) - q * a.d; } else {
    var dd = a.d << BigInt(-k);
    q = n / dd; r = n - q * dd;
  }
  if (r !== 0n) { q |= 1n; }  /* sticky bit below the 53 kept */
  var x = Number(q) * Math.pow(2, -k);
  return neg ? -x : x;
};
VL.qv = function (v, name, label) {  /* one argument of an exact expression */
  var x = v[name];
  if (x === undefined || x === null) { throw new Error("evaluate " + label + ": missing values for " + name); }
  return Q.from(x);
};
/* vramlib.core.portable's runtime, as the compiled portable functions (VL.py) call it */
VL.fmtG = function (x, digits) {  /* Python f"{x:.{digits}g}" */
  if (x === 0) { return "0"; }
  if (!isFinite(x)) { return x > 0 ? "inf" : (x < 0 ? "-inf" : "nan"); }
  var e = Number(Math.abs(x).toExponential(digits - 1).split("e")[1]);
  if (e >= -4 && e < digits) {
    var s = VL.toFixed(x, digits - 1 - e);
    return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
  }
  var m = Math.abs(x).toExponential(digits - 1).split("e"), mant = m[0];
  if (mant.indexOf(".") >= 0) { mant = mant.replace(/0+$/, "").replace(/\.$/, ""); }
  var ex = Number(m[1]), es = String(Math.abs(ex));
  return (x < 0 ? "-" : "") + mant + "e" + (ex < 0 ? "-" : "+") + (es.length < 2 ? "0" + es : es);
};
VL.roundEven = function (x) {  /* Python round(x): ties to even */
  var f = Math.floor(x);
  if (x - f === 0.5) { return f % 2 === 0 ? f : f + 1; }
  return Math.round(x);
};
VL.portable = {
  fmt_fixed: function (x, digits, commas) { return commas ? VL.fixed(x, digits) : VL.toFixed(x, digits); },
  fmt_g: function (x, digits) { return VL.fmtG(x, digits); },
  escape: function (s) { return VL.escape(s); },
  round_even: function (x) { return VL.roundEven(x); },
  infinity: function () { return Infinity; },
  raise_problem: function (problem) { VL.raiseProblem(problem); },  /* core.portable.raise_problem */
  ev: function (name, key, vals) {
    var f = VL.exact[name];
    if (key !== null && key !== undefined) { f = f[String(key)]; }
    if (typeof f !== "function") { throw new Error("no shared expression " + name + (key === null ? "" : "[" + key + "]")); }
    return f(vals);
  },
  ev_mean: function (name, key, n, vals) {  /* the mean over the layer index i_l = 0 .. n - 1, exact */
    var total = Q(0), v = Object.assign({}, vals);
    for (var i = 0; i < n; i++) { v.i_l = i; total = Q.add(total, VL.portable.ev(name, key, v)); }
    return Q.div(total, Q(n));
  },
  shared: function (name) {
    if (!Object.prototype.hasOwnProperty.call(VL.shared, name)) { throw new Error("no shared constant " + name); }
    return VL.shared[name];
  },
  q: Q.from,
  q_decimal: function (x) {  /* Fraction(str(x)): the number as written (String(x) is Python's repr for these) */
    var m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(x));
    if (!m) { throw new Error("not a decimal number: " + x); }
    var frac = m[3] || "", e = Number(m[4] || 0) - frac.length, n = BigInt(m[2] + frac) * (m[1] ? -1n : 1n);
    var ten = BigInt(10), p = ten ** BigInt(Math.abs(e));  /* decimal base */
    return e >= 0 ? Q(n * p) : Q(n, p);
  },
  q_add: function (a, b) { return Q.add(Q.from(a), Q.from(b)); },
  q_sub: function (a, b) { return Q.sub(Q.from(a), Q.from(b)); },
  q_mul: function (a, b) { return Q.mul(Q.from(a), Q.from(b)); },
  q_div: function (a, b) { return Q.div(Q.from(a), Q.from(b)); },
  q_ceil: function (a) { return Q.ceil(Q.from(a)); },
  q_floor: function (a) { return Number(Q.floorq(Q.from(a)).n); },
  q_round: function (a) {  /* round(): nearest integer, ties to even, exact */
    var x = Q.from(a), f = Q.floorq(x), r = Q.sub(x, f), c = Q.cmp(r, Q(1n, 2n));
    var n = f.n + (c > 0 || (c === 0 && f.n % 2n !== 0n) ? 1n : 0n);
    return Number(n);
  },
  q_int: function (a) { var x = Q.from(a); return Number(x.n / x.d); },  /* int(): BigInt division truncates */ q_cmp: function (a, b) { return Q.cmp(Q.from(a), Q.from(b)); },
  q_is_zero: function (a) { return Q.from(a).n === 0n; }, q_float: function (a) { return Q.num(Q.from(a)); }
};

/* ---- errors (vramlib.core.errors) ---- */
function VramlibError(message) {
  this.name = "VramlibError";
  this.message = String(message).split(/\s+/).filter(Boolean).join(" ");
}
VramlibError.prototype = Object.create(Error.prototype);
VramlibError.prototype.constructor = VramlibError;
VramlibError.prototype.toString = function () { return this.message; };
VL.VramlibError = VramlibError;
VL.repr = function (value) {
  if (typeof value === "string") { return "'" + value.replace(/\\/g, "\\\\").replace(/'/g, "\\'") + "'"; }
  if (value === true) { return "True"; }
  if (value === false) { return "False"; }
  if (value === null || value === undefined) { return "None"; }
  return String(value);
};
VL.invalid = function (field, value, allowed) {
  return new VramlibError(field + ": got " + VL.repr(value) + "; " + allowed);
};
VL.allowedHint = function (allowed) {
  allowed = Array.from(new Set(allowed)).sort();
  return allowed.length <= 12 ? "allowed: " + allowed.join(", ")
    : allowed.length + " names allowed, e.g. " + allowed.slice(0, 6).join(", ") + " ...";
};
VL.unknown = function (field, name, allowed) {
  return new VramlibError(field + ": unknown name " + VL.repr(name) + "; " + VL.allowedHint(allowed));
};
/* inference.allowed_tp / kv_heads_per_gpu's check, in the same words (whole KV heads per GPU, replicated beyond
   their count); generating this check from Python is issue 11's work */
VL.allowedTp = function (nh, nkv) { return VL.py.allowed_tp(nh, nkv); };  /* inference.allowed_tp */
VL.raiseProblem = function (problem) {  /* core.portable.raise_problem: a portable check's [field, value, allowed] */
  if (problem !== null && problem !== undefined) { throw VL.invalid(problem[0], problem[1], problem[2]); }
};
VL.checkTp = function (field, tp, name, nh, nkv) {
  tp = VL.checkPositiveInt(field, tp);
  VL.raiseProblem(VL.py.tp_problem(field, tp, name + "'s ", nh, nkv));
  return tp;
};
VL.checkPositiveInt = function (field, value, allowZero) {
  var ok = typeof value === "number" && Number.isInteger(value);
  if (!ok || value < 0 || (value === 0 && !allowZero)) {
    throw VL.invalid(field, value, "must be a " + (allowZero ? "non-negative" : "positive") + " integer");
  }
  return value;
};
VL.checkChoice = function (field, value, allowed) {
  if (typeof value === "string") {
    for (var i = 0; i < allowed.length; i++) {
      if (allowed[i].toLowerCase() === value.trim().toLowerCase()) { return allowed[i]; }
    }
  }
  throw VL.unknown(field, value, allowed);
};

/* ---- units (vramlib.core.units) ---- */
/* the unit sizes are exported from vramlib.core.units (VL.data.units, set after this file: read when a calculator runs) */
VL.gb = function (n) { return n / VL.data.units.GB; };
VL.gib = function (n) { return n / VL.data.units.GiB; };
VL.toFixed = function (x, digits) { /* Python f"{x:.{digits}f}": an exact binary tie rounds to even, as Python does */
  var a = Math.abs(x), scaled = a * Math.pow(10, digits), s;
  if (isFinite(scaled) && scaled - Math.floor(scaled) === 0.5) {
    var n = Math.floor(scaled);
    s = ((n % 2 ? n + 1 : n) / Math.pow(10, digits)).toFixed(digits);
  } else {
    s = a.toFixed(digits);
  }
  return (x < 0 && /[1-9]/.test(s) ? "-" : "") + s;
};
VL.fixed = function (x, digits) { /* Python f"{x:,.{digits}f}" */
  var s = VL.toFixed(Math.abs(x), digits), parts = s.split(".");
  parts[0] = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  var neg = x < 0 && /[1-9]/.test(s);
  return (neg ? "-" : "") + parts.join(".");
};
VL.commas = function (n) { return VL.fixed(n, 0); };
VL.fmtBytes = function (n, digits) {  /* units.fmt_bytes (units.bytes_text) */
  return VL.py.bytes_text(n, digits === undefined ? 1 : digits);
};
VL.parseMemory = function (value, field) {
  field = field || "memory";
  if (typeof value === "boolean") {
    throw VL.invalid(field, value, "give bytes as an int or a string such as '24GiB' or '80 GB'");
  }
  if (typeof value === "number") {
    if (!Number.isInteger(value)) {
      throw VL.invalid(field, value, "give bytes as an int or a string such as '24GiB' or '80 GB'");
    }
    if (value < 0) { throw VL.invalid(field, value, "must be >= 0 bytes"); }
    return value;
  }
  if (typeof value === "string") {
    var m = /^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$/.exec(value);
    var UNITS = VL.data.units.UNITS;  /* units._UNITS */
    if (m && m[2] && Object.prototype.hasOwnProperty.call(UNITS, m[2].toLowerCase())) {
      return Math.trunc(parseFloat(m[1]) * UNITS[m[2].toLowerCase()] + 1e-6);
    }
    if (m && !m[2] && parseFloat(m[1]) === 0) { return 0; }
    if (m && !m[2]) {  /* "24": bytes to the library, GB to a person; say which it could mean */
      throw VL.invalid(field, value, "a size needs a unit: did you mean '" + m[1] + "GB' (10^9 bytes) or '" + m[1] +
        "GiB' (2^30)? Units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
    }
    throw VL.invalid(field, value,
      "expected a number and a unit from B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. '24GiB')");
  }
  throw VL.invalid(field, value, "give bytes as an int or a string such as '24GiB' or '80 GB'");
};

/* ---- catalogues (vramlib.catalog.hardware, vramlib.catalog.precision) ---- */
VL.getGpu = function (name) {
  var key = String(name).trim().toLowerCase();
  if (Object.prototype.hasOwnProperty.call(VL.data.gpus, key)) { return VL.data.gpus[key]; }
  throw VL.unknown("gpu", name, Object.keys(VL.data.gpus));
};
VL.getPrecision = function (name, field) {
  var P = VL.data.precisions, key = String(name).trim().toLowerCase();
  if (Object.prototype.hasOwnProperty.call(P, key)) { return P[key]; }
  var alt = key.charAt(0) === "q" ? key.replace(/-/g, "_") : key.replace(/_/g, "-");
  if (Object.prototype.hasOwnProperty.call(P, alt)) { return P[alt]; }
  throw VL.unknown(field || "precision", name, VL.data.precision_names);
};
VL.kvBytesPerElement = function (dtype) {
  var p = VL.getPrecision(dtype, "kv_dtype");
  if (p.kv_bytes_per_element === undefined) { throw new VramlibError(p.kv_error); }
  return p.kv_bytes_per_element;
};
/* precision.tensor_bits: kept tensors, the format's bits, or the GGUF table vramlib exported for this shape */

/* ---- models (vramlib.catalog.models.ModelSpec) ---- */
VL.model = function (j) {
  if (j && j.spec) { return j; }
  var spec = Object.assign({}, j["$model"]);
  if (j.uniform_problem) {  /* beyond one uniform layer: what reads one refuses in one line (models._Refusing) */
    var problem = VL.py.layer_refusal(spec.name, j.uniform_problem);
    var no = function () { VL.raiseProblem(problem); };  /* every way code can look into it refuses */
    var refuse = new Proxy({}, { get: no, has: no, ownKeys: no, getOwnPropertyDescriptor: no });
    return { spec: spec, name: spec.name, sym: refuse, symActive: refuse, linear_modules: refuse, hf: refuse,
      layers: VL.py.layer_kinds_of(spec, false), refusal: problem, uniform_problem: j.uniform_problem };
  }
  return { spec: spec, name: spec.name, sym: Object.assign({}, j.symbols),
    symActive: Object.assign({}, j.symbols_active), linear_modules: j.linear_modules.slice(),
    layers: VL.py.layer_kinds_of(spec, false), hf: j.hf };
};
function divisorsNear(n, k) {
  var ds = [];
  for (var x = 1; x <= Math.min(n, 1024); x++) { if (n % x === 0) { ds.push(x); } }
  ds.sort(function (a, b) { return Math.abs(a - k) - Math.abs(b - k); });
  return ds.slice(0, 4).sort(function (a, b) { return a - b; }).join(", ");
}
VL.withHeads = function (m, nHeads, nKvHeads) {  /* ModelSpec.as_heads (models.heads_change) */
  nHeads = VL.checkPositiveInt("n_heads", nHeads);
  nKvHeads = VL.checkPositiveInt("n_kv_heads", nKvHeads);
  var s = m.spec, change = VL.py.heads_change(s, nHeads, nKvHeads);
  if (change.head_dim !== undefined && s.hidden % nHeads) {
    throw VL.invalid("n_heads", nHeads, "must divide hidden=" + s.hidden + " (e.g. " + divisorsNear(s.hidden, nHeads) + ")");
  }
  VL.raiseProblem(VL.py.heads_problem({ n_heads: nHeads, n_kv_heads: nKvHeads }));  /* ModelSpec's rule */
  if (!Object.keys(change).length) { return m; }
  var spec = Object.assign({}, s, change);
  VL.raiseProblem(VL.py.layers_problem(spec));  /* ModelSpec's rule for the new head_dim (MLA's rope part) */
  var heads = { n_h: spec.n_heads, n_kv: spec.n_kv_heads, d_head: spec.head_dim };
  return Object.assign({}, m, { spec: spec, layers: VL.py.layer_kinds_of(spec, false),
    sym: m.refusal ? m.sym : Object.assign({}, m.sym, heads),
    symActive: m.refusal ? m.symActive : Object.assign({}, m.symActive, heads) });
};
VL.nParams = function (m) { return VL.py.params_of(m); };  /* ModelSpec.n_params, exact */
VL.weightParams = function (m) { return VL.py.weight_params_of(m.spec, VL.nParams(m)); };  /* ModelSpec.weight_params */
VL.paramGroups = function (m) { return VL.py.param_groups_of(m); };  /* ModelSpec.param_groups */
VL.groupsDict = function (pairs) {
  var d = {};
  pairs.forEach(function (p) { d[p[0]] = p[1]; });
  return d;
};

/* ---- Breakdown (vramlib.memory.breakdown) ---- */
VL.Breakdown = function (parts, title) {
  parts.forEach(function (p) {
    if (typeof p[1] !== "number" || !Number.isInteger(p[1]) || p[1] < 0) {
      throw VL.invalid("Breakdown[" + VL.repr(p[0]) + "]", p[1], "must be a non-negative int of bytes");
    }
  });
  this.parts = parts;
  this.title = title || "";
  this.total = VL.sum(parts.map(function (p) { return p[1]; }));
};
VL.Breakdown.prototype.get = function (name) {
  for (var i = 0; i < this.parts.length; i++) { if (this.parts[i][0] === name) { return this.parts[i][1]; } }
  throw new Error("no component " + name);
};

/* ---- rendering (vramlib.present.widgets.render, vramlib.present.viz.breakdown_svg, Breakdown._repr_html_) ---- */
VL.escape = function (s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
};
VL.componentColour = function (name) { /* viz.component_colour: PALETTE and COMPONENT_COLOURS exported from viz */
  var V = VL.data.viz, key = name.split(" (")[0].toLowerCase(), fixed = V.COMPONENT_COLOURS;
  for (var i = 0; i < fixed.length; i++) {
    if (key.indexOf(fixed[i][0]) === 0) { return V.PALETTE[fixed[i][1]]; }
  }
  return V.PALETTE[key.length % V.PALETTE.length];
};
VL.breakdownSvg = function (bd, capacity) {
  var width = 560, height = 44, total = bd.total, scaleMax = Math.max(total, capacity || 0) || 1;
  var x = 0, rects = [], legend = [];
  bd.parts.forEach(function (p) {
    var name = p[0], v = p[1];
    if (!v) { return; }
    var w = width * v / scaleMax, colour = VL.componentColour(name);
    rects.push("<rect x='" + VL.toFixed(x, 1) + "' y='4' width='" + VL.toFixed(w, 1) + "' height='" + (height - 8) +
      "' fill='" + colour + "'><title>" + VL.escape(name) + ": " + VL.toFixed(VL.gb(v), 2) + " GB</title></rect>");
    legend.push("<span style='color:" + colour + "'>&#9632;</span> " + VL.escape(name) + " " + VL.toFixed(VL.gb(v), 2) + " GB");
    x += w;
  });
  if (capacity !== null && capacity !== undefined) {
    var cx = VL.toFixed(width * capacity / scaleMax, 1);
    rects.push("<line x1='" + cx + "' x2='" + cx + "' y1='0' y2='" + height + "' stroke='black' stroke-dasharray='4 3'/>");
  }
  var fill = (capacity === null || capacity === undefined || total <= capacity) ? "fits" : "does not fit";
  var aria = "stacked bar: total " + VL.toFixed(VL.gb(total), 2) + " GB" +
    (capacity ? ", capacity " + VL.toFixed(VL.gb(capacity), 2) + " GB, " + fill : "");
  return "<svg role='img' aria-label='" + aria + "' width='" + width + "' height='" + height + "' viewBox='0 0 " +
    width + " " + height + "'>" + rects.join("") + "</svg><div style='font-size:85%'>" + legend.join(" &nbsp; ") + "</div>";
};
VL.breakdownTable = function (bd) {
  var total = bd.total || 1, right = " style='text-align:right'";
  var rows = bd.parts.map(function (p) {
    return "<tr data-component='" + VL.escape(p[0]) + "' data-bytes='" + p[1] + "'><td>" + VL.escape(p[0]) + "</td><td" +
      right + ">" + VL.commas(p[1]) + "</td><td" + right + ">" + VL.fixed(VL.gb(p[1]), 2) + "</td><td" + right + ">" +
      VL.fixed(VL.gib(p[1]), 2) + "</td><td" + right + ">" + VL.toFixed(100 * p[1] / total, 1) + "%</td></tr>";
  }).join("");
  var cap = bd.title ? "<caption>" + VL.escape(bd.title) + "</caption>" : "";
  return "<table class='vramlib-breakdown'>" + cap + "<thead><tr><th>component</th><th>bytes</th><th>GB</th>" +
    "<th>GiB</th><th>share</th></tr></thead><tbody>" + rows + "</tbody><tfoot><tr data-total='" + bd.total +
    "'><th>total</th><th" + right + ">" + VL.commas(bd.total) + "</th><th" + right + ">" + VL.fixed(VL.gb(bd.total), 2) +
    "</th><th" + right + ">" + VL.fixed(VL.gib(bd.total), 2) + "</th><th></th></tr></tfoot></table>";
};
VL.render = function (result) {
  if (!(result instanceof Error) && typeof result.render === "function") { return result.render(); }  /* draws itself */
  if (!(result instanceof Error) && Array.isArray(result[0])) { return VL.renderStages(result); }
  if (result instanceof Error) {
    return "<div class='vramlib-error' style='color:#b00020'>&#9888; " + VL.escape(result.message) + "</div>";
  }
  var bd = result[0], cap = result[1], verdict = result[2];
  var head = verdict ? "<p class='vramlib-verdict'><b>" + VL.escape(verdict) + "</b></p>" : "";
  var capline = cap ? " of " + VL.fixed(VL.gb(cap), 2) + " GB (" + VL.fixed(VL.gib(cap), 2) + " GiB)" : "";
  return head + VL.breakdownSvg(bd, cap) + VL.breakdownTable(bd) + "<p><small>total " + VL.fixed(VL.gb(bd.total), 2) +
    " GB (" + VL.fixed(VL.gib(bd.total), 2) + " GiB)" + capline + "</small></p>";
};
/* widgets.parallel.render_stages: a result whose first item is a list of Breakdowns (one per pipeline stage) is
 * drawn as one bar per stage (the fullest marked), the verdict, and the fullest stage's table */
VL.fullestStage = function (stages) {
  var top = 0;
  for (var i = 1; i < stages.length; i++) { if (stages[i].total > stages[top].total) { top = i; } }
  return top;
};
VL.renderStages = function (result) {
  if (result instanceof Error) { return VL.render(result); }
  var stages = result[0], cap = result[1], verdict = result[2];
  if (stages.length === 1) { return VL.render([stages[0], cap, verdict]); }
  var top = VL.fullestStage(stages);
  var bars = stages.map(function (bd, i) {
    return "<div class='vramlib-stage' data-stage='" + i + "' data-total='" + bd.total + "'><small>stage " + i +
      (i === top ? " (fullest)" : "") + ": " + VL.fixed(VL.gb(bd.total), 2) + " GB (" + VL.fixed(VL.gib(bd.total), 2) +
      " GiB)</small>" + VL.breakdownSvg(bd, cap) + "</div>";
  }).join("");
  return "<p class='vramlib-verdict'><b>" + VL.escape(verdict) + "</b></p>" + bars + VL.breakdownTable(stages[top]);
};
/* widgets.evaluate_panel: a VramlibError is shown in place; a bug too, and it is logged */
VL.run = function (compute, values) {
  try {
    return compute(values);
  } catch (e) {
    if (e instanceof VramlibError) { return e; }
    console.error(e);
    return new VramlibError("internal error (" + e.name + "): " + e.message + "; please report it");
  }
};
VL.evaluate = function (compute, values) { return VL.render(VL.run(compute, values)); };

/* ---- the UI: the same knobs as the chapter's ipywidgets panel (data-controls), live ---- */
/* opts.linked(name, values): after control `name` changed, {other control: new value} to set first (the chapter's
 * ipywidgets observers, e.g. a new model brings its own heads) */
VL.register = function (name, compute, opts) {
  if (opts && opts.linked) { compute.linked = opts.linked; }
  VL.calcs[name] = compute;
};
/* ---- what a person types in a number box: the number as written, or one line naming the field and the range.
 * Accepted: 4096, " 4096 ", +4096, 1e5, 1E5, 1.5e3, 100,000 (commas between groups of three), 100_000, .5, 0.9;
 * an integer box needs a whole number (2.5 is refused, never rounded); a value outside [min, max] is refused, never
 * clamped; "4k" is refused with both readings (4,000 or 4,096); "", "abc", "1e", "NaN", "Infinity" are refused. */
VL.rangeText = function (spec) {
  var isInt = spec.kind === "int", has = function (x) { return x !== undefined && x !== null; };
  var f = function (x) { return isInt ? VL.commas(x) : String(x); };
  var what = isInt ? "an integer" : "a number";
  if (has(spec.min) && has(spec.max)) { return what + " from " + f(spec.min) + " to " + f(spec.max); }
  if (has(spec.min)) { return what + " >= " + f(spec.min); }
  if (has(spec.max)) { return what + " <= " + f(spec.max); }
  return what;
};
var TYPED_NUMBER = /^[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
VL.parseTyped = function (text, spec) {
  var field = spec.label || spec.name, raw = String(text), t = raw.trim();
  var shown = raw.length > 40 ? raw.slice(0, 40) + "..." : raw;
  var must = "must be " + VL.rangeText(spec);
  var suffix = /^([+-]?[\d,_]*\.?\d+)\s*([kKmMgG])$/.exec(t);
  if (suffix) {
    var n = Number(suffix[1].replace(/[,_]/g, "")), p = { k: 1, m: 2, g: 3 }[suffix[2].toLowerCase()];
    throw new VramlibError(field + ": got " + VL.repr(shown) + " (" + VL.fixed(n * Math.pow(1000, p), 0) + " or " +
      VL.fixed(n * Math.pow(1024, p), 0) + "?); type the number: " + VL.rangeText(spec));
  }
  if (!TYPED_NUMBER.test(t)) {
    var hint = t.indexOf(",") >= 0 ? "; commas may only separate thousands (100,000): write decimals with a point" : "";
    throw VL.invalid(field, shown, must + hint);
  }
  var x = Number(t.replace(/[,_]/g, ""));
  if (x === 0) { x = 0; }  /* -0 */
  var ok = isFinite(x) && (spec.kind !== "int" || Number.isInteger(x)) &&
    (spec.min === undefined || spec.min === null || x >= spec.min) &&
    (spec.max === undefined || spec.max === null || x <= spec.max);
  if (!ok) {
    var read = /[eE]/.test(t) && isFinite(x) ? " (read as " + (Number.isInteger(x) ? VL.commas(x) : String(x)) + ")" : "";
    throw new VramlibError(field + ": got " + VL.repr(shown) + read + "; " + must);
  }
  return x;
};

var uid = 0;
function makeControl(spec, onChange) {
  var id = "vramlib-ctl-" + (++uid), wrap = document.createElement("span"), input;
  var field = spec.label || spec.name;
  wrap.className = "vramlib-ctl";
  var label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = spec.label;
  if (spec.kind === "select") {
    input = document.createElement("select");
    spec.options.forEach(function (v, i) {
      var o = document.createElement("option");
      o.value = String(i);
      o.textContent = spec.labels[i];
      input.appendChild(o);
    });
    /* a value not in the list (the chapter's, or one a linked control brings) selects nothing and says so:
     * never the first option in its place */
    input.setChoice = function (v) {
      var i = spec.options.indexOf(v);
      input.selectedIndex = i;
      input.wanted = i < 0 ? { value: v } : null;
    };
    input.setChoice(spec.value);
    input.addEventListener("change", function () { if (input.selectedIndex >= 0) { input.wanted = null; } });
    input.getValue = function () {
      var i = input.selectedIndex;
      if (i >= 0 && i < spec.options.length && input.value === String(i)) { return spec.options[i]; }
      if (input.wanted) { throw VL.unknown(field, input.wanted.value, spec.labels); }
      throw new VramlibError(field + ": nothing chosen; " + VL.allowedHint(spec.labels));
    };
  } else if (spec.kind === "bool") {
    input = document.createElement("input");
    input.type = "checkbox";
    input.checked = !!spec.value;
    input.getValue = function () { return input.checked; };
  } else if (spec.kind === "int" || spec.kind === "float") {
    /* a text box, not type=number: the browser would hand "100,000" or "abc" over as "" and we could not say
     * what was typed; the text is read by VL.parseTyped, and shown back unchanged */
    input = document.createElement("input");
    input.type = "text";
    input.className = "vramlib-num";
    input.setAttribute("autocomplete", "off");
    input.setAttribute("spellcheck", "false");
    input.value = String(spec.value);
    input.getValue = function () { return VL.parseTyped(input.value, spec); };
    input.addEventListener("keydown", function (ev) {  /* the arrows step as a number box's do, within the range */
      if (ev.key !== "ArrowUp" && ev.key !== "ArrowDown") { return; }
      var x;
      try { x = input.getValue(); } catch (e) { return; }
      var step = spec.step || 1, next = Number((x + (ev.key === "ArrowUp" ? step : -step)).toPrecision(12));
      ev.preventDefault();
      if ((spec.min !== undefined && next < spec.min) || (spec.max !== undefined && next > spec.max)) { return; }
      input.value = String(next);
      onChange();
    });
  } else {
    input = document.createElement("input");
    input.type = "text";
    input.value = String(spec.value);
    input.getValue = function () { return input.value; };
  }
  input.id = id;
  input.setAttribute("data-name", spec.name);
  input.addEventListener("change", onChange);
  if (spec.kind !== "select" && spec.kind !== "bool") {
    input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { onChange(); } });
  }
  wrap.appendChild(label);
  wrap.appendChild(input);
  return { spec: spec, el: wrap, input: input };
}
/* every control's value, or the first one's one-line message (control order); a bad control is marked */
function readControls(ctls, fixed, outId) {
  var values = Object.assign({}, fixed), bad = null;
  ctls.forEach(function (c) {
    try {
      values[c.spec.name] = c.input.getValue();
      c.input.removeAttribute("aria-invalid");
      c.input.removeAttribute("aria-describedby");
    } catch (e) {
      if (!(e instanceof VramlibError)) { throw e; }
      c.input.setAttribute("aria-invalid", "true");
      c.input.setAttribute("aria-describedby", outId);
      bad = bad || { name: c.spec.name, error: e };
    }
  });
  return { values: values, bad: bad };
}
VL.fromFixed = function (fixed) {
  var out = {};
  Object.keys(fixed).forEach(function (k) {
    var v = fixed[k];
    out[k] = v && typeof v === "object" && v["$model"] ? VL.model(v) : v;
  });
  return out;
};
VL.mount = function (el) {
  var compute = VL.calcs[el.getAttribute("data-calc")];
  if (!compute || el.getAttribute("data-live")) { return false; }
  var fixed = VL.fromFixed(JSON.parse(el.getAttribute("data-fixed") || "{}"));
  var specs = JSON.parse(el.getAttribute("data-controls") || "[]");
  var form = document.createElement("div"), out = document.createElement("div");
  form.className = "vramlib-calc-controls";
  out.className = "vramlib-calc-out";
  out.setAttribute("aria-live", "polite");
  out.id = "vramlib-out-" + (++uid);
  var ctls = [];
  function link(name) {  /* a control that cannot be read brings nothing along */
    if (!compute.linked) { return; }
    var read = readControls(ctls, fixed, out.id);
    if (read.bad && read.bad.name === name) { return; }
    var set = compute.linked(name, read.values) || {};
    ctls.forEach(function (c) {
      if (!Object.prototype.hasOwnProperty.call(set, c.spec.name)) { return; }
      if (c.spec.kind === "bool") { c.input.checked = !!set[c.spec.name]; } else if (c.spec.kind === "select") {
        c.input.setChoice(set[c.spec.name]);
      } else { c.input.value = String(set[c.spec.name]); }
    });
  }
  function update() {  /* the result for what the controls say, or the first unreadable control's message */
    var read = readControls(ctls, fixed, out.id);
    var result = read.bad ? read.bad.error : VL.run(compute, read.values);
    out.innerHTML = VL.render(result);
    out.setAttribute("data-capacity", result instanceof Error || result[1] === null || result[1] === undefined ? "" : String(result[1]));
  }
  for (var i = 0; i < specs.length; i += 3) {   /* rows of three, as widgets.panel lays them out */
    var row = document.createElement("div");
    row.className = "vramlib-calc-row";
    specs.slice(i, i + 3).forEach(function (s) {
      var c = makeControl(s, function () { link(s.name); update(); });
      ctls.push(c);
      row.appendChild(c.el);
    });
    form.appendChild(row);
  }
  var note = document.createElement("p");
  note.className = "vramlib-calc-note";
  note.innerHTML = "<small>Live calculator: computed in your browser from the same formulas as vramlib " +
    "(generated from its sympy expressions). Change a value and press Enter or leave the field.</small>";
  el.innerHTML = "";
  el.appendChild(form);
  el.appendChild(out);
  el.appendChild(note);
  el.setAttribute("data-live", "1");
  el.vramlibUpdate = update;
  update();
  return true;
};
VL.start = function () {
  function go() {
    Array.prototype.forEach.call(document.querySelectorAll(".vramlib-calc[data-calc]"), VL.mount);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", go); } else { go(); }
};
