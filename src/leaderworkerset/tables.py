"""The one plain-text table every command prints (`kubectl lws`, `lws dev status`, the
demo stories): left-aligned columns as kubectl's printer lays them out.

kubectl writes its tables through a tab writer with three spaces of padding, so each
column is as wide as its widest cell, header included, and the last column is not
padded. Fixed widths instead push every later cell of a row to the right as soon as
one value outgrows its column. It sits below every package so that the plugin and
the local cluster, which never import each other, share it.
"""

from __future__ import annotations

from collections.abc import Sequence

# What kubectl prints for an empty cell.
NONE = "<none>"
GAP = "   "


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "") -> str:
    """`header` then `rows` (each as long as `header`), each line prefixed by `indent`."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = []
    for row in [list(header), *rows]:
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=True)]
        lines.append((indent + GAP.join(cells)).rstrip())
    return "\n".join(lines)
