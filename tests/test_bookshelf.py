"""Bookshelf diagrams (chapter 14): the drawing is the numbers, and the words match the drawing."""
import math
import re

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import vramlib as vl  # noqa: E402
from vramlib import bookshelf as bs  # noqa: E402
from vramlib.present.widgets.bookshelf import bookshelf_compute, evaluate_bookshelf  # noqa: E402

MODEL = "llama-3.1-8b"
CARD = "rtx-4090"
CAP = vl.get_gpu(CARD).memory_bytes
INF = vl.inference_memory(MODEL, "bf16", "bf16", tokens=4096, prefill_chunk=2048)
TRAIN = vl.training_memory(MODEL, seq=2048)
INF_4BIT = vl.inference_memory(MODEL, "gptq-4bit-g128", tokens=4096)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _widths(ax, gid):
    return sum(p.get_width() for p in ax.patches if p.get_gid() == gid)


def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts)


# --- layout ---------------------------------------------------------------------------------------------------
def test_layout_places_every_component_end_to_end():
    shelf = bs.shelf_layout(TRAIN, CARD)
    assert shelf.total_bytes == TRAIN.total
    assert sorted(i.component for i in shelf.items) == sorted(k for k, v in TRAIN.items() if v)
    pos = 0
    for item in shelf.items:
        assert item.start == pos
        pos = item.end
    assert shelf.capacity_bytes == CAP


def test_component_kinds():
    assert bs.component_kind("kv cache") == "notes"
    assert bs.component_kind("weights") == "books"
    assert bs.component_kind("base weights (nf4-dq)") == "books"
    assert bs.component_kind("gradients") == "scratch"
    assert bs.component_kind("optimizer states") == "calculators"
    assert bs.component_kind("master weights (fp32)") == "ledger"
    assert bs.component_kind("activations") == "notebooks"
    assert bs.component_kind("reserve (CUDA context, framework)") == "fittings"
    assert bs.component_kind("something new") == "other"


def test_book_bytes_are_every_weight_component():
    shelf = bs.shelf_layout(INF_4BIT, CARD)
    weights = sum(vl.weights_detail(MODEL, "gptq-4bit-g128").values())
    assert shelf.book_bytes == weights == vl.weights_bytes(MODEL, "gptq-4bit-g128")


@pytest.mark.parametrize("fmt, quality", [("fp32", "glossy full-colour print"), ("bf16", "colour print"),
                                          ("q8_0", "greyscale print"), ("int8", "greyscale print"),
                                          ("nf4", "thin greyscale paperbacks"), ("int4", "thin greyscale paperbacks")])
def test_print_quality_follows_precision(fmt, quality):
    assert bs.print_quality(fmt).name == quality


def test_guess_precision_reads_the_breakdown():
    assert bs.guess_precision(INF) == "bf16"
    assert bs.guess_precision(INF_4BIT) == "gptq-4bit-g128"
    assert bs.guess_precision(TRAIN) == "bf16"
    assert bs.guess_precision(vl.training_memory(MODEL, method="qlora")) == "nf4-dq"
    assert bs.guess_precision(vl.Breakdown({"weights": 1})) == "fp16"


def test_overflow_flag_exactly_when_total_exceeds_capacity():
    total = INF.total
    assert bs.shelf_layout(INF, total).fits                        # exactly full: fits
    assert bs.shelf_layout(INF, total).overflow_bytes == 0
    over = bs.shelf_layout(INF, total - 1)
    assert not over.fits and over.overflow_bytes == 1
    assert bs.shelf_layout(TRAIN, CARD).overflow_bytes == TRAIN.total - CAP
    assert math.isclose(bs.shelf_layout(TRAIN, CARD).shelves_needed, TRAIN.total / CAP)


def test_bad_inputs_name_the_field():
    with pytest.raises(vl.InvalidValueError, match="capacity"):
        bs.shelf_layout(INF, 0)
    with pytest.raises(vl.InvalidValueError, match="volumes"):
        bs.shelf_layout(INF, CARD, volumes=0)
    with pytest.raises(vl.UnknownNameError, match="precision"):
        bs.shelf_layout(INF, CARD, precision="fp17")
    with pytest.raises(vl.InvalidValueError, match="breakdown"):
        bs.shelf_layout({"weights": 1}, CARD)
    with pytest.raises(vl.UnknownNameError, match="gpu"):
        bs.shelf_layout(INF, "rtx-9999")


# --- matplotlib drawing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bd", [INF, TRAIN, INF_4BIT], ids=["bf16", "training", "gptq"])
def test_drawn_book_widths_sum_to_the_weights_in_gb(bd):
    ax = bs.draw_bookshelf(bd, CAP)
    books = sum(v for k, v in bd.items() if bs.component_kind(k) == "books")
    assert math.isclose(_widths(ax, "books"), vl.gb(books), rel_tol=1e-12)


