"""studies/h200/queue.sh's bookkeeping, run for real without a GPU: device.sh (which needs one) is
replaced in a scratch checkout by a script that records each call and exits as told. The queue runs
its sweeps in order, stops at the first that is not complete, never runs a complete one again, and
passes a sweep its committed archive."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_DEVICE = """#!/usr/bin/env bash
name=$(basename "$STUDY_SWEEP" .yml)
echo "$name from=${STUDY_FROM:-none} call_s=$STUDY_CALL_S" >> calls.log
rc_file=rc-$name
[ -f "$rc_file" ] && exit "$(cat "$rc_file")"
exit 0
"""


def checkout(tmp_path: Path) -> Path:
    (tmp_path / "studies" / "h200").mkdir(parents=True)
    shutil.copy(ROOT / "studies" / "h200" / "queue.sh", tmp_path / "studies" / "h200" / "queue.sh")
    (tmp_path / "studies" / "h200" / "device.sh").write_text(FAKE_DEVICE)
    return tmp_path


def queue(cwd: Path, limit: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(cwd / "out"), "LIMIT": str(limit)}
    return subprocess.run(
        ["bash", "studies/h200/queue.sh"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def calls(cwd: Path) -> list[str]:
    log = cwd / "calls.log"
    return [line.split(" call_s=")[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_a_call_without_the_time_for_a_sweep_runs_none_and_says_to_call_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    done = queue(cwd, limit=100)
    assert done.returncode == 3 and "video-kernel-trace: pending" in done.stdout
    assert calls(cwd) == []


def test_the_sweeps_run_in_order_and_a_complete_one_never_runs_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "docs" / "results").mkdir(parents=True)
    (cwd / "docs" / "results" / "h200-video-creation-gpu.tar.gz").write_bytes(b"")
    (cwd / "rc-kernels-sharing").write_text("3")
    first = queue(cwd, limit=5000)
    assert first.returncode == 3
    # The sharing grid is not complete: the queue stops there, the video sweep waits.
    assert calls(cwd) == ["video-kernel-trace from=none", "kernels-sharing from=none"]
    (cwd / "rc-kernels-sharing").unlink()
    second = queue(cwd, limit=5000)
    assert second.returncode == 0, second.stdout + second.stderr
    assert calls(cwd)[2:] == [
        "kernels-sharing from=none",
        "video-creation from=docs/results/h200-video-creation-gpu.tar.gz",
    ]
    third = queue(cwd, limit=5000)
    assert third.returncode == 0 and len(calls(cwd)) == 4
