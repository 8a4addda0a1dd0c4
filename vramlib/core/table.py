"""A small result table (list of row dicts) that renders as HTML in notebooks and as aligned text elsewhere.

Solvers and explanations return it (planning, recommend, validation); used in: chapters 3, 9, 11, 12, 16.
"""
from __future__ import annotations

import html
from collections.abc import Sequence


class Table:
    """A small table (list of row dicts) that renders as HTML in notebooks and as aligned text elsewhere."""

    def __init__(self, rows: Sequence[dict], caption: str = "", formats: dict[str, str] | None = None):
        self.rows, self.caption, self.formats = list(rows), caption, formats or {}
        self.columns = list(dict.fromkeys(k for r in self.rows for k in r))

    def _cell(self, col: str, v) -> str:
        if col in self.formats and isinstance(v, (int, float)):
            return format(v, self.formats[col])
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        if isinstance(v, float):
            return f"{v:,.2f}"
        return str(v)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(self._cell(c, r.get(c, '')))}</td>" for c in self.columns)
                       + "</tr>" for r in self.rows)
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f"<table class='vramlib-table'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        cells = [[self._cell(c, r.get(c, "")) for c in self.columns] for r in self.rows]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
        return "\n".join(([self.caption] if self.caption else []) + lines)
