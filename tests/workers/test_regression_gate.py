"""`consumerbench submit --baseline ... --fail-on-regression` against a live server (pytest-django's
live_server on the test database) with a real `consumerbench worker` process and Redis, as CI runs it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from cbweb.runs.models import Run
from cbweb.workflows.models import Workflow
from tests.workers.test_integration import (  # noqa: F401  (fixtures)
    ROOT,
    Worker,
    _on_postgres,
    broker,
    start_worker,
)

pytestmark = [pytest.mark.postgres, pytest.mark.broker, pytest.mark.django_db(transaction=True)]

GATE = "name: gate-sleep\nnap:\n  type: Sleep\n  sleep_time: {t}\n  num_requests: 10\n"


def _submit(server: str, token: str, workflow: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "benchmarks.cli", "submit", str(workflow), "--server", server]
    return subprocess.run(
        [*cli, "--token", token, "--poll", "0.3", "--timeout", "120", *args],
        cwd=ROOT,  # a git checkout: the commit and branch are filled in from git
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_one_workflow_by_name_and_the_gate_fails_a_three_times_slower_run_only(
    start_worker: Callable[[str], Worker],  # noqa: F811
    live_server: Any,
    alice: Any,
    make_token: Any,
    tmp_path: Path,
) -> None:
    start_worker("gate")
    token, server = make_token(alice), live_server.url
    wf = tmp_path / "ci-gate.yml"
    wf.write_text(GATE.format(t=0.1))

    first = _submit(server, token, wf, "--wait", "--meta", "tag=base", "--meta", "note=first of the day")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "new workflow" in first.stdout and "'gate-sleep' v1" in first.stdout
    # The same file again, gated against the first run: unchanged, exit 0.
    junit = tmp_path / "same.xml"
    same = _submit(server, token, wf, "--baseline", "latest", "--fail-on-regression", "--junit", str(junit))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "no significant regression" in same.stdout and "new version" not in same.stdout
    assert ElementTree.parse(junit).getroot().get("failures") == "0"

    workflow = Workflow.objects.get(name="gate-sleep")
    assert workflow.versions.count() == 1
    runs = list(Run.objects.filter(workflow_version__workflow=workflow).order_by("pk"))
    assert len(runs) == 2 and all(r.status == "succeeded" for r in runs)
    git_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    assert runs[0].tag_names == ["base"] and runs[0].notes == "first of the day"
    assert runs[1].commit == git_head.strip() and runs[1].branch

    # A 3x slower Sleep unit: a new version of the same workflow, and the gate fails naming the metric.
    wf.write_text(GATE.format(t=0.3))
    junit = tmp_path / "slow.xml"
    slow = _submit(server, token, wf, "--baseline", "latest", "--fail-on-regression", "--junit", str(junit))
    assert slow.returncode == 1, slow.stdout + slow.stderr
    assert f"baseline: run {runs[1].pk}" in slow.stdout and "v2, new version" in slow.stdout
    row = next(line for line in slow.stdout.splitlines() if line.startswith("nap "))
    assert row.split()[1] == "e2e" and row.endswith("regressed"), slow.stdout
    ratio = re.search(r"regressed: nap e2e \((\d+\.\d+)x\)", slow.stderr)
    assert ratio and 2.7 <= float(ratio.group(1)) <= 3.3, slow.stderr  # a 3x slower sleep
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("failures") == "1" and suite.find("testcase/failure") is not None
    assert Workflow.objects.filter(name="gate-sleep").count() == 1
    assert Run.objects.filter(workflow_version__workflow=workflow).count() == 3
    # The tagged baseline is the first run: still slower, but without --fail-on-regression exit 0.
    tagged = _submit(server, token, wf, "--baseline", "tag=base")
    assert tagged.returncode == 0 and f"baseline: run {runs[0].pk}" in tagged.stdout, tagged.stderr
    assert "regressed: nap e2e" in tagged.stderr


def test_a_baseline_that_cannot_be_used_is_a_usage_error_and_queues_nothing(
    live_server: Any, alice: Any, make_token: Any, tmp_path: Path
) -> None:
    token, server = make_token(alice), live_server.url
    wf = tmp_path / "ci-gate.yml"
    wf.write_text(GATE.format(t=0.01))
    other = tmp_path / "other.yml"
    other.write_text("name: other\nnap: {type: Sleep, sleep_time: 0.01, num_requests: 1}\n")
    queued = _submit(server, token, other)  # no worker: it stays queued
    assert queued.returncode == 0, queued.stderr
    other_run = Run.objects.get().pk

    missing = _submit(server, token, wf, "--baseline", "999999", "--fail-on-regression")
    assert missing.returncode == 2 and "baseline run 999999 not found" in missing.stderr
    foreign = _submit(server, token, wf, "--baseline", str(other_run))
    assert foreign.returncode == 2
    assert f"baseline run {other_run} is of workflow 'other', not 'gate-sleep'" in foreign.stderr
    for which in ("latest", "tag=nightly"):
        none = _submit(server, token, wf, "--baseline", which)
        assert none.returncode == 2 and "no succeeded run" in none.stderr and "'gate-sleep'" in none.stderr
    assert Run.objects.count() == 1