def test_same_number_of_volumes_thinner_at_lower_precision():
    a16 = bs.draw_bookshelf(vl.inference_memory(MODEL, "bf16"), CAP, volumes=10)
    a4 = bs.draw_bookshelf(vl.inference_memory(MODEL, "int4"), CAP, volumes=10)
    v16 = [p for p in a16.patches if p.get_gid() == "books"]
    v4 = [p for p in a4.patches if p.get_gid() == "books"]
    assert len(v16) == len(v4) == 10
    assert math.isclose(v4[0].get_width() * 4, v16[0].get_width())   # int4 = a quarter of bf16
    assert {p.get_facecolor()[:3] for p in v4} != {p.get_facecolor()[:3] for p in v16}   # greyscale vs colour


@pytest.mark.parametrize("kind", ["notes", "scratch", "calculators", "ledger", "notebooks", "fittings"])
def test_every_item_is_drawn_its_exact_width(kind):
    bd = vl.Breakdown({**TRAIN.to_dict(), "kv cache": 3 * 10**9})
    ax = bs.draw_bookshelf(bd, CAP)
    want = sum(v for k, v in bd.items() if bs.component_kind(k) == kind)
    assert math.isclose(_widths(ax, kind), vl.gb(want), rel_tol=1e-12)


def test_shelf_length_is_the_capacity():
    ax = bs.draw_bookshelf(INF, CAP)
    assert math.isclose(_widths(ax, "shelf"), vl.gb(CAP))


def test_overflow_drawn_and_labelled_exactly_when_total_exceeds_capacity():
    for bd, over in ((INF, False), (TRAIN, True)):
        ax = bs.draw_bookshelf(bd, CAP)
        gids = {p.get_gid() for p in ax.patches}
        assert ("overflow" in gids) is over
        assert ("does not fit" in _texts(ax)) is over
        assert ("free:" in _texts(ax)) is (not over)
    ax = bs.draw_bookshelf(TRAIN, CAP)
    red = next(p for p in ax.patches if p.get_gid() == "overflow")
    assert math.isclose(red.get_x(), vl.gb(CAP)) and math.isclose(red.get_width(), vl.gb(TRAIN.total - CAP))
    assert bs.fmt_gb(TRAIN.total - CAP) in _texts(ax)


def test_boundary_exactly_full_has_no_overflow():
    ax = bs.draw_bookshelf(INF, INF.total)
    assert "does not fit" not in _texts(ax)
    assert "overflow" not in {p.get_gid() for p in ax.patches}


def test_legend_plain_and_technical():
    ax = bs.draw_bookshelf(TRAIN, CAP, legend_plain=True)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("the model's knowledge" in t and "(weights)" in t for t in labels)
    assert any("calculators" in t and "(optimizer states)" in t for t in labels)
    assert any("scratch paper" in t and "(gradients)" in t for t in labels)
    ax = bs.draw_bookshelf(TRAIN, CAP, legend_plain=False)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("knowledge" in t for t in labels)


def test_pair_shares_one_scale():
    fig, (a1, a2) = bs.bookshelf_pair(INF, TRAIN, CARD)
    assert a1.get_xlim() == a2.get_xlim()
    assert math.isclose(_widths(a1, "shelf"), _widths(a2, "shelf"))
    assert a1.bookshelf.fits and not a2.bookshelf.fits
    assert "Does not fit" in a2.get_title(loc="left") and "Fits" in a1.get_title(loc="left")


# --- words ----------------------------------------------------------------------------------------------------
def test_alt_text_contains_the_numbers():
    text = bs.alt_text(TRAIN, CARD)
    for v in list(TRAIN.values()) + [CAP, TRAIN.total, TRAIN.total - CAP]:
        assert bs.fmt_gb(v) in text
    assert "does not fit" in text and "hangs off" in text
    assert f"{TRAIN.total / CAP:.1f} such shelves" in text
    text = bs.alt_text(INF, CARD)
    assert "it fits" in text and f"{bs.fmt_gb(CAP - INF.total)} of shelf left empty" in text
    assert "colour print (bf16, 2 bytes a number)" in text and "notes on the conversation" in text


def test_alt_text_names_the_print_quality():
    assert "thin greyscale paperbacks" in bs.alt_text(vl.inference_memory(MODEL, "int4"), CARD)
    assert "pages a compact edition keeps in full colour" in bs.alt_text(INF_4BIT, CARD)


def test_fmt_gb():
    assert bs.fmt_gb(16_060_522_496) == "16.1 GB"
    assert bs.fmt_gb(536_870_912) == "0.54 GB"
    assert bs.fmt_gb(1_000_000) == "under 0.01 GB"


def test_stack_alt_text():
    shelves = [bs.shelf_layout(INF, CARD), bs.shelf_layout(TRAIN, CARD)]
    text = bs.stack_alt_text(shelves, ["using it", "teaching it"])
    assert text.startswith("2 bookshelves, each 25.8 GB long")
    assert "Shelf 1, using it:" in text and "Shelf 2, teaching it:" in text
    assert f"does not fit, {bs.fmt_gb(TRAIN.total - CAP)} hangs off" in text
    with pytest.raises(vl.InvalidValueError, match="labels"):
        bs.stack_alt_text(shelves, ["one"])


