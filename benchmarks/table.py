"""Plain-text and Markdown tables: one layout for the CLI, the perf scripts and the bench commands.

Each table is a list of rows of cells, the first row the header. ``text_table`` sizes every column to its
widest cell, ``markdown_table`` writes the same rows for a results page (docs/results/).
"""

from __future__ import annotations

from collections.abc import Sequence


def text_table(rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """Return ``rows`` (header first) as plain-text columns two spaces apart, with a rule under the header.

    ``align`` has one character per column, ``<`` (left) or ``>`` (right); by default the first column
    (the row's name) is left-aligned and the others (numbers) right-aligned.
    """
    if not rows:
        raise ValueError("a table needs at least its header row")
    n = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {i} has {len(row)} cells, the header {n}")
    align = align if align is not None else "<" + ">" * (n - 1)
    if len(align) != n or set(align) - {"<", ">"}:
        raise ValueError(f"align must be {n} characters of '<' or '>', not {align!r}")
    widths = [max(len(row[i]) for row in rows) for i in range(n)]

    def line(row: Sequence[str]) -> str:
        cells = (c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(row, widths, align, strict=True))
        return "  ".join(cells).rstrip()

    return "\n".join([line(rows[0]), "  ".join("-" * w for w in widths), *(line(row) for row in rows[1:])])


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """Return ``rows`` (header first) as a Markdown table; a ``|`` inside a cell is escaped."""
    if not rows:
        raise ValueError("a table needs at least its header row")

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"

    return "\n".join([line(rows[0]), "|" + "---|" * len(rows[0]), *(line(row) for row in rows[1:])])
