"""``manage.py sweep_runs [--once]``: the run sweeper of a deployment with a broker (docs/operations.md).

Sends queued runs that have no message on the broker and fails running runs whose worker was lost,
every ``CB_SWEEP_S``, until stopped (docker-compose's ``sweeper`` service); ``--once`` sweeps once
(for cron). Without a broker the web process sweeps itself, and this command says so.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cbweb.runs.dispatch import run_dispatch
from cbweb.runs.sweeper import RunSweeper


class Command(BaseCommand):
    help = "Re-send queued runs that have no broker message and fail runs whose worker was lost."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="sweep once and exit (for cron)")

    def handle(self, *args: Any, once: bool, **options: Any) -> None:
        if settings.CB_RUN_EXECUTOR != "celery":
            raise CommandError(
                "CB_RUN_EXECUTOR is 'local' (no CELERY_BROKER_URL): the web process executes and "
                "sweeps runs itself; the sweeper is for deployments with a broker"
            )
        sweeper = RunSweeper(run_dispatch)
        if once:
            # A single sweep has no history of the database being up: count it as up for the whole
            # lost-after interval, which is what cron's interval vouches for.
            sweeper.connected_since = float("-inf")
            done = sweeper.sweep()
            self.stdout.write(
                f"sent {len(done.sent)} queued run(s), {len(done.not_sent)} not sent (broker down), "
                f"failed {len(done.reaped)} run(s) whose worker was lost"
            )
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        self.stdout.write(
            f"sweeping runs every {settings.CB_SWEEP_S:g} s (re-send after "
            f"{settings.CB_REDISPATCH_AFTER_S:g} s, worker lost after {settings.CB_WORKER_LOST_AFTER_S:g} s)"
        )
        self.stdout.flush()
        sweeper.forever(stop)