def test_min_shelves_and_glossary():
    # ZeRO-3 style: the books and tools split over n shelves, each keeps its own notebooks and fittings
    n = bs.min_shelves(TRAIN, CARD)
    shared = sum(TRAIN[k] for k in ("weights", "gradients", "master weights (fp32)", "optimizer states"))
    own = TRAIN["activations"] + TRAIN["reserve (CUDA context, framework)"]
    assert shared / n + own <= CAP < shared / (n - 1) + own
    assert bs.min_shelves(INF, CARD) == 1
    rows = bs.glossary_rows(INF, TRAIN, CARD)
    terms = [r["technical term"] for r in rows]
    for t in ("GPU memory (VRAM)", "weights", "KV cache", "gradients", "optimizer states", "fp32 master weights",
              "activations", "precision"):
        assert t in terms
    last = rows[-1]
    assert last["teaching it (training)"] == f"{n} shelves" and last["using it (inference)"] == "1 shelf"


def test_how_many_times():
    assert bs.how_many_times(vl.weights_bytes(MODEL, "fp32"), vl.weights_bytes(MODEL, "int4")) == 8.0
    with pytest.raises(vl.InvalidValueError):
        bs.how_many_times(1, 0)


def test_stack_errors():
    with pytest.raises(vl.InvalidValueError, match="breakdowns"):
        bs.bookshelf_stack([], CARD)
    with pytest.raises(vl.InvalidValueError, match="legend"):
        bs.bookshelf_stack([INF], CARD, legend="some")
    with pytest.raises(vl.InvalidValueError, match="titles"):
        bs.bookshelf_stack([INF, TRAIN], CARD, titles=["one"])


def test_verdict_words():
    assert bs.verdict(bs.shelf_layout(INF, CARD)).startswith("Fits")
    assert bs.verdict(bs.shelf_layout(TRAIN, CARD)).startswith("Does not fit")


# --- SVG and the panel ----------------------------------------------------------------------------------------
def test_svg_matches_the_layout():
    svg = bs.bookshelf_svg(bs.shelf_layout(TRAIN, CARD))
    assert "does not fit" in svg and svg.count("<svg") == 1
    assert "does not fit" not in bs.bookshelf_svg(bs.shelf_layout(INF, CARD))
    # every book rectangle together spans the weights' share of the drawing
    svg = bs.bookshelf_svg(bs.shelf_layout(INF, CARD), width=1020)   # 1000 px of scale
    xs = [float(w) for w in re.findall(r"<rect x='[^']+' y='[^']+' width='([0-9.]+)'[^>]*><title>books", svg)]
    assert math.isclose(sum(xs), 1000 * INF["weights"] / CAP, rel_tol=1e-3)


def test_panel_compute_and_errors_in_place():
    shelves = bookshelf_compute(MODEL, 32, 8, "bf16", 4096, CARD, "both")
    assert [s.fits for _, s in shelves] == [True, False]
    only = bookshelf_compute(MODEL, 32, 8, "q4_k_m", 131072, CARD, "inference")
    assert len(only) == 1 and only[0][1].fits
    html = evaluate_bookshelf(dict(model=MODEL, n_heads=32, n_kv_heads=5, weights="bf16", tokens=4096, gpu=CARD,
                                   task="both"))
    assert "vramlib-error" in html and "n_kv_heads" in html and "Traceback" not in html
    html = evaluate_bookshelf(dict(model=MODEL, n_heads=32, n_kv_heads=8, weights="q4_k_m", tokens=4096, gpu=CARD,
                                   task="training"))
    assert "vramlib-error" in html and "precision" in html
    html = evaluate_bookshelf(dict(model="no-such-model", n_heads=32, n_kv_heads=8, weights="bf16", tokens=4096,
                                   gpu=CARD, task="both"))
    assert "vramlib-error" in html and "model" in html


def test_panel_keeps_head_dim_when_heads_unchanged():
    # Gemma-2-9B's head_dim (256) is not hidden / heads; leaving the heads alone must not change the model
    (_, s), = bookshelf_compute("gemma-2-9b", 16, 8, "bf16", 4096, CARD, "inference")
    assert s.by_kind()["notes"] == vl.kv_cache_bytes("gemma-2-9b", 4096, dtype="bf16")


def test_panel_update_compiles_nothing():
    # the update time (< 50 ms) is measured by tools/bench.py; here the work after one update is counted
    from costs import counting, warm_cost

    values = dict(model=MODEL, n_heads=32, n_kv_heads=8, weights="bf16", tokens=4096, gpu=CARD, task="both")
    cost = warm_cost(evaluate_bookshelf, values)
    assert cost.compiles == 0 and cost.weights_misses == 0 and cost.evaluations > 0, cost
    with counting() as moved:           # other numbers: the same compiled formulas (other KV heads: a new shape)
        evaluate_bookshelf(values | dict(tokens=8192, n_kv_heads=4))
    assert moved.compiles == 0 and moved.weights_misses <= 1, moved
