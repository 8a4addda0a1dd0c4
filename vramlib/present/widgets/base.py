"""Widget panels: controls -> a compute function -> a Breakdown table, an SVG bar and a verdict.

Bad combinations show a one-line message in place (never a traceback). Each update is pure
vramlib arithmetic plus HTML, well under 50 ms (``tools/bench.py``). Used in: every chapter.

Chapter-specific panels live in submodules by concept: ``widgets.inference`` (chapters 1, 5, 7).

A panel shows two views of one computation. In Jupyter and on Binder the ipywidgets run. Its
``text/html`` view (what the static HTML book renders, see ``nb_mime_priority_overrides`` in
``_config.yml``) is a placeholder ``<div class="vramlib-calc" data-calc=... data-fixed=... data-controls=...>``
holding the result for the initial values; on the book's pages ``vramlib-calc.js`` (generated from
the sympy formulas by :mod:`vramlib.web.jsgen`) turns it into a live calculator with the same knobs. A
panel whose compute function is a named ``<calc>_compute`` given with ``fixed=`` arguments names
its calculator (``vramlib/web/js/<calc>.js`` registers it; ``tests/browser`` checks it against the Python);
anything else -- a lambda, a hand-built VBox given :func:`with_static_view` -- stays a static result
with a hint to run the page live.
"""
from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from ...memory.breakdown import Breakdown
from ...core.errors import InvalidValueError, VramlibError
from ...core.units import gb, gib
from ..viz import breakdown_svg

Computed = tuple[Breakdown, int | None, str]
"""What a panel's compute function returns: the breakdown, the capacity in bytes (or None), a verdict line."""


def render(result: Computed | Exception) -> str:
    """HTML for a computed result, or the one-line error message of a VramlibError."""
    if isinstance(result, Exception):
        return f"<div class='vramlib-error' style='color:#b00020'>&#9888; {result}</div>"
    bd, cap, verdict = result
    head = f"<p><b>{verdict}</b></p>" if verdict else ""
    capline = f" of {gb(cap):,.2f} GB ({gib(cap):,.2f} GiB)" if cap else ""
    return (head + breakdown_svg(bd, cap) + bd._repr_html_()
            + f"<p><small>total {gb(bd.total):,.2f} GB ({gib(bd.total):,.2f} GiB){capline}</small></p>")


def evaluate_panel(compute: Callable[..., Computed], values: Mapping[str, Any],
                   renderer: Callable[[Any], str] = render) -> str:
    """Run ``compute(**values)`` and render it (``renderer``, e.g. per-stage bars); VramlibError becomes an
    in-place message."""
    try:
        return renderer(compute(**values))
    except VramlibError as e:
        return render(e)
    except Exception as e:  # a bug, not a bad input: still one line in place, never a traceback
        return render(VramlibError(f"internal error ({type(e).__name__}): {e}; please report it"))


_STYLE = {"description_width": "initial"}


def dropdown(options, value, description: str):
    """A labelled ipywidgets Dropdown (the panels' select control)."""
    import ipywidgets as w

    return w.Dropdown(options=list(options), value=value, description=description, style=_STYLE)


@lru_cache(maxsize=1)
def _checked_int_class():
    import ipywidgets as w
    import traitlets

    class CheckedIntText(w.IntText):
        """An integer box that never clamps: ipywidgets' BoundedIntText silently turns 1,000,000,000 tokens into
        its maximum; this one lets the value through and the panel shows a one-line message in place
        (:func:`range_problem`), as the static book's calculators do. ``min``/``max`` are the allowed range."""

        min = traitlets.Int(None, allow_none=True)
        max = traitlets.Int(None, allow_none=True)

    return CheckedIntText


def bounded_int(value: int, min: int | None = None, max: int | None = None, **kwargs):  # noqa: A002 (ipywidgets' names)
    """The panels' integer control: BoundedIntText's arguments, no clamping (see :func:`_checked_int_class`)."""
    return _checked_int_class()(value=value, min=min, max=max, **kwargs)


def int_box(value: int, lo: int, hi: int, description: str, step: int = 1):
    """A labelled integer box with an allowed range [lo, hi] (:func:`bounded_int`)."""
    return bounded_int(value, min=lo, max=hi, step=step, description=description, style=_STYLE)


def range_problem(controls: Mapping[str, Any]) -> VramlibError | None:
    """The first control whose value lies outside its allowed range, as a one-line error (the same words as the
    static calculators' message); None when every value is allowed."""
    for name, c in controls.items():
        lo, hi, v = getattr(c, "min", None), getattr(c, "max", None), getattr(c, "value", None)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (lo is None and hi is None):
            continue
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            field = getattr(c, "description", "") or name
            span = (f"from {lo:,} to {hi:,}" if lo is not None and hi is not None
                    else f"at least {lo:,}" if lo is not None else f"at most {hi:,}")
            return InvalidValueError(field, v, f"must be an integer {span}")
    return None


