"""The monitor's own cost: CPU time per second of sampling, at 20 Hz and 100 Hz.

Usage: python -m benchmarks.perf.monitor_overhead [--seconds 5] [--rates 20,100] [--sources psutil,nvml]
                                                   [--apps 3] [--settle 10] [--profile N]

Samples every available source (or the ones named) in this process for ``--seconds`` at each rate,
with ``--apps`` watched application processes (sleeping children; 3 as in a chat + image + captions
run) so that per-application attribution is included, and prints CPU milliseconds per second of
sampling and the share of one core. Each rate first samples for ``--settle`` seconds (the first 10 s
of an application, when the monitor looks for new child processes every second instead of every 5 s),
whose cost is shown apart, then measures the steady state for ``--seconds``.
Goal: under 2 % of one core at 20 Hz, steady state. ``--profile N`` then samples once more at the
first rate (steady state) under cProfile and prints the N functions that took the most CPU time of
their own (where the cost goes; the profiler slows every call, so read shares, not absolute times).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
import time
from dataclasses import dataclass

from benchmarks.monitor.base import CHILDREN_EARLY_S
from benchmarks.monitor.sampler import Sampler, SamplerStats
from benchmarks.table import text_table

GOAL_PCT_AT_20HZ = 2.0


@dataclass
class Measured:
    settle: SamplerStats | None  # the first ``settle_s`` seconds
    steady: SamplerStats
    available: list[str]


def measure(
    hz: float,
    seconds: float,
    sources: list[str] | None,
    pids: list[int],
    settle_s: float,
    profiler: cProfile.Profile | None = None,
) -> Measured:
    """Sample at ``hz`` for ``settle_s`` then ``seconds`` (profiled when given); return the stats of each."""
    sampler = Sampler(hz, sources)
    statuses = sampler.open()
    for i, pid in enumerate(pids):
        sampler.apps.watch(f"app{i}", pid)
    try:
        settle = sampler.run(lambda: False, lambda batch: None, duration_s=settle_s) if settle_s > 0 else None
        sampler.stats = SamplerStats(hz=sampler.hz)
        if profiler is not None:
            profiler.enable()
        steady = sampler.run(lambda: False, lambda batch: None, duration_s=seconds)
        if profiler is not None:
            profiler.disable()
    finally:
        sampler.close()
    return Measured(settle, steady, [name for name, s in statuses.items() if s.available])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="steady-state seconds measured per rate")
    parser.add_argument("--rates", default="20,100", help="comma-separated sampling rates in Hz")
    parser.add_argument("--sources", help="comma-separated source names (default: all)")
    parser.add_argument("--apps", type=int, default=3, help="watched application processes")
    parser.add_argument(
        "--settle", type=float, default=CHILDREN_EARLY_S, help="seconds sampled before the measurement"
    )
    parser.add_argument("--profile", type=int, metavar="N", help="print the N costliest functions")
    args = parser.parse_args(argv)
    sources = args.sources.split(",") if args.sources else None
    rates = [float(r) for r in args.rates.split(",")]
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) for _ in range(args.apps)
    ]
    pids = [c.pid for c in children]
    header = (
        "rate",
        "sources sampled",
        "ticks",
        "missed",
        "CPU ms/s",
        "% of one core",
        "goal",
        "CPU ms/s by source",
        f"first {args.settle:g} s: % of one core",
    )
    rows = [header]
    try:
        for hz in rates:
            m = measure(hz, args.seconds, sources, pids, args.settle)
            stats = m.steady
            per_s = stats.cpu_s / stats.duration_s
            goal = f"< {GOAL_PCT_AT_20HZ:g} %" if hz == 20 else ""
            verdict = "" if not goal else (" ok" if per_s * 100 < GOAL_PCT_AT_20HZ else " MISSED")
            first = "" if m.settle is None else f"{m.settle.cpu_s / m.settle.duration_s * 100:.2f}"
            rows.append(
                (
                    f"{hz:g} Hz",
                    ",".join(m.available),
                    str(stats.ticks),
                    str(stats.missed),
                    f"{per_s * 1000:.2f}",
                    f"{per_s * 100:.2f}",
                    goal + verdict,
                    ", ".join(f"{k} {v / stats.duration_s * 1000:.2f}" for k, v in stats.source_s.items()),
                    first,
                )
            )
        print(text_table(rows, align="<" * len(header)))
        if args.profile:
            print(profile(rates[0], args.seconds, sources, pids, args.settle, args.profile))
    finally:
        for child in children:
            child.kill()
            child.wait()
    return 0


def profile(
    hz: float, seconds: float, sources: list[str] | None, pids: list[int], settle_s: float, top: int
) -> str:
    """Return cProfile's table of the ``top`` functions by own CPU time in the steady state at ``hz``."""
    profiler = cProfile.Profile(time.process_time)
    measure(hz, seconds, sources, pids, settle_s, profiler)
    out = io.StringIO()
    print(f"\nProfile at {hz:g} Hz, {seconds:g} s of steady state (own CPU time, top {top}):", file=out)
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


if __name__ == "__main__":
    raise SystemExit(main())
