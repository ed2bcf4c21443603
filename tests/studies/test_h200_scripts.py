"""studies/h200/gpu-session.sh's bookkeeping, run for real without a GPU: a measurement runs only when
the call has its budget left, a finished one is never run again, and every call returns the files of
every finished one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "studies" / "h200" / "gpu-session.sh"


def session(cwd: Path, out: Path, call_s: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(out), "CALL_S": str(call_s), "STUDY_ELAPSED_S": "0"}
    return subprocess.run(["bash", str(SCRIPT)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_a_call_without_the_time_runs_nothing_and_says_to_call_again(tmp_path: Path) -> None:
    done = session(tmp_path, tmp_path / "out", call_s=100)
    assert done.returncode == 3
    assert "chatbot-overhead: pending" in done.stdout and "model-servers: pending" in done.stdout
    assert not list((tmp_path / "results" / "h200-study" / "gpu-session").iterdir())


def test_a_finished_measurement_is_not_run_again_and_its_files_come_back_with_every_call(
    tmp_path: Path,
) -> None:
    state = tmp_path / "results" / "h200-study" / "gpu-session"
    state.mkdir(parents=True)
    (state / "chatbot-overhead.rc").write_text("0\n")
    (state / "chatbot-overhead.txt").write_text("table\n")
    (state / "chatbot-overhead-cuda.json").write_text("{}\n")
    done = session(tmp_path, tmp_path / "out", call_s=100)
    assert done.returncode == 3  # the second one is still pending
    assert "chatbot-overhead:" not in done.stdout
    assert sorted(
        p.name for p in (tmp_path / "out").iterdir() if p.suffix != ".txt" or "overhead" in p.name
    ) == [
        "chatbot-overhead-cuda.json",
        "chatbot-overhead.txt",
    ]
