"""The measurement scripts of tools/measure/ as modules, for tests that read their case lists and helpers."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools" / "measure"


def tool(name: str):
    """``tools/measure/<name>.py`` imported (once per name) with ``tools/measure`` on the path, as the scripts expect."""
    key = f"measure_{name}"
    if key not in sys.modules:
        if str(TOOLS) not in sys.path:
            sys.path.append(str(TOOLS))
        spec = importlib.util.spec_from_file_location(key, TOOLS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]
