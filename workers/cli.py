"""``consumerbench worker [--gpu N]``: a Celery worker for one GPU (or the CPU), plugged into the CLI.

Registered through the ``consumerbench.commands`` entry-point group (pyproject.toml), so the engine's
CLI never imports this package. The command pins the GPU in the environment, then replaces itself
with ``celery -A workers worker`` (exec: signals such as SIGTERM reach Celery directly), which
listens on the machine's queues, registers its platform and heartbeats (workers/celery.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from benchmarks.cli import EXIT_USAGE

POOLS = ("solo", "threads")


def register(subparsers: Any) -> None:
    """Add the ``worker`` sub-command to the consumerbench CLI."""
    p = subparsers.add_parser(
        "worker",
        help="execute queued web runs: a Celery worker pinned to one GPU (or CPU-only without --gpu)",
        description="Start a Celery worker that executes one run at a time. Needs CELERY_BROKER_URL and "
        "DATABASE_URL (the same as the web application's).",
    )
    p.add_argument("--gpu", type=int, metavar="N", help="the NVIDIA GPU to use (nvidia-smi index); none: CPU")
    p.add_argument("--name", help="Celery node name (default cb-gpuN@host or cb-cpu@host)")
    p.add_argument(
        "--pool",
        choices=POOLS,
        default="solo",
        help="solo (default) runs the engine in the worker's main process; both let the engine "
        "start the applications' processes, which prefork's daemonic children may not",
    )
    p.add_argument("--loglevel", default="INFO")
    p.set_defaults(func=cmd_worker)


def visible_gpu_count() -> int:
    """Return how many NVIDIA GPUs NVML sees on this machine (0 without a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def worker_environment(gpu: int | None, base: Mapping[str, str]) -> dict[str, str]:
    """Return the worker's environment: the GPU pinned (or every GPU hidden for a CPU worker)."""
    env = dict(base)
    # CUDA numbers GPUs fastest first unless told otherwise; NVML and nvidia-smi use PCI order.
    # Asking CUDA for PCI order makes --gpu N the same GPU for CUDA, NVML and the fingerprint.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["CUDA_VISIBLE_DEVICES"] = "" if gpu is None else str(gpu)
    return env


def celery_argv(*, gpu: int | None, name: str | None, pool: str, loglevel: str) -> list[str]:
    """Return the command line of the Celery worker: one run at a time, the machine's queues."""
    node = name or (f"cb-gpu{gpu}@%h" if gpu is not None else "cb-cpu@%h")
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers",
        "worker",
        f"--pool={pool}",
        "--concurrency=1",
        "--prefetch-multiplier=1",
        f"--hostname={node}",
        f"--loglevel={loglevel}",
        # Liveness comes from our own heartbeat (Platform.last_seen_at); gossip and mingle would
        # only add broker traffic and a second of start-up.
        "--without-gossip",
        "--without-mingle",
    ]


def cmd_worker(args: argparse.Namespace) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")
    from django.conf import settings

    # The settings, not os.environ: a .env file next to the checkout counts too.
    if not settings.CELERY_BROKER_URL:
        print(
            "consumerbench worker: CELERY_BROKER_URL is not set (e.g. redis://127.0.0.1:6379/0); "
            "without a broker the web application executes runs itself",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.gpu is not None:
        count = visible_gpu_count()
        if not 0 <= args.gpu < count:
            have = f"GPUs 0-{count - 1}" if count else "no NVIDIA GPU (NVML found none)"
            print(f"consumerbench worker: --gpu {args.gpu}: this machine has {have}", file=sys.stderr)
            return EXIT_USAGE
    # Set before exec, so before any CUDA library of the worker loads: the pin cannot be missed.
    env = worker_environment(args.gpu, os.environ)
    argv = celery_argv(gpu=args.gpu, name=args.name, pool=args.pool, loglevel=args.loglevel)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
    return 0  # not reached: exec replaced this process
