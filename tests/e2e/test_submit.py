"""`consumerbench submit` as a CI job runs it, against a live server with a real token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.client import Client
from tests.e2e.conftest import ROOT, LiveApp


def _token(app: LiveApp) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "ci-bot"],
        cwd=ROOT,
        env=app.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip().splitlines()[-1]


def _submit(app: LiveApp, workflow: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in app.env.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["CB_API_TOKEN"] = _token(app)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.cli",
            "submit",
            str(workflow),
            "--server",
            app.url,
            "--poll",
            "0.5",
            "--timeout",
            "120",
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_submit_waits_and_passes_when_attainment_is_high_enough(live_app: LiveApp, tmp_path: Path) -> None:
    wf = tmp_path / "ci-ok.yml"
    wf.write_text("quick: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 3, slo: ['e2e<=10s']}\n")
    out = _submit(live_app, wf, "--wait", "--fail-under", "0.9")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "succeeded" in out.stdout and "mean SLO attainment 100.0%" in out.stdout


def test_submit_fails_the_job_when_attainment_is_below_the_bar(live_app: LiveApp, tmp_path: Path) -> None:
    wf = tmp_path / "ci-slow.yml"
    wf.write_text("slow: {type: Synthetic, steps: 1, step_ms: 5, num_requests: 2, slo: ['e2e<1us']}\n")
    out = _submit(live_app, wf, "--wait", "--fail-under", "0.9", "--scheduler", "greedy")
    assert out.returncode == 1
    assert "mean SLO attainment 0.0%" in out.stdout and "below 90.0%" in out.stderr


def test_submit_of_a_workflow_without_slos_passes_fail_under_unless_slos_are_required(
    live_app: LiveApp, tmp_path: Path
) -> None:
    wf = tmp_path / "ci-noslo.yml"
    wf.write_text("quick: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2}\n")
    out = _submit(live_app, wf, "--wait", "--fail-under", "0.9")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "succeeded: no SLOs" in out.stdout and "served 2 of 2" in out.stdout
    out = _submit(live_app, wf, "--wait", "--fail-under", "0.9", "--require-slo")
    assert out.returncode == 1 and "no SLOs (--require-slo)" in out.stderr


def test_submit_of_an_invalid_workflow_prints_the_servers_errors_with_lines(
    live_app: LiveApp, tmp_path: Path
) -> None:
    wf = tmp_path / "ci-bad.yml"
    wf.write_text("a:\n  type: Sleep\n  sleep_tme: 1\n")
    out = _submit(live_app, wf, "--wait")
    assert out.returncode == 1  # an invalid file, as `validate` and `run` exit for it
    assert "HTTP 400" in out.stderr and "line 3: a.sleep_tme: unknown key 'sleep_tme'" in out.stderr


def test_submit_sends_scheduler_parameters_and_the_run_records_them(
    live_app: LiveApp, tmp_path: Path
) -> None:
    wf = tmp_path / "ci-credit.yml"
    wf.write_text(
        "scheduler: {name: credit, pressure_threshold: 0.4}\n"
        "quick: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 2, slo: ['e2e<=10s']}\n"
    )
    out = _submit(live_app, wf, "--wait", "--scheduler-param", "window=4")
    assert out.returncode == 0, out.stdout + out.stderr
    queued = next(line for line in out.stdout.splitlines() if line.startswith("run "))
    url = queued.split()[3]  # "run <id> <status>: <url>"
    run = Client(live_app.url, _token(live_app)).request("GET", url)
    assert run["scheduler"] == "credit"
    assert (run["scheduler_params"]["pressure_threshold"], run["scheduler_params"]["window"]) == (0.4, 4)


def test_submit_of_an_out_of_range_scheduler_parameter_names_it(live_app: LiveApp, tmp_path: Path) -> None:
    wf = tmp_path / "ci-credit-bad.yml"
    wf.write_text("quick: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 1}\n")
    out = _submit(live_app, wf, "--scheduler", "credit", "--scheduler-param", "pressure_threshold=1.5")
    assert out.returncode == 2
    assert "scheduler.pressure_threshold" in out.stderr and "must be < 1" in out.stderr
