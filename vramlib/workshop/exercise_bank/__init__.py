"""The chapters' exercises, one module per chapter, each answer computed by a vramlib call.

Importing this package registers every exercise into :mod:`vramlib.workshop.exercises`.
"""
from __future__ import annotations

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
