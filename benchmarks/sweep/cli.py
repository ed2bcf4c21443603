"""``consumerbench sweep SWEEP.yml``: run a sweep's pending steps (resumable, within a time budget), or
write its summary (JSON, Markdown, plots) from its state folder or from an archive of it."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.sweep.model import Sweep, SweepFileError, load_sweep
from benchmarks.sweep.plan import plan, table_levels
from benchmarks.sweep.run import prepare_all, run_sweep
from benchmarks.sweep.state import State, SweepError, extract_archive
from benchmarks.sweep.summary import write_summary

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_PENDING, EXIT_CANCELLED = 0, 1, 2, 3, 130


def register(subparsers: Any) -> None:
    """Add the ``sweep`` sub-command to the ``consumerbench`` parser."""
    p = subparsers.add_parser(
        "sweep",
        help="run a sweep file (levels x schedulers x repeats, resumable) or summarize it",
        description="Exit codes: 0 done, 1 a step's result cannot be read, 2 usage or sweep file error, "
        "3 steps still pending (call again), 130 interrupted (the steps recorded are kept).",
    )
    p.add_argument("file", type=Path, help="the sweep file (docs/sweeps.md)")
    p.add_argument("--state", type=Path, help="state and bundles (default results/sweeps/<name>[-smoke])")
    p.add_argument("--budget-s", type=float, help="run only the steps that fit in S seconds, then stop")
    p.add_argument("--cpu-smoke", action="store_true", help="the sweep file's smoke profile on this CPU")
    p.add_argument("--archive", type=Path, help="write the state and bundles (no images) to this tar.gz")
    p.add_argument("--repeats", type=int, help="runs of each workflow under each scheduler (overrides)")
    p.add_argument("--plan", action="store_true", help="print every planned step and its status")
    p.add_argument("--prepare", action="store_true", help="write the random model files the steps load")
    p.add_argument("--summarize", action="store_true", help="write the summary JSON, Markdown and plots")
    p.add_argument("--from-archive", type=Path, help="--summarize: read the state from this tar.gz")
    p.add_argument("--json", type=Path, help="--summarize: summary JSON (default: the sweep file's output)")
    p.add_argument("--md", type=Path, help="--summarize: summary Markdown (default: the sweep file's output)")
    p.add_argument("--plot-format", choices=("png", "svg"), default="png", help="--summarize: plot files")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run the ``sweep`` command; return the exit code."""
    if args.repeats is not None and args.repeats < 1:
        print(f"error: --repeats must be at least 1, got {args.repeats}", file=sys.stderr)
        return EXIT_USAGE
    if args.budget_s is not None and args.budget_s <= 0:
        print(f"error: --budget-s must be positive, got {args.budget_s:g}", file=sys.stderr)
        return EXIT_USAGE
    if args.from_archive is not None and not args.summarize:
        print("error: --from-archive goes with --summarize", file=sys.stderr)
        return EXIT_USAGE
    try:
        sweep = load_sweep(args.file, smoke=args.cpu_smoke)
        if args.repeats is not None:
            sweep.spec = sweep.spec.model_copy(update={"repeats": args.repeats})
        default = Path("results/sweeps") / (sweep.spec.name + ("-smoke" if args.cpu_smoke else ""))
        state_dir: Path = args.state or default
        if args.summarize:
            return _summarize(args, sweep, state_dir)
        state = State(state_dir)
        if args.prepare:
            for name in prepare_all(sweep):
                print(f"{name}@random ready")
            return EXIT_OK
        if args.plan:
            for step in plan(sweep, state):
                entry = state.get(step)
                print(f"{step.key}: {entry['status'] if entry else 'pending'}")
            return EXIT_OK
        started = time.monotonic()
        try:
            left = run_sweep(sweep, state, args.budget_s, sys.stdout, args.archive)
        except KeyboardInterrupt:
            print(
                "interrupted: the steps recorded so far are kept; the same command continues", file=sys.stderr
            )
            return EXIT_CANCELLED
        print(f"({time.monotonic() - started:.0f} s in this call)")
        return EXIT_PENDING if left else EXIT_OK
    except (SweepFileError, SweepError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS


def _summarize(args: argparse.Namespace, sweep: Sweep, state_dir: Path) -> int:
    """Write the summary from the state folder (or an archive of it); return the exit code."""
    json_path, md_path = sweep.summary_paths(state_dir)
    json_path, md_path = args.json or json_path, args.md or md_path
    command = f"consumerbench sweep {args.file} --summarize"
    with tempfile.TemporaryDirectory(prefix="cb-sweep-") as tmp:
        if args.from_archive is not None:
            state_dir = extract_archive(args.from_archive, Path(tmp))
            command += f" --from-archive {args.from_archive}"
        state = State(state_dir)
        if table_levels(sweep, state) is None:
            print(
                "error: the break-level search has not found the knee yet: run the sweep first",
                file=sys.stderr,
            )
            return EXIT_PENDING
        summary, plots = write_summary(sweep, state, json_path, md_path, command, args.plot_format)
    for path in (json_path, md_path, *plots):
        print(f"wrote {path}")
    print(f"level {summary['level']['name']}; breaks: {summary['breaks'] or 'no search'}")
    return EXIT_OK
