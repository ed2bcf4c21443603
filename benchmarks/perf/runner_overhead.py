"""Runner overhead: N no-op requests through the event pipe versus the same loop with no pipe.

Usage: python -m benchmarks.perf.runner_overhead [--requests 1000]
Prints events per second through the pipe and the latency the harness adds to each request.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.apps.base import AppContext
from benchmarks.apps.sleep import SleepDriver
from benchmarks.runner import run_workflow
from benchmarks.schedulers.base import OpenGate
from benchmarks.spec.load import load_yaml
from benchmarks.table import text_table


class _Count:
    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.events = 0

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.events += 1
        if event["kind"] in ("load_end", "done"):
            self.times[event["kind"]] = float(event["t"])


def _workflow(n: int) -> Any:
    return load_yaml(f"noop: {{type: Sleep, sleep_time: 0, num_requests: {n}}}\n", name="overhead")


def through_pipe(n: int) -> tuple[float, int]:
    """Return (seconds for the request loop in its own process, events the runner received)."""
    sink = _Count()
    run_workflow(_workflow(n), sink=sink)
    return sink.times["done"] - sink.times["load_end"], sink.events


def bare_loop(n: int) -> float:
    """Return seconds for the same driver loop in this process with events dropped."""
    wf = _workflow(n)
    ctx = AppContext(
        node="noop",
        emit=lambda kind, **f: None,
        gate=OpenGate(),
        stop_requested=lambda: False,
        device="cpu",
        out_dir=Path("."),
        seed=0,
    )
    driver = SleepDriver(wf.applications["noop"], ctx)
    driver.load()
    t = time.perf_counter()
    driver.run()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for _ in range(args.rounds):
        pipe_s, events = through_pipe(args.requests)
        bare_s = bare_loop(args.requests)
        rows.append((pipe_s, bare_s, events))
    best_pipe = min(r[0] for r in rows)
    best_bare = min(r[1] for r in rows)
    events = rows[0][2]
    print(f"{args.requests} no-op requests, best of {args.rounds} rounds, measured side by side")
    table = [["path", "loop time", "per request"]]
    table += [
        [path, f"{s * 1e3:.1f}ms", f"{s / args.requests * 1e6:.1f}us"]
        for path, s in (("bare driver loop", best_bare), ("through the runner pipe", best_pipe))
    ]
    print(text_table(table))
    added = (best_pipe - best_bare) / args.requests
    print(f"\nadded latency per request: {added * 1e6:.1f} us (ratio {best_pipe / best_bare:.2f})")
    print(f"events through the pipe:   {events} in {best_pipe:.3f} s = {events / best_pipe:,.0f} events/s")


if __name__ == "__main__":
    main()
