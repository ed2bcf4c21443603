"""studies/h200/queue.sh's bookkeeping, run for real without a GPU: device.sh (which needs one) is
replaced in a scratch checkout by a script that records each call and exits as told. The queue runs its
sweeps in order, stops at the first that is not complete (exit 3) or failed (its code), never runs a
complete one again, passes a sweep its committed archive (never a traced one's), runs the traced sweeps
only after their tests passed, and hands back what the device returns (at most 8 files, 2 folders
deep)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_DEVICE = """#!/usr/bin/env bash
name=$(basename "$STUDY_SWEEP" .yml)
echo "$name from=${STUDY_FROM:-none}${STUDY_PREPARE_ONLY:+ setup}" >> calls.log
echo "$name ${STUDY_LLAMA:-unset}" >> llama.log
if [ -n "${STUDY_PREPARE_ONLY:-}" ]; then
  sleep "$(cat setup-s 2>/dev/null || echo 0)"
  exit 0
fi
echo "archive of $name" > "$OUT/h200-$name-gpu.tar.gz"
# The runs this call finishes (a file of bundle names), as the sweep would leave them.
for bundle in $(cat "bundles-$name" 2>/dev/null); do
  mkdir -p "results/h200-study/$name/$bundle" && echo "{}" > "results/h200-study/$name/$bundle/result.json"
done
echo "plan of $name" > "$OUT/plan.txt"
rc_file=rc-$name
[ -f "$rc_file" ] && exit "$(cat "$rc_file")"
exit 0
"""


def checkout(tmp_path: Path, trace_tests: int | None = 0) -> Path:
    """A scratch checkout with queue.sh, wheels.sh and a fake device.sh; with ``trace_tests``, the side
    job's exit codes as a finished one leaves them (None: the side job runs, and fails here)."""
    studies = tmp_path / "studies" / "h200"
    studies.mkdir(parents=True)
    for script in ("queue.sh", "wheels.sh"):
        shutil.copy(ROOT / "studies" / "h200" / script, studies / script)
    (studies / "device.sh").write_text(FAKE_DEVICE)
    state = tmp_path / "results" / "h200-study" / "queue"
    state.mkdir(parents=True)
    if trace_tests is not None:
        for name, rc in (("trace-tests", trace_tests), ("kernels-h200-bshd-fp16", 0), ("gpu-tests", 0)):
            (state / f"{name}.rc").write_text(f"{rc}\n")
            (state / f"{name}.txt").write_text(f"{name} output\n")
    return tmp_path


def queue(cwd: Path, limit: int, **env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(cwd / "out"), "LIMIT": str(limit), **env}
    return subprocess.run(
        ["bash", "studies/h200/queue.sh"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def calls(cwd: Path) -> list[str]:
    log = cwd / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def returned(cwd: Path) -> dict[str, bytes]:
    """What the device hands back: the files under $OUT (at most 8, at most 2 folders down), with
    queue-out.tar.gz unpacked."""
    out = cwd / "out"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(len(p.relative_to(out).parts) <= 3 for p in files)
    found = {p.name: p.read_bytes() for p in files}
    with tarfile.open(out / "queue-out.tar.gz") as tar:
        for member in tar.getmembers():
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None:
                found[Path(member.name).name] = extracted.read()
    return found


def test_a_call_without_the_time_for_a_sweep_runs_none_and_says_to_call_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    done = queue(cwd, limit=100)
    assert done.returncode == 3 and "video-kernel-trace: pending" in done.stdout
    assert calls(cwd) == []
    assert returned(cwd)["trace-tests.txt"] == b"trace-tests output\n"


def test_the_sweeps_run_in_order_and_a_complete_one_never_runs_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "docs" / "results").mkdir(parents=True)
    for name in ("video-creation", "video-kernel-trace"):
        (cwd / "docs" / "results" / f"h200-{name}-gpu.tar.gz").write_bytes(b"")
    (cwd / "rc-kernels-sharing").write_text("3")
    first = queue(cwd, limit=5000)
    assert first.returncode == 3
    # A traced sweep never resumes from an archive (it holds no traces); the sharing grid is not
    # complete: the queue stops there and the video sweep waits.
    assert calls(cwd) == [
        "video-kernel-trace from=none setup",
        "video-kernel-trace from=none",
        "captions-crowd from=none setup",
        "captions-crowd from=none",
        "captions-busy from=none setup",
        "captions-busy from=none",
        "kernels-sharing from=none",
    ]
    assert returned(cwd)["h200-kernels-sharing-gpu.tar.gz"] == b"archive of kernels-sharing\n"
    (cwd / "rc-kernels-sharing").unlink()
    second = queue(cwd, limit=5000)
    assert second.returncode == 0, second.stdout + second.stderr
    assert calls(cwd)[7:] == [
        "kernels-sharing from=none",
        "video-creation from=docs/results/h200-video-creation-gpu.tar.gz",
    ]
    third = queue(cwd, limit=5000)
    assert third.returncode == 0 and len(calls(cwd)) == 9


def test_a_traced_sweep_whose_account_is_committed_is_not_run_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "docs" / "results").mkdir(parents=True)
    (cwd / "docs" / "results" / "video-kernel-trace-slices-h200.json").write_text("{}")
    assert queue(cwd, limit=5000).returncode == 0
    assert [c for c in calls(cwd) if c.startswith("video-kernel-trace")] == []


