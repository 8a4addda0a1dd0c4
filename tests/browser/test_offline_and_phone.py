"""The static book offline and on a phone. Equations render from the book itself: every page with math loads MathJax from ``_static/mathjax`` (the
``sphinx-mathjax-offline`` package, no CDN) and typesets it with the network off (the driver resolves no host), so a
workshop without internet sees equations, not raw TeX."""
from __future__ import annotations

import pytest

from .test_calculators import CHAPTERS, console_problems, load, wait_until

TYPESET = r"""
const spans = Array.from(document.querySelectorAll('article span.math, article div.math'));
const raw = spans.filter(s => !s.querySelector('mjx-container')).map(s => s.textContent.slice(0, 40));
const src = Array.from(document.scripts).map(s => s.src).filter(u => /mathjax/i.test(u));
return {n: spans.length, raw: raw, src: src, ready: !!(window.MathJax && MathJax.startup && MathJax.startup.document)};
"""


def _with_math(driver) -> list:
    pages = []
    for page in CHAPTERS:
        if "class=\"math" in page.read_text(encoding="utf-8"):
            pages.append(page)
    return pages


def test_every_equation_is_typeset_offline(driver, build_dir):
    pages = _with_math(driver)
    assert len(pages) >= 10, f"only {len(pages)} chapter pages have math"
    bad = []
    for page in pages:
        load(driver, page)
        got = wait_until(lambda: (lambda r: r if r["ready"] and not r["raw"] else None)(
            driver.execute_script(TYPESET)), tries=200, pause=0.05) or driver.execute_script(TYPESET)
        if not got["src"] or any(not u.startswith("file://") for u in got["src"]):
            bad.append(f"{page.name}: MathJax from {got['src']}")
        if got["raw"]:
            bad.append(f"{page.name}: {len(got['raw'])} of {got['n']} equations not typeset, e.g. {got['raw'][0]!r}")
        problems, external = console_problems(driver.get_log("browser"))
        if [u for u in external if "mathjax" in u.lower()]:
            bad.append(f"{page.name}: MathJax requested from the network")
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("page", CHAPTERS[:1], ids=lambda p: p.stem)
def test_raw_tex_is_caught(driver, build_dir, page):
    """The check can fail: with MathJax removed from the page, the equations stay raw TeX."""
    load(driver, page)
    driver.execute_script("for (const c of document.querySelectorAll('mjx-container')) c.remove();")
    got = driver.execute_script(TYPESET)
    assert got["n"] == 0 or got["raw"]


def test_bibliography_is_rendered_as_written(build_dir):
    """The bibliography shows code and units as the entries write them: no raw TeX command (``\\texttt``), no
    sentence-cased unit ("46.91gb"); every title is protected in references.bib, so the style cannot lower-case it."""
    import html
    import re

    text = html.unescape(re.sub(r"<[^>]+>", "", (build_dir / "book" / "bibliography.html").read_text()))
    assert not re.findall(r"\\[a-zA-Z]+", text), re.findall(r".{30}\\[a-zA-Z]+.{10}", text)[:3]
    lowered = re.findall(r"\d+(?:\.\d+)? ?(?:kb|mb|gb|kib|mib|gib|gb/s)\b", text)
    assert not lowered, lowered[:5]
    assert "46.91GB per GPU" in text and "79.14 GiB" in text


def test_tables_are_padded_and_scroll_inside_their_box_on_a_phone(driver, build_dir):
    """At 390 px (a phone): a result table's cells are padded, a wide table scrolls sideways inside its own box
    (overflow-x auto) and never widens the page."""
    page = next(p for p in CHAPTERS if "vramlib-table" in p.read_text(encoding="utf-8"))
    driver.set_window_size(390, 844)
    try:
        load(driver, page)
        got = driver.execute_script(r"""
          const t = document.querySelector('article table.vramlib-table'), td = t.querySelector('td');
          const cs = getComputedStyle(t), tdcs = getComputedStyle(td);
          return {pad: parseFloat(tdcs.paddingLeft) + parseFloat(tdcs.paddingRight), overflow: cs.overflowX,
                  table_inside: t.getBoundingClientRect().right <= document.documentElement.clientWidth + 1,
                  wide: Array.from(document.querySelectorAll('article table.vramlib-table'))
                             .some(x => x.scrollWidth > x.clientWidth)};""")
    finally:
        driver.set_window_size(1280, 1600)
    assert got["pad"] >= 12, got
    assert got["overflow"] == "auto" and got["table_inside"], got
    assert got["wide"], "no table is wider than a phone: the scroll case was not exercised"
