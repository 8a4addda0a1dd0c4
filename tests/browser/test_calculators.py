"""The static book's calculators in a real browser: every chapter page with a panel is loaded from file:// in
headless Debian chromium, its calculator's inputs are set (by typing and selecting, then by script for the
bulk of the seeded random sets) and its outputs are read from the page and compared with vramlib on the same
inputs: every component, the total, the capacity, the verdict and the table caption, equal to 4 significant
digits (error messages: equal). Any console error fails (a JS exception, a console.error, a local file that
does not load); external URLs (none now: MathJax is served from the book) would fail offline and are listed
only. Screenshots go to ``artifacts/screenshots/`` and a summary to ``artifacts/browser-report.json``.

Two probes show that the test has teeth: a calculator given a wrong formula is caught, and a page that
throws is caught.
"""
from __future__ import annotations

import json
import math
import random
import re
import time
from pathlib import Path

import pytest

from vramlib import jsgen

from .cases import compare, python_result, random_values
from .conftest import ARTIFACTS, BUILD

MIN_SETS_TOTAL = 200
"""Random input sets checked over the whole book, at least."""
SETS_PER_PANEL_MIN = 40
UI_SETS_PER_PANEL = 2
"""Sets entered through the controls like a reader (typing, selecting); the rest are set by script."""
SEED = 20260707
CHAPTERS = sorted((BUILD / "book").glob("ch[0-9][0-9]-*.html")) if (BUILD / "book").is_dir() else []

READ_JS = r"""
const el = arguments[0], out = el.querySelector('.vramlib-calc-out');
if (!out) return {missing: true};
const err = out.querySelector('.vramlib-error');
if (err) return {error: err.textContent.replace(/^\u26a0\s*/, '')};
const num = s => Number(s.replace(/,/g, ''));
const rows = Array.from(out.querySelectorAll('table.vramlib-breakdown tbody tr'));
const cap = out.getAttribute('data-capacity');
const verdict = out.querySelector('.vramlib-verdict'), caption = out.querySelector('caption');
return {
  parts: rows.map(tr => [tr.cells[0].textContent, num(tr.cells[1].textContent)]),
  attr_bytes: rows.map(tr => Number(tr.getAttribute('data-bytes'))),
  total: num(out.querySelector('table.vramlib-breakdown tfoot tr').cells[1].textContent),
  capacity: cap === '' ? null : Number(cap),
  verdict: verdict ? verdict.textContent : '',
  title: caption ? caption.textContent : '',
  svg: !!out.querySelector('svg rect'),
};
"""

SET_JS = r"""
const el = arguments[0], values = arguments[1];
let last = null;
for (const [name, v] of Object.entries(values)) {
  const input = el.querySelector('[data-name="' + name + '"]');
  if (!input) throw new Error('no control ' + name);
  if (input.type === 'checkbox') input.checked = v; else input.value = String(v);
  last = input;
}
last.dispatchEvent(new Event('change', {bubbles: true}));
"""


def console_problems(entries: list[dict]) -> tuple[list[str], list[str]]:
    """(problems, offline externals): SEVERE entries and JS warnings, except external URLs that cannot load offline."""
    problems, external = [], []
    for e in entries:
        msg, level, source = e.get("message", ""), e.get("level", ""), e.get("source", "")
        if source == "network" and re.match(r"^https?://", msg):
            external.append(msg.split(" ")[0])
            continue
        if level == "SEVERE" or (level == "WARNING" and (source == "javascript" or "vramlib" in msg)):
            problems.append(f"{level} {source}: {msg}")
    return problems, external


def wait_until(ready, tries: int, pause: float = 0.05):
    """Poll ``ready()`` up to ``tries`` times, ``pause`` seconds apart; its last value. Counts tries instead of
    reading the clock, so a loaded machine only waits longer."""
    value = ready()
    for _ in range(tries):
        if value:
            break
        time.sleep(pause)
        value = ready()
    return value


