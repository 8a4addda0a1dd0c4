"""The bookshelf panel (chapter 14): model, precision, context, conversations, GPU, task, heads, KV heads ->
the shelf redrawn as inline SVG (no matplotlib, so an update stays far under 50 ms)."""
from __future__ import annotations

from functools import lru_cache

from ...memory.breakdown import Breakdown
from ...core.portable import escape, fmt_fixed, portable, raise_problem, shared
from ...catalog.precision import precision_view
from ...explain.bookshelf import Shelf, shelf_layout, shelf_svg, shelf_verdict, shelf_words
from ...core.errors import VramlibError, check_choice
from ...catalog.hardware import GPUS, get_gpu
from ...memory.inference import inference_memory
from ...catalog.models import get_model, model_names
from ...catalog.precision import get_precision, precision_names
from ...memory.training import training_memory
from .base import bounded_int, range_problem, render, with_static_view

TASKS = ("inference", "training", "both")
"""inference: answer questions; training: full training (every weight learns); both: the two shelves."""


def bookshelf_compute(model, n_heads: int, n_kv_heads: int, weights: str, tokens: int, gpu: str, task: str = "both",
                      batch: int = 1, prefill_chunk: int | None = 2048, volumes: int = 12,
                      js_data: dict | None = None) -> list[tuple[str, Shelf]]:
    """One update: ``[(caption, Shelf), ...]`` for inference and/or full training of ``model`` on ``gpu``.

    ``js_data``: :func:`bookshelf_js_data`, what the static book's calculator (``vramlib/web/js/bookshelf.js``) needs
    from vramlib (the catalogue models, the furniture tables); ignored here.

    Inference: ``weights`` for the books, a KV cache in the same precision when it is a float format
    (fp16 otherwise), ``batch`` conversations of ``tokens`` tokens, prefill in chunks of ``prefill_chunk``.
    Training: full training in ``weights`` (bf16, fp16 or fp32), sequences of ``tokens``, micro-batch ``batch``.
    """
    m = get_model(model).as_heads(n_heads, n_kv_heads)
    task = check_choice("task", task, TASKS)
    card = get_gpu(gpu)
    prec = get_precision(weights, field="precision")
    out = []
    if task in ("inference", "both"):
        kv = bookshelf_kv_format(precision_view(prec))
        bd = inference_memory(m, prec.name, kv, tokens, batch, "sdpa", prefill_chunk=prefill_chunk)
        out.append((bookshelf_caption("inference", batch, tokens), shelf_layout(bd, card, prec.name, volumes)))
    if task in ("training", "both"):
        raise_problem(bookshelf_training_problem(prec.name))
        bd = training_memory(m, "full", seq=tokens, micro_batch=batch, precision=prec.name)
        out.append((bookshelf_caption("training", batch, tokens), shelf_layout(bd, card, prec.name, volumes)))
    return out


@portable
def bookshelf_kv_format(p):
    """The notes' format: the books' own when it is a 16- or 32-bit float (not tf32), else fp16."""
    return p["name"] if p["is_float"] and p["name"] != "tf32" else "fp16"


@portable
def bookshelf_caption(task, batch, tokens):
    """The caption of an inference or a training shelf."""
    if task == "inference":
        return "Using the model: " + str(batch) + " x " + fmt_fixed(tokens, 0, True) + " tokens of conversation"
    return "Teaching the model: " + str(batch) + " x " + fmt_fixed(tokens, 0, True) + "-token sequences"


@portable
def bookshelf_training_problem(name):
    """None, or why books in ``name`` cannot be taught (full training computes in bf16, fp16 or fp32)."""
    if name in shared("TRAINING_PRECISIONS"):
        return None
    return ["precision", name, "teaching (training) needs bf16, fp16 or fp32 books; compact 8- and 4-bit books are for "
            "inference (task 'inference')"]


def shelf_breakdown(shelf: Shelf) -> Breakdown:
    """The shelf's items as a Breakdown, in shelf order (its table in the panel)."""
    return Breakdown({i.component: i.nbytes for i in shelf.items}, title=shelf.title)


def bookshelf_render(shelves: list[tuple[str, Shelf]] | Exception) -> str:
    """HTML: for each shelf its caption and verdict, the SVG on a common scale; then the pictures in words (alt
    text) and each shelf's numbers (``shelves_html``); or an error line."""
    if isinstance(shelves, Exception):
        return render(shelves)
    return shelves_html([[caption, s.view()] for caption, s in shelves],
                        [shelf_breakdown(s)._repr_html_() for _, s in shelves])


