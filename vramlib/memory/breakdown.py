"""A memory :class:`Breakdown`: component -> exact bytes, with ``.total``, ``.fits`` and an HTML table.

Every computation of the book returns one. Used in: every chapter.
"""
from __future__ import annotations

import html
from collections.abc import Iterator, Mapping

from ..core.errors import InvalidValueError, check_fraction
from ..core.units import gb, gib
from ..catalog.hardware import capacity_bytes
from ..core.portable import portable, q, q_cmp, q_mul, q_sub


@portable
def fits_under(totals, capacity, headroom):
    """Every total <= capacity x (1 - headroom), exactly (``headroom=0.1`` keeps 10% free)."""
    limit = q_mul(q(capacity), q_sub(q(1), q(headroom)))
    for t in totals:
        if q_cmp(q(t), limit) > 0:
            return False
    return True


class Breakdown(Mapping[str, int]):
    """Immutable mapping of component name -> bytes (ints), in display order.

    ``title`` names the scenario; ``notes`` carry the assumptions a reader should see next to the numbers. A peak of
    several phases (:func:`vramlib.memory.training.training_memory`) also carries ``phases`` (phase -> total bytes, in the
    order they happen), ``peak_phase`` (the one whose tensors the components are, so ``total`` is its total) and
    ``steady`` (what stays allocated between steps); the others leave them empty / None.
    """

    __slots__ = ("_parts", "title", "notes", "phases", "peak_phase", "steady")

    def __init__(self, parts: Mapping[str, int], title: str = "", notes: tuple[str, ...] = (),
                 phases: Mapping[str, int] | None = None, peak_phase: str | None = None, steady: int | None = None):
        if not isinstance(parts, Mapping):
            raise InvalidValueError("Breakdown parts", type(parts).__name__, "must be a mapping of component -> bytes")
        clean: dict[str, int] = {}
        for k, v in parts.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidValueError(f"Breakdown[{k!r}]", v, "must be a non-negative int of bytes")
            clean[k] = v
        self._parts = clean
        self.title = title
        self.notes = tuple(notes)
        self.phases = dict(phases or {})
        self.peak_phase = peak_phase
        self.steady = steady
        if peak_phase is not None and self.phases.get(peak_phase) != self.total:
            raise InvalidValueError("Breakdown peak_phase", peak_phase, "its phase total must equal the components' "
                                    "total")

    def __getitem__(self, key: str) -> int:
        return self._parts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    @property
    def total(self) -> int:
        """Sum of all components, bytes."""
        return sum(self._parts.values())

    def capacity(self, gpu_or_bytes) -> int:
        """Bytes of a GPU (``GPU``, catalogue name) or a memory amount (int or ``"24GiB"``): hardware.capacity_bytes."""
        return capacity_bytes(gpu_or_bytes, positive=False)

    def fits(self, gpu_or_bytes, headroom: float = 0.0) -> bool:
        """True when total <= capacity x (1 - headroom); ``headroom=0.1`` keeps 10% free (exact arithmetic)."""
        headroom = check_fraction("headroom", headroom)
        return fits_under([self.total], self.capacity(gpu_or_bytes), headroom)

    def free_bytes(self, gpu_or_bytes) -> int:
        """Capacity minus total (negative when it does not fit)."""
        return self.capacity(gpu_or_bytes) - self.total

    def to_dict(self) -> dict[str, int]:
        return dict(self._parts)

    def scaled(self, title: str | None = None, **replace: int) -> "Breakdown":
        """A copy with some components replaced (a plain breakdown: phases describe the original components)."""
        return Breakdown({**self._parts, **replace}, title=self.title if title is None else title, notes=self.notes)

    def _phase_lines(self) -> list[str]:
        if not self.phases:
            return []
        each = ", ".join(f"{k} {gb(v):,.2f} GB" for k, v in self.phases.items())
        steady = "" if self.steady is None else f"; between steps (steady state) {gb(self.steady):,.2f} GB"
        return [f"peak in the {self.peak_phase} (phases: {each}){steady}"]

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={gb(v):.2f} GB" for k, v in self._parts.items())
        return f"Breakdown({self.title!r}: {body}; total={gb(self.total):.2f} GB / {gib(self.total):.2f} GiB)"

    def _repr_html_(self) -> str:
        total = self.total or 1
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v:,}</td>"
            f"<td style='text-align:right'>{gb(v):,.2f}</td><td style='text-align:right'>{gib(v):,.2f}</td>"
            f"<td style='text-align:right'>{100 * v / total:.1f}%</td></tr>"
            for k, v in self._parts.items()
        )
        cap = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        notes = "".join(f"<br><small>{html.escape(n)}</small>" for n in self._phase_lines() + list(self.notes))
        return (
            f"<table class='vramlib-breakdown'>{cap}<thead><tr><th>component</th><th>bytes</th><th>GB</th>"
            f"<th>GiB</th><th>share</th></tr></thead><tbody>{rows}</tbody><tfoot><tr><th>total</th>"
            f"<th style='text-align:right'>{self.total:,}</th><th style='text-align:right'>{gb(self.total):,.2f}</th>"
            f"<th style='text-align:right'>{gib(self.total):,.2f}</th><th></th></tr></tfoot></table>{notes}"
        )
