"""Which steps a sweep runs, in order, given what its state already holds.

Without ``search:`` a sweep is a grid: at every level, each application alone (``solo: true``; always
under greedy, ``SOLO_SCHEDULER``), then every workflow under every scheduler. With ``search:`` the first
scheduler walks the searched workflow's levels from the lowest up until its mean attainment falls below
its threshold: that level is the *knee*, the level of the tables (the last level when it never falls).
At the knee: each application alone, every workflow under every scheduler. Then each other scheduler
finds its own break level, walking from the knee (up while it meets its threshold, down while it does
not), and each application of the searched workflow runs alone at a break level above the knee (whether
the load itself, not the sharing, is too much there). Repeats (runs 2..N at the table levels) come last, so a
sweep short of time still has every figure once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from benchmarks.sweep.model import SOLO_SCHEDULER, Level, Sweep
from benchmarks.sweep.state import State, Step, SweepError


@dataclass
class Walk:
    """One scheduler's walk over the searched workflow's levels so far."""

    measured: list[tuple[Level, Step]] = field(default_factory=list)  # the levels run, lowest first
    next: Step | None = None  # the step to run next; None when the walk has ended
    breaks_at: Level | None = None  # the first level whose mean attainment fell below the threshold
    failed: tuple[Level, str] | None = None  # the level that could not run or had a failed application


def walk_step(sweep: Sweep, scheduler: str, level: str, knee_level: str) -> Step:
    """Return the run of the searched workflow under a scheduler at a level of its walk: at the knee,
    the other schedulers' first run of the whole workflow (one run serves both)."""
    name = sweep.search_workflow
    if scheduler != sweep.schedulers[0] and level == knee_level:
        return Step(name, "mix", level, scheduler)
    return Step(name, "sweep", level, scheduler)


def scheduler_walk(sweep: Sweep, state: State, scheduler: str, knee_level: str) -> Walk:
    """Walk a scheduler's levels one at a time from the knee (the first scheduler's from the lowest):
    upward while it meets its threshold (its break level is the first that does not), downward while it
    does not (its break level is the lowest that does not; attainment is taken to fall as the load
    grows). A level that failed (a broken measurement, not an SLO miss) ends the walk."""
    walk = Walk()
    levels = sweep.levels
    threshold = sweep.threshold(scheduler)
    start = 0 if scheduler == sweep.schedulers[0] else sweep.index(knee_level)

    def measure(index: int) -> float | None:
        """Return the level's mean attainment; None when the walk stops there (pending or failed)."""
        level = levels[index]
        step = walk_step(sweep, scheduler, level.name, knee_level)
        entry = state.get(step)
        if entry is None:
            walk.next = step
            return None
        result = state.result(step)
        attainment = result.get("mean_attainment") if result else None
        if result is None or attainment is None or entry.get("error"):
            walk.failed = (level, entry.get("error") or "no attainment")
            return None
        walk.measured.insert(0 if index < start else len(walk.measured), (level, step))
        return float(attainment)

    at_start = measure(start)
    if at_start is None:
        return walk
    if at_start >= threshold:
        for index in range(start + 1, len(levels)):
            attainment = measure(index)
            if attainment is None:
                return walk
            if attainment < threshold:
                walk.breaks_at = levels[index]
                return walk
        return walk
    for index in range(start - 1, -1, -1):
        attainment = measure(index)
        if attainment is None:
            return walk
        if attainment >= threshold:
            walk.breaks_at = levels[index + 1]
            return walk
    walk.breaks_at = levels[0]
    return walk


def knee(sweep: Sweep, state: State) -> Level | None:
    """Return the knee (the first scheduler's break level), or None while its walk goes on.

    A level that could not run, or where an application failed (out of memory, a crash), ends the walk
    at the level before it: a failed application is a broken measurement, not an SLO miss. Raises
    SweepError when the first level itself failed. The last level when none misses.
    """
    walk = scheduler_walk(sweep, state, sweep.schedulers[0], sweep.levels[0].name)
    if walk.next is not None:
        return None
    if walk.failed is not None and not walk.measured:
        level, reason = walk.failed
        raise SweepError(f"the first sweep level {level.name} failed: {reason}")
    if walk.breaks_at is not None:
        return walk.breaks_at
    return walk.measured[-1][0] if walk.failed is not None else sweep.levels[-1]


def table_levels(sweep: Sweep, state: State) -> list[Level] | None:
    """Return the levels whose every workflow runs under every scheduler: the knee with a search, every
    level without; None while the knee is not known."""
    if sweep.spec.search is None:
        return list(sweep.levels)
    found = knee(sweep, state)
    return None if found is None else [found]


def first_run(sweep: Sweep, workflow: str, level: str, scheduler: str, repeat: int = 1) -> Step:
    """Return the step of a workflow's whole run under a scheduler at a table level (the searched
    workflow's first run under the first scheduler is its walk's run)."""
    first = sweep.schedulers[0]
    searched = sweep.spec.search is not None and workflow == sweep.search_workflow
    kind = "sweep" if searched and scheduler == first and repeat == 1 else "mix"
    return Step(workflow, kind, level, scheduler, repeat=repeat)


def solo_step(workflow: str, level: str, node: str) -> Step:
    """Return the run of one node of a workflow alone at a level: under ``SOLO_SCHEDULER`` (greedy),
    whatever schedulers the sweep compares."""
    return Step(workflow, "solo", level, SOLO_SCHEDULER, node)


def plan(sweep: Sweep, state: State) -> Iterator[Step]:
    """Yield the sweep's steps in order, up to the first walk step not run yet while the knee is unknown."""
    first = sweep.schedulers[0]
    if sweep.spec.search is not None:
        found = knee(sweep, state)
        for level in sweep.levels:
            step = Step(sweep.search_workflow, "sweep", level.name, first)
            if state.get(step) is None:
                if found is None:
                    yield step
                break
            yield step
    levels = table_levels(sweep, state)
    if levels is None:
        return
    for level in levels:
        for name in sweep.base:
            for node in sweep.solo_nodes(name):
                yield solo_step(name, level.name, node)
            for scheduler in sweep.schedulers:
                step = first_run(sweep, name, level.name, scheduler)
                if step.kind == "mix":
                    yield step
    if sweep.spec.search is not None:
        yield from _break_steps(sweep, state, levels[0])
    groups = sweep.spec.repeat_groups or [sweep.schedulers]
    for repeat in range(2, sweep.spec.repeats + 1):
        for level in levels:
            for group in groups:
                for name in sweep.base:
                    for scheduler in group:
                        yield first_run(sweep, name, level.name, scheduler, repeat)


def _break_steps(sweep: Sweep, state: State, found: Level) -> Iterator[Step]:
    """Yield the other schedulers' walks from the knee, then each application alone at a break level
    above the knee."""
    above: list[Level] = []
    for scheduler in sweep.schedulers[1:]:
        walk = scheduler_walk(sweep, state, scheduler, found.name)
        for step in [step for _, step in walk.measured] + ([walk.next] if walk.next else []):
            if step.level != found.name:  # the knee's run is a table step
                yield step
        broke = walk.breaks_at
        if broke and sweep.index(broke.name) > sweep.index(found.name) and broke not in above:
            above.append(broke)
    for level in above:
        for node in sweep.solo_nodes(sweep.search_workflow):
            yield solo_step(sweep.search_workflow, level.name, node)


def pending(sweep: Sweep, state: State) -> list[Step]:
    """Return the planned steps not run yet, in order."""
    return [s for s in plan(sweep, state) if state.get(s) is None]
