"""Which steps a sweep runs: the knee search, the other schedulers' walks, solos, repeats, the grid."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sweep.model import load_sweep
from benchmarks.sweep.plan import knee, pending, plan
from benchmarks.sweep.state import State, Step, SweepError
from tests.benchmarks.sweep.conftest import H200, attained, h200, not_run, record

KNEE = 0.9


def keys(sweep, state) -> list[str]:
    return [s.key for s in plan(sweep, state)]


def test_the_sweep_runs_level_by_level_and_stops_at_the_first_level_where_greedy_misses(tmp_path):
    sweep, state = h200(), State(tmp_path)
    assert keys(sweep, state) == ["mix/sweep/L0/greedy"]
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    assert keys(sweep, state)[-1] == "mix/sweep/L1/greedy"
    attained(state, Step("mix", "sweep", "L1", "greedy"), 0.85)
    assert knee(sweep, state).name == "L1"
    # Each node alone at the knee, then the mix under the two other schedulers, then the DAG.
    assert keys(sweep, state)[2:] == [
        "mix/solo/L1/chat",
        "mix/solo/L1/image",
        "mix/solo/L1/captions",
        "mix/mix/L1/credit",
        "mix/mix/L1/partition",
        "content-creation/solo/L1/brainstorm",
        "content-creation/solo/L1/outline",
        "content-creation/solo/L1/cover_art",
        "content-creation/solo/L1/captions",
        "content-creation/mix/L1/greedy",
        "content-creation/mix/L1/credit",
        "content-creation/mix/L1/partition",
    ]


def test_repeats_come_after_every_other_step_in_the_files_repeat_groups(tmp_path):
    state = State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 0.5)
    once = keys(h200(), state)
    planned = keys(h200(repeats=3), state)
    # The knee at L0: credit and partition walk no lower, so their plan ends at the knee's steps.
    assert planned[: len(once)] == once and len(once) == 13
    assert planned[13:19] == [
        "mix/mix/L0/greedy/r2",
        "mix/mix/L0/credit/r2",
        "content-creation/mix/L0/greedy/r2",
        "content-creation/mix/L0/credit/r2",
        "mix/mix/L0/partition/r2",
        "content-creation/mix/L0/partition/r2",
    ]
    assert planned[19:] == [k.replace("/r2", "/r3") for k in planned[13:19]]


def test_a_level_that_could_not_run_ends_the_sweep_at_the_level_before(tmp_path):
    sweep, state = h200(), State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    attained(state, Step("mix", "sweep", "L1", "greedy"), 0.95)
    not_run(state, Step("mix", "sweep", "L2", "greedy"), "CUDA out of memory")
    assert knee(sweep, state).name == "L1"
    assert "mix/sweep/L3/greedy" not in keys(sweep, state)


def test_a_crashed_application_is_not_taken_for_an_slo_miss(tmp_path):
    sweep, state = h200(), State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    record(state, Step("mix", "sweep", "L1", "greedy"), [0.9], error="chat: killed by SIGSEGV")
    assert knee(sweep, state).name == "L0"


def test_a_failed_first_level_stops_the_sweep_with_its_reason(tmp_path):
    state = State(tmp_path)
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.9], error="chat: killed by SIGSEGV")
    with pytest.raises(SweepError, match="first sweep level L0 failed: chat: killed by SIGSEGV"):
        keys(h200(), state)


def test_credit_and_partition_walk_from_the_knee_to_their_own_break_levels(tmp_path):
    sweep, state = h200(), State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    attained(state, Step("mix", "sweep", "L1", "greedy"), 0.5)  # greedy's knee: L1
    attained(state, Step("mix", "mix", "L1", "credit"), 1.0)
    attained(state, Step("mix", "mix", "L1", "partition"), 0.0)
    # Credit meets the threshold at the knee, so it walks up; partition misses, so it walks down.
    assert keys(sweep, state)[-2:] == ["mix/sweep/L2/credit", "mix/sweep/L0/partition"]
    attained(state, Step("mix", "sweep", "L2", "credit"), 0.95)  # holds
    attained(state, Step("mix", "sweep", "L0", "partition"), 1.0)
    assert keys(sweep, state)[-3:] == ["mix/sweep/L2/credit", "mix/sweep/L3/credit", "mix/sweep/L0/partition"]
    attained(state, Step("mix", "sweep", "L3", "credit"), 0.5)
    # Credit breaks above the knee: each application alone there says whether the load alone misses.
    assert keys(sweep, state)[-3:] == ["mix/solo/L3/chat", "mix/solo/L3/image", "mix/solo/L3/captions"]


def test_a_failed_level_ends_a_schedulers_walk(tmp_path):
    sweep, state = h200(), State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    attained(state, Step("mix", "sweep", "L1", "greedy"), 0.5)
    attained(state, Step("mix", "mix", "L1", "credit"), 1.0)
    not_run(state, Step("mix", "sweep", "L2", "credit"), "CUDA out of memory")
    assert "mix/sweep/L3/credit" not in keys(sweep, state)


def test_each_scheduler_walks_against_its_own_threshold(tmp_path):
    text = H200.read_text().replace(
        "  threshold: 0.9\n", "  threshold: {greedy: 0.9, credit: 0.99, partition: 0.5}\n"
    )
    (tmp_path / "workflows").symlink_to(H200.parent / "workflows")
    (tmp_path / "mix.yml").write_text(text)
    sweep, state = load_sweep(tmp_path / "mix.yml"), State(tmp_path / "state")
    attained(state, Step("mix", "sweep", "L0", "greedy"), 0.85)  # the knee at L0
    attained(state, Step("mix", "mix", "L0", "credit"), 0.95)  # below its 0.99: breaks at L0 at once
    attained(state, Step("mix", "mix", "L0", "partition"), 0.6)  # above its 0.5: walks up
    assert [k for k in keys(sweep, state) if "/sweep/" in k] == [
        "mix/sweep/L0/greedy",
        "mix/sweep/L1/partition",
    ]


def grid(tmp_path: Path, extra: str = "") -> Path:
    """Write a sweep without search: one workflow of one Sleep unit, two levels, two schedulers."""
    (tmp_path / "w.yml").write_text(
        "naps:\n  type: Sleep\n  num_requests: 2\n  sleep_time: 0.01\nworkflows:\n  nap: {uses: naps}\n"
    )
    path = tmp_path / "sweep.yml"
    path.write_text(
        "name: grid\nworkflows: {w: w.yml}\nschedulers: [greedy, credit]\nrepeats: 2\n"
        "levels:\n  - {name: low}\n  - {name: high, load: twice the work, units: {naps: {num_requests: 4}}}\n"
        + extra
    )
    return path


def test_without_a_search_every_level_runs_under_every_scheduler_then_the_repeats(tmp_path):
    sweep, state = load_sweep(grid(tmp_path)), State(tmp_path / "state")
    assert keys(sweep, state) == [
        "w/solo/low/nap",
        "w/mix/low/greedy",
        "w/mix/low/credit",
        "w/solo/high/nap",
        "w/mix/high/greedy",
        "w/mix/high/credit",
        "w/mix/low/greedy/r2",
        "w/mix/low/credit/r2",
        "w/mix/high/greedy/r2",
        "w/mix/high/credit/r2",
    ]
    not_run(state, Step("w", "solo", "low", "greedy", "nap"), "no GPU")
    assert pending(sweep, state)[0].key == "w/mix/low/greedy"


def test_solo_false_runs_no_application_alone(tmp_path):
    sweep, state = load_sweep(grid(tmp_path, "solo: false\n")), State(tmp_path / "state")
    assert not [k for k in keys(sweep, state) if "/solo/" in k]
