import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import vramlib as vl  # noqa: E402
from vramlib.present.widgets import evaluate_panel  # noqa: E402
from vramlib.present.widgets.inference import inference_compute  # noqa: E402


def test_breakdown_basics():
    bd = vl.Breakdown({"weights": 10**9, "kv cache": 5 * 10**8}, title="t")
    assert bd.total == 1_500_000_000 and list(bd) == ["weights", "kv cache"]
    assert bd.fits("2GB") and not bd.fits("2GB", headroom=0.5) and bd.fits(vl.get_gpu("t4"))
    assert bd.free_bytes("1GB") == -500_000_000
    html = bd._repr_html_()
    assert "GiB" in html and "1,500,000,000" in html and "<caption>t</caption>" in html
    with pytest.raises(vl.InvalidValueError, match="Breakdown"):
        vl.Breakdown({"weights": -1})
    with pytest.raises(vl.InvalidValueError, match="headroom"):
        bd.fits("2GB", headroom=1.5)


def test_plots_and_svg():
    bd = vl.inference_memory("llama-2-7b", tokens=4096)
    ax = vl.viz.stacked_bars([bd], capacity=vl.get_gpu("rtx-4090").memory_bytes)
    heights = sum(p.get_height() for p in ax.patches)
    assert heights == pytest.approx(vl.gb(bd.total))
    svg = vl.viz.breakdown_svg(bd, capacity=vl.get_gpu("t4").memory_bytes)
    assert "aria-label" in svg and "does not fit" in svg
    t = vl.viz.Table([{"a": 1234, "b": 1.5}], caption="c")
    assert "1,234" in repr(t) and "<table" in t._repr_html_()


def test_widget_errors_stay_in_place():
    ok = dict(n_heads=40, n_kv_heads=8, weights="int4", kv_dtype="fp16", tokens=4096, gpu="rtx-4090",
              attention="sdpa", batch=1)
    html = evaluate_panel(lambda **v: inference_compute("llama-2-13b", **v), ok)
    assert "Fits on rtx-4090" in html and "<table" in html
    bad = evaluate_panel(lambda **v: inference_compute("llama-2-13b", **v), ok | {"n_kv_heads": 3})
    assert "vramlib-error" in bad and "n_kv_heads" in bad and "Traceback" not in bad
    bad = evaluate_panel(lambda **v: inference_compute("llama-2-13b", **v), ok | {"n_heads": 48})
    assert "must divide hidden=5120" in bad
    boom = evaluate_panel(lambda **v: 1 / 0, ok)
    assert "internal error (ZeroDivisionError)" in boom
