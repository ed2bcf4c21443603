"""Issue 19's H200 sweep files on this CPU with the tiny models (--cpu-smoke): the credit threshold grid
and the video-creation scenario, each from its first step to its summary, so a GPU session meets only GPU
problems."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli import main
from tests.benchmarks.sweep.conftest import ROOT

STUDIES = ROOT / "studies" / "h200"


@pytest.mark.models
def test_cpu_smoke_runs_the_credit_threshold_grid_with_each_threshold(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    smoke = ["sweep", str(STUDIES / "credit-threshold.yml"), "--cpu-smoke", "--repeats", "1"]
    assert main([*smoke, "--state", str(state)]) == 0
    steps = json.loads((state / "state.json").read_text())["steps"]
    labels = ["greedy", "credit-0.3", "credit-0.4", "credit-0.5", "credit-0.6"]
    assert [k for k in steps if "/mix/" in k] == [f"mix/mix/L1/{label}" for label in labels]
    for label, threshold in zip(labels[1:], (0.3, 0.4, 0.5, 0.6), strict=True):
        bundle = state / steps[f"mix/mix/L1/{label}"]["bundle"]
        scheduler = json.loads((bundle / "result.json").read_text())["scheduler"]
        assert scheduler["name"] == "credit" and scheduler["params"]["pressure_threshold"] == threshold
    capsys.readouterr()
    assert main([*smoke, "--state", str(state), "--summarize"]) == 0
    summary = json.loads((state / "h200-credit-threshold.json").read_text())
    per = summary["workflows"]["mix"]
    assert list(per) == labels
    for label in labels:
        assert 0 <= per[label]["mean_attainment"] <= 1 and per[label]["runs"] == 1
    assert "| credit-0.3 | 1 |" in (state / "h200-credit-threshold.md").read_text()


@pytest.mark.models
def test_cpu_smoke_runs_the_video_creation_scenario_under_each_scheduler(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    smoke = ["sweep", str(STUDIES / "video-creation.yml"), "--cpu-smoke", "--state", str(state)]
    assert main(smoke) == 0
    capsys.readouterr()
    assert main([*smoke, "--summarize"]) == 0
    per = json.loads((state / "h200-video-creation.json").read_text())["workflows"]["video"]
    assert list(per) == ["greedy", "partition", "credit"]
    # No GPU here: partition refuses with its reason instead of silently running greedy.
    assert per["partition"]["mean_attainment"] is None and "no GPU" in per["partition"]["error"]
    for scheduler in ("greedy", "credit"):
        s = per[scheduler]
        assert 0 <= s["mean_attainment"] <= 1 and s["makespan_s"] > 0
        # The research agent runs in the background: measured, but stopped once the GPU work is done.
        assert set(s["apps"]) == {"research", "script", "cover", "captions"}
        assert s["apps"]["captions"]["latency_s"]["chunk"]["p50"] > 0
    sweep = json.loads((state / "h200-video-creation-sweep.json").read_text())
    assert (sweep["sweep"][0]["level"], sweep["sweep"][0]["scheduler"]) == ("L0", "greedy")


@pytest.mark.models
def test_cpu_smoke_runs_credit_at_the_next_level_beside_each_application_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    smoke = ["sweep", str(STUDIES / "credit-next-level.yml"), "--cpu-smoke", "--state", str(state)]
    assert main(smoke) == 0
    steps = json.loads((state / "state.json").read_text())["steps"]
    assert sorted(steps) == sorted(
        ["mix/solo/L2/chat", "mix/solo/L2/image", "mix/solo/L2/captions", "mix/mix/L2/credit-0.3"]
    )
    bundle = state / steps["mix/mix/L2/credit-0.3"]["bundle"]
    scheduler = json.loads((bundle / "result.json").read_text())["scheduler"]
    assert scheduler["params"]["pressure_threshold"] == 0.3
    capsys.readouterr()
    assert main([*smoke, "--summarize"]) == 0
    per = json.loads((state / "h200-credit-next-level.json").read_text())["workflows"]["mix"]
    assert list(per) == ["credit-0.3"]
    assert all(app["solo_attainment"] is not None for app in per["credit-0.3"]["apps"].values())
