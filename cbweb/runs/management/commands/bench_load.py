"""``manage.py bench_load``: load a real deployment on loopback and check that no run is lost.

Starts, against this settings' PostgreSQL (``DATABASE_URL``) and Redis (``CELERY_BROKER_URL``),
what docker-compose runs: gunicorn with the project's settings, one ``consumerbench worker`` and the
sweeper, on a free loopback port. Then
1. reads: ``--clients`` concurrent clients each make ``--reads`` requests (run list, run detail, run
   page, workflow list, in turn); p50/p99 latency and the errors are reported;
2. submissions: ``--submissions`` concurrent ``POST /api/v1/runs/`` of a small Sleep workflow; each
   run must end (succeeded or failed with a reason) within ``--timeout`` s, and be executed once.
Prints a table; exits non-zero when a read failed, a submission was refused or a run was lost.
Only loopback traffic; bounded in requests and time. ``--url`` and ``--token`` load a server that is
already running instead (reads and submissions only).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.status import FINISHED, JobStatus

ROOT = Path(settings.BASE_DIR)
BIN = Path(sys.executable).parent
# The workflow each submission launches: two short requests, so 50 runs finish in minutes on one worker.
WORKFLOW = "tick:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 2\n"
ENDED = sorted(FINISHED)


class Client:
    """A tiny HTTP client of the API (urllib: one connection per request, as many scripts do)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/"), token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        """Return (status, decoded body or None, seconds)."""
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                data = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            data, status = exc.read(), exc.code
        except OSError:
            return 0, None, time.perf_counter() - started
        elapsed = time.perf_counter() - started
        try:
            decoded = json.loads(data) if data[:1] in (b"{", b"[") else None
        except ValueError:
            decoded = None
        return status, decoded, elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Command(BaseCommand):
    help = "Reads at N concurrent clients and M concurrent submissions against a real server; no run lost."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--clients", type=int, default=200, help="concurrent reading clients")
        parser.add_argument("--reads", type=int, default=10, help="requests per reading client")
        parser.add_argument("--submissions", type=int, default=50, help="concurrent run submissions")
        parser.add_argument(
            "--web-workers",
            type=int,
            default=2,
            help="gunicorn processes (compose's default; 8 threads each)",
        )
        parser.add_argument("--timeout", type=float, default=900, help="seconds for every run to end")
        parser.add_argument("--url", help="load this running server instead of starting one")
        parser.add_argument("--token", help="API token for --url")

    def handle(self, *args: Any, **o: Any) -> None:
        if not 1 <= o["clients"] <= 1000 or not 1 <= o["reads"] <= 1000 or not 0 <= o["submissions"] <= 500:
            raise CommandError("--clients and --reads must be 1-1000, --submissions 0-500")
        if o["url"]:
            if not o["token"]:
                raise CommandError("--url needs --token (manage.py create_api_token USER | tail -n1)")
            self.load(Client(o["url"], o["token"]), o, started=None)
            return
        if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
            raise CommandError("bench_load starts a deployment: set DATABASE_URL to PostgreSQL")
        if settings.CB_RUN_EXECUTOR != "celery":
            raise CommandError("bench_load starts a deployment: set CELERY_BROKER_URL to Redis")
        with self.deployment(o["web_workers"]) as (client, logs):
            self.load(client, o, started=logs)

    @contextmanager
    def deployment(self, web_workers: int) -> Iterator[tuple[Client, Path]]:
        folder = Path(tempfile.mkdtemp(prefix="cb-bench-load-"))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
        env.setdefault("CB_RESULTS_DIR", str(folder / "results"))
        # A fresh user each time: the token goes to this command only.
        user = f"bench-load-{secrets.token_hex(4)}"
        done = subprocess.run(
            [sys.executable, "manage.py", "create_api_token", user],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        token = done.stdout.strip().splitlines()[-1]
        port = _free_port()
        commands = {
            # docker-compose.yml's gunicorn settings (gthread), with this many processes.
            "web": [str(BIN / "gunicorn"), "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
                    "--bind", f"127.0.0.1:{port}", "--workers", str(web_workers), "cbweb.wsgi:application"],
            "sweeper": [sys.executable, "manage.py", "sweep_runs"],
            "worker": [str(BIN / "consumerbench"), "worker", "--name", f"{user}@%h"],
        }  # fmt: skip
        processes = []
        try:
            for name, argv in commands.items():
                with (folder / f"{name}.log").open("wb") as log:
                    processes.append(
                        subprocess.Popen(
                            argv,
                            cwd=ROOT,
                            env=env,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    )
            client = Client(f"http://127.0.0.1:{port}", token)
            deadline = time.monotonic() + 120
            while client.call("GET", "/api/v1/runs/?limit=1")[0] != 200 or " ready." not in (
                folder / "worker.log"
            ).read_text(errors="replace"):
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise CommandError(f"the deployment did not start; logs in {folder}")
                time.sleep(0.5)
            try:
                yield client, folder
            except CommandError as exc:
                raise CommandError(f"{exc} (logs of web, worker and sweeper in {folder})") from exc
            shutil.rmtree(folder, ignore_errors=True)  # held: the logs are not needed
        finally:
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def load(self, client: Client, o: dict[str, Any], started: Path | None) -> None:
        status, workflow, _ = client.call(
            "POST", "/api/v1/workflows/", {"name": f"bench-load-{secrets.token_hex(3)}", "yaml": WORKFLOW}
        )
        if status != 201:
            raise CommandError(f"could not create the workflow: {status} {workflow}")
        status, seed, _ = client.call("POST", "/api/v1/runs/", {"workflow": workflow["id"]})
        if status != 201:
            raise CommandError(f"could not submit a run: {status} {seed}")
        paths = ["/api/v1/runs/", f"/api/v1/runs/{seed['id']}/", f"/runs/{seed['id']}/", "/api/v1/workflows/"]

        # 1. Reads: every client starts at once (a barrier), then reads in turn.
        latencies: list[float] = []
        by_path: dict[str, list[float]] = {p: [] for p in paths}
        errors: list[int] = []
        lock = threading.Lock()
        barrier = threading.Barrier(o["clients"])

        def reader(k: int) -> None:
            barrier.wait()
            for i in range(o["reads"]):
                path = paths[(k + i) % len(paths)]
                code, _, seconds = client.call("GET", path)
                with lock:
                    latencies.append(seconds)
                    by_path[path].append(seconds)
                    if code != 200:
                        errors.append(code)

        began = time.perf_counter()
        with ThreadPoolExecutor(o["clients"]) as pool:
            list(pool.map(reader, range(o["clients"])))
        read_wall = time.perf_counter() - began

        # 2. Submissions, all at once; then every run must end, each executed once.
        submitted: list[int] = []
        refused: list[str] = []
        submit_latencies: list[float] = []
        gate = threading.Barrier(max(1, o["submissions"]))

        def submit(_: int) -> None:
            gate.wait()
            code, body, seconds = client.call("POST", "/api/v1/runs/", {"workflow": workflow["id"]})
            with lock:
                submit_latencies.append(seconds)
                if code == 201:
                    submitted.append(int(body["id"]))
                else:
                    refused.append(f"{code} {body}")

        if o["submissions"]:
            with ThreadPoolExecutor(o["submissions"]) as pool:
                list(pool.map(submit, range(o["submissions"])))
        run_ids = [int(seed["id"]), *submitted]
        ended: dict[int, dict[str, Any]] = {}
        began_runs = time.monotonic()
        while len(ended) < len(run_ids) and time.monotonic() - began_runs < o["timeout"]:
            for run_id in run_ids:
                if run_id not in ended:
                    _, run, _ = client.call("GET", f"/api/v1/runs/{run_id}/")
                    if isinstance(run, dict) and run.get("status") in ENDED:
                        ended[run_id] = run
            time.sleep(1)
        runs_wall = time.monotonic() - began_runs
        lost = [i for i in run_ids if i not in ended]
        unexplained = [
            i for i, r in ended.items() if r["status"] != JobStatus.SUCCEEDED and not r.get("error")
        ]
        claims = self.claims(started, run_ids) if started is not None else None
        twice = [i for i, n in (claims or {}).items() if n != 1]

        ms = [1000 * s for s in latencies]
        sub_ms = [1000 * s for s in submit_latencies] or [0.0]
        self.stdout.write(
            f"loopback load: {o['clients']} concurrent clients x {o['reads']} reads, "
            f"{o['submissions']} concurrent submissions; {client.url}; {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        rows = [
            ("reads (run list, run detail, run page, workflow list)", len(ms), _percentile(ms, 0.5),
             _percentile(ms, 0.99), max(ms), len(errors), f"{len(ms) / read_wall:.0f} req/s"),
            ("submissions (POST /api/v1/runs/)", len(sub_ms), _percentile(sub_ms, 0.5),
             _percentile(sub_ms, 0.99), max(sub_ms), len(refused), f"{len(submitted)} accepted"),
        ]  # fmt: skip
        self.stdout.write(
            f"{'what':<56} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>6}  rate"
        )
        for path, values in by_path.items():
            path_ms = [1000 * s for s in values]
            rows.append(
                (f"  GET {path}", len(path_ms), _percentile(path_ms, 0.5), _percentile(path_ms, 0.99),
                 max(path_ms), 0, ""),
            )  # fmt: skip
        for what, n, p50, p99, top, bad, rate in rows:
            self.stdout.write(f"{what:<56} {n:>5} {p50:>8.0f} {p99:>8.0f} {top:>8.0f} {bad:>6}  {rate}")
        counts = {s: sum(1 for r in ended.values() if r["status"] == s) for s in ENDED}
        self.stdout.write(
            f"runs: {len(run_ids)} submitted, {len(ended)} ended in {runs_wall:.0f} s "
            f"({', '.join(f'{n} {s}' for s, n in counts.items() if n)}), {len(lost)} lost, "
            f"{len(unexplained)} failed without a reason, "
            + (
                f"{len(twice)} executed other than once"
                if claims is not None
                else "claims not checked (--url)"
            )
        )
        problems = errors or refused or lost or unexplained or twice
        if problems:
            raise CommandError(
                f"load not held: {len(errors)} read errors {sorted(set(errors))[:5]}, {len(refused)} refused "
                f"submissions {refused[:3]}, lost runs {lost[:10]}, unexplained failures {unexplained[:10]}, "
                f"runs executed other than once {twice[:10]}"
            )

    @staticmethod
    def claims(folder: Path, run_ids: list[int]) -> dict[int, int]:
        """How many times the worker claimed each run (it logs every claim)."""
        text = (folder / "worker.log").read_text(errors="replace")
        return {i: text.count(f"run {i}: claimed by ") for i in run_ids}
