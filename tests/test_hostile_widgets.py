"""A hostile sweep of every chapter's panel: each control of each calculator, fed values a person could type.

The panels' compute functions (what Jupyter, Binder and the static calculators run) are taken from the chapters'
stored placeholders, with the chapter's own initial values; one control at a time gets a bad value. Each update
must give a result or a one-line VramlibError message naming the control -- never another exception, never
"internal error". Values outside a box's allowed range are the panel's business (``widgets.range_problem``, see
tests/test_widgets_training.py); here the compute functions must still refuse what no box could hold.
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from cases import python_result  # noqa: E402

PLACEHOLDER = re.compile(r'class="vramlib-calc"[^>]*?data-calc="([^"]+)" data-fixed="([^"]*)" data-controls="([^"]*)"')
INT_BAD = {"zero": 0, "negative": -1, "half": 2.5, "text": "abc", "none": None, "nan": float("nan"),
           "inf": float("inf"), "huge": 10**15, "bool": True}
SELECT_BAD = {"unknown": "no-such-option", "none": None, "number": 3, "empty": ""}
NEVER = {"half", "text", "none", "nan", "inf", "bool", "unknown", "number", "empty"}


def _panels():
    seen = set()
    for nb in sorted((ROOT / "book").glob("ch*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        pages = ["".join(o.get("data", {}).get("text/html", "")) for c in cells for o in c.get("outputs", [])]
        for calc, fixed, controls in PLACEHOLDER.findall("\n".join(pages)):
            key = (calc, fixed)
            if key in seen:
                continue
            seen.add(key)
            yield nb.stem[:4], calc, json.loads(html.unescape(fixed)), json.loads(html.unescape(controls))


def _cases():
    for chapter, calc, fixed, specs in _panels():
        values = {s["name"]: s["value"] for s in specs}
        for s in specs:
            bad = INT_BAD if s["kind"] in ("int", "float") else SELECT_BAD if s["kind"] == "select" else {}
            for label, v in bad.items():
                if (s["kind"] == "float" and label == "half") or (s["kind"] == "select" and v in s["options"]):
                    continue
                if label == "none" and s["name"] in ("n_heads", "n_kv_heads"):
                    continue  # None: the model's own heads (the compute functions' documented default)
                yield pytest.param(calc, fixed, values, s["name"], label, v, id=f"{chapter}-{calc}-{s['name']}-{label}")


CASES = list(_cases())
OPTIONS = {(calc, s["name"]): s.get("options", []) for _, calc, _, specs in _panels() for s in specs}


def test_every_chapter_panel_is_swept():
    assert len({c.values[0] for c in CASES}) >= 10 and len(CASES) > 500, (len({c.values[0] for c in CASES}), len(CASES))


@pytest.mark.parametrize("calc,fixed,values,name,label,value", CASES)
def test_bad_control_value_gives_one_line(calc, fixed, values, name, label, value):
    out = python_result(calc, fixed, {**values, name: value})  # any exception but VramlibError fails here
    if "error" in out:
        msg = out["error"]
        assert "\n" not in msg and "internal error" not in msg, msg
        return
    numeric_select = label == "number" and not all(isinstance(o, str) for o in OPTIONS.get((calc, name), ["x"]))
    assert label not in NEVER or numeric_select, f"{calc}: {name}={value!r} was silently accepted"
