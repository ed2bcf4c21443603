"""Spec checks on hostile sizes: the partition share check and the topological order, before/after.

Usage: python -m benchmarks.perf.spec_limits [--old-max-pairs 16] [--old-max-nodes 3000]
Prints two tables: the partition check (largest concurrent MPS share) on N pairs of dependent nodes,
and ``Workflow.topological_order`` on a chain of N nodes defined last-first, each with the algorithm
before issue 17 (kept here as the reference) and the current one. The old algorithms are exponential
and quadratic; they run only up to the given sizes (beyond them a cell says "skipped").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.spec.graph import concurrent_sets_max
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import Limits, Workflow
from benchmarks.table import text_table

UNLIMITED = Limits(max_nodes=100_000, max_units=100_000, max_values=10_000_000, max_bytes=1 << 30)


def old_concurrent_sets_max(workflow: Workflow, weight: Mapping[str, int]) -> tuple[int, list[str]]:
    """The partition check before issue 17: branch and bound over sets of overlapping nodes
    (exponential in the number of independent pairs). The reference the new one must agree with."""
    names = [n for n in workflow.nodes if weight.get(n, 0) > 0]
    after: dict[str, set[str]] = {n: set() for n in workflow.nodes}
    for name in workflow.topological_order():
        for dep in workflow.nodes[name].depend_on:
            if not workflow.nodes[dep].background:
                after[name] |= {dep} | after[dep]
    overlap = {a: {b for b in names if b != a and a not in after[b] and b not in after[a]} for a in names}
    best: tuple[int, list[str]] = (0, [])

    def grow(chosen: list[str], candidates: list[str], total: int) -> None:
        nonlocal best
        if total > best[0]:
            best = (total, list(chosen))
        if total + sum(weight[c] for c in candidates) <= best[0]:
            return
        for i, c in enumerate(candidates):
            grow([*chosen, c], [d for d in candidates[i + 1 :] if d in overlap[c]], total + weight[c])

    grow([], sorted(names, key=lambda n: -weight[n]), 0)
    return best


def old_topological_order(workflow: Workflow) -> list[str]:
    """``Workflow.topological_order`` before issue 17: quadratic, and endless on a cycle."""
    order: list[str] = []
    done: set[str] = set()
    pending = list(workflow.nodes)
    while pending:
        for name in pending:
            if all(d in done for d in workflow.nodes[name].depend_on):
                order.append(name)
                done.add(name)
                pending.remove(name)
                break
    return order


def pairs_workflow(pairs: int, share: int = 4) -> Workflow:
    """Return ``pairs`` independent pairs of dependent nodes (q_i after p_i), each with ``share`` % MPS."""
    nodes = "".join(f"  p{i}: {{uses: a}}\n  q{i}: {{uses: a, depend_on: [p{i}]}}\n" for i in range(pairs))
    return load_yaml(f"a: {{type: Sleep, mps: {share}}}\nworkflows:\n{nodes}", limits=UNLIMITED)


def chain_workflow(n: int) -> Workflow:
    """Return a chain of ``n`` nodes, each depending on the previous one, defined last-first."""
    nodes = "".join(
        f"  n{i}: {{uses: a{', depend_on: [n' + str(i - 1) + ']' if i else ''}}}\n"
        for i in reversed(range(n))
    )
    return load_yaml(f"a: {{type: Sleep}}\nworkflows:\n{nodes}", limits=UNLIMITED)


def _time(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def _cell(seconds: float | None) -> str:
    return "skipped" if seconds is None else f"{seconds * 1e3:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-max-pairs", type=int, default=16, help="largest size for the old check")
    parser.add_argument("--old-max-nodes", type=int, default=3000, help="largest chain for the old order")
    args = parser.parse_args()

    concurrent_sets_max(pairs_workflow(1), {"p0": 1})  # imports networkx outside the timings
    print("partition share check: N independent pairs of dependent nodes, 4 % MPS each")
    rows = [["pairs", "before", "after", "largest share"]]
    for pairs in (8, 12, 14, 16, 18, 20, 24, 50, 128):
        wf = pairs_workflow(pairs)
        weight = {n: wf.unit_of(n).mps or 0 for n in wf.nodes}
        new_s, (total, _) = _time(concurrent_sets_max, wf, weight)
        old_s = None
        if pairs <= args.old_max_pairs:
            old_s, (old_total, _) = _time(old_concurrent_sets_max, wf, weight)
            assert old_total == total, (pairs, old_total, total)
        rows.append([str(pairs), _cell(old_s), _cell(new_s), f"{total} %"])
    print(text_table(rows, align=">>>>"))

    print()
    print("topological order: a chain of N nodes defined last-first")
    rows = [["nodes", "before", "after"]]
    for n in (100, 600, 1000, 3000, 10_000):
        wf = chain_workflow(n)
        new_s, order = _time(wf.topological_order)
        old_s = None
        if n <= args.old_max_nodes:
            old_s, old_order = _time(old_topological_order, wf)
            assert old_order == order
        rows.append([str(n), _cell(old_s), _cell(new_s)])
    print(text_table(rows, align=">>>"))


if __name__ == "__main__":
    main()
