"""The sweeper: queued runs with no message are sent (again), runs whose worker was lost are failed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from cbweb.runs.models import Run
from cbweb.runs.services import run_claim, run_mark_dispatched, run_take_for_dispatch
from cbweb.runs.sweeper import RunSweeper

ROOT = Path(__file__).resolve().parents[3]


class Sent:
    """Records what the sweeper hands over; fails while ``down`` (a broker that refuses)."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.down = False
        self.attempts = 0

    def __call__(self, run_id: int) -> None:
        self.attempts += 1
        if self.down:
            raise ConnectionRefusedError("broker down")
        self.ids.append(run_id)


def _age(run: Run, **fields: float) -> None:
    Run.objects.filter(pk=run.pk).update(
        **{name: timezone.now() - timedelta(seconds=s) for name, s in fields.items()}
    )


def test_a_queued_run_never_sent_is_sent_at_the_next_sweep_and_then_not_again_within_the_interval(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_REDISPATCH_AFTER_S = 120.0
    run = make_run(make_workflow(alice), alice)
    assert Run.objects.get(pk=run.pk).dispatched_at is None
    sent = Sent()
    sweeper = RunSweeper(sent)
    assert sweeper.sweep().sent == [run.pk]
    assert Run.objects.get(pk=run.pk).dispatched_at is not None
    assert sweeper.sweep().sent == []
    assert sent.ids == [run.pk]


def test_a_queued_run_sent_longer_ago_than_the_interval_is_sent_again(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_REDISPATCH_AFTER_S = 120.0
    old, recent = make_run(make_workflow(alice), alice), make_run(make_workflow(alice, name="b"), alice)
    _age(old, dispatched_at=121)
    _age(recent, dispatched_at=60)
    sent = Sent()
    assert RunSweeper(sent).sweep().sent == [old.pk]


def test_each_resend_of_a_run_doubles_the_wait_up_to_sixteen_intervals(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    assert run_take_for_dispatch(resend_after_s=100) == [run.pk]  # first hand-over
    for sends, wait in ((1, 100), (2, 200), (3, 400), (4, 800), (5, 1600), (6, 1600), (9, 1600)):
        Run.objects.filter(pk=run.pk).update(dispatches=sends)
        _age(run, dispatched_at=wait - 5)
        assert run_take_for_dispatch(resend_after_s=100) == [], (sends, wait)
        _age(run, dispatched_at=wait + 5)
        assert run_take_for_dispatch(resend_after_s=100) == [run.pk], (sends, wait)
        assert Run.objects.get(pk=run.pk).dispatches == sends + 1


def test_a_refused_hand_over_is_not_counted_as_a_send(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    sent = Sent()
    sent.down = True
    RunSweeper(sent).sweep()
    assert Run.objects.filter(pk=run.pk).values_list("dispatched_at", "dispatches").get() == (None, 0)


def test_running_finished_and_cancelled_runs_are_never_sent(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    running, done = make_run(make_workflow(alice), alice), make_run(make_workflow(alice, name="d"), alice)
    assert run_claim(run_id=running.pk, worker="w")
    Run.objects.filter(pk=done.pk).update(status=Run.Status.SUCCEEDED)
    cancelled = make_run(make_workflow(alice, name="c"), alice)
    Run.objects.filter(pk=cancelled.pk).update(cancel_requested=True)
    assert run_take_for_dispatch(resend_after_s=0) == []


def test_two_sweepers_at_once_send_a_run_once(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    assert run_take_for_dispatch(resend_after_s=60) == [run.pk]
    assert run_take_for_dispatch(resend_after_s=60) == []


def test_with_the_broker_down_the_runs_stay_queued_unsent_and_the_next_sweep_sends_them(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    runs = [make_run(make_workflow(alice, name=f"w{i}"), alice) for i in range(3)]
    ids = [r.pk for r in runs]
    sent = Sent()
    sweeper = RunSweeper(sent)
    sent.down = True
    sweep = sweeper.sweep()
    assert (sweep.sent, sweep.not_sent) == ([], ids)
    assert sent.attempts == 1  # the first refusal stands for the others: no wait per run
    assert list(Run.objects.filter(pk__in=ids).values_list("dispatched_at", flat=True)) == [None] * 3
    sent.down = False
    assert sweeper.sweep().sent == ids


def test_marking_a_run_dispatched_holds_off_the_sweeper(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_mark_dispatched(run_id=run.pk)
    assert run_take_for_dispatch(resend_after_s=60) == []


def test_a_run_whose_heartbeat_stopped_is_failed_once_the_sweeper_has_seen_the_database_long_enough(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_WORKER_LOST_AFTER_S = 60.0
    run = make_run(make_workflow(alice), alice)
    assert run_claim(run_id=run.pk, worker="w1@host:42")
    _age(run, heartbeat_at=61)
    sweeper = RunSweeper(Sent())
    # Just started (or just back from a database outage): heartbeats may be old because the
    # workers' writes failed, not because the workers died. Nothing is failed yet.
    first = sweeper.sweep()
    assert not first.reaping and first.reaped == []
    assert Run.objects.get(pk=run.pk).status == "running"
    assert sweeper.connected_since is not None
    sweeper.connected_since = time.monotonic() - 60
    assert sweeper.sweep().reaped == [run.pk]
    failed = Run.objects.get(pk=run.pk)
    assert failed.status == "failed"
    assert failed.error.startswith("worker lost: w1@host:42 sent no heartbeat for more than 60 s")


def test_sweep_runs_once_reports_what_it_did(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any, capsys: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "celery"
    settings.CB_WORKER_LOST_AFTER_S = 60.0
    run = make_run(make_workflow(alice), alice)
    assert run_claim(run_id=run.pk, worker="w")
    _age(run, heartbeat_at=3600)
    call_command("sweep_runs", "--once")
    assert "failed 1 run(s) whose worker was lost" in capsys.readouterr().out
    assert Run.objects.get(pk=run.pk).status == "failed"


def test_sweep_runs_refuses_without_a_broker_and_says_who_sweeps(db: Any, settings: Any) -> None:
    settings.CB_RUN_EXECUTOR = "local"
    with pytest.raises(CommandError, match="the web process executes and sweeps runs itself"):
        call_command("sweep_runs", "--once")


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"CB_SWEEP_S": "0"}, "CB_SWEEP_S=0 must be positive"),
        ({"CB_SWEEP_S": "30", "CB_REDISPATCH_AFTER_S": "20"}, "at least as long"),
        ({"CB_SWEEP_S": "55"}, "must be at most CB_WORKER_LOST_AFTER_S - CB_HEARTBEAT_S (50)"),
    ],
)
def test_sweeper_intervals_that_could_lose_or_wrongly_fail_runs_are_refused_at_start(
    variables: dict[str, str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import cbweb.settings"],
        env={**os.environ, **variables, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and message in done.stderr