def panel(compute: Callable[..., Computed], controls: Mapping[str, Any], fixed: Mapping[str, Any] | None = None,
          view: Callable[[dict[str, Any]], str] | None = None,
          linked: Callable[[str, dict[str, Any]], Mapping[str, Any]] | None = None):
    """An ipywidgets VBox: ``controls`` (name -> widget) drive ``compute(**fixed, **values)``; output is an HTML widget.

    Give ``compute`` as the named function (``inference_compute``) and its non-control arguments as
    ``fixed`` (``{"model": m}``): the static book then runs the calculator of the same name in the
    browser. A lambda (or ``fixed=None``) still works in Jupyter; the static book shows its initial result.
    ``view`` (optional) draws a richer Jupyter output from the same values (per-rank bars, a ranked table);
    the static page still shows ``compute``'s calculator.
    ``linked(name, values)`` (optional): after control ``name`` changed, ``{other control: new value}`` to set first,
    with one update for all (a new model brings its own heads); the static calculator's ``linked`` does the same.
    """
    import ipywidgets as w

    fixed = dict(fixed or {})
    out = w.HTML()

    def values() -> dict[str, Any]:
        return {**fixed, **{k: c.value for k, c in controls.items()}}

    busy = [False]  # while linked values are set: one update after them, not one per control

    def update(_=None) -> None:
        if busy[0]:
            return
        problem = range_problem(controls)
        out.value = render(problem) if problem else (view(values()) if view else evaluate_panel(compute, values()))

    def changed(name: str) -> None:
        if linked is not None and not busy[0]:
            busy[0] = True
            try:
                for k, v in (linked(name, values()) or {}).items():
                    controls[k].value = v
            finally:
                busy[0] = False
        update()

    for name, c in controls.items():
        c.observe(lambda _change, name=name: changed(name), names="value")
    update()
    box = _panel_class()([w.HBox(list(controls.values())[i:i + 3]) for i in range(0, len(controls), 3)] + [out])
    box._vramlib_static_html = static_html(compute, controls, fixed, out.value)
    return box


@lru_cache(maxsize=1)
def _panel_class():
    import ipywidgets as w

    class Panel(w.VBox):
        """A panel's VBox whose display bundle also carries the static page's ``text/html`` calculator placeholder."""

        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            html_view = getattr(self, "_vramlib_static_html", None)
            if html_view and isinstance(data, dict):
                data["text/html"] = html_view
            return data

    return Panel


def __getattr__(name: str):
    if name == "Panel":  # built on first use so that `import vramlib` does not import ipywidgets
        return _panel_class()
    raise AttributeError(f"module 'vramlib.present.widgets.base' has no attribute {name!r}")


def with_static_view(box, controls: Mapping[str, Any], result_html: str,
                     compute: Callable[..., Any] | None = None, fixed: Mapping[str, Any] | None = None):
    """Give a hand-built panel (a VBox not made by :func:`panel`) the same ``text/html`` view: the settings and
    ``result_html`` (its output for the initial values), so the static book shows a result, never dead controls.
    Name ``compute`` and ``fixed`` as for :func:`panel` when the static book has a calculator for it."""
    import ipywidgets as w

    if type(box) is w.VBox:
        box.__class__ = _panel_class()
    box._vramlib_static_html = static_html(compute, controls, dict(fixed or {}), result_html)
    if not isinstance(box, _panel_class()):  # another container: carry the view on the instance
        base = box._repr_mimebundle_

        def bundle(**kwargs):
            data = base(**kwargs)
            if isinstance(data, dict):
                data["text/html"] = box._vramlib_static_html
            return data

        box._repr_mimebundle_ = bundle
    return box


