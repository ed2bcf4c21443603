"""The Celery app's configuration and the queues a worker listens on."""

from __future__ import annotations

from workers.celery import DEFAULT_QUEUE, GPU_QUEUE, app, worker_queues


def test_the_app_sends_json_only_acknowledges_late_and_prefetches_one() -> None:
    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.task_acks_late is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.worker_pool == "solo" and conf.worker_concurrency == 1
    assert conf.task_default_queue == DEFAULT_QUEUE


def test_a_gpu_worker_listens_on_its_own_queue_its_platforms_and_the_shared_gpu_queue() -> None:
    info = {"id": "abc123", "gpus": [{"index": 1, "name": "NVIDIA H200"}]}
    assert worker_queues(info) == ["cb.abc123.gpu1", "cb.abc123", GPU_QUEUE, DEFAULT_QUEUE]


def test_a_cpu_worker_does_not_listen_on_the_gpu_queue() -> None:
    assert worker_queues({"id": "abc123", "gpus": []}) == ["cb.abc123.cpu", "cb.abc123", DEFAULT_QUEUE]


def test_a_run_message_is_redelivered_if_its_worker_is_lost_but_not_while_any_run_can_last() -> None:
    from django.conf import settings

    conf = app.conf
    assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is True
    longest_run = settings.CB_RUN_TIME_LIMIT_S + settings.CB_RUN_HARD_LIMIT_GRACE_S
    assert conf.broker_transport_options["visibility_timeout"] > longest_run
    assert conf.worker_cancel_long_running_tasks_on_connection_loss is False


def test_workers_reconnect_to_the_broker_forever_but_a_publish_gives_up_within_seconds() -> None:
    conf = app.conf
    assert conf.broker_connection_retry and conf.broker_connection_retry_on_startup
    assert conf.broker_connection_max_retries is None
    policy = conf.task_publish_retry_policy
    assert policy["max_retries"] * policy["interval_max"] + conf.broker_connection_timeout <= 5


def test_the_run_task_is_retried_with_backoff_when_the_database_is_down() -> None:
    from django.db import InterfaceError, OperationalError

    from workers.tasks import execute_run

    assert set(execute_run.autoretry_for) == {OperationalError, InterfaceError}
    assert execute_run.retry_backoff and execute_run.max_retries >= 10