def test_a_sweep_committed_from_an_h100_is_skipped_unless_a_chosen_queue_names_it(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "docs" / "results").mkdir(parents=True)
    (cwd / "docs" / "results" / "h100-kernels-sharing-gpu.tar.gz").write_text("an H100's archive")
    assert queue(cwd, limit=5000).returncode == 0
    assert [c for c in calls(cwd) if c.startswith("kernels-sharing")] == []
    assert queue(cwd, limit=5000, STUDY_QUEUE="kernels-sharing").returncode == 0
    assert [c for c in calls(cwd) if c.startswith("kernels-sharing")] == ["kernels-sharing from=none"]


def test_a_failed_sweep_stops_the_queue_with_its_code_not_call_again(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "rc-video-kernel-trace").write_text("1")
    done = queue(cwd, limit=5000)
    assert done.returncode == 1
    assert calls(cwd) == ["video-kernel-trace from=none setup", "video-kernel-trace from=none"]


def test_the_traced_sweeps_wait_for_passing_trace_tests_and_the_others_still_run(tmp_path: Path) -> None:
    cwd = checkout(tmp_path, trace_tests=1)
    done = queue(cwd, limit=5000)
    assert done.returncode == 4
    assert "video-kernel-trace: skipped, the kernel trace tests did not pass" in done.stdout
    assert calls(cwd) == [
        "video-kernel-trace from=none setup",
        "captions-crowd from=none setup",
        "captions-busy from=none setup",
        "kernels-sharing from=none",
        "video-creation from=none",
    ]


def test_the_side_job_runs_once_beside_the_setup_and_its_failures_are_kept_not_retried(
    tmp_path: Path,
) -> None:
    # No GPU, no test files, no cbkernels here: every side job command fails at once.
    cwd = checkout(tmp_path, trace_tests=None)
    first = queue(cwd, limit=5000)
    assert first.returncode == 4, first.stdout + first.stderr
    state = cwd / "results" / "h200-study" / "queue"
    codes = {p.stem: p.read_text().strip() for p in state.glob("*.rc")}
    assert set(codes) == {"trace-tests", "kernels-h200-bshd-fp16", "gpu-tests"} and "0" not in codes.values()
    assert not (state / "side.hold").exists() and "trace-tests.rc" in returned(cwd)
    second = queue(cwd, limit=5000)
    assert second.returncode == 4 and {p.stem: p.read_text().strip() for p in state.glob("*.rc")} == codes


