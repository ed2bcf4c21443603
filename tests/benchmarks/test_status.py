"""The status words: string enums whose JSON is the plain word, each vocabulary with its own sets."""

from __future__ import annotations

import json

from benchmarks.status import FAILING, FINISHED, TERMINAL, JobStatus, NodeStatus, RequestStatus, RunStatus


def test_statuses_serialise_as_their_plain_words() -> None:
    event = {"run": RunStatus.CANCELLED, "node": NodeStatus.SKIPPED, "request": RequestStatus.OK}
    assert json.dumps(event) == '{"run": "cancelled", "node": "skipped", "request": "ok"}'
    assert f"{NodeStatus.FAILED}" == "failed" and NodeStatus("stopped") is NodeStatus.STOPPED


def test_a_node_ends_succeeded_failed_stopped_or_skipped_and_only_failed_or_skipped_fail() -> None:
    assert {s for s in NodeStatus if s.terminal} == TERMINAL == {"succeeded", "failed", "stopped", "skipped"}
    assert {s for s in NodeStatus if s.failing} == FAILING == {"failed", "skipped"}
    assert not NodeStatus.STOPPING.terminal and not NodeStatus.STOPPED.failing


def test_a_server_run_is_finished_once_succeeded_failed_or_cancelled() -> None:
    assert {s for s in JobStatus if s.finished} == FINISHED == {"succeeded", "failed", "cancelled"}
    assert "queued" not in FINISHED and "succeeded" in FINISHED
