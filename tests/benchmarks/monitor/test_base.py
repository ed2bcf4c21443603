"""The table of watched application processes: the /proc parent scan and the refresh schedule."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from benchmarks.monitor.base import (
    CHILDREN_EARLY_S,
    CHILDREN_LATE_S,
    CHILDREN_REFRESH_S,
    AppProcesses,
    app_entity,
    core_entity,
    is_core_entity,
    parent_pids,
)

# A child that renames itself with the characters that break a naive parse of /proc/<pid>/stat.
RENAMED = "open('/proc/self/comm', 'w').write('a) b (c'); import time; time.sleep(60)"


@pytest.fixture
def children():
    started: list[subprocess.Popen[bytes]] = []

    def spawn(code: str = "import time; time.sleep(60)") -> int:
        started.append(subprocess.Popen([sys.executable, "-c", code]))
        return started[-1].pid

    yield spawn
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/comm is Linux")
def test_parent_pids_reads_the_parent_of_a_process_whose_name_holds_parentheses_and_spaces(children):
    pid = children(RENAMED)
    deadline = time.monotonic() + 5
    while psutil.Process(pid).name() != "a) b (c" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert psutil.Process(pid).name() == "a) b (c"
    parents = parent_pids()
    assert parents[pid] == os.getpid()
    assert parents[os.getpid()] == os.getppid()


def test_children_are_looked_up_every_second_at_first_then_every_five_seconds(children):
    apps = AppProcesses()
    apps.watch("me", os.getpid())
    apps.refresh(0.0)
    assert [n for n, _ in apps.processes()] == ["me"]
    first = children()
    apps.refresh(CHILDREN_REFRESH_S / 2)
    assert apps.node_of(first) is None  # not due yet
    apps.refresh(CHILDREN_REFRESH_S)
    assert apps.node_of(first) == "me"
    late = CHILDREN_EARLY_S + 1
    apps.refresh(late)
    second = children()
    apps.refresh(late + CHILDREN_REFRESH_S)
    assert apps.node_of(second) is None  # past the start-up: every CHILDREN_LATE_S
    apps.refresh(late + CHILDREN_LATE_S)
    assert apps.node_of(second) == "me" and apps.node_of(first) == "me"


def test_core_entities_are_cpu_and_a_number_and_nothing_else() -> None:
    assert core_entity(7) == "cpu7" and is_core_entity(core_entity(7)) and is_core_entity("cpu128")
    for other in ("system", "cpu", "cpu1x", "xcpu1", "cpu1.cpu_percent", app_entity("cpu1")):
        assert not is_core_entity(other), other