def control_spec(name: str, control) -> dict[str, Any] | None:
    """A JSON description of one ipywidgets control (kind, label, value, options or bounds); None if unknown."""
    import ipywidgets as w

    label = getattr(control, "description", "") or name
    spec: dict[str, Any] = {"name": name, "label": label}
    if isinstance(control, (w.Dropdown, w.RadioButtons, w.ToggleButtons, w.Select, w.SelectionSlider)):
        values = list(control._options_values)
        if not all(isinstance(v, (str, int, float, bool)) for v in values):
            return None
        return {**spec, "kind": "select", "labels": [str(x) for x in control._options_labels], "options": values,
                "value": control.value}
    if isinstance(control, (w.Checkbox, w.ToggleButton)):
        return {**spec, "kind": "bool", "value": bool(control.value)}
    for kind, classes in (("int", (w.IntText, w.BoundedIntText, w.IntSlider)),  # CheckedIntText is an IntText
                          ("float", (w.FloatText, w.BoundedFloatText, w.FloatSlider, w.FloatLogSlider))):
        if isinstance(control, classes):
            spec.update(kind=kind, value=control.value)
            for bound in ("min", "max", "step"):
                if getattr(control, bound, None) is not None:
                    spec[bound] = getattr(control, bound)
            return spec
    if isinstance(control, (w.Text, w.Textarea)):
        return {**spec, "kind": "text", "value": control.value}
    return None


def calculator_name(compute: Callable[..., Computed] | None, fixed: Mapping[str, Any]) -> str | None:
    """``"inference"`` for ``inference_compute`` (given with ``fixed`` arguments); None for a lambda or a partial."""
    name = getattr(compute, "__name__", "") if compute is not None else ""
    if not fixed or not name.endswith("_compute") or name == "<lambda>":
        return None
    return name[: -len("_compute")]


def static_html(compute: Callable[..., Computed] | None, controls: Mapping[str, Any], fixed: Mapping[str, Any],
                result_html: str) -> str:
    """The ``text/html`` view of a panel: the settings and the result for the initial values, in a placeholder
    that the static book's ``vramlib-calc.js`` turns into a live calculator named ``data-calc``."""
    from ..jsdata import to_js_value

    specs = [control_spec(k, c) for k, c in controls.items()]
    calc = calculator_name(compute, fixed) if all(specs) else None
    settings = " &middot; ".join(f"{html.escape(str(getattr(c, 'description', '') or k))} "
                                 f"<b>{html.escape(str(getattr(c, 'label', None) or c.value))}</b>"
                                 for k, c in controls.items() if hasattr(c, "value"))
    attrs = ""
    if calc:
        def attr(obj) -> str:
            return html.escape(json.dumps(obj, sort_keys=True, separators=(",", ":")), quote=True)

        attrs = (f' data-calc="{calc}" data-fixed="{attr({k: to_js_value(v) for k, v in fixed.items()})}"'
                 f' data-controls="{attr(specs)}"')
    hint = ("Result for these settings. To change them, run this page live: the launch button (rocket icon) at "
            "the top of the page opens it on Binder or Colab.")
    return (f'<div class="vramlib-calc"{attrs}><div class="vramlib-calc-static">'
            f'<p class="vramlib-calc-settings"><small>{settings}</small></p>{result_html}'
            f'<p class="vramlib-calc-hint"><small>{hint}</small></p></div></div>')


def model_with_heads(model, n_heads: int | None = None, n_kv_heads: int | None = None):
    """The panel's model with its heads changed (None keeps the model's); 0 or text is refused by with_heads,
    never replaced by the model's value."""
    from ...catalog.models import get_model

    m = get_model(model)
    if n_heads is None and n_kv_heads is None:
        return m
    return m.as_heads(m.n_heads if n_heads is None else n_heads, m.n_kv_heads if n_kv_heads is None else n_kv_heads)


def panel_plan(tp=1, pp=1, dp=1, zero=0, sequence_parallel=False, **fields):
    """The ParallelPlan of a panel's values: sequence parallelism only with tp > 1, ZeRO as an integer stage."""
    from ...core.errors import check_positive_int
    from ...plans.parallel import ParallelPlan

    tp = check_positive_int("tp", tp)
    return ParallelPlan(tp=tp, pp=pp, dp=dp, zero=check_positive_int("zero", zero, allow_zero=True),
                        sequence_parallel=bool(sequence_parallel) and tp > 1, **fields)


def model_controls(model, gpu_names: list[str] | None = None, precisions: list[str] | None = None,
                   **extra) -> dict[str, Any]:
    """The standard knobs every chapter offers: heads, KV heads, precision (plus chapter-specific ``extra``)."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    ctl: dict[str, Any] = {
        "n_heads": bounded_int(value=model.n_heads, min=1, max=256, description="heads", style=style),
        "n_kv_heads": bounded_int(value=model.n_kv_heads, min=1, max=256, description="KV heads", style=style),
    }
    if precisions:
        ctl["weights"] = w.Dropdown(options=precisions, value=precisions[0], description="weights", style=style)
    if gpu_names:
        ctl["gpu"] = w.Dropdown(options=gpu_names, value=gpu_names[0], description="GPU", style=style)
    ctl.update(extra)
    return ctl

