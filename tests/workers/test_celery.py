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
