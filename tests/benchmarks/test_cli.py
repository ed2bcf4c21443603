"""The consumerbench CLI as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.cli import summary_table
from benchmarks.results import QualityFigure, ResultDocument, load_bundle
from benchmarks.status import RunStatus
from tests.benchmarks.test_engine_isolation import run_without

ROOT = Path(__file__).parents[2]
CLI = [sys.executable, "-m", "benchmarks.cli"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_validate_passes_good_files_and_exits_1_with_lines_for_bad_ones(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("a:\n  type: Sleep\n  sleep_tim: 1\nworkflows:\n  n: {uses: b}\n")
    ok = cli("validate", "examples/sleep.yml")
    assert ok.returncode == 0 and "examples/sleep.yml: ok" in ok.stdout
    out = cli("validate", "examples/sleep.yml", str(bad))
    assert out.returncode == 1
    assert (
        "line 3: a.sleep_tim: unknown key 'sleep_tim'" in out.stdout
        and "did you mean 'sleep_time'" in out.stdout
    )
    assert "line 5: workflows.n.uses" in out.stdout


def test_validate_json_is_machine_readable(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("a: {type: Nope}\n")
    out = cli("validate", "--json", str(bad))
    assert out.returncode == 1
    report = json.loads(out.stdout)["files"][str(bad)]
    assert report[0]["line"] == 1 and report[0]["path"] == "a.type" and "Nope" in report[0]["message"]


def test_validate_checks_the_machine_only_when_asked(tmp_path: Path) -> None:
    from benchmarks.platform import gpus

    path = tmp_path / "gpu.yml"
    path.write_text("a: {type: Synthetic, load: torch, device: gpu}\n")
    assert cli("validate", str(path)).returncode == 0
    checked = cli("validate", "--check-files", str(path))
    assert checked.returncode == (0 if gpus() else 1)


def test_run_writes_a_bundle_that_matches_the_documented_schema(tmp_path: Path) -> None:
    out = cli("run", "examples/sleep.yml", "--out", str(tmp_path / "b"))
    assert out.returncode == 0, out.stderr
    assert "first_sleep" in out.stdout and "run completed" in out.stdout
    assert "quality" not in out.stdout  # Sleep has no quality figures: no empty table either
    doc = load_bundle(tmp_path / "b")
    assert [n.status for n in doc.nodes] == ["succeeded", "succeeded"]
    assert doc.workflow["name"] == "sleep"
    assert (tmp_path / "b" / "first_sleep.csv").read_text().splitlines()[0].startswith("index,arrival_s")
    assert len((tmp_path / "b" / "second_sleep.csv").read_text().splitlines()) == 1 + 2


def test_run_kernel_trace_of_a_node_the_workflow_lacks_is_a_usage_error_before_anything_runs(
    tmp_path: Path,
) -> None:
    out = cli("run", "examples/sleep.yml", "--out", str(tmp_path / "b"), "--kernel-trace", "nope")
    assert out.returncode == 2
    assert "--kernel-trace: no node named 'nope' in the workflow" in out.stderr
    assert not (tmp_path / "b").exists()


def test_run_repeat_writes_one_bundle_per_repetition_and_a_summary(tmp_path: Path) -> None:
    wf = tmp_path / "w.yml"
    wf.write_text("a: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2, slo: ['e2e<1s']}\n")
    out = cli("run", str(wf), "--repeat", "2", "--out", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert load_bundle(tmp_path / "r" / "rep-2").repeat_index == 2
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["repetitions"] == 2 and summary["mean_attainment"]["mean"] == 1.0


def test_ctrl_c_cancels_the_run_and_still_writes_the_partial_bundle(tmp_path: Path) -> None:
    wf = tmp_path / "long.yml"
    wf.write_text("a: {type: Sleep, sleep_time: 0.1, num_requests: 10000}\n")
    proc = subprocess.Popen(
        [*CLI, "run", str(wf), "--out", str(tmp_path / "c")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "running" in line:
            break
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=15)
    assert time.monotonic() - sent < 5.0
    assert proc.returncode == 130
    doc = load_bundle(tmp_path / "c")
    assert doc.status == "cancelled" and doc.nodes[0].status == "stopped"
    served = doc.applications[0].requests_counted
    assert served >= 1
    # The summary's headline says the run is partial, with what it served of what was asked.
    assert f"run cancelled: partial: served {served} of 10000, no SLOs" in proc.stdout.read()


def test_run_of_an_invalid_file_prints_the_problems_and_exits_1_as_validate_does(tmp_path: Path) -> None:
    wf = tmp_path / "bad.yml"
    wf.write_text("a: {type: Sleep, num_requests: 0}\n")
    out = cli("run", str(wf))
    assert out.returncode == 1 and "line 1: a.num_requests" in out.stderr
    assert cli("validate", str(wf)).returncode == 1
    assert not list((ROOT / "results").glob("bad-*"))
    assert cli("run", str(wf), "--repeat", "0").returncode == 1  # the file first, then the flags


def test_check_files_problems_carry_the_line_of_their_field_with_the_other_problems(tmp_path: Path) -> None:
    wf = tmp_path / "w.yml"
    wf.write_text(
        "a:\n  type: Sleep\n  arrival: {kind: trace, trace: /nonexistent/t.txt}\n"
        "b:\n  type: Sleep\n  num_requests: 0\n"
    )
    out = cli("validate", "--check-files", str(wf))
    assert out.returncode == 1 and "<top>" not in out.stdout
    assert "line 3: a.arrival.trace: field 'arrival.trace' of unit 'a'" in out.stdout
    assert "line 6: b.num_requests" in out.stdout


def test_run_refuses_an_out_folder_that_holds_a_bundle_unless_told_to_overwrite(tmp_path: Path) -> None:
    two = tmp_path / "two.yml"
    two.write_text("a: {type: Sleep, sleep_time: 0}\nb: {type: Sleep, sleep_time: 0}\n")
    one = tmp_path / "one.yml"
    one.write_text("c: {type: Sleep, sleep_time: 0}\n")
    out = tmp_path / "b"
    assert cli("run", str(two), "--out", str(out), "--monitor-hz", "0").returncode == 0
    refused = cli("run", str(one), "--out", str(out), "--monitor-hz", "0")
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert sorted(p.name for p in out.glob("*.csv")) == ["a.csv", "b.csv"]
    replaced = cli("run", str(one), "--out", str(out), "--monitor-hz", "0", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert f"bundle: {out / 'result.json'}" in replaced.stdout
    # Nothing of the old bundle is left beside the new one, and no working folder beside it.
    assert sorted(p.name for p in out.glob("*.csv")) == ["c.csv"]
    assert [n.name for n in load_bundle(out).nodes] == ["c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "one.yml", "two.yml"]


def test_a_run_that_cannot_start_leaves_the_bundle_it_would_replace_whole(tmp_path: Path) -> None:
    from benchmarks.platform import gpus

    if gpus():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "b"
    ok = tmp_path / "ok.yml"
    ok.write_text("a: {type: Sleep, sleep_time: 0}\n")
    assert cli("run", str(ok), "--out", str(out), "--monitor-hz", "0").returncode == 0
    gpu = tmp_path / "gpu.yml"
    gpu.write_text("g: {type: Synthetic, load: torch, device: gpu}\n")
    failed = cli("run", str(gpu), "--out", str(out), "--overwrite")
    assert failed.returncode == 2 and "device: gpu" in failed.stderr
    assert [n.name for n in load_bundle(out).nodes] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "gpu.yml", "ok.yml"]


def test_run_never_writes_into_a_folder_that_holds_other_files(tmp_path: Path) -> None:
    wf = tmp_path / "w.yml"
    wf.write_text("a: {type: Sleep, sleep_time: 0}\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    out = cli("run", str(wf), "--out", str(mine), "--overwrite")
    assert out.returncode == 2 and "not a result bundle" in out.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_plugged_in_commands_that_need_the_web_stack_are_refused_clearly_without_it() -> None:
    from importlib.metadata import entry_points

    assert "worker" in [ep.name for ep in entry_points(group="consumerbench.commands")]
    # A fresh interpreter with the web stack unimportable, as on an engine-only install.
    result = run_without("from benchmarks.cli import main; raise SystemExit(main(['worker']))")
    assert result.returncode == 2, result.stderr
    assert "'worker' is not available here" in result.stderr


def test_progress_counts_stream_chunks_without_a_made_up_total() -> None:
    import io

    from benchmarks.cli import Progress
    from benchmarks.spec.load import load_yaml

    text = "cap: {type: LiveCaptions}\n"
    text += "chat: {type: Sleep, num_requests: 2, concurrency: 2, warmup_requests: 1}"
    out = io.StringIO()
    progress = Progress(load_yaml(text + "\n"), out)
    ok = {"status": "ok", "warmup": False, "metrics": {}}
    progress.on_event({"t": 0.5, "kind": "node_status", "node": "cap", "status": "running"})
    # Once loaded, a stream says how many chunks it will send.
    progress.on_event({"t": 1.0, "kind": "load_end", "node": "cap", "planned": 5})
    for node in ("cap", "cap", "cap", "chat"):
        progress.on_event({"t": 1.0, "kind": "request_end", "node": node, "record": ok})
    # Neither a warm-up request nor an interrupted one is served: the counts are those of the result.
    progress.on_event({"t": 1.0, "kind": "request_end", "node": "chat", "record": {**ok, "warmup": True}})
    interrupted = {**ok, "status": "interrupted"}
    progress.on_event({"t": 1.0, "kind": "request_end", "node": "chat", "record": interrupted})
    progress.on_event({"t": 1.0, "kind": "node_status", "node": "cap", "status": "succeeded"})
    progress.on_event({"t": 1.0, "kind": "node_status", "node": "chat", "status": "running"})
    lines = out.getvalue().splitlines()
    assert "cap   loading   0 chunks" in lines[0]
    assert "cap   running   0/5 chunks" in lines[1]
    assert "cap   succeeded 3/5 chunks" in lines[2]
    assert "chat  loading   1/4 requests" in lines[3]


def test_the_summary_prints_a_quality_table_under_the_slo_table() -> None:
    doc = ResultDocument.model_validate_json((ROOT / "tests/benchmarks/fixtures/result-v1.json").read_text())
    chat = doc.applications[0]
    chat.quality = {
        "tokens_out": QualityFigure(value=31.25, unit="tokens/request", count=4),
        "decode_rate": QualityFigure(value=41.234, unit="tokens/s", count=4),
    }
    lines = summary_table(doc).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("node") and "quality" in line)
    assert lines[start].split() == ["node", "quality", "value", "of"]
    assert lines[start + 2].split() == [chat.name, "tokens_out", "31.2", "tokens/request", "4"]
    assert lines[start + 3].split() == ["decode_rate", "41.2", "tokens/s", "4"]
    assert lines[start + 4] == "" and lines[-1].startswith("run ")


def test_the_summary_of_a_partial_run_says_its_attainments_are_of_requested() -> None:
    doc = ResultDocument.model_validate_json((ROOT / "tests/benchmarks/fixtures/result-v1.json").read_text())
    complete = summary_table(doc)
    assert not doc.partial() and "of requested" not in complete
    doc.status, doc.reason = RunStatus.CANCELLED, "run cancelled"
    lines = summary_table(doc).splitlines()
    rows = [line for line in lines if line.startswith(doc.applications[0].name)]
    attainment = doc.applications[0].slo_attainment
    # With its 95 % interval over the requests (Wilson's, 2 of 2 met: 34-100 %).
    assert f"{attainment:.0%} [34-100 %] of requested" in rows[0]
    assert lines[-1].startswith("run cancelled: partial: served") and "% of requested, makespan" in lines[-1]


def test_the_repetitions_summary_says_when_some_attainments_are_of_requested(tmp_path: Path, capsys) -> None:
    from benchmarks.cli import _write_repeat_summary

    fixture = (ROOT / "tests/benchmarks/fixtures/result-v1.json").read_text()
    complete, cancelled = (ResultDocument.model_validate_json(fixture) for _ in range(2))
    _write_repeat_summary([complete, complete], tmp_path)
    assert "of requested" not in capsys.readouterr().out
    cancelled.status, cancelled.reason = RunStatus.CANCELLED, "run cancelled"
    _write_repeat_summary([complete, cancelled], tmp_path)
    assert "  1 of 2 partial: their attainment is of requested" in capsys.readouterr().out


def _submitted(status: str, summary: dict | None) -> dict:
    return {
        "id": 7,
        "status": status,
        "error": "" if status == "succeeded" else "run cancelled",
        "summary": summary,
    }


NO_SLOS = {
    "headline": "no SLOs",
    "mean_attainment": None,
    "applications": [
        {
            "name": "nap",
            "type": "Sleep",
            "slo_attainment": None,
            "requests_served": 2,
            "requests_requested": 2,
        }
    ],
}


def test_submit_reports_a_workflow_without_slos_as_such_and_fails_it_only_when_slos_are_required(
    capsys,
) -> None:
    from benchmarks.cli import EXIT_OK, EXIT_PROBLEMS, _report_submitted

    assert _report_submitted(_submitted("succeeded", NO_SLOS), 0.9) == EXIT_OK
    out = capsys.readouterr()
    assert "SLO met no SLOs  served 2 of 2" in out.out and "run 7 succeeded: no SLOs" in out.out
    assert _report_submitted(_submitted("succeeded", NO_SLOS), 0.9, require_slo=True) == EXIT_PROBLEMS
    assert "has no SLOs (--require-slo)" in capsys.readouterr().err


def test_submit_says_a_cancelled_run_is_partial_and_fails_it(capsys) -> None:
    from benchmarks.cli import EXIT_PROBLEMS, _report_submitted

    summary = {
        **NO_SLOS,
        "headline": "partial: served 2 of 9, mean SLO attainment 22.2% of requested",
        "mean_attainment": 0.222,
        "applications": [{**NO_SLOS["applications"][0], "slo_attainment": 0.222, "requests_requested": 9}],
    }
    assert _report_submitted(_submitted("cancelled", summary), None) == EXIT_PROBLEMS
    out = capsys.readouterr().out
    assert "run 7 cancelled: partial: served 2 of 9, mean SLO attainment 22.2% of requested" in out
    # Each application's attainment is over what was asked of it too.
    assert "SLO met 22.2% of requested  served 2 of 9" in out
    # A run that ended before it had a summary (an older server, or cancelled before it started).
    assert _report_submitted(_submitted("cancelled", None), None) == EXIT_PROBLEMS
    assert "run 7 cancelled: partial" in capsys.readouterr().out


def test_kernels_profile_is_reached_through_the_engine_cli_and_says_when_there_is_no_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: the no-GPU path cannot be taken here")
    out = cli("kernels", "profile", "--shape", "1,2,64,64", "--no-ncu")
    assert out.returncode == 2
    assert "error: no CUDA GPU visible to PyTorch" in out.stderr
    helped = cli("kernels", "profile", "--help")
    assert helped.returncode == 0 and "--maxnreg LIST" in helped.stdout
