"""Random input sets for the calculators and the comparison of a browser result with vramlib's (tests/browser).

A case is the panel's fixed arguments (read back from the page's ``data-fixed``) plus one value per control
(``data-controls``), drawn with a seeded generator: selects uniformly, integers near the chapter's value or
log-uniformly within the control's bounds, heads mostly the chosen model's own (a model control) or among the
divisors that make a valid shape (the rest exercise the error path, which must give vramlib's own message).

A stages calculator (``widgets.parallel``) is compared on its fullest stage (the table the page shows) and its
verdict (every stage's total or split); the bookshelf on its first shelf's items and the pictures in words of
every shelf (every item in GB, each verdict).
"""
from __future__ import annotations

import math
import random
import re
from typing import Any

from vramlib.present import jsdata
from vramlib.core.errors import VramlibError

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _divisors(n: int, upto: int) -> list[int]:
    return [k for k in range(1, min(n, upto) + 1) if n % k == 0]


SPARING = ("virtual_stages", "offload_optimizer", "offload_params")
"""Knobs valid only with some others (interleaving, offload needs ZeRO): mostly left at the chapter's value, so
that most sets are valid plans; the rest exercise vramlib's error messages."""


def random_values(specs: list[dict], fixed: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One value per control; the heads knobs use the fixed model's hidden size to stay mostly valid."""
    values: dict[str, Any] = {}
    models = [v for v in fixed.values() if isinstance(v, dict) and "$model" in v]
    catalogue = dict(next((v["models"] for v in fixed.values() if isinstance(v, dict) and "models" in v), None)
                     or page_models(specs))
    catalogue.update({m["$model"]["name"]: m for m in models})  # the panel's own model under its name
    for s in specs:
        chosen = catalogue.get(values.get("model")) if isinstance(values.get("model"), str) else None
        if chosen:  # a model chosen by a control (the bookshelf, the inference panel): its shape
            models = [chosen]
        hidden = values.get("hidden") or (models[0]["$model"]["hidden"] if models else None)
        name, kind = s["name"], s["kind"]
        if kind in ("int", "float"):
            lo, hi = s.get("min", 1), s.get("max", max(8 * abs(s["value"] or 1), 2))
        if chosen and name in ("n_heads", "n_kv_heads") and rng.random() < 0.8:
            values[name] = chosen["$model"][name]  # what the panel sets when the model changes
        elif kind == "select" and name in SPARING and s["value"] in s["options"] and rng.random() < 0.6:
            values[name] = s["value"]
        elif kind == "int" and name in SPARING and rng.random() < 0.6:
            values[name] = s["value"]
        elif kind == "select":
            values[name] = rng.choice(s["options"])
        elif kind == "bool":
            values[name] = rng.random() < 0.5
        elif kind == "int" and name == "n_heads" and hidden and rng.random() < 0.9:
            values[name] = rng.choice(_divisors(hidden, hi))
        elif kind == "int" and name == "n_kv_heads" and hidden and rng.random() < 0.9:
            values[name] = rng.choice(_divisors(values.get("n_heads", s["value"]), hi))
        elif kind in ("int", "float"):
            if rng.random() < 0.7:
                x = s["value"] * 2 ** rng.uniform(-3, 3)
            else:
                x = math.exp(rng.uniform(math.log(max(lo, 1e-9)), math.log(hi)))
            x = min(max(x, lo), hi)
            values[name] = int(round(x)) if kind == "int" else x
        else:
            values[name] = s["value"]
    return values


def page_models(specs: list[dict]) -> dict[str, Any]:
    """The page data's catalogue (``VL.data.models``) when a model control chooses from it without data-fixed's
    own copy (the inference panel); else none."""
    if not any(s["name"] == "model" and s["kind"] == "select" for s in specs):
        return {}
    from vramlib.web.jsgen import catalogue_json

    return catalogue_json()["models"]


def python_result(calc: str, fixed_json: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """What vramlib computes for these inputs: parts, capacity, verdict, title -- or the error message."""
    compute = calculators()[calc]
    fixed = {k: jsdata.from_js_value(v) for k, v in fixed_json.items()}
    try:
        result = compute(**fixed, **values)
    except VramlibError as e:
        return {"error": str(e)}
    if isinstance(result, list):  # the bookshelf: [(caption, Shelf), ...]; the page shows the pictures in words
        from vramlib.explain.bookshelf import shelf_alt_text
        from vramlib.present.widgets.bookshelf import shelf_breakdown

        first = result[0][1]
        return {"parts": [[k, v] for k, v in shelf_breakdown(first).items()], "capacity": first.capacity_bytes,
                "verdict": "".join(shelf_alt_text(s) for _, s in result), "title": first.title}
    bd, cap, verdict = result
    if isinstance(bd, (tuple, list)):  # a stages calculator (widgets.parallel): the page's table is the fullest stage
        bd = bd[max(range(len(bd)), key=lambda i: bd[i].total)]
    return {"parts": [[k, v] for k, v in bd.items()], "capacity": cap, "verdict": verdict, "title": bd.title}


PANEL_MODULES = ("vramlib.explain.validation",)
"""Modules outside vramlib.present.widgets whose panels name a calculator (``validation.published_compute``)."""


def calculators() -> dict[str, Any]:
    """Calculator name -> the Python compute function of the same name in vramlib.present.widgets.* (and PANEL_MODULES)"""
    import importlib
    import pkgutil

    import vramlib.present.widgets as W

    out = {}
    names = [f"vramlib.present.widgets.{mod.name}" for mod in pkgutil.iter_modules(W.__path__)] + list(PANEL_MODULES)
    for module in names:
        m = importlib.import_module(module)
        for name, obj in vars(m).items():
            if name.endswith("_compute") and callable(obj):
                out[name[: -len("_compute")]] = obj
    return out


def close(a: float, b: float, rel: float = 1e-4) -> bool:
    """Equal to 4 significant digits."""
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def _numbers(text: str) -> tuple[str, list[str]]:
    return NUMBER.sub("#", text), NUMBER.findall(text)


def _number_close(x: str, y: str) -> bool:
    a, b = float(x.replace(",", "")), float(y.replace(",", ""))
    if close(a, b):
        return True
    decimals = len(x.split(".")[1]) if "." in x else 0  # display rounding: one unit in the last printed digit
    return decimals > 0 and abs(a - b) <= 10 ** -decimals * 1.0001


def compare(py: dict[str, Any], js: dict[str, Any]) -> list[str]:
    """Differences between vramlib's result and the browser's (empty when equal to 4 significant digits)."""
    if "error" in py or js.get("error"):
        if py.get("error") != js.get("error"):
            return [f"error: python {py.get('error')!r} vs browser {js.get('error')!r}"]
        return []
    diffs = []
    pn, jn = [p[0] for p in py["parts"]], [p[0] for p in js["parts"]]
    if pn != jn:
        return [f"components: python {pn} vs browser {jn}"]
    for (name, a), (_, b) in zip(py["parts"], js["parts"]):
        if not close(a, b):
            diffs.append(f"{name}: python {a:,} vs browser {b:,}")
    if not close(sum(p[1] for p in py["parts"]), js["total"]):
        diffs.append(f"total: python {sum(p[1] for p in py['parts']):,} vs browser {js['total']:,}")
    if py["capacity"] is not None and not close(py["capacity"], js.get("capacity") or 0):
        diffs.append(f"capacity: python {py['capacity']} vs browser {js.get('capacity')}")
    for field in ("verdict", "title"):
        if field == "title" and js.get("title") is None:
            continue
        (ps, pnums), (bs, bnums) = _numbers(py[field]), _numbers(js[field])
        if ps != bs or len(pnums) != len(bnums) or not all(_number_close(x, y) for x, y in zip(pnums, bnums)):
            diffs.append(f"{field}: python {py[field]!r} vs browser {js[field]!r}")
    return diffs
