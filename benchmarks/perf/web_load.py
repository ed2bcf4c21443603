"""Readers' latency on the documented deployment, quiet and under attack.

Usage: python -m benchmarks.perf.web_load [--readers 50,200] [--duration 20] [--attackers 3]

Starts docker-compose.yml's services on this machine without Docker (benchmarks/perf/stack.py: nginx,
gunicorn as deploy/gunicorn.conf.py runs it, a private PostgreSQL and Redis, a CPU worker and the
sweeper), stores a few finished runs (small Sleep workflows run by the worker) and a workflow with two
~1 MB versions, then runs locust headless (benchmarks/perf/web_load_locust.py) for each number of
readers, first alone and then beside attackers that send the costliest requests (150 KB bodies of
escaped quotes to the validation API with a valid token, a search of 100 one-letter words, the diff of
the two large versions). Prints, per cell and per page, the readers' requests per second, p50, p99 and
errors, and what the attackers got. The write and preview throttles are lifted so that every attack
request reaches the application. Goal on an otherwise idle 2-core machine: 0 reader errors and readers'
p99 <= 2 s at 200 readers with the attackers running. The load generator runs on the same machine and
takes its share of the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.perf.stack import BIN, ROOT, Stack, StackError, wait_for
from benchmarks.table import text_table

LOCUSTFILE = Path(__file__).with_name("web_load_locust.py")
RUN = "nap:\n  type: Sleep\n  sleep_time: 0.05\n  num_requests: {n}\n  slo: ['e2e<=1s']\n"
READS = ("read: run list page", "read: result page", "read: API run list")
GOAL_P99_MS = 2000.0


def big_version(marker: str) -> str:
    """Return a valid workflow of about 0.9 MB whose text depends on ``marker``: 60 chatbot units
    with long client model names."""
    unit = "u{i}:\n  type: Chatbot\n  model: smollm2-135m\n  client_model: {name}\n  num_requests: 1\n"
    return "".join(unit.format(i=i, name=marker + "x" * 15_000) for i in range(60))


def populate(stack: Stack, runs: int) -> tuple[int, int]:
    """Store ``runs`` finished runs and a workflow with two large versions; return (a run id, that
    workflow's id)."""
    ids = []
    for i in range(runs):
        status, workflow, _ = stack.request(
            "POST", "/api/v1/workflows/submit/", {"name": f"nap-{i}", "yaml": RUN.format(n=2 + i)}
        )
        if status not in (200, 201):
            raise StackError(f"could not store a workflow: {status} {workflow!r}")
        status, run, _ = stack.request("POST", "/api/v1/runs/", {"workflow": workflow["id"]})
        if status != 201:
            raise StackError(f"could not submit a run: {status} {run!r}")
        ids.append(int(run["id"]))

    def ended() -> bool:
        states = [stack.request("GET", f"/api/v1/runs/{i}/")[1].get("status") for i in ids]
        if any(s in ("failed", "cancelled") for s in states):
            raise StackError(f"a run did not succeed: {states}; worker log: {stack.log('worker')[-2000:]}")
        return all(s == "succeeded" for s in states)

    wait_for(ended, "the runs did not finish", timeout=300, every=1)
    big = 0
    for marker in ("a", "b"):
        status, workflow, _ = stack.request(
            "POST", "/api/v1/workflows/submit/", {"name": "large", "yaml": big_version(marker)}
        )
        if status not in (200, 201):
            raise StackError(f"could not store a large workflow version: {status} {str(workflow)[:500]}")
        big = int(workflow["id"])
    return ids[-1], big


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def run_cell(
    stack: Stack, o: argparse.Namespace, readers: int, attackers: int, run_id: int, workflow_id: int
) -> list[dict[str, Any]]:
    """Run locust once; return its request records measured after the warm-up."""
    with tempfile.NamedTemporaryFile(prefix="cb-web-load-", suffix=".jsonl", delete=False) as handle:
        out = Path(handle.name)
    env = {
        **os.environ,
        "CB_LOAD_OUT": str(out),
        "CB_LOAD_RUN_ID": str(run_id),
        "CB_LOAD_WORKFLOW_ID": str(workflow_id),
        "CB_LOAD_TOKEN": stack.token,
        "CB_LOAD_CA_FILE": str(stack.ca_file),
        "CB_LOAD_THINK_S": str(o.think_s),
        "CB_LOAD_ATTACKERS": str(attackers),
    }
    users = readers + attackers
    argv = [
        str(BIN / "locust"), "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--loglevel", "ERROR",
        "--host", stack.url, "-u", str(users), "-r", str(users), "--run-time", f"{o.warmup + o.duration}s",
        "--stop-timeout", "5", "Reader", *(["Attacker"] if attackers else []),
    ]  # fmt: skip
    began = time.time()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=o.warmup + o.duration + 120
    )
    try:
        records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    finally:
        out.unlink(missing_ok=True)
    if not records:
        raise StackError(f"locust recorded no request (exit {done.returncode}): {done.stderr[-3000:]}")
    return [r for r in records if r["end"] - r["ms"] / 1000 >= began + o.warmup]