@portable
def shelves_html(shelves, tables):
    """The panel's HTML from ``[[caption, shelf view]]`` and each shelf's breakdown table (HTML)."""
    xmax = 0
    for c in shelves:
        xmax = max(xmax, c[1]["total_bytes"], c[1]["capacity_bytes"])
    blocks = ""
    for c in shelves:
        colour = "#1b7837" if c[1]["fits"] else shared("OVERFLOW_RED")
        blocks += ("<p style='margin:6px 0 2px 0'><b>" + escape(c[0]) + ".</b> <span style='color:" + colour + "'>" +
                   escape(shelf_verdict(c[1])) + "</span></p>" + shelf_svg(c[1], 720, xmax))
    words = "<br>".join([escape(shelf_words(c[1])) for c in shelves])
    more = ""
    for k in range(len(tables)):
        more += tables[k] if k == 0 else tables[k].replace("<table class='vramlib-breakdown'>",
                                                           "<table class='vramlib-breakdown-more'>")
    return (blocks + "<details><summary>the picture in words, and the numbers</summary><span class='vramlib-verdict'>" +
            words + "</span>" + more + "</details>")


@lru_cache(maxsize=1)
def bookshelf_js_data() -> dict:
    """What ``vramlib/web/js/bookshelf.js`` takes from vramlib, as JSON: every catalogue model (``jsdata.model_json``)
    and the tasks (the furniture, print qualities and words reach the page as ``VL.shared``)."""
    from ..jsdata import model_json

    return {"models": {n: model_json(get_model(n)) for n in shelf_models()}, "tasks": list(TASKS)}


def shelf_models() -> list[str]:
    """The catalogue models a bookshelf can draw: those of one uniform layer kind (the shelf's training books read
    one layer's activations); the others are listed in the panel's note."""
    return [n for n in model_names() if get_model(n).uniform_problem() is None]


def evaluate_bookshelf(values: dict) -> str:
    """Compute and render; a VramlibError (or a bug) becomes one line in place, never a traceback."""
    try:
        return bookshelf_render(bookshelf_compute(**values))
    except VramlibError as e:
        return render(e)
    except Exception as e:  # noqa: BLE001  (a bug: still one line in place)
        return render(VramlibError(f"internal error ({type(e).__name__}): {e}; please report it"))


def bookshelf_panel(model="llama-3.1-8b", weights: str = "bf16", tokens: int = 4096, gpu: str = "rtx-4090",
                    task: str = "both", batch: int = 1):
    """Controls: model, precision (print quality), context, conversations, GPU, task, heads, KV heads."""
    import ipywidgets as w

    m = get_model(model)
    style = {"description_width": "initial"}
    controls = {
        "model": w.Dropdown(options=shelf_models(), value=m.name if m.name in shelf_models() else shelf_models()[0],
                            description="model", style=style),
        "weights": w.Dropdown(options=precision_names(), value=weights, description="precision", style=style),
        "tokens": bounded_int(value=tokens, min=1, max=10**7, step=1024, description="context (tokens)",
                                   style=style),
        "batch": bounded_int(value=batch, min=1, max=4096, description="conversations at once", style=style),
        "gpu": w.Dropdown(options=sorted(GPUS), value=gpu, description="GPU", style=style),
        "task": w.Dropdown(options=list(TASKS), value=task, description="task", style=style),
        "n_heads": bounded_int(value=m.n_heads, min=1, max=512, description="heads", style=style),
        "n_kv_heads": bounded_int(value=m.n_kv_heads, min=1, max=512, description="KV heads", style=style),
    }
    out = w.HTML()
    busy = [False]

    def on_model(change) -> None:  # a new model brings its own heads and KV heads: one update, not three
        mm = get_model(change["new"])
        busy[0] = True
        try:
            controls["n_heads"].value = mm.n_heads
            controls["n_kv_heads"].value = mm.n_kv_heads
        finally:
            busy[0] = False
        update()

    def update(_=None) -> None:
        if busy[0]:
            return
        problem = range_problem(controls)
        out.value = render(problem) if problem else evaluate_bookshelf({k: c.value for k, c in controls.items()})

    controls["model"].observe(on_model, names="value")
    for k, c in controls.items():
        if k != "model":
            c.observe(update, names="value")
    update()
    keys = list(controls)
    box = w.VBox([w.HBox([controls[k] for k in keys[i:i + 3]]) for i in range(0, len(keys), 3)] + [out])
    return with_static_view(box, controls, out.value, compute=bookshelf_compute,  # live in the static book too
                            fixed={"js_data": bookshelf_js_data()})
