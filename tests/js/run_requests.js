// node tests/js/run_requests.js BUNDLE REQUESTS.json: evaluates each JS expression (with VL in scope) against the built
// vramlib-calc.js and prints a JSON list of {ok: value} or {err: message} (BigInts as strings). Used by tests/nodejs.py.
const fs = require('fs');
global.window = global;
global.document = { readyState: "complete", querySelectorAll: function () { return []; } };
eval(fs.readFileSync(process.argv[2], 'utf8'));
const VL = global.VL;
const reqs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
function out(x) { return JSON.stringify(x, function (k, v) { return typeof v === 'bigint' ? v.toString() : v; }); }
const res = reqs.map(function (r) {
  try { return {ok: Function('VL', 'return (' + r + ');')(VL)}; } catch (e) { return {err: String(e && e.message || e)}; }
});
console.log(out(res));
