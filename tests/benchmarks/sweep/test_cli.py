"""``consumerbench sweep``: usage errors, a budget too small for a step, a run cut by the budget, and the
H200 study's whole pipeline on this CPU with the tiny models (--cpu-smoke), then its summary."""

from __future__ import annotations

import json
import tarfile

import pytest

from benchmarks.cli import main
from benchmarks.runner import TIME_LIMIT_REASON
from benchmarks.sweep.plan import plan
from benchmarks.sweep.run import prepare_models, run_step, workflow_of
from benchmarks.sweep.state import State
from tests.benchmarks.sweep.conftest import H200, h200


def test_a_bad_sweep_file_exits_1_with_its_problems_and_lines_as_a_bad_workflow_does(tmp_path, capsys):
    bad = tmp_path / "s.yml"
    bad.write_text("name: s\nworkflows: {w: w.yml}\nschedulers: [greedy]\nlevels: []\nrepeats: many\n")
    assert main(["sweep", str(bad), "--plan"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: 2 problem(s) in the sweep file" in err
    assert "line 4: levels: List should have at least 1 item" in err and "line 5: repeats:" in err


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["sweep", str(H200), "--repeats", "0"]) == 2
    assert "--repeats must be at least 1, got 0" in capsys.readouterr().err
    assert main(["sweep", str(H200), "--from-archive", "a.tar.gz"]) == 2
    assert "--from-archive goes with --summarize" in capsys.readouterr().err
    assert main(["sweep", str(H200), "--budget-s", "0"]) == 2


def test_a_call_without_the_budget_for_a_step_runs_nothing_and_says_so(tmp_path, capsys):
    assert main(["sweep", str(H200), "--cpu-smoke", "--state", str(tmp_path), "--budget-s", "1"]) == 3
    assert "call again" in capsys.readouterr().out and not (tmp_path / "state.json").exists()


def test_summarize_before_the_knee_is_known_says_so(tmp_path, capsys):
    assert main(["sweep", str(H200), "--summarize", "--state", str(tmp_path)]) == 3
    assert "has not found the knee yet" in capsys.readouterr().err


def test_a_grid_sweep_runs_every_level_once_and_summarizes(tmp_path, capsys):
    (tmp_path / "w.yml").write_text(
        "naps:\n  type: Sleep\n  num_requests: 2\n  sleep_time: 0.01\n  slo: ['e2e<=1s']\n"
        "workflows:\n  nap: {uses: naps}\n"
    )
    sweep = tmp_path / "grid.yml"
    sweep.write_text(
        "name: grid\nworkflows: {w: w.yml}\nschedulers: [greedy]\nsolo: false\n"
        "levels:\n  - {name: low, load: two naps}\n"
        "  - {name: high, load: four naps, units: {naps: {num_requests: 4}}}\n"
    )
    state = tmp_path / "state"
    assert main(["sweep", str(sweep), "--state", str(state)]) == 0
    steps = json.loads((state / "state.json").read_text())["steps"]
    assert list(steps) == ["w/mix/low/greedy", "w/mix/high/greedy"]
    assert main(["sweep", str(sweep), "--state", str(state)]) == 0  # nothing left: nothing runs again
    assert json.loads((state / "state.json").read_text())["steps"] == steps
    assert main(["sweep", str(sweep), "--state", str(state), "--summarize"]) == 0
    tables = json.loads((state / "grid.json").read_text())
    greedy = tables["workflows"]["w"]["greedy"]
    assert greedy["runs"] == 1 and greedy["apps"]["nap"]["requests"] == 4  # the last level's
    # Several levels: every one is tabled too (the grid), e.g. levels that are a unit option's values.
    grid = tables["grid"]["w"]
    assert list(grid) == ["low", "high"] and grid["high"]["greedy"] == greedy
    assert grid["low"]["greedy"]["apps"]["nap"]["requests"] == 2
    rows = json.loads((state / "grid-sweep.json").read_text())
    assert [(r["level"], r["mean_attainment"]) for r in rows["sweep"]] == [("low", 1.0), ("high", 1.0)]
    assert rows["breaks"] == {} and rows["level"] == {"name": "high", "load": "four naps", "knee_below": None}
    text = (state / "grid.md").read_text()
    assert "A grid: every level under every scheduler" in text
    assert "| low | two naps | greedy | 100 % | nap 100 % |" in text
    assert "| level | scheduler | runs | mean attainment | SM activity serving | nap e2e p50 (s) |" in text
    low_e2e = grid["low"]["greedy"]["apps"]["nap"]["latency_s"]["e2e"]["p50"]
    assert f"| low | greedy | 1 | 100 % | — % | {low_e2e:.3f} |" in text
    assert "## Workflow w at level low" in text and "## Workflow w at level high" in text


@pytest.mark.models
def test_a_run_cut_by_the_budget_is_dropped_but_one_past_the_run_limit_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    sweep, state = h200(smoke=True), State(tmp_path / "state")
    step = next(plan(sweep, state))
    prepare_models(workflow_of(sweep, step))
    cut = run_step(sweep, state, step, 0.5)
    assert cut["status"] == "cut" and "runs again" in cut["error"]
    assert state.get(step) is None and not (state.dir / step.bundle).exists()
    assert sweep.spec.smoke is not None
    sweep.spec = sweep.spec.model_copy(
        update={"smoke": sweep.spec.smoke.model_copy(update={"run_limit_s": 0.5})}
    )
    failed = run_step(sweep, state, step, 0.5)
    assert failed["status"] == "failed" and state.get(step) == failed
    assert state.result(step)["reason"] == TIME_LIMIT_REASON.format(0.5)


@pytest.mark.models
def test_cpu_smoke_runs_the_h200_sweep_end_to_end_and_summarizes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    smoke = ["sweep", str(H200), "--cpu-smoke", "--state", str(state)]
    assert main([*smoke, "--prepare"]) == 0
    assert [p.name for p in (tmp_path / "cache" / "models").glob("*.gguf")] == ["llama-tiny@random-v1.gguf"]
    archive = tmp_path / "out" / "sweep.tar.gz"
    assert main([*smoke, "--budget-s", "400", "--archive", str(archive)]) == 0
    # Every step is recorded, and archived as it was recorded: a second call has nothing left to do.
    steps = json.loads((state / "state.json").read_text())["steps"]
    with tarfile.open(archive) as tar:
        state_file = tar.extractfile("state/state.json")
        assert state_file is not None and json.loads(state_file.read())["steps"] == steps
    assert main(smoke) == 0
    assert json.loads((state / "state.json").read_text())["steps"] == steps
    capsys.readouterr()
    assert main([*smoke, "--summarize", "--from-archive", str(archive)]) == 0
    assert "wrote" in capsys.readouterr().out
    summary = json.loads((state / "h200-schedulers.json").read_text())
    assert set(summary) == {"platform", "workflows"} and set(summary["workflows"]) == {
        "mix",
        "content-creation",
    }
    for per in summary["workflows"].values():
        assert set(per) == {"greedy", "credit", "partition"}
        # No GPU here: partition refuses with its reason instead of silently running greedy.
        assert per["partition"]["mean_attainment"] is None and "no GPU" in per["partition"]["error"]
        for scheduler in ("greedy", "credit"):
            s = per[scheduler]
            assert 0 <= s["mean_attainment"] <= 1 and 0 < s["fairness"] <= 1 and s["makespan_s"] > 0
            captions = s["apps"]["captions"]
            assert captions["type"] == "LiveCaptions" and captions["latency_s"]["chunk"]["p50"] > 0
            assert captions["slowdown_vs_solo"]["chunk"] > 0
    assert set(summary["workflows"]["mix"]["greedy"]["apps"]) == {"chat", "image", "captions"}
    sweep = json.loads((state / "h200-schedulers-sweep.json").read_text())
    assert sweep["level"]["name"] in ("L0", "L1")
    assert (sweep["sweep"][0]["level"], sweep["sweep"][0]["scheduler"]) == ("L0", "greedy")
    assert "no GPU to partition" in sweep["breaks"]["partition"]["ended"]
    text = (state / "h200-schedulers.md").read_text()
    assert "## Workflow mix" in text and "| greedy |" in text
    assert (state / "h200-schedulers-attainment.png").read_bytes().startswith(b"\x89PNG")


def test_a_grid_runs_each_scheduler_entry_with_its_parameters_and_its_bundle_records_them(tmp_path):
    (tmp_path / "w.yml").write_text(
        "naps:\n  type: Sleep\n  num_requests: 2\n  sleep_time: 0.01\n  slo: ['e2e<=1s']\n"
        "workflows:\n  nap: {uses: naps}\n"
    )
    sweep = tmp_path / "grid.yml"
    sweep.write_text(
        "name: grid\nworkflows: {w: w.yml}\nsolo: false\n"
        "schedulers:\n  - {name: credit, pressure_threshold: 0.3, label: credit-0.3}\n"
        "  - {name: credit, pressure_threshold: 0.6}\n"
        "levels:\n  - {name: low, load: two naps}\n"
    )
    state = tmp_path / "state"
    assert main(["sweep", str(sweep), "--state", str(state)]) == 0
    steps = json.loads((state / "state.json").read_text())["steps"]
    assert list(steps) == ["w/mix/low/credit-0.3", "w/mix/low/credit(pressure_threshold=0.6)"]
    recorded = {}
    for key, entry in steps.items():
        result = json.loads((state / entry["bundle"] / "result.json").read_text())
        recorded[key] = (result["scheduler"]["name"], result["scheduler"]["params"]["pressure_threshold"])
    assert recorded == {
        "w/mix/low/credit-0.3": ("credit", 0.3),
        "w/mix/low/credit(pressure_threshold=0.6)": ("credit", 0.6),
    }
    assert main(["sweep", str(sweep), "--state", str(state), "--summarize"]) == 0
    tables = json.loads((state / "grid.json").read_text())
    assert list(tables["workflows"]["w"]) == ["credit-0.3", "credit(pressure_threshold=0.6)"]
    assert "| credit(pressure_threshold=0.6) | 1 |" in (state / "grid.md").read_text()


def test_solo_runs_of_a_sweep_listing_credit_first_run_under_greedy_and_the_summary_says_so(tmp_path):
    (tmp_path / "w.yml").write_text(
        "naps:\n  type: Sleep\n  num_requests: 2\n  sleep_time: 0.01\n  slo: ['e2e<=1s']\n"
        "dozes:\n  type: Sleep\n  num_requests: 1\n  sleep_time: 0.01\n  priority: low\n"
        "workflows:\n  nap: {uses: naps}\n  doze: {uses: dozes}\n"
    )
    sweep = tmp_path / "alone.yml"
    sweep.write_text(
        "name: alone\nworkflows: {w: w.yml}\nschedulers: [credit]\nsolo: true\n"
        "levels:\n  - {name: low, load: naps}\n"
    )
    state = tmp_path / "state"
    assert main(["sweep", str(sweep), "--state", str(state)]) == 0
    steps = json.loads((state / "state.json").read_text())["steps"]
    assert list(steps) == ["w/solo/low/nap", "w/solo/low/doze", "w/mix/low/credit"]
    for key in ("w/solo/low/nap", "w/solo/low/doze"):
        assert steps[key]["scheduler"] == "greedy"
        result = json.loads((state / steps[key]["bundle"] / "result.json").read_text())
        assert result["scheduler"]["name"] == "greedy" and result["applications"][0]["gate_wait_s"] == 0.0
    mixed = json.loads((state / steps["w/mix/low/credit"]["bundle"] / "result.json").read_text())
    assert mixed["scheduler"]["name"] == "credit"
    assert main(["sweep", str(sweep), "--state", str(state), "--summarize"]) == 0
    credit = json.loads((state / "alone.json").read_text())["workflows"]["w"]["credit"]
    assert (
        credit["apps"]["nap"]["solo_scheduler"] == "greedy"
        and credit["apps"]["nap"]["solo_attainment"] == 1.0
    )
    assert credit["apps"]["nap"]["gate_wait_s"] is not None
    assert (
        "Solo: each application alone at this level, under greedy whatever"
        in (state / "alone.md").read_text()
    )