def rows_of(records: list[dict[str, Any]], readers: int, attackers: int, duration: float) -> list[list[str]]:
    """Return table rows: each page the readers read, all reads, and what the attackers got."""
    label = f"{readers} readers" + (
        f" + {attackers} attacker{'s' if attackers > 1 else ''}" if attackers else ""
    )
    rows = []

    def timing(picked: list[dict[str, Any]]) -> list[str]:
        ms = [r["ms"] for r in picked]
        return [f"{len(ms) / duration:.1f}", f"{percentile(ms, 0.5):.0f}", f"{percentile(ms, 0.99):.0f}"]

    for name in (*READS, "all reads"):
        picked = [r for r in records if (r["name"] == name if name != "all reads" else r["name"] in READS)]
        errors = sum(1 for r in picked if r["error"] or r["status"] != 200)
        rows.append([label, name, *timing(picked), str(errors), ""])
    for name in sorted({r["name"] for r in records} - set(READS)):
        picked = [r for r in records if r["name"] == name]
        statuses = Counter(r["status"] for r in picked)
        rows.append(
            [label, name, *timing(picked), "", " ".join(f"{s}x{n}" for s, n in sorted(statuses.items()))]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", default="50,200", help="comma-separated numbers of concurrent readers")
    parser.add_argument("--duration", type=int, default=20, help="seconds measured per cell")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of each cell not measured")
    parser.add_argument("--attackers", type=int, default=3, help="concurrent attackers (0: none)")
    parser.add_argument("--think-s", type=float, default=1.0, help="a reader's mean pause between pages")
    parser.add_argument("--runs", type=int, default=3, help="finished runs stored before the load")
    o = parser.parse_args(argv)
    readers = [int(n) for n in o.readers.split(",") if n.strip()]
    if not readers or not all(1 <= n <= 1000 for n in readers) or not 0 <= o.attackers <= 50:
        parser.error("--readers: numbers from 1 to 1000; --attackers: 0 to 50")
    if not (1 <= o.duration <= 600 and 0 <= o.warmup <= 60 and 0 < o.think_s <= 60 and 1 <= o.runs <= 20):
        parser.error("--duration 1-600 s, --warmup 0-60 s, --think-s (0, 60] s, --runs 1-20")
    load_before = os.getloadavg()[0]
    # Every attack request reaches the application: the write throttle would refuse most of them.
    with Stack(
        worker=True,
        sweeper=True,
        access_log=False,
        settings={"CB_THROTTLE_WRITES": "1000000/h", "CB_THROTTLE_PREVIEWS": "1000000/h"},
    ) as stack:
        run_id, workflow_id = populate(stack, o.runs)
        rows = [["cell", "requests", "req/s", "p50 ms", "p99 ms", "errors", "statuses"]]
        verdicts = []
        for n in readers:
            for attackers in (0, o.attackers) if o.attackers else (0,):
                records = run_cell(stack, o, n, attackers, run_id, workflow_id)
                cell = rows_of(records, n, attackers, o.duration)
                rows.extend(cell)
                reads = cell[len(READS)]
                verdicts.append((n, attackers, int(reads[5]), float(reads[4])))
    print(
        f"web load: nginx -> gunicorn (deploy/gunicorn.conf.py) -> PostgreSQL; {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before the stack started; {o.duration:g} s per cell after "
        f"{o.warmup:g} s of warm-up; readers pause {o.think_s:g} s on average between pages"
    )
    print(text_table(rows, align="<<>>>><"))
    top = max(readers)
    for n, attackers, errors, p99 in verdicts:
        if n == top and attackers == o.attackers:
            met = errors == 0 and p99 <= GOAL_P99_MS
            print(
                f"goal (0 reader errors, readers' p99 <= {GOAL_P99_MS:.0f} ms at {n} readers with "
                f"{attackers} attackers): {'met' if met else 'NOT met'} ({errors} errors, p99 {p99:.0f} ms)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
