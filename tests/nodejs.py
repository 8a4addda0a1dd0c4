"""Run JavaScript expressions against the generated ``vramlib-calc.js`` in Node.js (no browser): the fast parity checks
of the portable code (``VL.py``) and the exact expressions (``VL.exact``) against Python. Node comes with Debian's
``nodejs`` package; the Makefile's test target installs it when missing."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NODE = shutil.which("node") or shutil.which("nodejs")


@lru_cache(maxsize=1)
def bundle() -> Path:
    from vramlib.web.jsgen import build_js

    path = Path(tempfile.mkdtemp(prefix="vramlib-js-")) / "vramlib-calc.js"
    path.write_text(build_js())
    return path


def run_js(expressions: list[str]) -> list[dict]:
    """``[{"ok": value} | {"err": message}]`` for each expression (``VL`` in scope)."""
    if NODE is None:
        pytest.fail("Node.js not found: `apt-get install -y nodejs` (make test installs it)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(expressions, f)
    out = subprocess.run([NODE, str(HERE / "js" / "run_requests.js"), str(bundle()), f.name], capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        raise AssertionError(f"node failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def js(value) -> str:
    """A Python value as a JavaScript literal (JSON)."""
    return json.dumps(value)
