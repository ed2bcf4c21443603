"""Runs are never lost: faults injected into a real deployment on private PostgreSQL and Redis servers.

The module starts its own PostgreSQL cluster (initdb) and redis-server on free ports, so that it can
stop, kill and restart them without touching the shared services; then a gunicorn web server, the
sweeper (`manage.py sweep_runs`) and `consumerbench worker` processes against them, with short
intervals (heartbeat 1 s, worker lost after 4 s, sweep every 1 s, re-send after 3 s). Runs are
submitted through the HTTP API and followed through it; "executed once" is read from the workers'
logs (each claim is logged) and from the stored results.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from benchmarks.perf.stack import Postgres as StackPostgres
from benchmarks.perf.stack import Redis
from benchmarks.perf.stack import free_port as _free_port
from benchmarks.perf.stack import stop_process as _stop
from tests.waiting import wait_until

pytestmark = [pytest.mark.faults]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HEARTBEAT_S, LOST_AFTER_S, SWEEP_S, REDISPATCH_AFTER_S = 1, 4, 1, 3
# A run's end is seen within: the lost-after interval, a sweep, and a little slack on 2 busy cores.
REPAIR_S = LOST_AFTER_S + SWEEP_S + 10

SHORT = "nap:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 10\n"
LONG = "long:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 200\n"
# One request of 60 s: the application sends nothing to its runner for a minute.
SILENT = "silent:\n  type: Sleep\n  sleep_time: 60\n  num_requests: 1\n"


class Postgres(StackPostgres):
    """The private cluster of benchmarks/perf/stack.py, with a query for the checks."""

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url.replace("postgres://", "postgresql://"), connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchall()


class Stack:
    """The deployment under test: web, sweeper and workers on the private database and broker."""

    def __init__(self, folder: Path, postgres: Postgres, redis: Redis) -> None:
        self.folder, self.postgres, self.redis = folder, postgres, redis
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "cbweb.settings",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DATABASE_URL": postgres.url,
            "CELERY_BROKER_URL": redis.url,
            "CB_RESULTS_DIR": str(folder / "results"),
            "CB_HEARTBEAT_S": str(HEARTBEAT_S),
            "CB_WORKER_LOST_AFTER_S": str(LOST_AFTER_S),
            "CB_SWEEP_S": str(SWEEP_S),
            "CB_REDISPATCH_AFTER_S": str(REDISPATCH_AFTER_S),
            "CB_DB_RETRY_S": "120",
        }
        self.web_port = _free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        self.token = ""

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def spawn(self, name: str, argv: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.folder / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                argv, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes.append(process)
        return process, log

    def start(self) -> None:
        self.manage("migrate", "--noinput")
        self.token = self.manage("create_api_token", "tester").strip().splitlines()[-1]
        web, _ = self.spawn(
            "web",
            [str(BIN / "gunicorn"), "cbweb.wsgi:application", "--bind", f"127.0.0.1:{self.web_port}",
             "--workers", "2", "--timeout", "60"],
        )  # fmt: skip
        self.spawn("sweeper", [sys.executable, "manage.py", "sweep_runs"])
        wait_until(lambda: self.get("/api/v1/runs/", raw=True) or web.poll() is not None, "no web server")
        assert web.poll() is None, (self.folder / "web.log").read_text()[-3000:]

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        process, log = self.spawn(name, [str(BIN / "consumerbench"), "worker", "--name", f"{name}@%h"])
        self.workers[name] = (process, log)
        wait_until(
            lambda: " ready." in log.read_text(errors="replace") or process.poll() is not None,
            f"worker {name} did not start",
            timeout=90,
        )
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        return process

    def stop_workers(self) -> None:
        for process, _ in self.workers.values():
            _stop(process, signal.SIGQUIT)
        self.workers.clear()

    def stop(self) -> None:
        self.stop_workers()
        for process in self.processes:
            _stop(process)

    # -- the HTTP API, as a client sees it ----------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.web_port}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def get(self, path: str, raw: bool = False) -> Any:
        with contextlib.suppress(OSError):
            status, body = self.request("GET", path)
            return status == 200 if raw else body
        return False if raw else None

    def submit(self, yaml_text: str, name: str = "faults") -> int:
        # By name, as CI submits: the tests of one deployment reuse a name.
        status, workflow = self.request(
            "POST", "/api/v1/workflows/submit/", {"name": name, "yaml": yaml_text}
        )
        assert status in (200, 201), workflow
        status, run = self.request(
            "POST", "/api/v1/runs/", {"workflow": workflow["id"], "scheduler": "greedy"}
        )
        assert status == 201, run
        return int(run["id"])

    def run(self, run_id: int) -> dict[str, Any]:
        body = self.get(f"/api/v1/runs/{run_id}/")
        return body if isinstance(body, dict) else {}

    def status(self, run_id: int) -> str:
        return str(self.run(run_id).get("status", "?"))

    def wait_ended(self, run_ids: list[int], timeout: float) -> dict[int, dict[str, Any]]:
        ended: dict[int, dict[str, Any]] = {}

        def all_ended() -> bool:
            for run_id in run_ids:
                if run_id not in ended:
                    run = self.run(run_id)
                    if run.get("status") in ("succeeded", "failed", "cancelled"):
                        ended[run_id] = run
            return len(ended) == len(run_ids)

        wait_until(
            all_ended,
            f"runs still not ended: {[(i, self.status(i)) for i in run_ids if i not in ended]}",
            timeout,
        )
        return ended

    def claims(self, run_id: int) -> int:
        """How many times any worker claimed the run (each claim is logged)."""
        pattern = re.compile(rf"run {run_id}: claimed by ")
        return sum(len(pattern.findall(log.read_text(errors="replace"))) for _, log in self.workers_seen())

    def workers_seen(self) -> list[tuple[str, Path]]:
        return [(p.stem, p) for p in self.folder.glob("w-*.log")]

    def stored_requests(self, run_id: int) -> int:
        [(count,)] = self.postgres.query(
            "SELECT count(*) FROM runs_requestresult r JOIN runs_applicationresult a "
            "ON r.application_id = a.id WHERE a.run_id = %s",
            run_id,
        )
        return int(count)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    folder = Path(tempfile.mkdtemp(prefix="cb-faults-"))
    os.chmod(folder, 0o755)
    postgres, redis = Postgres(folder / "pg"), Redis(folder)
    deployment = Stack(folder, postgres, redis)
    try:
        postgres.init()
        redis.start()
        deployment.start()
        yield deployment
    finally:
        deployment.stop()
        redis.kill()
        postgres.stop("fast")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def deployment(stack: Stack) -> Iterator[Stack]:
    """The stack with every service up and no worker; workers started by the test are stopped after it."""
    if not stack.redis.up():
        stack.redis.start()
    with contextlib.suppress(Exception):
        stack.postgres.start()
    yield stack
    stack.stop_workers()


def _report(line: str) -> None:
    """A measured figure for docs/results/reliability.md (shown by pytest -rP)."""
    print(f"[fault] {line}")


def _applications(worker: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process(worker.pid).children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())
    ]


def test_a_worker_killed_mid_run_while_alone_has_its_run_failed_by_the_sweeper_and_its_apps_gone(
    deployment: Stack,
) -> None:
    victim = deployment.start_worker("w-victim")
    run_id = deployment.submit(SILENT)
    wait_until(lambda: deployment.status(run_id) == "running", "the run did not start")
    apps = wait_until(lambda: _applications(victim), "the engine started no application process")
    time.sleep(1.0)  # inside its 60 s request: it writes nothing to its runner until then

    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed = time.monotonic()
    # The kernel kills the application processes with their runner (parent-death signal).
    _, alive = psutil.wait_procs(apps, timeout=5)
    assert not alive, f"application processes outlived their worker: {[p.pid for p in alive]}"
    apps_gone_s = time.monotonic() - killed

    # No other worker lives: the sweeper alone fails the run, within its interval.
    [run] = deployment.wait_ended([run_id], timeout=REPAIR_S).values()
    assert time.monotonic() - killed < REPAIR_S
    assert run["status"] == "failed"
    assert run["error"].startswith("worker lost: w-victim@"), run["error"]
    _report(f"kill -9: application processes gone after {apps_gone_s:.1f} s, run failed after "
            f"{time.monotonic() - killed:.1f} s: {run['error'][:60]}...")  # fmt: skip

    # A worker started afterwards, even handed the run's message again, does not run it twice.
    deployment.start_worker("w-after")
    _send_duplicate(deployment, run_id)
    wait_until(
        lambda: "skipped" in (deployment.folder / "w-after.log").read_text(), "the duplicate was not handled"
    )
    assert deployment.status(run_id) == "failed"
    assert deployment.claims(run_id) == 1


def _send_duplicate(deployment: Stack, run_id: int) -> None:
    """Send the run's message once more, as a broker redelivery would."""
    from tests.cbweb.conftest import celery_broker
    from workers.celery import DEFAULT_QUEUE, app

    with celery_broker(deployment.redis.url):
        app.send_task("workers.execute_run", args=[run_id], queue=DEFAULT_QUEUE)


