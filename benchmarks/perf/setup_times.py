"""Everyday speed on this machine: a fresh clone to the demo's SLO table, and the test tiers.

Usage: python -m benchmarks.perf.setup_times [--repo PATH] [--steps clone,install,demo,check,test]
       [--second-clone] [--keep DIR] [--make-args "TEST_DATABASE_URL=..."]

Clones the checkout ``--repo`` (default: this one, its committed HEAD) into a temporary folder and
times each step there, as a new contributor meets them: ``git clone``, ``make install`` (with the
package caches this machine has), ``make demo``, ``make check`` and ``make test``. ``--second-clone``
then times clone, install and demo of another clone beside it (the cached llama.cpp builds make it
short). Prints a table of seconds against the goals; a step that fails prints the end of its log and
the script exits 1. Each step's whole output is in ``<clone>/setup-times-<step>.log``.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.table import text_table

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("clone", "install", "demo", "check", "test")
# Seconds; the demo's goal is from the clone to its SLO table (clone + install + demo).
GOALS = {"clone to demo": 300.0, "second clone to demo": 120.0, "check": 120.0, "test": 720.0}
LOG_TAIL_LINES = 40


class StepFailed(RuntimeError):
    """A step exited non-zero: its name and the end of its log."""


def timed(name: str, argv: list[str], cwd: Path, log_dir: Path) -> float:
    """Run ``argv`` in ``cwd`` with its output in ``log_dir/setup-times-<name>.log``; return seconds."""
    log = log_dir / f"setup-times-{name.replace(' ', '-')}.log"
    print(f"==> {name}: {shlex.join(argv)}", flush=True)
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
        raise StepFailed(f"{name} exited {done.returncode} after {seconds:.0f} s ({log}):\n{tail}")
    print(f"    {name}: {seconds:.0f} s", flush=True)
    return seconds


def clone_and_time(repo: Path, into: Path, steps: list[str], make_args: list[str]) -> dict[str, float]:
    """Clone ``repo`` into ``into`` and time ``steps`` there; return seconds by step."""
    times: dict[str, float] = {}
    if "clone" in steps:
        into.parent.mkdir(parents=True, exist_ok=True)
        times["clone"] = timed(
            "clone", ["git", "clone", "--quiet", str(repo), str(into)], into.parent, into.parent
        )
    for step in ("install", "demo", "check", "test"):
        if step in steps:
            times[step] = timed(step, ["make", step, *make_args], into, into)
    return times


def rows(first: dict[str, float], second: dict[str, float]) -> list[list[str]]:
    """Return the table: each step's seconds, then the totals against their goals."""
    table = [["step", "seconds", "goal (s)", "met"]]
    for step, seconds in first.items():
        table.append([step, f"{seconds:.0f}", "", ""])

    def total(label: str, times: dict[str, float]) -> None:
        if all(s in times for s in ("clone", "install", "demo")):
            seconds = times["clone"] + times["install"] + times["demo"]
            goal = GOALS[label]
            table.append([label, f"{seconds:.0f}", f"{goal:.0f}", "yes" if seconds <= goal else "no"])

    total("clone to demo", first)
    for step in ("check", "test"):
        if step in first:
            goal = GOALS[step]
            table.append(
                [f"make {step}", f"{first[step]:.0f}", f"{goal:.0f}", "yes" if first[step] <= goal else "no"]
            )
    total("second clone to demo", second)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout to clone (default: this one)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--second-clone", action="store_true", help="then time clone, install, demo again")
    parser.add_argument(
        "--keep", type=Path, help="clone into this new folder and keep it (default: a temporary one)"
    )
    parser.add_argument("--make-args", default="", help="extra arguments for every make step")
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown steps {unknown}; expected some of {', '.join(STEPS)}")
    if steps and steps[0] != "clone":
        parser.error("the steps start with clone: they run in a fresh clone")
    make_args = shlex.split(args.make_args)
    with tempfile.TemporaryDirectory(prefix="cb-setup-times-") as tmp:
        base = args.keep or Path(tmp)
        if args.keep and args.keep.exists():
            parser.error(f"--keep {args.keep} exists; name a new folder")
        try:
            first = clone_and_time(args.repo, base / "first", steps, make_args)
            second = (
                clone_and_time(args.repo, base / "second", ["clone", "install", "demo"], make_args)
                if args.second_clone
                else {}
            )
        except StepFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print()
    print(text_table(rows(first, second)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
