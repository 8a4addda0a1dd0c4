/* vramlib/web/js/validation.js -- the published-figures calculator (chapter 16): mirrors
 * vramlib.explain.validation.published_compute. Its one control picks a published workload, so the page carries
 * vramlib's own result for every entry (validation.published_predictions, in the panel's data-fixed) and this
 * shows the selected one: the breakdown, the published figure as the line, the verdict. */
(function () {
  VL.register("published", function (a) {
    var table = a.predictions || {};
    if (typeof a.entry !== "string" || !Object.prototype.hasOwnProperty.call(table, a.entry)) {
      throw VL.unknown("published entry", a.entry, Object.keys(table));
    }
    var r = table[a.entry];
    if (r.error) { throw new VL.VramlibError(r.error); }
    return [new VL.Breakdown(r.parts.map(function (p) { return [p[0], p[1]]; }), r.title), r.capacity, r.verdict];
  });
})();
