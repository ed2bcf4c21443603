"""Who held the GPU while an application waited: per-request time slices from kernel traces.

Reads bundles of runs taken with a kernel trace (``consumerbench run --kernel-trace NODE`` or a sweep's
``kernel_trace:``; benchmarks.monitor.kernels) and accounts for each counted request of one node (a live
caption chunk, by default) on the GPU's own timeline, over the request's window: from when it was due
(its arrival; a chunk behind the one before it waits for that one too) to its end, or to its last
kernel's end when later. Over that window, latency = own GPU time + behind others + idle:

- own GPU time: the union of the node's kernels that began in the window; with several sessions in one
  process (``concurrency``), their kernels are the node's alike;
- GPU span: from the window's first own kernel's start to its last one's end;
- backlog: from when the request was due to when the node began it (the one before still running);
- waiting: the time the node's kernels were launched and due (their stream's previous kernel done) but
  not running ("-" without launch records). It includes the launch latency and the tracer's own cost,
  so it is above 0 alone; "a kernel": divided by the request's kernels; "while others ran": the part of
  it in which another traced node's kernel ran;
- behind others: the time in the window, outside the node's own kernels, in which another traced
  node's kernels ran: the others' turns (the node may also have had CPU work of its own then);
- idle: the rest of the window outside its own kernels: no traced kernel ran (the node's CPU work,
  launches, context switches, untraced processes);
- slices: the others' turns, one a hole between own kernels in which they ran (from their first
  kernel's start to their last one's end there), their lengths, and whose;
- concurrent: own kernel time during which another node's kernel also ran (MPS clients run kernels
  side by side; with time-sliced contexts it is not 0 either: CUPTI's record of a kernel spans the time
  its context was switched out, docs/monitor.md).

A run in which another node on the GPU has no trace (not asked for, or its process was killed before it
wrote it) names those nodes, and its figures about the others (waiting while others ran, behind others,
idle, slices, by node, concurrent, headroom) are "-": the untraced node's turns would count as idle.

The table also gives the share of the node's kernels that began inside its counted requests' windows
(the rest: priming, warm-up and work between requests; near 0, a trace whose clock does not match the
records') and the requests in which none began (a trace cut short: CUPTI's buffers full).

Each figure is per request; the table gives the median and p99 over the run's requests. ``headroom``
is how many times the time behind others would have to grow before the p99 request (nearest rank)
misses its SLO: (SLO - (latency - behind others)) / behind others (0 when it misses even without that
time), a projection from the measured run, not a measurement.

    python3 -m benchmarks.perf.kernel_slices --node captions --slo 1.0 \\
        --run alone=BUNDLE --run greedy-L1=BUNDLE [--json out.json] [--md out.md]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.files import bundle_path
from benchmarks.monitor.kernels import TRACE_FILE, Kernel, read_trace
from benchmarks.results import load_bundle
from benchmarks.status import RequestStatus
from benchmarks.table import markdown_table, text_table

Interval = tuple[float, float]


class Intervals:
    """Sorted, disjoint intervals with their ends indexed, so that a window is cut out by bisection."""

    def __init__(self, intervals: Iterable[Interval]) -> None:
        self.items = merge(intervals)
        self.ends = [end for _, end in self.items]

    def within(self, lo: float, hi: float) -> list[Interval]:
        """Return the parts inside [lo, hi] (none of zero length)."""
        out = []
        for start, end in self.items[bisect_left(self.ends, lo) :]:
            if start >= hi:
                break
            piece = (max(start, lo), min(end, hi))
            if piece[1] > piece[0]:
                out.append(piece)
        return out


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Return the union of intervals as sorted, disjoint intervals (touching ones joined)."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        elif end > start:
            out.append((start, end))
    return out


def measure(intervals: Iterable[Interval]) -> float:
    """Return the total length of disjoint intervals."""
    return sum(end - start for start, end in intervals)


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Return the intersection of two sorted, disjoint interval lists (no piece of zero length)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def complement(intervals: Sequence[Interval], lo: float, hi: float) -> list[Interval]:
    """Return the parts of [lo, hi] outside sorted, disjoint intervals."""
    out, cursor = [], lo
    for start, end in intervals:
        if start > cursor:
            out.append((cursor, min(start, hi)))
        cursor = max(cursor, end)
        if cursor >= hi:
            break
    if cursor < hi:
        out.append((cursor, hi))
    return [(s, e) for s, e in out if e > s]


def waits(kernels: Sequence[Kernel]) -> list[Interval | None]:
    """Return, for each kernel (in start order), the time it was due but not running: from its launch,
    or its stream's previous kernel's end when later, to its start; None when its launch is unknown."""
    stream_end: dict[int, float] = {}
    out: list[Interval | None] = []
    for k in kernels:
        due = None if k.launch is None else max(k.launch, stream_end.get(k.stream, k.launch))
        out.append(None if due is None else (due, max(due, k.start)))
        stream_end[k.stream] = max(stream_end.get(k.stream, k.end), k.end)
    return out


def traces(bundle: Path) -> dict[str, list[Kernel]]:
    """Return the kernel trace of every traced node of a bundle, by node name."""
    out = {}
    for app in load_bundle(bundle).applications:
        path = bundle_path(bundle / "artifacts", app.name) / TRACE_FILE
        if path.is_file():
            out[app.name] = list(read_trace(path))
    return out


def account(bundle: Path, node: str, metric: str = "chunk") -> dict[str, Any]:
    """Return the per-request account of ``node`` in one bundle (module docstring); a request's latency
    is its ``metric`` (its end less its start when it has none)."""
    result = load_bundle(bundle)
    app = next((a for a in result.applications if a.name == node), None)
    if app is None:
        raise ValueError(f"{bundle}: no application '{node}' in this run")
    kernels = traces(bundle)
    if node not in kernels:
        raise ValueError(f"{bundle}: '{node}' has no kernel trace (run it with --kernel-trace {node})")
    own_all = kernels.pop(node)
    untraced = sorted(
        a.name for a in result.applications if a.device == "gpu" and a.name not in kernels and a.name != node
    )
    due = waits(own_all)
    others = {name: Intervals((k.start, k.end) for k in ks) for name, ks in kernels.items()}
    other_union = Intervals(iv for o in others.values() for iv in o.items)
    starts = [k.start for k in own_all]
    rows: list[dict[str, Any]] = []
    counted: set[int] = set()
    empty = 0
    for req in app.requests:
        if req.warmup or req.status != RequestStatus.OK:
            continue
        # From when the request was due: a chunk that waits for the one before it (a backlog) waits
        # for that one's kernels and the others' turns in between too.
        lo = min(req.arrival, req.start)
        first, last = bisect_left(starts, lo), bisect_left(starts, req.end)
        own = own_all[first:last]
        if not own:
            empty += 1
            continue
        counted.update(range(first, last))
        own_union = merge((k.start, k.end) for k in own)
        hi = max(req.end, own_union[-1][1])
        around = other_union.within(lo, hi)
        holes = complement(own_union, lo, hi)
        # One slice: the others' turn in one hole between own kernels, from its first kernel's start to
        # its last one's end (their back-to-back kernels are one turn).
        turns = [(pieces[0][0], pieces[-1][1]) for hole in holes if (pieces := intersect([hole], around))]
        behind = intersect(holes, around)
        known = [w for w in due[first:last] if w is not None]
        waiting = merge(known) if len(known) == len(own) else None
        rows.append(
            {
                "start": req.start,
                "latency_s": req.metrics.get(metric, req.end - lo),
                "backlog_s": max(0.0, req.start - lo),
                "kernels": len(own),
                "own_gpu_s": measure(own_union),
                "span_s": own_union[-1][1] - own_union[0][0],
                "waiting_s": None if waiting is None else measure(waiting),
                "waiting_per_kernel_s": None if waiting is None else measure(waiting) / len(own),
                "waiting_others_s": None if waiting is None else measure(intersect(waiting, around)),
                "behind_others_s": measure(behind),
                "idle_s": measure(holes) - measure(behind),
                "slices": len(turns),
                "slice_lengths_s": [e - s for s, e in turns],
                "behind_by_node_s": {
                    name: measure(intersect(holes, ivs.within(lo, hi))) for name, ivs in others.items()
                },
                "concurrent_s": measure(intersect(own_union, around)),
            }
        )
    # The share of the node's kernels that ran inside a counted request (each kernel once, however many
    # requests' windows overlap it): the rest is priming, warm-up, work between requests, or (near 0) a
    # trace whose clock does not match the records'.
    coverage = len(counted) / len(own_all) if own_all else None
    return {
        "node": node,
        "traced": sorted([node, *others]),
        "untraced": untraced,
        "coverage": coverage,
        "requests_without_kernels": empty,
        "requests": rows,
    }


def _natural(name: str) -> tuple[str | int, ...]:
    """Return a node name's sort key with its numbers as numbers: busy-2 before busy-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def nearest_rank(values: Sequence[float], q: float) -> int:
    """Return the index, in ``sorted(values)``, of the ``q``-th percentile by nearest rank."""
    return max(0, math.ceil(q / 100 * len(values)) - 1)


