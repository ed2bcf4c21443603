"""studies/h200/queue.sh's bookkeeping, run for real without a GPU: device.sh (which needs one) is
replaced in a scratch checkout by a script that records each call and exits as told, and the GPU tests'
exit codes are laid down as a finished side job leaves them. The queue runs its sweeps in order, stops
at the first that is not complete (exit 3) or failed (its code), never runs a complete one again,
passes a sweep its committed archive, and runs the trace sweep only after its tests passed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_DEVICE = """#!/usr/bin/env bash
name=$(basename "$STUDY_SWEEP" .yml)
echo "$name from=${STUDY_FROM:-none}${STUDY_PREPARE_ONLY:+ setup}" >> calls.log
[ -n "${STUDY_PREPARE_ONLY:-}" ] && exit 0
rc_file=rc-$name
[ -f "$rc_file" ] && exit "$(cat "$rc_file")"
exit 0
"""


def checkout(tmp_path: Path, trace_tests: int = 0) -> Path:
    """A scratch checkout with queue.sh, wheels.sh, a fake device.sh, and the side job's exit codes."""
    studies = tmp_path / "studies" / "h200"
    studies.mkdir(parents=True)
    for script in ("queue.sh", "wheels.sh"):
        shutil.copy(ROOT / "studies" / "h200" / script, studies / script)
    (studies / "device.sh").write_text(FAKE_DEVICE)
    state = tmp_path / "results" / "h200-study" / "queue"
    state.mkdir(parents=True)
    for name, rc in (("trace-tests", trace_tests), ("kernels-h200-bshd-fp16", 0), ("gpu-tests", 0)):
        (state / f"{name}.rc").write_text(f"{rc}\n")
        (state / f"{name}.txt").write_text(f"{name} output\n")
    return tmp_path


def queue(cwd: Path, limit: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(cwd / "out"), "LIMIT": str(limit)}
    return subprocess.run(
        ["bash", "studies/h200/queue.sh"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def calls(cwd: Path) -> list[str]:
    log = cwd / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_call_without_the_time_for_a_sweep_runs_none_and_says_to_call_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    done = queue(cwd, limit=100)
    assert done.returncode == 3 and "video-kernel-trace: pending" in done.stdout
    assert calls(cwd) == []
    # The side job's outputs come back with every call.
    assert (cwd / "out" / "trace-tests.txt").read_text() == "trace-tests output\n"


def test_the_sweeps_run_in_order_and_a_complete_one_never_runs_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "docs" / "results").mkdir(parents=True)
    for name in ("video-creation", "video-kernel-trace"):
        (cwd / "docs" / "results" / f"h200-{name}-gpu.tar.gz").write_bytes(b"")
    (cwd / "rc-kernels-sharing").write_text("3")
    first = queue(cwd, limit=5000)
    assert first.returncode == 3
    # The trace sweep never resumes from an archive (it holds no traces); the sharing grid is not
    # complete: the queue stops there and the video sweep waits.
    assert calls(cwd) == [
        "video-kernel-trace from=none setup",
        "video-kernel-trace from=none",
        "captions-crowd from=none",
        "kernels-sharing from=none",
    ]
    (cwd / "rc-kernels-sharing").unlink()
    second = queue(cwd, limit=5000)
    assert second.returncode == 0, second.stdout + second.stderr
    assert calls(cwd)[4:] == [
        "kernels-sharing from=none",
        "video-creation from=docs/results/h200-video-creation-gpu.tar.gz",
    ]
    third = queue(cwd, limit=5000)
    assert third.returncode == 0 and len(calls(cwd)) == 6


def test_a_failed_sweep_stops_the_queue_with_its_code_not_call_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "rc-video-kernel-trace").write_text("1")
    done = queue(cwd, limit=5000)
    assert done.returncode == 1
    assert calls(cwd) == ["video-kernel-trace from=none setup", "video-kernel-trace from=none"]


def test_the_trace_sweep_waits_for_passing_trace_tests_and_the_others_still_run(tmp_path: Path) -> None:
    cwd = checkout(tmp_path, trace_tests=1)
    done = queue(cwd, limit=5000)
    assert done.returncode == 4
    assert "video-kernel-trace: skipped, the kernel trace tests did not pass" in done.stdout
    assert calls(cwd) == [
        "video-kernel-trace from=none setup",
        "captions-crowd from=none",
        "kernels-sharing from=none",
        "video-creation from=none",
    ]
