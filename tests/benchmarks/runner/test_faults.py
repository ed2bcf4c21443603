"""The runner's application processes do not outlive it, however it dies (kill -9 included)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

# A runner whose only application is inside one 60 s request: it sends nothing to the runner for a
# minute, so only the kernel (the parent-death signal) can stop it early.
RUNNER = textwrap.dedent(
    """
    from benchmarks.runner import run_workflow
    from benchmarks.spec.load import load_yaml

    workflow = load_yaml("long:\\n  type: Sleep\\n  sleep_time: 60\\n  num_requests: 1\\n")
    run_workflow(workflow, monitor_hz=None)
    """
)


def _applications(runner: psutil.Process) -> list[psutil.Process]:
    return [
        p
        for p in runner.children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_application_processes_die_within_seconds_when_their_runner_is_killed() -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        apps: list[psutil.Process] = []
        while not apps and time.monotonic() < deadline:
            time.sleep(0.2)
            apps = _applications(psutil.Process(runner.pid))
        assert apps, "the runner started no application process"
        time.sleep(1.0)  # the application is now inside its long request
        assert all(p.is_running() for p in apps)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        killed = time.monotonic()
        _gone, alive = psutil.wait_procs(apps, timeout=5)
        assert not alive, f"application processes outlived their runner: {[p.pid for p in alive]}"
        assert time.monotonic() - killed < 5
    finally:
        # Whatever is left of the session (nothing, if the test passes).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
