"""The sampler in its own process: application attribution, stop, and the runner's handle."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from benchmarks import clock
from benchmarks.monitor.process import MonitorProcess

# A child "application" that holds 150 MB and starts a helper holding 100 MB, as a server would.
APP = """
import subprocess, sys, time
held = bytearray(150 * 2**20)
helper = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(100 * 2**20); time.sleep(60)"])
time.sleep(60)
"""


def test_rss_of_a_child_application_and_its_helper_is_attributed_to_the_application():
    app = subprocess.Popen([sys.executable, "-c", APP])
    monitor = MonitorProcess(20, ["psutil"])
    try:
        monitor.start(clock.now())
        monitor.watch("chat", app.pid)
        # Long enough for the helper to start and for a children refresh (once a second) to see it.
        deadline = time.monotonic() + 2.5
        messages = []
        while time.monotonic() < deadline:
            messages += monitor.poll()
            time.sleep(0.1)
        messages += monitor.stop()
    finally:
        for child in psutil.Process(app.pid).children(recursive=True):
            child.kill()
        app.kill()
        app.wait()
    kinds = [m["kind"] for m in messages]
    assert kinds[0] == "sources" and kinds[-1] == "stopped"
    columns = next(m["columns"] for m in messages if m["kind"] == "batch")
    rows = [r for m in messages if m["kind"] == "batch" for r in m["rows"] if r[1] == "app:chat"]
    rss = [r[columns.index("rss_bytes")] for r in rows]
    procs = [r[columns.index("processes")] for r in rows]
    assert rows, "no sample was attributed to the application"
    assert max(procs) == 2
    assert max(rss) >= 250 * 2**20


def test_stop_returns_the_last_batches_and_the_stats_of_the_sampler_process():
    monitor = MonitorProcess(50, ["psutil"])
    monitor.start(clock.now())
    time.sleep(1.0)
    messages = monitor.poll() + monitor.stop()
    stopped = messages[-1]
    assert stopped["kind"] == "stopped"
    assert stopped["stats"]["ticks"] >= 10
    assert [s["name"] for s in stopped["sources"]] == ["psutil"]
    assert monitor.exitcode == 0
    batch_rows = sum(len(m["rows"]) for m in messages if m["kind"] == "batch")
    assert batch_rows >= stopped["stats"]["ticks"]  # one system row per tick at least
    assert monitor.stop() == []  # stopping twice is harmless
