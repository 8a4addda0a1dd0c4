"""Bookshelf diagrams: GPU memory explained to someone who has never heard of a GPU.

The shelf is the GPU's memory (its length is the capacity); the books are the model's weights (their
total width is the weight bytes; the print quality is the precision: glossy colour for 32-bit, colour
for 16-bit, greyscale for 8-bit, thin greyscale paperbacks for 4-bit: the same number of volumes,
thinner); sticky notes are the KV cache; scratch paper the gradients; calculators the optimizer states;
a ledger the fp32 master weights; open notebooks the activations. A workload that does not fit hangs
off the end of the shelf, in red, with the overflow labelled.

Every width comes from a :class:`~vramlib.memory.breakdown.Breakdown` computed by vramlib: the drawing adds no
number of its own. :func:`shelf_layout` places the items (a pure computation, tested);
:func:`draw_bookshelf` and :func:`bookshelf_pair` draw it with matplotlib; :func:`bookshelf_svg` draws
the same layout as inline SVG for widgets; :func:`alt_text` describes it in words.

Used in: chapter 14.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from ..memory.breakdown import Breakdown
from ..core.errors import InvalidValueError, check_positive_int
from ..catalog.precision import get_precision, precision_names
from ..core.units import gb, gib
from ..catalog.hardware import capacity_bytes
from ..core.portable import escape, fmt_fixed, fmt_g, infinity, portable, round_even, share, shared

# --- what each Breakdown component is on the shelf ---------------------------------------------------------


@dataclass(frozen=True)
class Furniture:
    """How one kind of component appears on the shelf."""

    kind: str          # books, booklet, notes, reading, scratch, ledger, calculators, notebooks, fittings, cart, other
    thing: str         # the object, in a few words ("books")
    plain: str         # what it stands for, for a non-technical reader
    colour: str        # face colour (books get theirs from the print quality)
    height: float      # drawn height, as a fraction of the shelf's inner height


_FURNITURE: dict[str, Furniture] = {
    "fittings": Furniture("fittings", "shelf fittings", "space the system keeps for itself", "#8c8c8c", 0.30),
    "books": Furniture("books", "books", "the model's knowledge", "#0072B2", 0.86),
    "booklet": Furniture("booklet", "a booklet of corrections", "the small add-on being trained", "#CC79A7", 0.62),
    "notes": Furniture("notes", "sticky notes", "notes on the conversation so far", "#F0E442", 0.42),
    "reading": Furniture("reading", "the page being read", "working space while reading the question", "#56B4E9", 0.22),
    "scratch": Furniture("scratch", "scratch paper", "corrections worked out for every number", "#fff8dc", 0.40),
    "ledger": Furniture("ledger", "ledgers", "an exact copy of the books, kept for careful updates", "#1b5e20", 0.80),
    "calculators": Furniture("calculators", "calculators", "running averages the trainer keeps for every number",
                             "#3a3a3a", 0.52),
    "notebooks": Furniture("notebooks", "open notebooks", "intermediate results kept for checking the work",
                           "#009E73", 0.34),
    "cart": Furniture("cart", "a book cart", "room to unpack one shelf-load at a time", "#a0785a", 0.40),
    "other": Furniture("other", "boxes", "other memory", "#999999", 0.40),
}

_COMPONENT_KIND = (  # Breakdown component name (lower case, before " (") -> furniture kind; first match wins
    ("reserve", "fittings"), ("weights", "books"), ("base weights", "books"), ("quantization constants", "books"),
    ("unquantized tensors", "books"), ("lora adapters", "booklet"), ("kv cache", "notes"),
    ("prefill workspace", "reading"), ("gradients", "scratch"), ("master weights", "ledger"),
    ("optimizer states", "calculators"), ("activations", "notebooks"), ("zero-3 gather buffer", "cart"),
)
_ORDER = ("fittings", "books", "booklet", "scratch", "ledger", "calculators", "notebooks", "cart", "notes",
          "reading", "other")
"""Order along the shelf: the system's space, then the books, then the work materials."""

_TECHNICAL = {"fittings": "reserve: CUDA context, framework", "books": "weights", "booklet": "LoRA adapters",
              "notes": "KV cache", "reading": "prefill workspace", "scratch": "gradients",
              "ledger": "fp32 master weights", "calculators": "optimizer states", "notebooks": "activations",
              "cart": "ZeRO-3 gather buffer", "other": "other"}


@portable
def component_kind(name):
    """The furniture kind of a Breakdown component name (``"kv cache"`` -> ``"notes"``)."""
    key = name.split(" (")[0].strip().lower()
    for pair in shared("COMPONENT_KIND"):
        if key == pair[0] or key.startswith(pair[0] + " "):
            return pair[1]
    return "other"


# --- print quality = precision -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PrintQuality:
    """How the books are printed: the precision of the weights in words and colours."""

    precision: str
    bits: float
    name: str            # "colour print"
    plain: str           # "colour print (bf16, 2 bytes a number)"
    spine_colours: tuple[str, ...]


