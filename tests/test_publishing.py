"""Publishing as Jupyter Book users expect (issue 7): what can be checked without GitHub or mybinder.org.

The Pages workflow parses and builds with the same ``make book`` that ``make test`` exercises; mybinder.org
finds ``requirements.txt`` (pinned) and ``runtime.txt``; ``_config.yml`` drives the launch buttons from one
repository URL, hides ipywidgets views from the static HTML and loads the calculator extension.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _workflow() -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())


def test_pages_workflow_builds_with_make_book_and_deploys_build_html():
    wf = _workflow()
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "push" in on and "workflow_dispatch" in on
    steps = wf["jobs"]["build"]["steps"]
    assert any(s.get("run", "").strip() == "make book" for s in steps)
    upload = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages-artifact@")]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages@") for s in deploy["steps"])
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"


def test_make_book_is_the_tested_build():
    make = (ROOT / "Makefile").read_text()
    book = re.search(r"^book:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    test = re.search(r"^test:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    build = [ln.strip() for ln in book.splitlines() if "jupyter-book build" in ln]
    assert build and build[0] in [ln.strip() for ln in test.splitlines()], "make test must run make book's build"
    assert "tests/browser" in test, "make test runs the browser tests after the build"


def test_binder_reads_the_pinned_requirements():
    assert (ROOT / "runtime.txt").read_text().strip() == "python-3.11"
    reqs = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    for ln in reqs:
        assert ln == "-e ." or "==" in ln, f"requirements.txt: {ln!r} is not pinned"


def test_config_launch_buttons_and_static_calculators():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["repository"]["url"].startswith("https://github.com/")
    lb = cfg["launch_buttons"]
    assert lb["binderhub_url"] == "https://mybinder.org" and lb["colab_url"] and lb["thebe"] is True
    assert cfg["html"]["use_download_button"] is True
    assert cfg["bibtex_bibfiles"]
    sphinx = cfg["sphinx"]
    assert "vramlib.web.sphinxext" in sphinx["extra_extensions"]
    overrides = {(b, m): p for b, m, p in sphinx["config"]["nb_mime_priority_overrides"]}
    assert overrides[("html", "application/vnd.jupyter.widget-view+json")] is None
    assert sphinx["config"]["numfig"] is True
