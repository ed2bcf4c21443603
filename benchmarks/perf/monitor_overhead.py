"""The monitor's own cost: CPU time per second of sampling, at 20 Hz and 100 Hz.

Usage: python -m benchmarks.perf.monitor_overhead [--seconds 5] [--rates 20,100] [--sources psutil,nvml]
                                                   [--profile N]

Samples every available source (or the ones named) in this process for ``--seconds`` at each rate,
with one watched application process (a sleeping child) so that per-application attribution is
included, and prints CPU milliseconds per second of sampling and the share of one core.
Goal: under 2 % of one core at 20 Hz. ``--profile N`` then samples once more at the first rate under
cProfile and prints the N functions that took the most time of their own (where the cost goes; the
profiler itself slows every call, so read shares, not absolute times).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys

from benchmarks.monitor.sampler import Sampler, SamplerStats

GOAL_PCT_AT_20HZ = 2.0


def measure(hz: float, seconds: float, sources: list[str] | None, pid: int) -> tuple[SamplerStats, list[str]]:
    """Return the sampler's stats for ``seconds`` at ``hz`` and the sources that were available."""
    sampler = Sampler(hz, sources)
    statuses = sampler.open()
    sampler.apps.watch("child", pid)
    try:
        stats = sampler.run(lambda: False, lambda batch: None, duration_s=seconds)
    finally:
        sampler.close()
    return stats, [name for name, s in statuses.items() if s.available]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="20,100", help="comma-separated sampling rates in Hz")
    parser.add_argument("--sources", help="comma-separated source names (default: all)")
    parser.add_argument("--profile", type=int, metavar="N", help="print the N costliest functions")
    args = parser.parse_args(argv)
    sources = args.sources.split(",") if args.sources else None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    rows = [
        (
            "rate",
            "sources sampled",
            "ticks",
            "missed",
            "CPU ms/s",
            "% of one core",
            "goal",
            "wall ms/s by source",
        )
    ]
    try:
        for hz in (float(r) for r in args.rates.split(",")):
            stats, available = measure(hz, args.seconds, sources, child.pid)
            per_s = stats.cpu_s / stats.duration_s
            goal = f"< {GOAL_PCT_AT_20HZ:g} %" if hz == 20 else ""
            verdict = "" if not goal else (" ok" if per_s * 100 < GOAL_PCT_AT_20HZ else " MISSED")
            rows.append(
                (
                    f"{hz:g} Hz",
                    ",".join(available),
                    str(stats.ticks),
                    str(stats.missed),
                    f"{per_s * 1000:.2f}",
                    f"{per_s * 100:.2f}",
                    goal + verdict,
                    ", ".join(f"{k} {v / stats.duration_s * 1000:.2f}" for k, v in stats.source_s.items()),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if args.profile:
            print(profile(float(args.rates.split(",")[0]), args.seconds, sources, child.pid, args.profile))
    finally:
        child.kill()
        child.wait()
    return 0


def profile(hz: float, seconds: float, sources: list[str] | None, pid: int, top: int) -> str:
    """Return cProfile's table of the ``top`` functions by own time while sampling at ``hz``."""
    profiler = cProfile.Profile()
    profiler.enable()
    measure(hz, seconds, sources, pid)
    profiler.disable()
    out = io.StringIO()
    print(f"\nProfile at {hz:g} Hz for {seconds:g} s (own time, top {top}):", file=out)
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


if __name__ == "__main__":
    raise SystemExit(main())