def load(driver, page: Path) -> None:
    driver.get(page.resolve().as_uri())
    wait_until(lambda: driver.execute_script("return document.readyState") == "complete", tries=400)
    time.sleep(0.2)  # deferred scripts and DOMContentLoaded handlers


def calculators_on(driver) -> list:
    return driver.find_elements("css selector", ".vramlib-calc[data-calc]")


def _ui_set(driver, el, specs: list[dict], values: dict) -> None:
    """Enter one input set through the controls, like a reader."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    for s in specs:
        ctl = el.find_element("css selector", f'[data-name="{s["name"]}"]')
        v = values[s["name"]]
        if s["kind"] == "select":
            Select(ctl).select_by_index(s["options"].index(v))
        elif s["kind"] == "bool":
            if ctl.is_selected() != v:
                ctl.click()
        else:
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", ctl)
            ctl.send_keys(Keys.CONTROL, "a")
            ctl.send_keys(str(v), Keys.TAB)


def _js_values(specs: list[dict], values: dict) -> dict:
    return {s["name"]: (s["options"].index(values[s["name"]]) if s["kind"] == "select" else values[s["name"]])
            for s in specs}


def check_panel(driver, el, n_sets: int, rng: random.Random, ui_sets: int = UI_SETS_PER_PANEL) -> dict:
    """Set ``n_sets`` random input sets on one live calculator; return counts and the differences found."""
    calc = el.get_attribute("data-calc")
    fixed = json.loads(el.get_attribute("data-fixed"))
    specs = json.loads(el.get_attribute("data-controls"))
    diffs, errors = [], 0
    for i in range(n_sets):
        values = random_values(specs, fixed, rng)
        if i < ui_sets:
            _ui_set(driver, el, specs, values)
        else:
            driver.execute_script(SET_JS, el, _js_values(specs, values))
        js = driver.execute_script(READ_JS, el)
        py = python_result(calc, fixed, values)
        errors += "error" in py
        if js.get("missing"):
            diffs.append(f"{calc} set {i}: no output")
            continue
        if "parts" in js and js["attr_bytes"] != [p[1] for p in js["parts"]]:
            diffs.append(f"{calc} set {i}: shown bytes {js['parts']} differ from data-bytes {js['attr_bytes']}")
        if "parts" in js and not js["svg"] and any(p[1] for p in js["parts"]):
            diffs.append(f"{calc} set {i}: no bar drawn")
        found = compare(py, js)
        if found:
            diffs.append(f"{calc} set {i} {values}: " + "; ".join(found))
    return {"calc": calc, "sets": n_sets, "error_sets": errors, "diffs": diffs}


def test_calculators_match_vramlib(driver, build_dir):
    """Every calculator equals vramlib on >= 200 seeded random input sets; no console errors meanwhile."""
    rng = random.Random(SEED)
    live_calcs = set(jsgen.js_calculators())
    pages = []
    for page in CHAPTERS:
        load(driver, page)
        found = calculators_on(driver)
        if found:
            pages.append((page, len(found)))
    n_panels = sum(n for _, n in pages if n)
    assert n_panels, "no chapter page has a calculator"
    per_panel = max(SETS_PER_PANEL_MIN, math.ceil(MIN_SETS_TOTAL / n_panels))
    report, diffs, total, static = {}, [], 0, []
    for page, _ in pages:
        load(driver, page)
        entries = []
        rows = []
        for el in calculators_on(driver):
            calc = el.get_attribute("data-calc")
            if calc not in live_calcs:
                static.append(f"{page.name}: {calc}")
                assert not el.get_attribute("data-live"), f"{page.name}: {calc} live without a calculator?"
                continue
            assert el.get_attribute("data-live") == "1", f"{page.name}: calculator {calc!r} did not start"
            row = check_panel(driver, el, per_panel, rng)
            rows.append(row)
            total += row["sets"]
            diffs += [f"{page.name}: {d}" for d in row["diffs"]]
        entries += driver.get_log("browser")
        problems, external = console_problems(entries)
        diffs += [f"{page.name}: console: {p}" for p in problems]
        report[page.name] = {"panels": [{k: r[k] for k in ("calc", "sets", "error_sets")} for r in rows],
                             "diffs": sum(len(r["diffs"]) for r in rows), "console_problems": problems,
                             "offline_external_resources": sorted(set(external))}
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-report.json").write_text(json.dumps(
        {"input_sets_checked": total, "static_panels_without_calculator": static, "pages": report}, indent=1))
    print(f"\nbrowser: {total} input sets checked on {len(report)} chapter pages; static panels: {static or 'none'}")
    assert not diffs, f"{len(diffs)} differences:\n" + "\n".join(diffs[:40])
    assert total >= MIN_SETS_TOTAL, f"only {total} input sets checked"


@pytest.mark.parametrize("page", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_page_is_clean(driver, build_dir, page):
    """No console error, no dead control (no widget view, no ipywidgets repr, no form field outside a live
    calculator), and a screenshot of the chapter's calculator (or its top) as a build artefact."""
    load(driver, page)
    problems, _ = console_problems(driver.get_log("browser"))
    dead = driver.execute_script(r"""
      const art = document.querySelector('article') || document.body, out = [];
      if (art.querySelector('script[type="application/vnd.jupyter.widget-view+json"]')) out.push('widget view');
      if (document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]')) out.push('widget state');
      for (const pre of art.querySelectorAll('.cell_output pre, .output pre'))
        if (/^(VBox|HBox|Box|Dropdown|BoundedIntText|CheckedIntText|IntText|IntSlider|Output)\(/.test(pre.textContent.trim())) out.push('ipywidgets repr');
      for (const f of art.querySelectorAll('input, select, textarea'))
        if (!f.closest('.vramlib-calc[data-live]') && !f.closest('.sd-tab-set')) out.push('form field ' + (f.name || f.type));
      return out;""")
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    calcs = driver.find_elements("css selector", ".vramlib-calc")
    if calcs:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", calcs[0])
        time.sleep(0.1)
    driver.save_screenshot(str(shots / f"{page.stem}.png"))
    assert not problems, f"{page.name}: console errors: {problems}"
    assert not dead, f"{page.name}: dead controls: {dead}"


