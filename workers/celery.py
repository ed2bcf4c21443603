"""The Celery app of ConsumerBench (``celery -A workers worker``) and its queues.

The one home of the Celery configuration: configured from cbweb.settings (every ``CELERY_*``
setting: JSON only, acks late, prefetch 1).
Queues, so that a run reaches a worker that can execute it:

- ``consumerbench``: runs launched for no platform in particular; every worker listens.
- ``consumerbench.gpu``: such runs whose workflow asks for ``device: gpu``; every GPU worker listens.
- ``cb.<platform id>``: runs launched for one platform (``Platform.queue``); every worker whose machine
  has that fingerprint listens (two identical GPUs, or two identical hosts, share the work).
- ``cb.<platform id>.gpu<N>`` (``.cpu``): the worker's own queue, named after its platform and GPU.

The queue names have one home, the run's queue choice (``cbweb.runs.execution``, which the web side
calls); which of them a worker listens on is decided here (``worker_queues``).
A worker works out its queues itself when it starts (``celeryd_after_setup``), so a bare
``celery -A workers worker`` listens where runs for its machine are sent, as ``consumerbench worker``
does; then it registers its platform and starts its heartbeat (workers/heartbeat.py). Asked to stop
(SIGTERM), it stops the run in progress and stores it with its partial data before exiting.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown, worker_shutting_down

from cbweb.runs.execution import DEFAULT_QUEUE, GPU_QUEUE, platform_queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")

log = logging.getLogger(__name__)

app = Celery("consumerbench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    include=["workers.tasks"],
    task_default_queue=DEFAULT_QUEUE,
    # One run at a time, executed in the worker's main process: the engine starts one process per
    # application, which prefork's daemonic children may not do. The solo pool cannot enforce
    # Celery's time limits, so cbweb/runs/limits.py enforces a soft and a hard limit per run instead.
    worker_pool="solo",
    worker_concurrency=1,
)


def worker_queues(fingerprint: dict[str, Any]) -> list[str]:
    """Return the queues a worker with this engine fingerprint listens on, its own queue first."""
    gpus = fingerprint.get("gpus") or []
    device = "gpu" + "-".join(str(g["index"]) for g in gpus) if gpus else "cpu"
    platform = platform_queue(str(fingerprint["id"]))
    shared = [GPU_QUEUE, DEFAULT_QUEUE] if gpus else [DEFAULT_QUEUE]
    return [f"{platform}.{device}", platform, *shared]


@celeryd_after_setup.connect
def _listen_on_machine_queues(sender: str, instance: Any, **kwargs: Any) -> None:
    from benchmarks.platform import fingerprint

    queues = instance.app.amqp.queues
    for name in worker_queues(fingerprint()):
        queues.select_add(name)
    log.info("worker %s listens on %s", sender, ", ".join(sorted(queues.consume_from)))


@worker_ready.connect
def _start_heartbeat(sender: Any, **kwargs: Any) -> None:
    from workers.heartbeat import WorkerHeartbeat

    WorkerHeartbeat.start()


@worker_shutting_down.connect
def _stop_the_run(sender: Any, **kwargs: Any) -> None:
    # Called in the signal handler: only set a flag; the run's cancel callable reads it.
    from cbweb.runs.execution import WORKER_SHUTDOWN

    WORKER_SHUTDOWN.set()


@worker_shutdown.connect
def _stop_heartbeat(sender: Any, **kwargs: Any) -> None:
    from workers.heartbeat import WorkerHeartbeat

    WorkerHeartbeat.stop()
