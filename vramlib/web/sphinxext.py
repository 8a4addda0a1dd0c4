"""Sphinx extension of the book (``_config.yml``: ``sphinx: extra_extensions: [vramlib.web.sphinxext]``).

* writes ``_static/vramlib-book.css`` (every page: padded result tables that scroll sideways with an edge shadow)
  and links it from every page;
* writes ``_static/vramlib-calc.js`` (generated from the sympy expressions by :mod:`vramlib.web.jsgen`),
  ``vramlib-calc.css`` and ``vramlib-catalogue.json`` into the HTML output at every build, so the
  calculators can never be stale;
* links the script and stylesheet only from pages that hold a calculator placeholder
  (``<div class="vramlib-calc">``, the ``text/html`` view of every ``vramlib.present.widgets`` panel);
* drops the ipywidgets state and the widget manager scripts myst-nb would load from a CDN: the HTML
  builders never render widget views (``nb_mime_priority_overrides``), so the static pages carry no dead
  controls and load nothing from a CDN for them;
* keeps every page's console free of errors (the browser test fails on any): an inline script registered
  twice (Sphinx 7.4 keeps both copies of ``app.add_js_file(None, body=...)`` when the registry and the
  builder list it as ``None`` and ``''``: sphinx-thebe's ``const THEBE_JS_URL`` then throws "already been
  declared") is written once; and an empty stored theme mode is set to ``auto`` before
  pydata-sphinx-theme reads it (it logs "Got invalid theme mode" on a reader's first visit otherwise).

Used in: the static HTML book (every chapter with a panel).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .jsgen import write_assets

JS_FILE = "vramlib-calc.js"
CSS_FILE = "vramlib-calc.css"
BOOK_CSS = "vramlib-book.css"
"""Every page's stylesheet (``vramlib/web/js/book.css``): padded, sideways-scrolling result tables."""


def _static_dir(app) -> Path:
    return Path(app.outdir) / "_static"


def _write(app) -> None:
    if getattr(app.builder, "format", "") == "html":
        write_assets(_static_dir(app))
        css = (Path(__file__).parent / "js" / "book.css").read_text()
        target = _static_dir(app) / BOOK_CSS
        if not target.exists() or target.read_text() != css:
            target.write_text(css)


def _page(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:
    if getattr(app.builder, "format", "") != "html":
        return
    js_files = getattr(app.env, "nb_metadata", {}).get(pagename, {}).get("js_files", {})
    for key in [k for k in js_files if k.startswith("ipywidgets")]:
        del js_files[key]
    if 'class="vramlib-calc' in (context.get("body") or ""):
        app.add_js_file(JS_FILE, loading_method="defer")
        app.add_css_file(CSS_FILE)


def _dedupe_inline_scripts(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, keep = set(), []
    for js in scripts:
        body = getattr(js, "attributes", {}).get("body")
        key = (str(getattr(js, "filename", "") or ""), body) if body else None
        if key is not None and key in seen:
            continue
        seen.add(key)
        keep.append(js)
    scripts[:] = keep


THEME_MODE_FIX = ('if (!document.documentElement.dataset.mode) { document.documentElement.dataset.mode = '
                  '"auto"; }')


def _finished(app, exception) -> None:
    if exception is None and getattr(app.builder, "format", "") == "html":
        if not all((_static_dir(app) / f).exists() for f in (JS_FILE, BOOK_CSS)):
            _write(app)


def setup(app) -> dict[str, Any]:
    app.connect("builder-inited", _write)
    app.connect("html-page-context", _page, priority=400)  # before myst-nb (500) adds the widget scripts
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)  # after every extension added its scripts
    app.connect("build-finished", _finished)
    app.add_js_file(None, body=THEME_MODE_FIX, priority=100)
    app.add_css_file(BOOK_CSS)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
