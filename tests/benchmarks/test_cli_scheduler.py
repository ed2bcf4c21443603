"""``consumerbench run`` with scheduler parameters: from the YAML, from ``--scheduler-param``, refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.cli import EXIT_OK, EXIT_USAGE
from benchmarks.cli import main as cli_main
from benchmarks.results import load_bundle

WORKFLOW = (
    "scheduler: {name: credit, pressure_threshold: 0.4}\n"
    "chat: {type: Synthetic, steps: 2, step_ms: 1, num_requests: 2, priority: high, slo: ['e2e<=1s']}\n"
    "nap: {type: Sleep, sleep_time: 0.01, num_requests: 1}\n"
)


def run(tmp_path: Path, *args: str) -> tuple[int, Path]:
    wf = tmp_path / "wf.yml"
    wf.write_text(WORKFLOW)
    out = tmp_path / "out"
    return cli_main(["run", str(wf), "--out", str(out), "--monitor-hz", "0", *args]), out


def test_a_run_records_the_scheduler_parameters_of_the_workflow_with_defaults(tmp_path: Path) -> None:
    code, out = run(tmp_path)
    assert code == EXIT_OK
    recorded = json.loads((out / "result.json").read_text())["scheduler"]
    assert recorded["name"] == "credit"
    assert recorded["params"]["pressure_threshold"] == 0.4
    assert recorded["params"]["max_wait_s"] == 2.0  # a default, filled in
    assert load_bundle(out).scheduler["params"]["pressure_threshold"] == 0.4


def test_scheduler_param_overrides_the_workflow(tmp_path: Path) -> None:
    code, out = run(tmp_path, "--scheduler-param", "pressure_threshold=0.3", "--scheduler-param", "window=4")
    assert code == EXIT_OK
    params = json.loads((out / "result.json").read_text())["scheduler"]["params"]
    assert (params["pressure_threshold"], params["window"]) == (0.3, 4)


def test_another_scheduler_does_not_take_the_workflow_parameters(tmp_path: Path) -> None:
    code, out = run(tmp_path, "--scheduler", "greedy")
    assert code == EXIT_OK
    assert json.loads((out / "result.json").read_text())["scheduler"] == {"name": "greedy", "params": {}}


def test_a_bad_or_unknown_scheduler_param_is_a_usage_error_naming_it(tmp_path: Path, capsys: Any) -> None:
    code, out = run(tmp_path, "--scheduler-param", "pressure_threshold=1.5", "--scheduler-param", "windw=3")
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--scheduler-param pressure_threshold (credit): must be < 1 (got '1.5'" in err
    assert "--scheduler-param windw (credit): unknown parameter (did you mean 'window'?)" in err
    assert not out.exists()
