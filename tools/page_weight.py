"""Page weight of the built book: each chapter's HTML plus its own assets, and what a first visit downloads.

* own assets: files only this page references (its figures in ``_images/``, downloads) plus the files
  it loads that not every page loads (``vramlib-calc.js`` / ``.css`` on pages with a calculator); MathJax
  (``_static/mathjax/``, :data:`SITE_WIDE`) is shared like the theme;
* first visit: the HTML and every local file it links (scripts, stylesheets, images; web fonts, which a
  browser fetches only when a glyph needs them, are not counted); external URLs (none since MathJax is served from _static) are
  listed, not counted.

Usage: ``python tools/page_weight.py [_build/html] [--limit-mb 2]``; prints the table, largest first, and
exits 1 when a chapter's HTML plus own assets reaches the limit (``tests/browser/test_page_weight.py``
asserts the same).
"""
from __future__ import annotations

import argparse
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 2 * 10**6
"""2 MB (10^6 bytes) per chapter: its HTML plus its own assets."""

class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.refs.append(a["src"])
        elif tag == "link" and a.get("href") and ("stylesheet" in (a.get("rel") or "") or a.get("rel") == "preload"):
            self.refs.append(a["href"])
        elif tag in ("img", "source", "embed", "iframe") and a.get("src"):
            self.refs.append(a["src"])
        elif tag == "object" and a.get("data"):
            self.refs.append(a["data"])
        elif tag == "a" and a.get("href") and "_downloads/" in a["href"]:
            self.refs.append(a["href"])


def _local(page: Path, ref: str, root: Path) -> Path | None:
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    path = (page.parent / unquote(parts.path)).resolve()
    return path if path.is_file() and root.resolve() in path.parents else None


def page_assets(page: Path, root: Path) -> tuple[set[Path], list[str]]:
    """Local files a page links and its external URLs."""
    parser = _Refs()
    parser.feed(page.read_text(errors="replace"))
    local, external = set(), []
    for ref in parser.refs:
        p = _local(page, ref, root)
        if p is None:
            if urlsplit(ref).scheme in ("http", "https"):
                external.append(ref)
            continue
        local.add(p)
    return local, external


SITE_WIDE = ("_static/mathjax/",)
"""Assets the site serves once for every page that needs them (MathJax, from the book itself since it works
offline): shared like the theme's, even though pages without an equation do not load them."""


def _site_wide(path: Path, root: Path) -> bool:
    rel = str(path.relative_to(root)).replace("\\", "/")
    return any(rel.startswith(prefix) for prefix in SITE_WIDE)


def weights(root: Path) -> list[dict]:
    """One row per chapter page, largest (HTML + own assets) first."""
    pages = sorted((root / "book").glob("*.html"))
    assets = {p: page_assets(p, root) for p in pages}
    everywhere = set.intersection(*(a for a, _ in assets.values())) if assets else set()
    rows = []
    for p in pages:
        local, external = assets[p]
        own = {f for f in local - everywhere if not _site_wide(f, root)}
        html = p.stat().st_size
        own_bytes = sum(f.stat().st_size for f in own)
        rows.append({"page": str(p.relative_to(root)), "html": html, "own_assets": own_bytes,
                     "page_plus_own": html + own_bytes,
                     "first_visit": html + sum(f.stat().st_size for f in local),
                     "own_files": sorted(str(f.relative_to(root)) for f in own), "external": sorted(set(external))})
    return sorted(rows, key=lambda r: -r["page_plus_own"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default=str(ROOT / "_build" / "html"))
    ap.add_argument("--limit-mb", type=float, default=LIMIT_BYTES / 10**6)
    args = ap.parse_args(argv)
    root = Path(args.build)
    rows = weights(root)
    if not rows:
        print(f"no pages under {root / 'book'}", file=sys.stderr)
        return 1
    limit = int(args.limit_mb * 10**6)
    print(f"{'page':46} {'HTML':>9} {'own':>9} {'HTML+own':>9} {'1st visit':>10}  (kB = 10^3 bytes)")
    for r in rows:
        print(f"{r['page']:46} {r['html'] / 1e3:9.1f} {r['own_assets'] / 1e3:9.1f} {r['page_plus_own'] / 1e3:9.1f} "
              f"{r['first_visit'] / 1e3:10.1f}")
    top = rows[0]
    print(f"largest: {top['page']} at {top['page_plus_own'] / 1e6:.3f} MB (HTML + own assets; limit "
          f"{limit / 1e6:g} MB); heaviest first visit {max(r['first_visit'] for r in rows) / 1e6:.3f} MB")
    externals = sorted({u for r in rows for u in r["external"]})
    if externals:
        print("external, not counted: " + ", ".join(externals))
    over = [r for r in rows if r["page_plus_own"] >= limit]
    for r in over:
        print(f"OVER THE LIMIT: {r['page']} {r['page_plus_own'] / 1e6:.3f} MB", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