_QUALITY = (  # (minimum bits, name, colours)
    (32, "glossy full-colour print", ("#003f7f", "#8b0000", "#005f3f", "#6a1b9a", "#b8860b")),
    (16, "colour print", ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")),
    (8, "greyscale print", ("#4d4d4d", "#6b6b6b", "#5a5a5a", "#7a7a7a")),
    (0, "thin greyscale paperbacks", ("#9a9a9a", "#b3b3b3", "#a6a6a6", "#bfbfbf")),
)


_BOOK_PLAIN = {"quantization constants": "the key to the compact print",
               "unquantized tensors": "pages a compact edition keeps in full colour"}
"""The words of the book components that are not the main volumes."""

_CONSTANTS_COLOUR = "#c8ad7f"
"""The one thin tan volume of the quantization constants."""


share(COMPONENT_KIND=[list(x) for x in _COMPONENT_KIND], SHELF_ORDER=list(_ORDER), TECHNICAL=dict(_TECHNICAL),
      QUALITY=[[low, name, list(colours)] for low, name, colours in _QUALITY], BOOK_PLAIN=dict(_BOOK_PLAIN),
      CONSTANTS_COLOUR=_CONSTANTS_COLOUR,
      FURNITURE={k: {"thing": f.thing, "plain": f.plain, "colour": f.colour, "height": f.height}
                 for k, f in _FURNITURE.items()})


def print_quality(precision: str) -> PrintQuality:
    """Print quality of books stored in ``precision`` (a vramlib format name)."""
    p = get_precision(precision, field="precision")
    q = quality_of(p.name, float(p.bits))
    return PrintQuality(q["precision"], q["bits"], q["name"], q["plain"], tuple(q["spine_colours"]))


@portable
def quality_of(precision, bits):
    """The print quality of ``bits``-bit books as a dict (:class:`PrintQuality`'s fields): the first row of the
    quality table whose minimum the bits reach."""
    for row in shared("QUALITY"):
        if bits >= row[0]:
            per = bits / 8
            size = fmt_g(per, 3) + " byte" + ("" if per == 1 else "s")
            return {"precision": precision, "bits": bits, "name": row[1],
                    "plain": row[1] + " (" + precision + ", " + size + " a number)", "spine_colours": row[2]}
    return None


def guess_precision(breakdown: Breakdown) -> str:
    """The weights' precision a Breakdown was computed with: ``base weights (nf4-dq)`` names it; otherwise the
    first format name in the title (vramlib's titles put it first: ``"m: fp16 weights, ..."``); else fp16."""
    names = set(precision_names())
    for comp in breakdown:
        if comp.lower().startswith("base weights (") and comp.endswith(")"):
            fmt = comp[len("base weights ("):-1]
            if fmt in names or _is_precision(fmt):
                return fmt
    for token in breakdown.title.replace(",", " ").replace(":", " ").split():
        if token.lower() in names or _is_precision(token):
            return token.lower()
    return "fp16"


def _is_precision(name: str) -> bool:
    try:
        get_precision(name)
    except (KeyError, ValueError):
        return False
    return True


# --- the layout ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShelfItem:
    """One Breakdown component on the shelf: where it starts and how wide it is, in bytes."""

    component: str
    kind: str
    thing: str
    plain: str
    technical: str
    nbytes: int
    start: int           # bytes from the left end of the shelf

    @property
    def end(self) -> int:
        return self.start + self.nbytes

    @property
    def width_gb(self) -> float:
        return gb(self.nbytes)


@dataclass(frozen=True)
class Shelf:
    """A laid-out shelf: items in order along a shelf of ``capacity_bytes``."""

    items: tuple[ShelfItem, ...]
    capacity_bytes: int
    quality: PrintQuality
    volumes: int
    title: str = ""

    @cached_property
    def _totals(self) -> dict:
        return shelf_totals([i.nbytes for i in self.items], self.capacity_bytes)

    @property
    def total_bytes(self) -> int:
        return self._totals["total_bytes"]

    @property
    def fits(self) -> bool:
        return self._totals["fits"]

    @property
    def overflow_bytes(self) -> int:
        """Bytes hanging off the end of the shelf (0 when it fits)."""
        return self._totals["overflow_bytes"]

    @property
    def free_bytes(self) -> int:
        """Empty shelf left (0 when it does not fit)."""
        return self._totals["free_bytes"]

    @property
    def book_bytes(self) -> int:
        """Bytes of all books (every weight component: weights, quantization constants, unquantized tensors)."""
        return sum(i.nbytes for i in self.items if i.kind == "books")

    @property
    def shelves_needed(self) -> float:
        """Total over capacity: how many such shelves the workload would fill."""
        return self._totals["shelves_needed"]

    def view(self) -> dict:
        """The shelf as portable code reads it (the browser's shelf object: ``make_shelf``)."""
        items = [{"component": i.component, "kind": i.kind, "thing": i.thing, "plain": i.plain,
                  "technical": i.technical, "nbytes": i.nbytes, "start": i.start} for i in self.items]
        q = self.quality
        return make_shelf(items, self.capacity_bytes, {"precision": q.precision, "bits": q.bits, "name": q.name,
                                                       "plain": q.plain, "spine_colours": list(q.spine_colours)},
                          self.volumes, self.title)

    def by_kind(self) -> dict[str, int]:
        """Bytes per furniture kind, in shelf order."""
        out: dict[str, int] = {}
        for i in self.items:
            out[i.kind] = out.get(i.kind, 0) + i.nbytes
        return out


def shelf_layout(breakdown: Breakdown, capacity, precision: str | None = None, volumes: int = 12) -> Shelf:
    """Place a Breakdown's components along a shelf of ``capacity`` (bytes, ``"24GiB"`` or a GPU name).

    ``precision``: the weights' format (print quality); ``None`` reads it from the Breakdown
    (:func:`guess_precision`). ``volumes``: how many volumes the main weights are drawn as, whatever the
    precision (lower precision = thinner volumes, not fewer). Components of zero bytes are left out.
    """
    if not isinstance(breakdown, Breakdown):
        raise InvalidValueError("breakdown", type(breakdown).__name__, "give a vramlib Breakdown")
    cap = capacity_bytes(capacity, field="capacity")
    volumes = check_positive_int("volumes", volumes)
    quality = print_quality(precision or guess_precision(breakdown))
    items = tuple(ShelfItem(**x) for x in layout_items([[k, v] for k, v in breakdown.items()]))
    return Shelf(items, cap, quality, volumes, breakdown.title)


@portable
def layout_items(parts):
    """The items of a shelf from ``[[component, bytes]]`` (a Breakdown's order): zero-byte components left out, the
    rest in shelf order (SHELF_ORDER; equal kinds keep their order), each with its words and its start in bytes."""
    order = shared("SHELF_ORDER")
    comps = []
    for j in range(len(parts)):
        if parts[j][1]:
            kind = component_kind(parts[j][0])
            comps.append([order.index(kind) * (len(parts) + 1) + j, parts[j][0], kind, parts[j][1]])
    comps.sort(key=lambda c: c[0])
    items = []
    pos = 0
    for c in comps:
        f = shared("FURNITURE")[c[2]]
        plain = f["plain"]
        if c[2] == "books":
            low = c[1].split(" (")[0].lower()
            if low in shared("BOOK_PLAIN"):
                plain = shared("BOOK_PLAIN")[low]
        technical = c[1] if c[2] in ("books", "other") else shared("TECHNICAL")[c[2]]
        items.append({"component": c[1], "kind": c[2], "thing": f["thing"], "plain": plain, "technical": technical,
                      "nbytes": c[3], "start": pos})
        pos += c[3]
    return items


@portable
def make_shelf(items, capacity, quality, volumes, title):
    """A laid-out shelf as a dict (what the SVG and the words read): the items with their ends, the capacity, the
    print quality (``quality_of``), the volumes, the title and ``shelf_totals``."""
    placed = []
    for i in items:
        d = dict(i)
        d["end"] = i["start"] + i["nbytes"]
        placed.append(d)
    out = shelf_totals([i["nbytes"] for i in items], capacity)
    out["items"] = placed
    out["capacity_bytes"] = capacity
    out["quality"] = quality
    out["volumes"] = volumes
    out["title"] = title
    return out


@portable
def shelf_totals(sizes, capacity):
    """Total, fits, overflow (past the end), free shelf and shelves' worth of items of ``sizes`` bytes."""
    total = 0
    for n in sizes:
        total += n
    return {"total_bytes": total, "fits": total <= capacity, "overflow_bytes": max(0, total - capacity),
            "free_bytes": max(0, capacity - total), "shelves_needed": total / capacity}


# --- counting shelves ------------------------------------------------------------------------------------------

SHARED_KINDS = ("books", "booklet", "scratch", "ledger", "calculators")
"""What several shelves can share out evenly (ZeRO-3 shards weights, gradients, master weights and optimizer
states over the GPUs); everything else (notebooks, notes, fittings ...) every shelf keeps for itself."""


def min_shelves(breakdown: Breakdown, capacity) -> int:
    """Fewest shelves of ``capacity`` that hold the workload when the books, booklet, scratch paper, ledgers and
    calculators are shared out evenly and every shelf keeps its own notebooks, notes and fittings
    (ZeRO-3 data parallelism, :func:`vramlib.solve.feasibility.min_gpus`); 0 if the per-shelf part alone does not fit."""
    from ..solve.feasibility import min_gpus

    shelf = shelf_layout(breakdown, capacity)
    shared = sum(i.nbytes for i in shelf.items if i.kind in SHARED_KINDS)
    own = sum(i.nbytes for i in shelf.items if i.kind not in SHARED_KINDS)
    return min_gpus(shared, shelf.capacity_bytes, own)


def how_many_times(larger: int | float, smaller: int | float) -> float:
    """``larger / smaller``: the "x times thicker", "x shelves long" the chapter states in words."""
    if not smaller:
        raise InvalidValueError("smaller", smaller, "must be non-zero")
    return float(Fraction(larger) / Fraction(smaller))


def _shelves(n: int) -> str:
    return "never: what each shelf keeps alone is too big" if n == 0 else f"{n} shelf" if n == 1 else f"{n} shelves"


def glossary_rows(inference_bd: Breakdown, training_bd: Breakdown, capacity, precision: str | None = None) -> list[dict]:
    """The analogy as a table: what is on the shelf, what it stands for, the technical term, and how much of it
    using the model (inference) and teaching it (training) need; then the total and the shelves needed."""
    inf = shelf_layout(inference_bd, capacity, precision)
    tr = shelf_layout(training_bd, capacity, precision)
    ik, tk = inf.by_kind(), tr.by_kind()
    cols = ("using it (inference)", "teaching it (training)")

    def row(thing: str, plain: str, term: str, a: str, b: str) -> dict:
        return {"on the shelf": thing, "stands for": plain, "technical term": term, cols[0]: a, cols[1]: b}

    def size(kinds: dict, kind: str) -> str:
        return _g(kinds[kind]) if kind in kinds else "none"

    rows = [row("the shelf", "the room the graphics card has for the work", "GPU memory (VRAM)",
                _g(inf.capacity_bytes), _g(tr.capacity_bytes))]
    for kind in _ORDER:
        if kind in ik or kind in tk:
            f = _FURNITURE[kind]
            rows.append(row(f.thing, f.plain, _TECHNICAL[kind], size(ik, kind), size(tk, kind)))
    rows.append(row("print quality", "how many bytes each number of the books takes", "precision",
                    inf.quality.plain, tr.quality.plain))
    rows.append(row("everything", "all of the above", "total", _g(inf.total_bytes), _g(tr.total_bytes)))
    rows.append(row("more shelves", "several graphics cards sharing the books and tools",
                    "GPUs (ZeRO-3 sharding)", _shelves(min_shelves(inference_bd, capacity)),
                    _shelves(min_shelves(training_bd, capacity))))
    return rows


# --- words -------------------------------------------------------------------------------------------------------


@portable
def fmt_gb(n_bytes):
    """GB for a reader: one decimal from 1 GB up, two below, "under 0.01 GB" for crumbs."""
    v = n_bytes / shared("GB")
    if v >= 0.95:
        return fmt_fixed(v, 1, True) + " GB"
    return fmt_fixed(v, 2, False) + " GB" if v >= 0.005 else "under 0.01 GB"


_g = fmt_gb


def verdict(shelf: Shelf) -> str:
    """One line: fits with so much free, or overflows by so much."""
    return shelf_verdict(shelf.view())


@portable
def shelf_verdict(s):
    """:func:`verdict` of a shelf as portable code reads it (:meth:`Shelf.view`)."""
    if s["fits"]:
        return ("Fits: " + fmt_gb(s["total_bytes"]) + " on a " + fmt_gb(s["capacity_bytes"]) + " shelf, " +
                fmt_gb(s["free_bytes"]) + " free.")
    return ("Does not fit: " + fmt_gb(s["total_bytes"]) + " on a " + fmt_gb(s["capacity_bytes"]) + " shelf; " +
            fmt_gb(s["overflow_bytes"]) + " hangs off the end (" + fmt_fixed(s["shelves_needed"], 1, False) +
            " shelves' worth).")


@portable
def is_main_books(item):
    """The main volumes (weights, base weights), not the quantization constants or unquantized tensors."""
    return item["kind"] == "books" and item["component"].split(" (")[0].lower() in ("weights", "base weights")


def legend_rows(shelf: Shelf, plain: bool = True) -> list[tuple[str, str, str]]:
    """(component, label, GB text) per item: plain words with the technical term in brackets, or the term alone."""
    return [tuple(r) for r in shelf_legend(shelf.view(), plain)]


@portable
def shelf_legend(s, plain):
    """:func:`legend_rows` of a shelf view."""
    rows = []
    for i in s["items"]:
        thing = "books in " + s["quality"]["plain"] if is_main_books(i) else i["thing"]
        label = thing + ": " + i["plain"] + " (" + i["technical"] + ")" if plain else i["technical"]
        rows.append([i["component"], label, fmt_gb(i["nbytes"])])
    return rows


def shelf_alt_text(shelf: Shelf) -> str:
    """A plain-language description of a laid-out shelf, with every number in GB."""
    return shelf_words(shelf.view())


@portable
def shelf_length(capacity):
    """The shelf's length in words: "24.6 GB (22.9 GiB)"."""
    return (fmt_fixed(capacity / shared("GB"), 1, True) + " GB (" + fmt_fixed(capacity / shared("GiB"), 1, True) +
            " GiB)")


@portable
def shelf_words(s):
    """:func:`shelf_alt_text` of a shelf view."""
    parts = [r[2] + " of " + r[1] for r in shelf_legend(s, True)]
    things = "; ".join(parts) if len(parts) else "nothing"
    cap = s["capacity_bytes"]
    head = ("A bookshelf " + fmt_fixed(cap / shared("GB"), 1, True) + " GB long (" +
            fmt_fixed(cap / shared("GiB"), 1, True) + " GiB), standing for the GPU's memory. On it, from left to "
            "right: " + things + ". In all " + fmt_gb(s["total_bytes"]) + ": ")
    if s["fits"]:
        return head + "it fits, with " + fmt_gb(s["free_bytes"]) + " of shelf left empty."
    return (head + "it does not fit; " + fmt_gb(s["overflow_bytes"]) + " hangs off the end of the shelf, drawn in red: "
            "the workload would fill " + fmt_fixed(s["shelves_needed"], 1, False) + " such shelves.")


def _main_books(item: ShelfItem) -> bool:
    return is_main_books({"kind": item.kind, "component": item.component})


def stack_alt_text(shelves, labels) -> str:
    """Several shelves of one GPU in words: the shelf once, then each shelf's contents and verdict."""
    shelves, labels = list(shelves), list(labels)
    if not shelves or len(labels) != len(shelves):
        raise InvalidValueError("labels", len(labels), f"give one label per shelf ({len(shelves)})")
    cap = shelves[0].capacity_bytes
    out = [f"{len(shelves)} bookshelves, each {gb(cap):,.1f} GB long ({gib(cap):,.1f} GiB), standing for the "
           f"GPU's memory."]
    for k, (shelf, label) in enumerate(zip(shelves, labels), 1):
        things = "; ".join(f"{size} of {text}" for _, text, size in legend_rows(shelf, plain=True))
        end = (f"fits, {_g(shelf.free_bytes)} free" if shelf.fits else
               f"does not fit, {_g(shelf.overflow_bytes)} hangs off the end in red")
        out.append(f"Shelf {k}, {label}: {things}; in all {_g(shelf.total_bytes)}: {end}.")
    return " ".join(out)


def alt_text(breakdown: Breakdown, capacity, precision: str | None = None, volumes: int = 12) -> str:
    """A plain-language description of the bookshelf drawing of ``breakdown`` on a shelf of ``capacity``."""
    return shelf_alt_text(shelf_layout(breakdown, capacity, precision, volumes))


# --- matplotlib drawing -------------------------------------------------------------------------------------------

_RED = "#c62828"


def _draw_books(ax, x0: float, width: float, n: int, colours, height: float, gid: str, pale: bool = False):
    """``n`` volumes filling exactly [x0, x0 + width]; each volume is one Rectangle with ``gid``."""
    from matplotlib.patches import Rectangle

    w = width / n
    for k in range(n):
        h = height * (0.9 + 0.1 * ((k * 7) % 5) / 4)
        c = colours[k % len(colours)]
        ax.add_patch(Rectangle((x0 + k * w, 0), w, h, facecolor=c, edgecolor="white",
                               linewidth=0.6 if w > 0 else 0, gid=gid, alpha=0.75 if pale else 1.0))
        if not pale:  # a band near the top of each spine: the title label
            ax.add_patch(Rectangle((x0 + k * w + 0.2 * w, h * 0.74), 0.6 * w, h * 0.08, facecolor="white",
                                   edgecolor="none", alpha=0.55, gid="decor"))


def _draw_item(ax, item: ShelfItem, shelf: Shelf, unit: float) -> None:
    """One item, filling exactly its width; the outline Rectangle carries ``gid=item.kind``."""
    from matplotlib.patches import FancyBboxPatch, Polygon, Rectangle

    f = _FURNITURE[item.kind]
    x0, w, h = gb(item.start), item.width_gb, f.height
    if item.kind == "books":
        low = item.component.split(" (")[0].lower()
        if low in ("weights", "base weights"):
            _draw_books(ax, x0, w, shelf.volumes, shelf.quality.spine_colours, f.height, "books")
        elif low == "unquantized tensors":  # kept in 16 bits: colour, even among greyscale paperbacks
            _draw_books(ax, x0, w, tile_count(w, unit * 0.6, 1), _QUALITY[1][2], f.height * 0.97, "books")
        else:  # quantization constants: one thin tan volume
            _draw_books(ax, x0, w, 1, (_CONSTANTS_COLOUR,), f.height * 0.8, "books")
        return
    ax.add_patch(Rectangle((x0, 0), w, h, facecolor="none", edgecolor="none", gid=item.kind))
    n = tile_count(w, unit, 1)
    if not n:
        return
    tw = w / n
    pad = min(tw * 0.08, unit * 0.05)
    for k in range(n):
        x = x0 + k * tw + pad
        iw = tw - 2 * pad
        if item.kind == "notes":  # piles of sticky notes, three high, slightly offset
            for j in range(3):
                off = (((k + j) * 5) % 3 - 1) * iw * 0.05
                ax.add_patch(Rectangle((x + off, j * h / 3), iw, h / 3 * 0.92, facecolor=f.colour,
                                       edgecolor="#b8a600", linewidth=0.5, gid="decor"))
        elif item.kind == "calculators":
            ax.add_patch(FancyBboxPatch((x, 0), iw, h, boxstyle="round,pad=0,rounding_size=0.02",
                                        facecolor=f.colour, edgecolor="black", linewidth=0.5, gid="decor"))
            ax.add_patch(Rectangle((x + iw * 0.12, h * 0.72), iw * 0.76, h * 0.18, facecolor="#b9d7a8",
                                   edgecolor="none", gid="decor"))
            for r in range(3):
                for c in range(3):
                    ax.add_patch(Rectangle((x + iw * (0.12 + c * 0.27), h * (0.1 + r * 0.19)), iw * 0.2, h * 0.12,
                                           facecolor="#d9d9d9", edgecolor="none", gid="decor"))
        elif item.kind == "scratch":  # a ream of ruled sheets
            for j in range(4):
                ax.add_patch(Rectangle((x + j * iw * 0.01, j * h / 4), iw * 0.97, h / 4, facecolor=f.colour,
                                       edgecolor="#7aa6c2", linewidth=0.5, gid="decor"))
        elif item.kind == "notebooks":  # an open notebook: two pages and a spine
            ax.add_patch(Polygon([(x, 0), (x + iw / 2, h * 0.15), (x + iw / 2, h), (x, h * 0.85)],
                                 facecolor="#e8f5ef", edgecolor=f.colour, linewidth=0.8, gid="decor"))
            ax.add_patch(Polygon([(x + iw, 0), (x + iw / 2, h * 0.15), (x + iw / 2, h), (x + iw, h * 0.85)],
                                 facecolor="#e8f5ef", edgecolor=f.colour, linewidth=0.8, gid="decor"))
        elif item.kind == "ledger":
            ax.add_patch(Rectangle((x, 0), iw, h, facecolor=f.colour, edgecolor="black", linewidth=0.5, gid="decor"))
            ax.add_patch(Rectangle((x + iw * 0.15, h * 0.55), iw * 0.7, h * 0.15, facecolor="#f2e6c9",
                                   edgecolor="none", gid="decor"))
        elif item.kind == "fittings":  # brackets and boxes the system keeps
            ax.add_patch(Rectangle((x, 0), iw, h, facecolor=f.colour, edgecolor="black", linewidth=0.4,
                                   hatch="xx", gid="decor"))
        else:
            ax.add_patch(Rectangle((x, 0), iw, h, facecolor=f.colour, edgecolor="black", linewidth=0.5, gid="decor"))


def item_colour(item: ShelfItem, shelf: Shelf) -> str:
    """The colour that stands for an item in legends (books: their print quality's first spine colour)."""
    q = shelf.quality
    return colour_of({"kind": item.kind, "component": item.component}, {"quality": {"spine_colours": q.spine_colours}})


@portable
def colour_of(item, s):
    """:func:`item_colour` of an item of a shelf view."""
    if is_main_books(item):
        return s["quality"]["spine_colours"][0]
    if item["kind"] == "books":
        return shared("QUALITY")[1][2][0] if item["component"].lower().startswith("unquantized") else \
            shared("CONSTANTS_COLOUR")
    return shared("FURNITURE")[item["kind"]]["colour"]


_SHORT = {"fittings": "fittings", "books": "books", "booklet": "booklet", "notes": "notes", "reading": "reading",
          "scratch": "scratch paper", "ledger": "ledgers", "calculators": "calculators", "notebooks": "notebooks",
          "cart": "cart", "other": "other"}
share(SHORT=dict(_SHORT), OVERFLOW_RED=_RED)


def item_labels(shelf: Shelf, right_gb: float, gb_per_char: float, rows: int = 2) -> list[tuple[float, int, str]]:
    """Short labels ("books 16.1 GB") for the runs of items of one kind: ``(centre in GB, row, text)``.

    Greedy: each label takes the first row where it does not overlap the previous one (``gb_per_char`` is the
    width of one character on the drawing's scale); a label with no room is left to the legend. The fittings
    and the reading workspace are small and secondary, so they get no label.
    """
    return [tuple(x) for x in shelf_labels(shelf.view(), right_gb, gb_per_char, rows)]


@portable
def shelf_labels(s, right_gb, gb_per_char, rows):
    """:func:`item_labels` of a shelf view."""
    runs = []
    for it in s["items"]:
        if len(runs) and runs[len(runs) - 1][0]["kind"] == it["kind"]:
            runs[len(runs) - 1].append(it)
        else:
            runs.append([it])
    last_end = [-infinity() for r in range(rows)]
    out = []
    for run in runs:
        if run[0]["kind"] in ("fittings", "reading"):
            continue
        start = run[0]["start"] / shared("GB")
        end = run[len(run) - 1]["end"] / shared("GB")
        total = 0
        for i in run:
            total += i["nbytes"]
        text = shared("SHORT")[run[0]["kind"]] + " " + fmt_gb(total)
        half = len(text) * gb_per_char / 2
        centre = min(max((start + end) / 2, half - right_gb * 0.015), right_gb * 1.015 - half)
        for r in range(rows):
            if centre - half > last_end[r] + gb_per_char:
                out.append([centre, r, text])
                last_end[r] = centre + half
                break
    return out


def _label_items(ax, shelf: Shelf, right: float, rows_y=(-0.13, -0.29), fontsize: float = 8.5) -> None:
    """Draw :func:`item_labels` under the board, with a leader line from the second row."""
    ax_w_in = ax.get_position().width * ax.figure.get_figwidth()
    per_char = 0.55 * fontsize / 72 * (right * 1.04) / ax_w_in   # GB per character at this scale
    for centre, r, text in item_labels(shelf, right, per_char, len(rows_y)):
        ax.text(centre, rows_y[r], text, ha="center", va="top", fontsize=fontsize, gid="item-label")
        if r:
            ax.plot([centre, centre], [rows_y[r] + 0.01, -0.08], color="#777777", lw=0.6)


def draw_bookshelf(breakdown: Breakdown, capacity_bytes, ax=None, title: str | None = None, legend_plain: bool = True,
                   precision: str | None = None, volumes: int = 12, xmax_bytes: int | None = None,
                   legend: bool = True):
    """Draw a Breakdown as a bookshelf on ``ax`` (a new figure if None); returns the Axes.

    The x axis is GB; the shelf runs from 0 to ``capacity_bytes``; each item's drawn width is its bytes
    (books: every weight component). When the total exceeds the capacity, what lies past the end of the
    shelf is shaded red and the overflow is labelled. ``legend_plain``: legend in plain words with the
    technical term in brackets (else technical terms only). ``xmax_bytes``: a common scale for several
    shelves. The Axes gets ``ax.bookshelf`` (the :class:`Shelf`) for tests and captions.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.transforms import offset_copy

    shelf = shelf_layout(breakdown, capacity_bytes, precision, volumes)
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 3.2))
    cap, total = gb(shelf.capacity_bytes), gb(shelf.total_bytes)
    right = gb(max(shelf.total_bytes, shelf.capacity_bytes, xmax_bytes or 0))
    unit = right / 28  # the size of one drawn calculator, notebook, pile of notes
    board = 0.07
    # the shelf: a board from 0 to the capacity, and the two end panels
    ax.add_patch(Rectangle((0, -board), cap, board, facecolor="#b07d4f", edgecolor="#6d4c2f", gid="shelf"))
    for x in (0, cap):
        ax.add_patch(Rectangle((x - right * 0.004, -board), right * 0.008, 1.12 + board, facecolor="#8d6240",
                               edgecolor="#6d4c2f", gid="shelf-end"))
    for item in shelf.items:
        _draw_item(ax, item, shelf, unit)
    # the shelf's length, above (left-aligned when the shelf is shorter than its label)
    ax.annotate("", xy=(0, 1.2), xytext=(cap, 1.2), arrowprops=dict(arrowstyle="<->", color="#6d4c2f", lw=1))
    cap_text = "the shelf = the GPU's memory: " + shelf_length(shelf.capacity_bytes)
    narrow = cap < 0.45 * right
    ax.text(0 if narrow else cap / 2, 1.25, cap_text, ha="left" if narrow else "center", va="bottom", fontsize=9,
            color="#6d4c2f")
    _label_items(ax, shelf, right)
    if shelf.fits:
        if shelf.free_bytes:
            ax.annotate("", xy=(total, -0.5), xytext=(cap, -0.5), arrowprops=dict(arrowstyle="<->", color="#1b7837"))
            ax.text((total + cap) / 2, -0.56, f"free: {_g(shelf.free_bytes)}", ha="center", va="top", fontsize=9,
                    color="#1b7837", gid="free-label")
    else:
        ax.add_patch(Rectangle((cap, 0), total - cap, 1.0, facecolor=_RED, alpha=0.13, edgecolor="none",
                               gid="overflow"))
        ax.add_patch(Rectangle((cap, 0), total - cap, 1.0, facecolor="none", edgecolor=_RED, linewidth=1.5,
                               gid="overflow-outline"))
        ax.add_patch(Rectangle((cap, -board), total - cap, board, facecolor="none", edgecolor=_RED, hatch="///",
                               linestyle="--", linewidth=1, gid="missing-shelf"))
        ax.annotate("", xy=(cap, -0.5), xytext=(total, -0.5), arrowprops=dict(arrowstyle="<->", color=_RED, lw=1.5))
        msg = (f"does not fit: {_g(shelf.overflow_bytes)} hangs off the end "
               f"({shelf.shelves_needed:.1f} shelves' worth)")
        ax.text(right * 1.02, -0.56, msg, ha="right", va="top", fontsize=10, color=_RED, fontweight="bold",
                gid="overflow-label")
    ax.set_xlim(-right * 0.02, right * 1.02)
    ax.set_ylim(-0.82, 1.45)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g} GB")
    ax.tick_params(axis="x", labelsize=8.5)
    ax.set_title(title if title is not None else verdict(shelf), fontsize=11, loc="left")
    if legend:
        rows = legend_rows(shelf, plain=legend_plain)
        handles = [Patch(facecolor=item_colour(i, shelf), edgecolor="black", linewidth=0.4) for i in shelf.items]
        labels = [f"{size}  {label}" for _, label, size in rows]
        below = offset_copy(ax.transAxes, fig=ax.figure, y=-0.3, units="inches")   # under the tick labels
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.0, 0.0), bbox_transform=below,
                  ncol=1 if legend_plain else 3, fontsize=8.5, frameon=False, handlelength=1.4)
    ax.bookshelf = shelf
    return ax


def bookshelf_stack(breakdowns, capacity, titles=None, precisions=None, legend: str = "all",
                    legend_plain: bool = True, volumes: int = 12, width: float = 11, shelf_height: float = 2.4):
    """Several shelves of the same GPU, one above the other on one scale, so their lengths compare directly.

    ``titles`` / ``precisions``: one per Breakdown (None: the verdict / read from the Breakdown).
    ``legend``: ``"all"`` (under every shelf), ``"last"`` (under the last one) or ``"none"``.
    Returns ``(figure, [axes])``.
    """
    import matplotlib.pyplot as plt

    bds = list(breakdowns)
    if not bds:
        raise InvalidValueError("breakdowns", bds, "give at least one Breakdown")
    if legend not in ("all", "last", "none"):
        raise InvalidValueError("legend", legend, "one of 'all', 'last', 'none'")
    cap = capacity_bytes(capacity, field="capacity")
    titles = list(titles) if titles is not None else [None] * len(bds)
    precs = list(precisions) if precisions is not None else [None] * len(bds)
    if len(titles) != len(bds) or len(precs) != len(bds):
        raise InvalidValueError("titles/precisions", (len(titles), len(precs)), f"give one per Breakdown ({len(bds)})")
    xmax = max(max(bd.total for bd in bds), cap)
    shelves = [shelf_layout(bd, cap, p, volumes) for bd, p in zip(bds, precs)]
    legends = [legend == "all" or (legend == "last" and k == len(bds) - 1) for k in range(len(bds))]
    heights = [shelf_height + (0.2 * len(s.items) + 0.3 if show else 0) for s, show in zip(shelves, legends)]
    fig, axes = plt.subplots(len(bds), 1, figsize=(width, sum(heights)), squeeze=False,
                             gridspec_kw=dict(height_ratios=heights))
    axes = list(axes[:, 0])
    for ax, bd, t, p, show, sh in zip(axes, bds, titles, precs, legends, shelves):
        draw_bookshelf(bd, cap, ax=ax, title=t if t is not None else verdict(sh), legend_plain=legend_plain,
                       precision=p, volumes=volumes, xmax_bytes=xmax, legend=show)
    fig.tight_layout()
    return fig, axes


def bookshelf_pair(inference_bd: Breakdown, training_bd: Breakdown, capacity, titles: tuple[str, str] | None = None,
                   legend_plain: bool = True, inference_precision: str | None = None,
                   training_precision: str | None = None, volumes: int = 12, width: float = 11):
    """Inference and training of the same model on two shelves of the same GPU, drawn to one scale (one above
    the other, so the lengths compare directly). Returns ``(figure, (inference_ax, training_ax))``."""
    cap = capacity_bytes(capacity, field="capacity")
    if titles is None:
        titles = tuple(f"{word}. {verdict(shelf_layout(bd, cap, p, volumes))}" for word, bd, p in (
            ("Using the model (inference)", inference_bd, inference_precision),
            ("Teaching the model (training)", training_bd, training_precision)))
    fig, axes = bookshelf_stack([inference_bd, training_bd], cap, titles, [inference_precision, training_precision],
                                legend="all", legend_plain=legend_plain, volumes=volumes, width=width)
    return fig, tuple(axes)


# --- SVG (widgets: fast, no matplotlib) ----------------------------------------------------------------------------


@portable
def svg_tile(kind, x, w, base, h, colour, tip):
    """One drawn object (a calculator, a pile of notes ...) in SVG, ``w`` wide, standing on ``base``."""
    def f1(v):
        return fmt_fixed(v, 1, False)

    def f2(v):
        return fmt_fixed(v, 2, False)

    t = "<title>" + tip + "</title>"
    y = base - h
    if kind == "notes":
        return "".join(["<rect x='" + f2(x + (j % 2) * w * 0.05) + "' y='" + f1(base - (j + 1) * h / 3) + "' width='" +
                        f2(w * 0.95) + "' height='" + f1(h / 3 - 1) + "' fill='" + colour +
                        "' stroke='#b8a600' stroke-width='0.5'>" + t + "</rect>" for j in range(3)])
    body = ("<rect x='" + f2(x) + "' y='" + f1(y) + "' width='" + f2(w) + "' height='" + f1(h) + "' fill='" + colour +
            "' stroke='#333' stroke-width='0.5'>" + t + "</rect>")
    if kind == "calculators":
        keys = ""
        for r in range(3):
            for c in range(3):
                keys += ("<rect x='" + f2(x + w * (0.15 + c * 0.25)) + "' y='" + f1(y + h * (0.42 + r * 0.18)) +
                         "' width='" + f2(w * 0.18) + "' height='" + f1(h * 0.11) + "' fill='#d9d9d9'/>")
        return (body + "<rect x='" + f2(x + w * 0.15) + "' y='" + f1(y + h * 0.1) + "' width='" + f2(w * 0.7) +
                "' height='" + f1(h * 0.2) + "' fill='#b9d7a8'/>" + keys)
    if kind == "scratch":
        return body + "".join(["<line x1='" + f2(x) + "' x2='" + f2(x + w) + "' y1='" + f1(y + h * k / 4) + "' y2='" +
                               f1(y + h * k / 4) + "' stroke='#7aa6c2' stroke-width='0.6'/>" for k in (1, 2, 3)])
    if kind == "ledger":
        return (body + "<rect x='" + f2(x + w * 0.15) + "' y='" + f1(y + h * 0.3) + "' width='" + f2(w * 0.7) +
                "' height='" + f1(h * 0.15) + "' fill='#f2e6c9'/>")
    if kind == "notebooks":
        m = x + w / 2
        return ("<polygon points='" + f2(x) + "," + str(base) + " " + f2(m) + "," + f1(base - h * 0.15) + " " + f2(m) +
                "," + f1(y) + " " + f2(x) + "," + f1(y + h * 0.15) + "' fill='#e8f5ef' stroke='" + colour + "'>" + t +
                "</polygon><polygon points='" + f2(x + w) + "," + str(base) + " " + f2(m) + "," + f1(base - h * 0.15) +
                " " + f2(m) + "," + f1(y) + " " + f2(x + w) + "," + f1(y + h * 0.15) + "' fill='#e8f5ef' stroke='" +
                colour + "'/>")
    return body


@portable
def tile_count(width, unit, at_least):
    """How many objects of ``unit`` width fill ``width`` (at least ``at_least`` when there is any width)."""
    return max(at_least, round_even(width / unit)) if width > 0 else 0


@portable
def svg_books(item, s, x0, x1, base, tall, unit, tip):
    """The volumes of a books item: the main volumes in the print quality's colours, unquantized tensors in colour,
    the quantization constants as one thin tan volume."""
    if is_main_books(item):
        n = s["volumes"]
        colours = s["quality"]["spine_colours"]
    elif item["component"].lower().startswith("unquantized"):
        n = tile_count(x1 - x0, unit * 0.6, 1)
        colours = shared("QUALITY")[1][2]
    else:
        n = 1
        colours = [shared("CONSTANTS_COLOUR")]
    w = (x1 - x0) / n
    out = ""
    for k in range(n):
        hgt = tall * shared("FURNITURE")["books"]["height"] * (0.9 + 0.1 * ((k * 7) % 5) / 4)
        out += ("<rect x='" + fmt_fixed(x0 + k * w, 2, False) + "' y='" + fmt_fixed(base - hgt, 1, False) + "' width='" +
                fmt_fixed(w, 2, False) + "' height='" + fmt_fixed(hgt, 1, False) + "' fill='" + colours[k % len(colours)] +
                "' stroke='white' stroke-width='0.5'><title>" + tip + "</title></rect>")
    return out


@portable
def svg_overflow(s, cap_x, end_x, base, tall, width):
    """The free-space label, or the red overhang and its label."""
    red = shared("OVERFLOW_RED")
    if s["fits"]:
        if not s["free_bytes"]:
            return ""
        return ("<text x='" + fmt_fixed(min((end_x + cap_x) / 2, width - 60), 1, False) + "' y='" + str(base + 50) +
                "' text-anchor='middle' font-size='12' fill='#1b7837'>free: " + fmt_gb(s["free_bytes"]) + "</text>")
    return ("<rect x='" + fmt_fixed(cap_x, 1, False) + "' y='" + str(base - tall) + "' width='" +
            fmt_fixed(end_x - cap_x, 1, False) + "' height='" + str(tall + 7) + "' fill='" + red +
            "' fill-opacity='0.15' stroke='" + red + "' stroke-width='1.5'/>" + "<text x='" +
            fmt_fixed((cap_x + end_x) / 2, 1, False) + "' y='" + str(base + 50) + "' text-anchor='middle' font-size='12' "
            "font-weight='bold' fill='" + red + "'>does not fit: " + fmt_gb(s["overflow_bytes"]) + " hangs off the end (" +
            fmt_fixed(s["shelves_needed"], 1, False) + " shelves' worth)</text>")


@portable
def shelf_svg(s, width, xmax_bytes):
    """:func:`bookshelf_svg` of a shelf view (``xmax_bytes``: a common scale, or 0)."""
    right = max(s["total_bytes"], s["capacity_bytes"], xmax_bytes) or 1
    right_gb = right / shared("GB")
    pad = 10
    inner = width - 20
    height = 176
    base = 112
    tall = 72
    unit = inner / 28
    cap_x = pad + inner * s["capacity_bytes"] / right
    parts = ["<rect x='" + fmt_fixed(pad, 1, False) + "' y='" + str(base) + "' width='" + fmt_fixed(cap_x - pad, 1, False) +
             "' height='7' fill='#b07d4f' stroke='#6d4c2f'/>"]
    for x in (pad, cap_x):
        parts.append("<rect x='" + fmt_fixed(x - 2, 1, False) + "' y='" + str(base - tall - 8) + "' width='4' height='" +
                     str(tall + 15) + "' fill='#8d6240'/>")
    for item in s["items"]:
        f = shared("FURNITURE")[item["kind"]]
        x0 = pad + inner * item["start"] / right
        x1 = pad + inner * item["end"] / right
        tip = escape(item["thing"] + ": " + item["plain"] + " (" + item["technical"] + "), " + fmt_gb(item["nbytes"]))
        if item["kind"] == "books":
            parts.append(svg_books(item, s, x0, x1, base, tall, unit, tip))
            continue
        n = tile_count(x1 - x0, unit, 1)
        tw = (x1 - x0) / n
        gap = min(tw * 0.08, 2.0)
        for k in range(n):
            parts.append(svg_tile(item["kind"], x0 + k * tw + gap, max(tw - 2 * gap, 0.4), base, tall * f["height"],
                                  f["colour"], tip))
    narrow = cap_x - pad < 0.45 * inner
    parts.append("<text x='" + fmt_fixed(pad if narrow else (pad + cap_x) / 2, 1, False) + "' y='16' font-size='12' "
                 "fill='#6d4c2f' text-anchor='" + ("start" if narrow else "middle") + "'>the shelf = the GPU's memory: " +
                 shelf_length(s["capacity_bytes"]) + "</text>")
    for label in shelf_labels(s, right_gb, 6.2 * right_gb / inner, 2):
        parts.append("<text x='" + fmt_fixed(pad + inner * (label[0] * shared("GB")) / right, 1, False) + "' y='" +
                     str(base + 20 + 14 * label[1]) + "' text-anchor='middle' font-size='11'>" + escape(label[2]) +
                     "</text>")
    parts.append(svg_overflow(s, cap_x, pad + inner * s["total_bytes"] / right, base, tall, width))
    svg = ("<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='" + escape(shelf_verdict(s)) + "' width='" +
           str(width) + "' height='" + str(height) + "' viewBox='0 0 " + str(width) + " " + str(height) +
           "' style='font-family:sans-serif'>" + "".join(parts) + "</svg>")
    legend = []
    rows = shelf_legend(s, True)
    for j in range(len(rows)):
        legend.append("<div><span style='color:" + colour_of(s["items"][j], s) + ";text-shadow:0 0 1px #000'>&#9632;" +
                      "</span> <b>" + rows[j][2] + "</b> " + escape(rows[j][1]) + "</div>")
    return svg + "<div style='font-size:85%;margin-top:4px'>" + "".join(legend) + "</div>"


def bookshelf_svg(shelf: Shelf, width: int = 720, xmax_bytes: int | None = None) -> str:
    """The same layout as inline SVG (fast enough for every widget update), with labels and a plain legend."""
    return shelf_svg(shelf.view(), width, xmax_bytes or 0)


bookshelf_alt_text = alt_text
"""``vl.bookshelf_alt_text``: :func:`alt_text` under the name the package exports."""
