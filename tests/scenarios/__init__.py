"""Each chapter's alternate papermill scenario: one module per chapter with STEM, PARAMS and expected(params).

``expected`` recomputes the chapter's glued numbers through vramlib for the merged parameters
(defaults from the notebook's ``parameters`` cell, overridden by PARAMS); tests/test_chapters.py
runs the chapter with PARAMS through papermill and compares.
"""
from __future__ import annotations

import importlib
import pkgutil

SCENARIOS: dict = {}
for _info in pkgutil.iter_modules(__path__):
    _mod = importlib.import_module(f"{__name__}.{_info.name}")
    SCENARIOS[_mod.STEM] = (_mod.PARAMS, _mod.expected)
