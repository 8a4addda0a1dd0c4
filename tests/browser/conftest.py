"""Browser tests of the built book (``make test`` runs them after ``jupyter-book build``).

They need the HTML in ``_build/html`` and Debian's ``chromium`` + ``chromium-driver``; the Makefile's test
target installs those and sets ``VRAMLIB_BROWSER_TESTS=1``. Anywhere else (``pytest tests`` before the
build) they are skipped, so a stale build is never tested.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("VRAMLIB_BUILD_DIR", ROOT / "_build" / "html"))
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
ENABLED = os.environ.get("VRAMLIB_BROWSER_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    if ENABLED:
        return
    skip = pytest.mark.skip(reason="browser tests run in `make test` after the book build (VRAMLIB_BROWSER_TESTS=1)")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def build_dir() -> Path:
    if not (BUILD / "index.html").exists():
        pytest.fail(f"no built book in {BUILD}: run `jupyter-book build .` first")
    return BUILD


@pytest.fixture(scope="session")
def driver():
    """Headless Debian chromium through chromedriver: fresh profile, no network (every host but 127.0.0.1 resolves to nothing)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for exe in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(exe):
            pytest.fail(f"{exe} not found: `apt-get install -y chromium chromium-driver` (the Makefile does it)")
    profile = tempfile.mkdtemp(prefix="vramlib-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,1600",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)