def _first_page_with(driver, calc: str) -> Path:
    for page in CHAPTERS:
        load(driver, page)
        if any(el.get_attribute("data-calc") == calc and el.get_attribute("data-live") for el in calculators_on(driver)):
            return page
    pytest.fail(f"no page has a live {calc} calculator")


def test_a_wrong_formula_is_caught(driver, build_dir):
    """Probe: double the generated (exact) per-layer KV-cache formula the calculators evaluate (KV_LAYER_ELEMENTS);
    the comparison must report differences."""
    _first_page_with(driver, "inference")
    driver.execute_script("""
      const f = VL.exact.KV_LAYER_ELEMENTS;
      VL.exact.KV_LAYER_ELEMENTS = v => VL.Q.mul(f(v), VL.Q(2));""")
    el = next(e for e in calculators_on(driver) if e.get_attribute("data-calc") == "inference")
    row = check_panel(driver, el, 10, random.Random(1), ui_sets=0)
    assert len(row["diffs"]) >= 10 - row["error_sets"] and row["diffs"], "a doubled KV cache went unnoticed"
    driver.get_log("browser")


PER_LAYER_MODELS = ("gpt-oss-20b", "qwen3-30b-a3b", "gemma-3-27b", "deepseek-v3", "bamba-9b")
"""2025 layer stacks (sinks and MXFP4 experts, MoE with q/k norms, a 5:1 sliding pattern, MLA, Mamba-2) the inference
calculator's model control offers."""