# The figures about the other nodes' turns: unknown while one of them has no trace.
OTHERS_KEYS = frozenset({"waiting_others_s", "behind_others_s", "idle_s", "concurrent_s", "slices"})


def summarize(acc: dict[str, Any], slo_s: float | None) -> dict[str, Any]:
    """Return the medians and p99s of an account's requests, and the headroom against ``slo_s``."""
    rows = acc["requests"]

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in rows if r[key] is not None]

    out: dict[str, Any] = {
        "requests": len(rows),
        "requests_without_kernels": acc["requests_without_kernels"],
        "traced": acc["traced"],
        "untraced": acc["untraced"],
        "coverage": acc["coverage"],
    }
    keys = (
        "latency_s",
        "backlog_s",
        "own_gpu_s",
        "span_s",
        "waiting_s",
        "waiting_per_kernel_s",
        "waiting_others_s",
        "behind_others_s",
        "idle_s",
        "concurrent_s",
        "kernels",
        "slices",
    )
    # Without every other GPU node's trace, their turns are indistinguishable from idle time.
    blind = bool(acc["untraced"])
    for key in keys:
        values = [] if blind and key in OTHERS_KEYS else col(key)
        out[key] = {"p50": _pct(values, 50), "p99": _pct(values, 99)}
    lengths = [] if blind else [x for r in rows for x in r["slice_lengths_s"]]
    out["slice_s"] = {"p50": _pct(lengths, 50), "p99": _pct(lengths, 99), "max": max(lengths, default=None)}
    names = [] if blind else sorted({n for r in rows for n in r["behind_by_node_s"]}, key=_natural)
    out["behind_by_node_s"] = {n: _pct([r["behind_by_node_s"].get(n, 0.0) for r in rows], 50) for n in names}
    out["headroom"] = None
    if slo_s is not None and rows and not blind:
        ranked = sorted(rows, key=lambda r: r["latency_s"])
        p99 = ranked[nearest_rank([r["latency_s"] for r in rows], 99)]
        behind = p99["behind_others_s"]
        if behind > 0:
            # 0: that request misses even without the others' time.
            out["headroom"] = max(0.0, (slo_s - (p99["latency_s"] - behind)) / behind)
    return out


