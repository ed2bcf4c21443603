"""benchmarks.perf.setup_times: its table and its steps' failures (the timings themselves are the
script's to print, not a test's to assert)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.perf.setup_times import StepFailed, rows, timed


def test_the_table_gives_each_step_then_the_totals_against_their_goals() -> None:
    first = {"clone": 3.0, "install": 200.0, "demo": 60.0, "check": 130.0, "test": 600.0}
    second = {"clone": 2.0, "install": 40.0, "demo": 50.0}
    table = rows(first, second)
    assert table[0] == ["step", "seconds", "goal (s)", "met"]
    assert table[1:6] == [[s, f"{first[s]:.0f}", "", ""] for s in first]
    assert table[6:] == [
        ["clone to demo", "263", "300", "yes"],
        ["make check", "130", "120", "no"],
        ["make test", "600", "720", "yes"],
        ["second clone to demo", "92", "120", "yes"],
    ]


def test_a_step_that_fails_says_its_exit_code_and_the_end_of_its_log(tmp_path: Path) -> None:
    with pytest.raises(StepFailed) as info:
        timed("install", ["sh", "-c", "echo compiling; echo 'no space left' >&2; exit 3"], tmp_path, tmp_path)
    message = str(info.value)
    assert message.startswith("install exited 3 after ")
    assert message.endswith("compiling\nno space left")
    assert (tmp_path / "setup-times-install.log").read_text() == "compiling\nno space left\n"