def test_redis_restarted_with_runs_queued_and_one_running_every_run_ends_and_none_runs_twice(
    deployment: Stack,
) -> None:
    deployment.start_worker("w-redis")
    running = deployment.submit(LONG)
    wait_until(lambda: deployment.status(running) == "running", "the first run did not start")
    queued = [deployment.submit(SHORT, name=f"queued-{i}") for i in range(3)]
    assert all(deployment.status(q) == "queued" for q in queued)

    # A crash of Redis with no persistence: every queued message is gone.
    deployment.redis.kill()
    time.sleep(2)
    deployment.redis.start()
    restarted = time.monotonic()

    ended = deployment.wait_ended([running, *queued], timeout=120)
    _report(f"Redis restart: 1 running + {len(queued)} queued runs all succeeded "
            f"{time.monotonic() - restarted:.1f} s after the restart")  # fmt: skip
    assert {i: r["status"] for i, r in ended.items()} == dict.fromkeys([running, *queued], "succeeded")
    assert deployment.stored_requests(running) == 200
    assert all(deployment.stored_requests(q) == 10 for q in queued)
    assert all(deployment.claims(i) == 1 for i in [running, *queued])


def test_postgres_down_with_a_run_running_and_runs_queued_loses_nothing_and_fails_nothing(
    deployment: Stack,
) -> None:
    deployment.start_worker("w-pg-1")
    running = deployment.submit(LONG)
    wait_until(
        lambda: (
            (deployment.run(running).get("progress") or {}).get("nodes", {}).get("long", {}).get("done", 0)
            >= 5
        ),
        "the first run did not get going",
    )
    queued = [deployment.submit(SHORT, name=f"pg-queued-{i}") for i in range(2)]

    deployment.postgres.stop("immediate")
    down = time.monotonic()
    # A second worker starts during the outage and takes the queued runs' messages: its claims fail
    # with the database down, and the tasks are retried instead of being acknowledged as done.
    deployment.start_worker("w-pg-2")
    time.sleep(max(0.0, 5 - (time.monotonic() - down)) + 2)
    deployment.postgres.start()
    outage = time.monotonic() - down
    assert outage > LOST_AFTER_S  # longer than the lost-after interval, and yet no run is failed

    ended = deployment.wait_ended([running, *queued], timeout=120)
    _report(f"PostgreSQL down {outage:.1f} s: 1 running + {len(queued)} queued runs all ended "
            f"{time.monotonic() - down - outage:.1f} s after it was back")  # fmt: skip
    assert {i: (r["status"], r["error"]) for i, r in ended.items()} == dict.fromkeys(
        [running, *queued], ("succeeded", "")
    )
    assert deployment.stored_requests(running) == 200
    assert all(deployment.stored_requests(q) == 10 for q in queued)
    assert all(deployment.claims(i) == 1 for i in [running, *queued])
    # The faults did happen where they were aimed: the running run buffered through the outage, and
    # a claim met the database down and was retried.
    logs = {name: path.read_text(errors="replace") for name, path in deployment.workers_seen()}
    assert f"run {running}: database unavailable" in logs["w-pg-1"]
    assert re.search(
        r"Task workers\.execute_run\[[^\]]+\] retry: Retry in \d+s: OperationalError", logs["w-pg-2"]
    )


def test_a_run_submitted_while_the_broker_is_down_is_kept_and_runs_once_the_broker_is_back(
    deployment: Stack,
) -> None:
    deployment.start_worker("w-late")
    deployment.redis.kill()
    asked = time.monotonic()
    run_id = deployment.submit(SHORT, name="while-down")
    submit_s = time.monotonic() - asked
    assert submit_s < 10, "the submit waited for the broker"
    assert deployment.status(run_id) == "queued"
    web_log = (deployment.folder / "web.log").read_text(errors="replace")
    assert f"run {run_id}: the broker did not take it" in web_log

    deployment.redis.start()
    back = time.monotonic()
    [run] = deployment.wait_ended([run_id], timeout=60).values()
    assert run["status"] == "succeeded", run["error"]
    _report(f"broker down at submit: workflow + run submitted in {submit_s:.1f} s (201, queued); run "
            f"succeeded {time.monotonic() - back:.1f} s after the broker was back")  # fmt: skip
    assert deployment.claims(run_id) == 1