def request_row(row: dict[str, Any]) -> dict[str, Any]:
    """Return a request's account as the JSON keeps it: its slices' lengths as their median, p99 and
    longest (thousands a request: megabytes a run in full)."""
    out = {k: v for k, v in row.items() if k != "slice_lengths_s"}
    lengths = row["slice_lengths_s"]
    out["slice_s"] = {"p50": _pct(lengths, 50), "p99": _pct(lengths, 99), "max": max(lengths, default=None)}
    return out


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def _scaled(value: float | None, unit: float) -> str:
    return "-" if value is None else f"{value * unit:.1f}"


def _ms(value: float | None) -> str:
    return _scaled(value, 1000)


def table(summaries: dict[str, dict[str, Any]], markdown: bool = False) -> str:
    """Return the summaries as one table (plain text, or Markdown): a row per figure, a column per run."""

    def pair(s: dict[str, Any], key: str, unit: float = 1000) -> str:
        return f"{_scaled(s[key]['p50'], unit)} / {_scaled(s[key]['p99'], unit)}"

    def count(s: dict[str, Any], key: str) -> str:
        return "-" if s[key]["p50"] is None else f"{s[key]['p50']:.0f}"

    def slices(s: dict[str, Any]) -> str:
        return f"{_ms(s['slice_s']['p50'])} / {_ms(s['slice_s']['p99'])} / {_ms(s['slice_s']['max'])}"

    def by_node(s: dict[str, Any]) -> str:
        return ", ".join(f"{n} {_ms(v)}" for n, v in s["behind_by_node_s"].items()) or "-"

    figures: list[tuple[str, Any]] = [
        ("requests (without a kernel)", lambda s: f"{s['requests']} ({s['requests_without_kernels']})"),
        ("GPU nodes without a trace", lambda s: ", ".join(s["untraced"]) or "none"),
        ("own kernels inside them", lambda s: _share(s["coverage"])),
        ("latency p50 / p99 (ms)", lambda s: pair(s, "latency_s")),
        ("backlog p50 / p99 (ms)", lambda s: pair(s, "backlog_s")),
        ("kernels a request, p50", lambda s: count(s, "kernels")),
        ("own GPU time p50 / p99 (ms)", lambda s: pair(s, "own_gpu_s")),
        ("GPU span p50 / p99 (ms)", lambda s: pair(s, "span_s")),
        ("waiting p50 / p99 (ms)", lambda s: pair(s, "waiting_s")),
        ("waiting a kernel p50 / p99 (us)", lambda s: pair(s, "waiting_per_kernel_s", 1e6)),
        ("waiting while others ran p50 / p99 (ms)", lambda s: pair(s, "waiting_others_s")),
        ("behind others p50 / p99 (ms)", lambda s: pair(s, "behind_others_s")),
        ("idle p50 / p99 (ms)", lambda s: pair(s, "idle_s")),
        ("slices a request, p50", lambda s: count(s, "slices")),
        ("slice p50 / p99 / max (ms)", slices),
        ("behind, by node, p50 (ms)", by_node),
        ("concurrent p50 / p99 (ms)", lambda s: pair(s, "concurrent_s")),
        ("headroom (x behind others)", lambda s: "-" if s["headroom"] is None else f"x{s['headroom']:.1f}"),
    ]
    rows = [["figure", *summaries]] + [[name, *(fn(s) for s in summaries.values())] for name, fn in figures]
    return markdown_table(rows) if markdown else text_table(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--node", default="captions", help="the node whose requests are accounted for")
    p.add_argument("--metric", default="chunk", help="the latency metric of a request (default: chunk)")
    p.add_argument("--slo", type=float, help="the metric's SLO in seconds (for the headroom)")
    p.add_argument(
        "--run", action="append", required=True, metavar="LABEL=BUNDLE", help="a traced run's bundle"
    )
    p.add_argument("--json", type=Path, help="write the summaries and every request's account here")
    p.add_argument("--md", type=Path, help="write the table as Markdown here (for docs/results/)")
    args = p.parse_args(argv)
    summaries, accounts, skipped = {}, {}, []
    for item in args.run:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            p.error(f"--run {item!r}: expected LABEL=BUNDLE")
        try:
            accounts[label] = account(Path(path), args.node, args.metric)
        except (OSError, ValueError) as exc:
            # One run without its trace (a cold machine's resumed sweep) leaves the others' account.
            print(f"error: {label}: {exc}", file=sys.stderr)
            skipped.append(label)
            continue
        summaries[label] = summarize(accounts[label], args.slo)
    if not summaries:
        return 1
    print(table(summaries))
    if args.md:
        args.md.write_text(table(summaries, markdown=True) + "\n")
    if args.json:
        document = {
            "node": args.node,
            "slo_s": args.slo,
            "runs": summaries,
            "skipped": skipped,
            "requests": {k: [request_row(r) for r in a["requests"]] for k, a in accounts.items()},
        }
        args.json.write_text(json.dumps(document, indent=1))
    return 1 if skipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