def test_a_setup_that_leaves_too_little_time_stops_before_the_sweep(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    (cwd / "setup-s").write_text("3")
    done = queue(cwd, limit=152)
    assert done.returncode == 3 and "after the setup" in done.stdout
    assert calls(cwd) == ["video-kernel-trace from=none setup"]


def test_a_side_job_step_that_timed_out_runs_again_and_only_it(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    state = cwd / "results" / "h200-study" / "queue"
    (state / "kernels-h200-bshd-fp16.rc").unlink()  # timed out last call: no exit code kept
    done = queue(cwd, limit=5000)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (state / "kernels-h200-bshd-fp16.rc").read_text().strip() != "0"  # no cbkernels here
    assert (state / "trace-tests.txt").read_text() == "trace-tests output\n"  # not run again


def test_a_chosen_queue_runs_those_sweeps_in_its_order_and_builds_llama_cpp_only_where_needed(
    tmp_path: Path,
) -> None:
    cwd = checkout(tmp_path)
    done = queue(cwd, limit=5000, STUDY_QUEUE="captions-crowd kernels-sharing")
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls(cwd) == [
        "captions-crowd from=none setup",
        "captions-crowd from=none",
        "kernels-sharing from=none",
    ]
    # The captions and the image generators run on no llama.cpp: device.sh is told to skip its build.
    assert (cwd / "llama.log").read_text().splitlines() == [
        "captions-crowd 0",
        "captions-crowd 0",
        "kernels-sharing 1",
    ]


def test_a_chosen_side_job_runs_only_its_steps(tmp_path: Path) -> None:
    cwd = checkout(tmp_path, trace_tests=None)
    done = queue(cwd, limit=5000, STUDY_QUEUE="captions-crowd", STUDY_SIDE="trace-tests")
    state = cwd / "results" / "h200-study" / "queue"
    # No GPU here: the trace tests fail, so the traced sweep is skipped after its setup.
    assert done.returncode == 4, done.stdout + done.stderr
    assert {p.stem for p in state.glob("*.rc")} == {"trace-tests"}
    assert calls(cwd) == ["captions-crowd from=none setup"]


def test_an_unknown_sweep_or_side_step_is_refused_before_anything_runs(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    sweep = queue(cwd, limit=5000, STUDY_QUEUE="captions-crowd video-kernel-trac")
    assert sweep.returncode == 2 and "STUDY_QUEUE: no sweep 'video-kernel-trac'" in sweep.stderr
    step = queue(cwd, limit=5000, STUDY_SIDE="gpu-test")
    assert step.returncode == 2 and "STUDY_SIDE: no step 'gpu-test'" in step.stderr
    assert calls(cwd) == []


FAKE_SLICES = """import sys
from pathlib import Path

args = sys.argv[1:]
runs = [args[i + 1].split("=")[0] for i, a in enumerate(args) if a == "--run"]
for flag in ("--json", "--md"):
    Path(args[args.index(flag) + 1]).write_text(" ".join(runs))
print("account of", " ".join(runs))
"""


def test_a_traced_sweep_cut_short_returns_the_account_of_its_runs_so_far(tmp_path: Path) -> None:
    cwd = checkout(tmp_path)
    # The account's command, replaced: it writes the labels of the runs it was given.
    perf = cwd / "benchmarks" / "perf"
    perf.mkdir(parents=True)
    (cwd / "benchmarks" / "__init__.py").write_text("")
    (perf / "__init__.py").write_text("")
    (perf / "kernel_slices.py").write_text(FAKE_SLICES)
    (cwd / "rc-captions-crowd").write_text("3")
    (cwd / "bundles-captions-crowd").write_text("k4-mix-K-greedy k2-mix-K-greedy")
    first = queue(cwd, limit=5000, STUDY_QUEUE="captions-crowd")
    assert first.returncode == 3, first.stdout + first.stderr
    back = returned(cwd)
    assert back["captions-crowd-partial-slices.md"] == b"K2 K4" and "captions-crowd-slices.md" not in back
    (cwd / "rc-captions-crowd").unlink()
    (cwd / "bundles-captions-crowd").write_text("k1-mix-K-greedy k0-mix-K-greedy")
    second = queue(cwd, limit=5000, STUDY_QUEUE="captions-crowd")
    assert second.returncode == 0, second.stdout + second.stderr
    back = returned(cwd)
    assert (
        back["captions-crowd-slices.md"] == b"K0 K1 K2 K4" and "captions-crowd-partial-slices.md" not in back
    )
