"""Runs through the real stack: PostgreSQL, Redis and `consumerbench worker` processes (not eager).

Each worker is a separate process started the way an operator starts one, pointed at this test's
database (pytest-django's test database, with committed data: transactional tests) and at a
dedicated Redis database that is flushed before each test. The workers run with a 1 s heartbeat and
count a run as lost after 4 s, so the sweeper acts within seconds. (Faults on private servers:
test_faults.py.)
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.db import connection

from cbweb.platforms.models import Platform
from cbweb.platforms.selectors import platform_live
from cbweb.runs.execution import DEFAULT_QUEUE, SHUTDOWN_REASON, platform_queue, run_queue
from cbweb.runs.models import ApplicationResult, RequestResult, Run, TelemetryChunk
from tests.cbweb.conftest import celery_broker
from tests.conftest import REDIS_URL
from tests.waiting import wait_until
from workers.tasks import execute_run

pytestmark = [pytest.mark.postgres, pytest.mark.broker, pytest.mark.django_db(transaction=True)]

# The Redis database of CB_TEST_REDIS_URL is this suite's own (each concurrent test run names its
# own): flushed freely.
BROKER_URL = REDIS_URL
HEARTBEAT_S = 1
LOST_AFTER_S = 4
CONSUMERBENCH = str(Path(sys.executable).parent / "consumerbench")
ROOT = Path(__file__).resolve().parents[2]

SHORT = "nap:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 20\n"
SLOW = "slow:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 300\n"


@pytest.fixture(autouse=True)
def _on_postgres() -> None:
    # A worker is another process: it needs a database server, not the suite's in-memory SQLite.
    if connection.vendor != "postgresql":
        message = "run the web suite with DATABASE_URL=postgres://postgres@127.0.0.1:5432/test"
        if os.environ.get("CB_REQUIRE_SERVICES") == "1":
            pytest.fail(f"worker integration tests need PostgreSQL: {message}", pytrace=False)
        pytest.skip(message)


@pytest.fixture
def broker(settings: Any) -> Iterator[None]:
    """Send runs from this test process to Redis, as the web application does with a broker."""
    import redis

    redis.Redis.from_url(BROKER_URL).flushdb()
    settings.CB_RUN_EXECUTOR = "celery"
    with celery_broker(BROKER_URL):
        yield


def _database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Worker:
    def __init__(self, name: str, log: Path, process: subprocess.Popen[bytes]) -> None:
        self.name, self.log, self.process = name, log, process

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def start_worker(broker: None, tmp_path: Path) -> Iterator[Callable[[str], Worker]]:
    """Start `consumerbench worker` processes; each is stopped (with its children) after the test."""
    started: list[Worker] = []
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": BROKER_URL,
        "CB_HEARTBEAT_S": str(HEARTBEAT_S),
        "CB_WORKER_LOST_AFTER_S": str(LOST_AFTER_S),
        "CB_SWEEP_S": str(HEARTBEAT_S),
        "CB_RESULTS_DIR": str(tmp_path / "results"),
    }

    def start(name: str) -> Worker:
        log = tmp_path / f"{name}.log"
        # "sweeper" is `manage.py sweep_runs`, the deployment's sweeper; any other name a worker.
        argv = (
            [sys.executable, str(ROOT / "manage.py"), "sweep_runs"]
            if name == "sweeper"
            else [CONSUMERBENCH, "worker", "--name", f"{name}@%h"]
        )
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        worker = Worker(name, log, process)
        started.append(worker)
        wait_until(
            lambda: (
                any(s in worker.output() for s in (" ready.", "sweeping runs every"))
                or process.poll() is not None
            ),
            f"worker {name} did not start",
            timeout=90,
        )
        assert process.poll() is None, f"worker {name} exited:\n{worker.output()[-3000:]}"
        return worker

    yield start
    for worker in started:
        _stop(worker.process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGQUIT)  # Celery's cold shutdown: do not wait for a run
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    # The session holds what the worker started (application processes, the monitor).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _submit(api: Any, yaml_text: str) -> dict[str, Any]:
    created = api.post("/api/v1/workflows/", {"name": "worker-test", "yaml": yaml_text}, format="json")
    assert created.status_code == 201, created.content
    queued = api.post(
        "/api/v1/runs/", {"workflow": created.json()["id"], "scheduler": "greedy"}, format="json"
    )
    assert queued.status_code == 201, queued.content
    body: dict[str, Any] = queued.json()
    return body


def test_a_worker_registers_its_platform_pinned_and_listening_on_its_queues(
    start_worker: Callable[[str], Worker],
) -> None:
    worker = start_worker("pin")
    wait_until(lambda: platform_live().exists(), "the worker registered no live platform")
    platform = Platform.objects.get()
    assert platform.queue == platform_queue(platform.fingerprint_id)
    assert platform.info["cpu_threads"] >= 1 and "libraries" in platform.info
    # `consumerbench worker` replaced itself with Celery, the CPU worker hiding every GPU.
    process = psutil.Process(worker.pid)
    assert "celery" in " ".join(process.cmdline())
    assert process.environ()["CUDA_VISIBLE_DEVICES"] == ""
    assert process.environ()["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    queues = re.search(r"listens on (.+)", worker.output())
    assert queues is not None, worker.output()
    listened = queues.group(1).split(", ")
    assert {DEFAULT_QUEUE, platform.queue, f"{platform.queue}.cpu"} <= set(listened)
    # The heartbeat keeps it live.
    seen = platform.last_seen_at
    wait_until(
        lambda: Platform.objects.get().last_seen_at > seen, "no heartbeat after registration", timeout=10
    )


def test_a_run_submitted_through_the_api_goes_queued_running_succeeded_with_telemetry(
    start_worker: Callable[[str], Worker], api: Any
) -> None:
    worker = start_worker("api")
    submitted = _submit(api, SHORT)
    statuses = [submitted["status"]]

    def finished() -> bool:
        status = api.get(f"/api/v1/runs/{submitted['id']}/").json()["status"]
        if status != statuses[-1]:
            statuses.append(status)
        return status in ("succeeded", "failed", "cancelled")

    wait_until(finished, "the run did not finish", timeout=120)
    run = Run.objects.get(pk=submitted["id"])
    assert statuses == ["queued", "running", "succeeded"], run.error
    assert run.worker == f"api@{os.uname().nodename}:{worker.pid}"
    assert run.platform is not None and run.platform.queue
    assert RequestResult.objects.filter(application__run=run, status="ok").count() == 20
    assert TelemetryChunk.objects.filter(run=run, source="psutil").exists()
    summary = api.get(f"/api/v1/runs/{run.pk}/").json()["summary"]
    assert summary["makespan_s"] > 2.0


def test_cancel_through_the_api_stops_a_running_run_within_seconds_and_keeps_partial_data(
    start_worker: Callable[[str], Worker], api: Any
) -> None:
    start_worker("cancel")
    run_id = _submit(api, SLOW)["id"]
    wait_until(
        lambda: Run.objects.get(pk=run_id).progress["nodes"]["slow"]["done"] >= 3,
        "the run never got going",
        timeout=180,
    )
    asked = time.monotonic()
    assert api.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 200
    wait_until(lambda: Run.objects.get(pk=run_id).status != "running", "the run did not stop", timeout=30)
    assert time.monotonic() - asked < 10
    run = Run.objects.get(pk=run_id)
    assert run.status == "cancelled", run.error
    assert 3 <= RequestResult.objects.filter(application__run=run, status="ok").count() < 300


def test_a_worker_killed_mid_run_leaves_the_run_failed_by_the_sweeper_with_its_data(
    start_worker: Callable[[str], Worker], api: Any
) -> None:
    victim = start_worker("victim")
    run_id = _submit(api, SLOW)["id"]
    wait_until(
        lambda: (
            Run.objects.get(pk=run_id).progress["nodes"]["slow"]["done"] >= 3
            and TelemetryChunk.objects.filter(run_id=run_id).exists()
        ),
        "the run wrote no progress and telemetry",
        timeout=180,
    )
    engine = psutil.Process(victim.pid).children(recursive=True)
    assert engine, "the engine started no process"
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait()
    killed = time.monotonic()
    chunks = TelemetryChunk.objects.filter(run_id=run_id).count()

    # The sweeper, outside the workers, fails the run although no worker is left.
    start_worker("sweeper")
    wait_until(lambda: Run.objects.get(pk=run_id).status != "running", "the sweeper did not act", timeout=60)
    run = Run.objects.get(pk=run_id)
    assert run.status == "failed"
    assert run.error.startswith("worker lost: victim@"), run.error
    # Bounded: the loss is noticed within twice CB_WORKER_LOST_AFTER_S (the sweeper, just started,
    # first watches the database for that long) plus a sweep and a process start.
    assert time.monotonic() - killed < 2 * LOST_AFTER_S + HEARTBEAT_S + 30
    assert run.progress["nodes"]["slow"]["done"] >= 3
    # Its summary says it is partial, with what its progress counted.
    served = sum(n["done"] for n in run.progress["nodes"].values())
    assert (run.summary["partial"], run.summary["requests_served"]) == (True, served)
    assert run.summary["headline"] == f"partial: served {served} of {run.summary['requests_requested']}"
    assert TelemetryChunk.objects.filter(run_id=run_id).count() == chunks
    assert run.telemetry_overview, "the partial telemetry has no chart overview"
    # Without their runner the application processes and the monitor stop too.
    _, alive = psutil.wait_procs(engine, timeout=30)
    assert not alive, f"orphaned engine processes: {[p.pid for p in alive]}"


def test_a_worker_asked_to_stop_mid_run_stores_the_run_failed_with_its_partial_data_then_exits(
    start_worker: Callable[[str], Worker], api: Any
) -> None:
    worker = start_worker("stopping")
    run_id = _submit(api, SLOW)["id"]
    wait_until(
        lambda: Run.objects.get(pk=run_id).progress["nodes"]["slow"]["done"] >= 3,
        "the run never got going",
        timeout=180,
    )
    asked = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)  # what `docker compose stop` sends
    assert worker.process.wait(timeout=30) == 0, worker.output()[-3000:]
    assert time.monotonic() - asked < 15
    run = Run.objects.get(pk=run_id)
    assert run.status == "failed"
    assert run.error == SHUTDOWN_REASON
    assert 3 <= RequestResult.objects.filter(application__run=run, status="ok").count() < 300


def test_the_same_run_delivered_twice_is_executed_once(
    start_worker: Callable[[str], Worker], make_workflow: Any, make_run: Any, alice: Any
) -> None:
    first, second = start_worker("one"), start_worker("two")
    # run_launch sends the run once when its transaction commits; a second copy of the message
    # (a broker redelivery) goes out at once, so both idle workers may take one each.
    run = make_run(make_workflow(alice, yaml_text=SHORT), alice)
    execute_run.apply_async(args=[run.pk], queue=run_queue(run.pk))
    wait_until(lambda: Run.objects.get(pk=run.pk).is_finished, "the run did not finish", timeout=120)

    def returned(value: str) -> int:
        pattern = rf"Task workers\.execute_run\[[^\]]+\] succeeded in [0-9.e-]+s: '{value}'"
        return sum(len(re.findall(pattern, w.output())) for w in (first, second))

    wait_until(
        lambda: returned("succeeded") + returned("skipped") == 2,
        "two deliveries were not both handled",
        timeout=180,
    )
    assert (returned("succeeded"), returned("skipped")) == (1, 1)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    assert ApplicationResult.objects.filter(run=run).count() == 1
    assert RequestResult.objects.filter(application__run=run).count() == 20
