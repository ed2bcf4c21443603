"""``consumerbench monitor``: sample this machine and print a live table (or JSON lines), then a
summary of the sources (available, or unavailable with the reason)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from benchmarks.monitor.sampler import DEFAULT_HZ, MAX_HZ, Batch, Sampler, SamplerStats
from benchmarks.monitor.sources import SOURCES

EXIT_OK, EXIT_USAGE = 0, 2
# The live table shows these (source, entity prefix, column, heading, scale, format).
HEADLINE = (
    ("psutil", "system", "cpu_percent", "CPU%", 1, "{:5.1f}"),
    ("psutil", "system", "mem_used_bytes", "RAM GiB", 2**-30, "{:7.2f}"),
    ("nvml", "gpu", "util_gpu_pct", "util%", 1, "{:5.0f}"),
    ("nvml", "gpu", "mem_used_bytes", "VRAM GiB", 2**-30, "{:8.2f}"),
    ("nvml", "gpu", "power_w", "W", 1, "{:6.1f}"),
    ("gpm", "gpu", "sm_activity_pct", "SMact%", 1, "{:6.1f}"),
    ("gpm", "gpu", "sm_occupancy_pct", "SMocc%", 1, "{:6.1f}"),
    ("dcgm", "gpu", "sm_activity_pct", "dcgm SMact%", 1, "{:11.1f}"),
    ("rapl", "package", "power_w", "CPU W", 1, "{:6.1f}"),
    ("pcm", "system", "memory_mbps", "mem MB/s", 1, "{:8.0f}"),
    ("powermetrics", "soc", "combined_power_w", "SoC W", 1, "{:6.2f}"),
)
# The live table prints one line per this many seconds (the batch interval of the sampler).
LINE_S = 1.0


def register(subparsers: Any) -> None:
    """Add the ``monitor`` sub-command to the ``consumerbench`` parser."""
    p = subparsers.add_parser(
        "monitor", help="sample this machine's GPU, CPU, memory and power; print a table"
    )
    p.add_argument("--duration", type=float, help="seconds to sample (default: until Ctrl-C)")
    p.add_argument("--hz", type=float, default=DEFAULT_HZ, help=f"samples per second, at most {MAX_HZ:g}")
    p.add_argument("--json", action="store_true", help="print each batch of samples as a JSON line")
    p.add_argument("--sources", help=f"comma-separated sources (default all: {','.join(SOURCES)})")
    p.set_defaults(func=cmd_monitor)


class LiveTable:
    """Keeps the latest value of each headline column and prints one line per ``LINE_S``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.latest: dict[tuple[str, str], float] = {}
        self.columns: list[tuple[str, str, float, str]] = []
        self.header_printed = False
        self.seen: set[str] = set()
        self.t = 0.0

    def on_batch(self, batch: Batch) -> None:
        """Take one source's batch; a second batch of the same source starts a new line."""
        source, columns = batch["source"], batch["columns"]
        if source in self.seen:
            self.print_line()
        self.seen.add(source)
        for row in batch["rows"]:
            t, entity = row[0], row[1]
            for src, prefix, column, heading, scale, fmt in HEADLINE:
                if src != source or not entity.startswith(prefix) or column not in columns:
                    continue
                value = row[columns.index(column)]
                if value is None or (isinstance(value, float) and not math.isfinite(value)):
                    continue
                label = (
                    heading if entity in ("system", "soc", "gpu0", "package-0") else f"{heading}[{entity}]"
                )
                key = (source, label)
                if key not in self.latest:
                    self.columns.append((source, label, scale, fmt))
                self.latest[key] = float(value)
            self.t = t

    def print_line(self) -> None:
        """Print the latest values (the header first, once)."""
        self.seen.clear()
        if not self.latest:
            return
        if not self.header_printed:
            heads = ["t s"] + [label for _, label, _, _ in self.columns]
            print("  ".join(f"{h:>{max(len(h), 6)}}" for h in heads), file=self.stream)
            self.header_printed = True
        cells = [f"{self.t:6.1f}"]
        for source, label, scale, fmt in self.columns:
            value = self.latest.get((source, label))
            text = "-" if value is None else fmt.format(value * scale)
            cells.append(f"{text:>{max(len(label), 6)}}")
        print("  ".join(cells), file=self.stream, flush=True)


def summary(statuses: Mapping[str, Any], stats: SamplerStats) -> str:
    """Return the end-of-run text: each source's status and what sampling cost."""
    lines = ["", "sources:"]
    width = max(len(n) for n in statuses)
    lines += [f"  {name:<{width}}  {status.describe()}" for name, status in statuses.items()]
    cost = stats.cpu_s / stats.duration_s * 100 if stats.duration_s else 0.0
    lines.append(
        f"{stats.ticks} ticks in {stats.duration_s:.1f} s at {stats.hz:g} Hz ({stats.missed} missed); "
        f"the monitor used {cost:.2f} % of one core"
    )
    return "\n".join(lines)


def cmd_monitor(args: argparse.Namespace) -> int:
    sources: Sequence[str] | None = args.sources.split(",") if args.sources else None
    if args.duration is not None and args.duration <= 0:
        print("error: --duration must be positive", file=sys.stderr)
        return EXIT_USAGE
    try:
        sampler = Sampler(args.hz, sources)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    statuses = sampler.open()
    table = LiveTable(sys.stdout)

    def on_batch(batch: Batch) -> None:
        if args.json:
            print(json.dumps(batch, default=_json_value), flush=True)
        else:
            table.on_batch(batch)

    try:
        stats = sampler.run(lambda: False, on_batch, batch_s=LINE_S, duration_s=args.duration)
    except KeyboardInterrupt:
        stats = sampler.stats
    finally:
        sampler.close()
    if not args.json:
        table.print_line()
    print(summary(statuses, stats), file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK


def _json_value(value: Any) -> Any:
    return str(value)
