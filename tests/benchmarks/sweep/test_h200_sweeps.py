"""The H200 sweep files on this CPU with the tiny models (--cpu-smoke): issue 19's credit threshold grid
and video-creation scenario, issue 21's attention kernels grid, each from its first step to its summary,
so a GPU session meets only GPU problems."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli import main
from benchmarks.sweep.model import load_sweep
from benchmarks.sweep.plan import plan
from benchmarks.sweep.state import State
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


@pytest.mark.models
def test_cpu_smoke_runs_the_mix_with_each_attention_choice_and_tables_every_level(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    smoke = [
        "sweep",
        str(STUDIES / "kernels-sharing.yml"),
        "--cpu-smoke",
        "--repeats",
        "1",
        "--state",
        str(state),
    ]
    assert main(smoke) == 0
    steps = json.loads((state / "state.json").read_text())["steps"]
    for level in ("sdpa", "math"):
        bundle = state / steps[f"mix/mix/{level}/greedy"]["bundle"]
        (image,) = [
            a
            for a in json.loads((bundle / "result.json").read_text())["applications"]
            if a["name"] == "image"
        ]
        assert image["loaded"]["attention"]["choice"] == level
        # sd3-tiny: 2 attention processors, 2 guided steps per image.
        assert image["quality"]["attention_calls"]["value"] == 4
        if level == "math":
            assert all(r["info"]["attention_backends"] == {"math": 4} for r in image["requests"])
    capsys.readouterr()
    assert main([*smoke, "--summarize"]) == 0
    grid = json.loads((state / "h200-kernels-sharing.json").read_text())["grid"]["mix"]
    assert list(grid) == ["sdpa", "math"] and list(grid["math"]) == ["greedy", "partition"]
    for level in grid.values():
        apps = level["greedy"]["apps"]
        assert (
            apps["chat"]["latency_s"]["tpot"]["p50"] > 0 and apps["captions"]["latency_s"]["chunk"]["p50"] > 0
        )
        assert apps["image"]["latency_s"]["step"]["p50"] > 0
    markdown = (state / "h200-kernels-sharing.md").read_text()
    assert (
        "| level | scheduler | runs | mean attainment | SM activity serving | chat ttft p50 (s) | "
        in markdown
    )
    assert "## Workflow mix at level math" in markdown and "attention_calls 4 calls/image" in markdown


def test_the_gpu_levels_of_the_kernels_grid_are_valid_workflows():
    # Every level applied to the mix is checked when the file loads, cbkernels' parameters by the kernel.
    sweep = load_sweep(STUDIES / "kernels-sharing.yml")
    assert [lv.name for lv in sweep.levels] == ["flash", "cudnn", "cbkernels_r128"]
    assert sweep.spec.repeats == 3 and sweep.schedulers == ["greedy", "partition"]


def test_the_traced_kernels_sweep_traces_every_gpu_process_at_two_of_the_grids_levels(tmp_path):
    # Its runs are the grid's cudnn and cbkernels_r128 cells under greedy, with every GPU process traced
    # (an account with an untraced GPU node leaves the others' figures out): the same settings as the
    # grid's but the MPS shares, which greedy ignores.
    traced, grid = (
        load_sweep(STUDIES / "kernels-sharing-trace.yml"),
        load_sweep(STUDIES / "kernels-sharing.yml"),
    )
    assert sorted(traced.spec.kernel_trace) == sorted(traced.base["mix"]["workflows"])
    assert [f"{s.level}/{s.scheduler}" for s in plan(traced, State(tmp_path))] == [
        "cudnn/greedy",
        "cbkernels_r128/greedy",
    ]
    levels = {lv.name: lv for lv in grid.levels}
    for level in traced.levels:
        without_shares = {
            t: {k: v for k, v in o.items() if k != "mps"} for t, o in levels[level.name].types.items()
        }
        assert level.types == {t: o for t, o in without_shares.items() if o}


def test_the_kernels_grid_says_which_level_needs_cbkernels_where_it_cannot_be_imported(monkeypatch):
    import sys

    from benchmarks.sweep.model import SweepFileError

    monkeypatch.setitem(sys.modules, "cbkernels.attention", None)  # what an absent module raises
    with pytest.raises(SweepFileError) as err:
        load_sweep(STUDIES / "kernels-sharing.yml")
    message = str(err.value)
    assert "level 'cbkernels_r128' on workflow 'mix': image.attention_params" in message
    assert "cbkernels needs cbkernels.attention, which cannot be imported here" in message
    assert "level 'sdpa'" not in message and "level 'cudnn'" not in message


def test_the_kernel_trace_sweep_runs_the_captions_alone_then_the_workflow_traced_at_each_level(tmp_path):
    sweep = load_sweep(STUDIES / "video-kernel-trace.yml")
    assert sweep.spec.kernel_trace == ["captions", "cover", "script"]
    steps = [f"{s.kind}/{s.level}/{s.node or s.scheduler}" for s in plan(sweep, State(tmp_path))]
    assert steps == ["solo/L1/captions", "mix/L1/greedy"]


def test_the_crowd_sweep_runs_the_captions_beside_each_number_of_image_processes(tmp_path):
    sweep = load_sweep(STUDIES / "captions-crowd.yml")
    steps = [f"{s.workflow}/{s.kind}/{s.scheduler}" for s in plan(sweep, State(tmp_path))]
    # The largest K first: the time a step is given to fit in a call is then the longest's.
    assert steps == ["k4/mix/greedy", "k2/mix/greedy", "k1/mix/greedy", "k0/mix/greedy"]
    for name, data in sweep.base.items():
        images = [n for n in data["workflows"] if n.startswith("image-")]
        # K image generators, each its own node (process), in the background, with no SLO of their own.
        assert len(images) == int(name[1:])
        assert all(data["workflows"][n].get("background") for n in images)
        assert all(data["image"]["slo"] == [] for _ in images)


def test_the_starvation_curve_runs_each_k_three_times_untraced(tmp_path):
    sweep = load_sweep(STUDIES / "captions-starvation.yml")
    steps = [f"{s.workflow}/{s.scheduler}" for s in plan(sweep, State(tmp_path))]
    assert sorted(set(steps)) == sorted(f"b{k}/greedy" for k in (8, 10, 12, 14, 16))
    assert len(steps) == 15 and not sweep.kernel_trace
    for name, data in sweep.base.items():
        busy = [n for n in data["workflows"] if n.startswith("busy-")]
        # K busy processes, each its own node (its own CUDA context), in the background.
        assert len(busy) == int(name[1:])
        assert all(data["workflows"][n].get("background") for n in busy)


@pytest.mark.models
def test_cpu_smoke_runs_the_starvation_curve_to_its_summary(tmp_path, monkeypatch, capsys):
    state = tmp_path / "state"
    smoke = ["sweep", str(STUDIES / "captions-starvation.yml"), "--cpu-smoke", "--repeats", "1"]
    assert main([*smoke, "--state", str(state)]) == 0
    assert main([*smoke, "--state", str(state), "--summarize", "--out", str(tmp_path / "summary")]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["grid"]) == 5 if "grid" in summary else summary
