"""Tables: columns sized to the widest cell, names left and numbers right; Markdown for results pages."""

from __future__ import annotations

import pytest

from benchmarks.table import markdown_table, text_table

ROWS = [
    ["gate", "pairs/s", "us/pair"],
    ["greedy", "1,250,000", "0.80"],
    ["credit, contended", "90,000", "11.11"],
]


def test_text_table_sizes_columns_to_the_widest_cell_names_left_numbers_right() -> None:
    assert text_table(ROWS).splitlines() == [
        "gate                 pairs/s  us/pair",
        "-----------------  ---------  -------",
        "greedy             1,250,000     0.80",
        "credit, contended     90,000    11.11",
    ]


def test_text_table_alignment_can_be_chosen_per_column() -> None:
    lines = text_table([["a", "b"], ["long", "x"]], align="<<").splitlines()
    assert lines == ["a     b", "----  -", "long  x"]


@pytest.mark.parametrize(
    ("rows", "align", "message"),
    [
        ([], None, "at least its header"),
        ([["a", "b"], ["1"]], None, "row 1 has 1 cells, the header 2"),
        ([["a", "b"]], "<", "align must be 2 characters"),
        ([["a", "b"]], "<^", "align must be 2 characters"),
    ],
)
def test_malformed_tables_are_refused_with_what_is_wrong(
    rows: list[list[str]], align: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        text_table(rows, align)


def test_markdown_table_has_a_header_rule_and_escapes_pipes() -> None:
    assert markdown_table([["check", "result"], ["a|b", "PASS"]]) == (
        "| check | result |\n|---|---|\n| a\\|b | PASS |"
    )
