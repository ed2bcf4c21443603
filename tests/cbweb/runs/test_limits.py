"""Run time limits: sized from the workflow and the settings; the soft one stops the engine, the hard
one kills what the engine started."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from django.db import transaction

from benchmarks.spec.load import load_yaml
from cbweb.runs.execution import run_execute
from cbweb.runs.limits import HardLimit, run_time_limits
from cbweb.runs.models import RequestResult, Run
from cbweb.runs.services import run_claim

TWO_NODES = """\
a:
  type: Sleep
  num_requests: 10
  warmup_requests: 2
b:
  type: Sleep
  num_requests: 5
workflows:
  first: {uses: a}
  second: {uses: b, depend_on: [first]}
"""


def test_limits_grow_with_nodes_and_requests_and_are_capped(settings: Any) -> None:
    settings.CB_RUN_TIME_PER_NODE_S = 100.0
    settings.CB_RUN_TIME_PER_REQUEST_S = 10.0
    settings.CB_RUN_HARD_LIMIT_GRACE_S = 30.0
    settings.CB_RUN_TIME_LIMIT_S = 10_000.0
    limits = run_time_limits(load_yaml(TWO_NODES))
    assert limits.soft_s == 2 * 100 + (10 + 2 + 5) * 10
    assert limits.hard_s == limits.soft_s + 30
    settings.CB_RUN_TIME_LIMIT_S = 60.0
    assert run_time_limits(load_yaml(TWO_NODES)).soft_s == 60.0


def test_each_concurrent_session_counts_its_requests(settings: Any) -> None:
    settings.CB_RUN_TIME_PER_NODE_S = 100.0
    settings.CB_RUN_TIME_PER_REQUEST_S = 10.0
    settings.CB_RUN_TIME_LIMIT_S = 10_000.0
    sessions = load_yaml("a: {type: Sleep, num_requests: 4, warmup_requests: 1, concurrency: 3}\n")
    assert run_time_limits(sessions).soft_s == 100 + (4 + 1) * 3 * 10


def test_a_run_longer_than_its_soft_limit_is_stopped_by_the_engine_with_its_partial_data(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    # 300 requests of 0.1 s would take 30 s; the limit allows 2 s + 300 x 5 ms = 3.5 s.
    settings.CB_RUN_TIME_PER_NODE_S = 2.0
    settings.CB_RUN_TIME_PER_REQUEST_S = 0.005
    yaml_text = "slow:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 300\n"
    run = make_run(make_workflow(alice, yaml_text=yaml_text), alice)
    started = time.monotonic()
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    assert time.monotonic() - started < 20
    run.refresh_from_db()
    assert "time limit of 3.5 s exceeded" in run.error
    assert 0 < RequestResult.objects.filter(application__run=run, status="ok").count() < 300


def test_the_hard_limit_fails_the_run_and_kills_the_processes_started_under_it(
    alice: Any, make_workflow: Any, make_run: Any, transactional_db: Any
) -> None:
    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # Claimed in the transaction that queues it: the local executor, handed the run on commit,
    # finds it taken.
    with transaction.atomic():
        run = make_run(make_workflow(alice), alice)
        assert run_claim(run_id=run.pk, worker="test")
    try:
        with HardLimit(run.pk, 0.5) as limit:
            engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            assert engine.wait(timeout=20) < 0, "the process started under the limit was not killed"
        assert limit.fired.is_set()
        assert before.poll() is None, "a process started before the run was killed"
        run.refresh_from_db()
        assert run.status == Run.Status.FAILED
        assert run.error.startswith("hard time limit of 0.5 s exceeded")
    finally:
        before.kill()
        before.wait()


def test_a_block_that_ends_in_time_is_left_alone(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    with HardLimit(run.pk, 0.3) as limit:
        pass
    time.sleep(0.5)
    assert not limit.fired.is_set()
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
