"""`consumerbench worker`: the environment and command line it hands to Celery, and its refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli import build_parser
from workers.cli import celery_argv, visible_gpu_count, worker_environment

CONSUMERBENCH = str(Path(sys.executable).parent / "consumerbench")


def test_worker_is_a_consumerbench_command_through_the_entry_point_group() -> None:
    args = build_parser().parse_args(["worker", "--gpu", "1"])
    assert args.gpu == 1 and args.pool == "solo"


def test_a_gpu_worker_sees_only_its_gpu_numbered_as_nvidia_smi_does() -> None:
    env = worker_environment(3, {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["PATH"] == "/bin"


def test_a_cpu_worker_hides_every_gpu() -> None:
    assert worker_environment(None, {"CUDA_VISIBLE_DEVICES": "0"})["CUDA_VISIBLE_DEVICES"] == ""


def test_the_celery_command_runs_one_run_at_a_time_in_a_pool_that_may_spawn_processes() -> None:
    argv = celery_argv(gpu=2, name=None, pool="solo", loglevel="INFO")
    assert argv[:6] == [sys.executable, "-m", "celery", "-A", "workers", "worker"]
    for option in ("--pool=solo", "--concurrency=1", "--prefetch-multiplier=1", "--hostname=cb-gpu2@%h"):
        assert option in argv
    assert "--hostname=cb-cpu@%h" in celery_argv(gpu=None, name=None, pool="threads", loglevel="INFO")


def test_the_pool_cannot_be_prefork() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", "--pool", "prefork"])


def _worker(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"} | env
    return subprocess.run(
        [CONSUMERBENCH, "worker", *args], capture_output=True, text=True, env=environment, timeout=120
    )


def test_without_a_broker_the_worker_refuses_to_start_and_says_why() -> None:
    done = _worker()
    assert done.returncode == 2
    assert "CELERY_BROKER_URL is not set" in done.stderr


def test_a_gpu_that_is_not_there_is_refused_with_what_the_machine_has() -> None:
    count = visible_gpu_count()
    done = _worker("--gpu", str(count), CELERY_BROKER_URL="redis://127.0.0.1:6379/14")
    assert done.returncode == 2
    have = f"GPUs 0-{count - 1}" if count else "no NVIDIA GPU"
    assert f"--gpu {count}: this machine has {have}" in done.stderr