def test_inference_calculator_picks_any_catalogue_model(driver, build_dir):
    """The static inference calculator offers every catalogue model: choosing a 2025 per-layer model with the select,
    as a reader does, brings its own heads and KV heads (the panel's linked controls) and vramlib's numbers for it; a
    head change its shape refuses (MLA's rope part) is Python's one line; choosing the chapter's model again brings
    its result back."""
    from selenium.webdriver.support.ui import Select

    from vramlib import get_model, model_names

    page = _first_page_with(driver, "inference")
    el = next(e for e in calculators_on(driver) if e.get_attribute("data-calc") == "inference")
    fixed, specs = json.loads(el.get_attribute("data-fixed")), json.loads(el.get_attribute("data-controls"))
    chapter = {s["name"]: s["value"] for s in specs}
    options = next(s["options"] for s in specs if s["name"] == "model")
    assert options[0] == chapter["model"] and sorted(options) == model_names(), options[:3]

    def choose(name: str) -> None:
        Select(el.find_element("css selector", '[data-name="model"]')).select_by_visible_text(name)

    def heads() -> list[str]:
        return [el.find_element("css selector", f'[data-name="{k}"]').get_attribute("value")
                for k in ("n_heads", "n_kv_heads")]

    diffs = []
    for name in PER_LAYER_MODELS:
        choose(name)
        spec = get_model(name)
        assert heads() == [str(spec.n_heads), str(spec.n_kv_heads)], f"{page.name}: {name} brought heads {heads()}"
        values = dict(chapter, model=name, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads)
        py, js = python_result("inference", fixed, values), driver.execute_script(READ_JS, el)
        assert "error" not in py and "error" not in js, (name, py.get("error"), js.get("error"))
        diffs += [f"{name}: {d}" for d in compare(py, js)]
    assert not diffs, diffs
    choose("deepseek-v3")
    driver.execute_script(SET_JS, el, {"n_heads": 256, "n_kv_heads": 128})  # head_dim 28 < MLA's rope part (64)
    js = driver.execute_script(READ_JS, el)
    py = python_result("inference", fixed, dict(chapter, model="deepseek-v3", n_heads=256, n_kv_heads=128))
    assert py["error"].startswith("attention: got 'mla'") and js.get("error") == py["error"], js
    choose(chapter["model"])
    assert heads() == [str(chapter["n_heads"]), str(chapter["n_kv_heads"])]
    assert not compare(python_result("inference", fixed, chapter), driver.execute_script(READ_JS, el))
    problems, _ = console_problems(driver.get_log("browser"))
    assert not problems, problems


def test_a_js_error_is_caught(driver, build_dir):
    """Probe: an exception thrown by a page script must show up as a console problem."""
    load(driver, CHAPTERS[0])
    driver.get_log("browser")
    driver.execute_script("setTimeout(function () { throw new Error('vramlib probe: deliberate'); }, 0);")
    problems: list[str] = []

    def probe_logged() -> bool:
        problems.extend(console_problems(driver.get_log("browser"))[0])
        return any("vramlib probe" in p for p in problems)

    assert wait_until(probe_logged, tries=60), problems


def test_search_finds_chapters(driver, build_dir):
    """Search works as published (served over HTTP on 127.0.0.1: on file:// the browser blocks the fetches
    Sphinx makes for result summaries): a query returns chapter pages, with no console error."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(build_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        driver.get_log("browser")
        driver.get(f"http://127.0.0.1:{server.server_port}/search.html?q=KV+cache")
        hits = wait_until(lambda: driver.execute_script(
            "return Array.from(document.querySelectorAll('#search-results li a')).map(a => a.getAttribute('href'))"),
            tries=60, pause=0.25)
        time.sleep(0.5)  # the result summaries are fetched after the list appears
        problems, _ = console_problems(driver.get_log("browser"))
    finally:
        server.shutdown()
        server.server_close()
    assert any("book/ch" in (h or "") for h in hits), f"search for 'KV cache' found {hits}"
    assert not problems, problems
