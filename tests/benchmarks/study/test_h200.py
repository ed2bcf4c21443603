"""The H200 study driver: its plan, the workflows it derives, and the whole pipeline on the CPU."""

from __future__ import annotations

import json
import tarfile
from xml.etree import ElementTree

import pytest

from benchmarks.metrics import application_metrics
from benchmarks.runner import TIME_LIMIT_REASON
from benchmarks.spec.load import from_dict
from benchmarks.spec.model import parse_slo
from benchmarks.study.h200 import (
    HAND_WRITTEN_MARKER,
    KNEE,
    RUN_LIMIT_S,
    SMOKE_LEVELS,
    State,
    Step,
    Study,
    apply_overrides,
    knee,
    main,
    only_node,
    plan,
    prepare_models,
    run_step,
    summarize,
    workflow_of,
    write_summary,
)


def fake_result(state: State, step: Step, attainment: float | None) -> None:
    """Record a step as run, with a minimal result.json holding its mean attainment."""
    bundle = state.dir / step.key.replace("/", "-")
    bundle.mkdir(parents=True)
    (bundle / "result.json").write_text(json.dumps({"mean_attainment": attainment}))
    state.put(step, {"bundle": bundle.name, "status": "completed", "wall_s": 1.0})


def test_the_sweep_runs_level_by_level_and_stops_at_the_first_level_where_greedy_misses(tmp_path):
    study = Study(tmp_path, smoke=False)
    state = State(tmp_path)
    assert [s.key for s in plan(study, state)] == ["mix/sweep/L0/greedy"]
    fake_result(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    assert [s.key for s in plan(study, state)][-1] == "mix/sweep/L1/greedy"
    fake_result(state, Step("mix", "sweep", "L1", "greedy"), KNEE - 0.01)
    assert knee(study, state).name == "L1"
    keys = [s.key for s in plan(study, state)]
    # Each node alone at the knee, then the mix under the two other schedulers, then the DAG.
    assert keys[2:] == [
        "mix/solo/L1/chat",
        "mix/solo/L1/image",
        "mix/solo/L1/captions",
        "mix/mix/L1/credit",
        "mix/mix/L1/partition",
        "content-creation/solo/L1/brainstorm",
        "content-creation/solo/L1/outline",
        "content-creation/solo/L1/cover_art",
        "content-creation/solo/L1/captions",
        "content-creation/mix/L1/greedy",
        "content-creation/mix/L1/credit",
        "content-creation/mix/L1/partition",
    ]


def test_repeats_come_after_every_other_step_greedy_and_credit_first(tmp_path):
    study, state = Study(tmp_path, repeats=3), State(tmp_path)
    fake_result(state, Step("mix", "sweep", "L0", "greedy"), KNEE - 0.01)
    keys = [s.key for s in plan(study, state)]
    assert keys[:13] == [s.key for s in plan(Study(tmp_path), state)]
    assert keys[13:19] == [
        "mix/mix/L0/greedy/r2",
        "mix/mix/L0/credit/r2",
        "content-creation/mix/L0/greedy/r2",
        "content-creation/mix/L0/credit/r2",
        "mix/mix/L0/partition/r2",
        "content-creation/mix/L0/partition/r2",
    ]
    assert keys[19:] == [k.replace("/r2", "/r3") for k in keys[13:19]]


def test_repeats_below_one_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--state", str(tmp_path), "--repeats", "0"])
    assert "--repeats must be at least 1, got 0" in capsys.readouterr().err


def test_a_level_that_could_not_run_ends_the_sweep_at_the_level_before(tmp_path):
    study, state = Study(tmp_path), State(tmp_path)
    fake_result(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    fake_result(state, Step("mix", "sweep", "L1", "greedy"), 0.95)
    state.put(
        Step("mix", "sweep", "L2", "greedy"),
        {"status": "not run", "error": "CUDA out of memory", "wall_s": 9},
    )
    assert knee(study, state).name == "L1"
    assert "mix/sweep/L3/greedy" not in [s.key for s in plan(study, state)]


def test_a_crashed_application_is_not_taken_for_an_slo_miss(tmp_path):
    study, state = Study(tmp_path), State(tmp_path)
    fake_result(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    fake_result(state, Step("mix", "sweep", "L1", "greedy"), 0.5)
    entry = state.get(Step("mix", "sweep", "L1", "greedy"))
    state.put(Step("mix", "sweep", "L1", "greedy"), {**entry, "error": "chat: killed by SIGSEGV"})
    assert knee(study, state).name == "L0"


def test_a_failed_first_level_stops_the_study_with_its_reason(tmp_path, capsys):
    state = State(tmp_path)
    fake_result(state, Step("mix", "sweep", "L0", "greedy"), 0.8)
    entry = state.get(Step("mix", "sweep", "L0", "greedy"))
    state.put(Step("mix", "sweep", "L0", "greedy"), {**entry, "error": "chat: killed by SIGSEGV"})
    assert main(["plan", "--state", str(tmp_path)]) == 2
    assert "first sweep level L0 failed: chat: killed by SIGSEGV" in capsys.readouterr().err


def test_levels_override_every_unit_of_a_type_and_solo_keeps_one_node(tmp_path):
    study = Study(tmp_path)
    data = study.workflow_dict("content-creation", study.levels[2])
    chats = [u for u in data.values() if isinstance(u, dict) and u.get("type") == "Chatbot"]
    assert len(chats) == 2 and all(
        c["model"] == "llama-3.2-3b@random" and c["concurrency"] == 6 for c in chats
    )
    solo = from_dict(only_node(data, "captions"))
    assert list(solo.nodes) == ["captions"] and solo.nodes["captions"].depend_on == ()
    assert list(solo.applications) == ["live_captions"]
    assert solo.applications["live_captions"].concurrency == 2
    # Sessions share the unit's requests (ceil): 6 brainstorm turns and 4 outline turns over 6 sessions,
    # 2 streams over 2.
    assert [c["num_requests"] for c in chats] == [1, 1]
    assert solo.applications["live_captions"].num_requests == 1


def test_the_smoke_profile_puts_every_unit_on_the_cpu_with_the_tiny_models(tmp_path):
    data = Study(tmp_path, smoke=True).workflow_dict("mix", SMOKE_LEVELS[0])
    units = {u["type"]: u for u in data.values() if isinstance(u, dict) and "type" in u}
    assert {u["device"] for u in units.values()} == {"cpu"}
    assert units["Chatbot"]["model"] == "llama-tiny@random" and units["ImageGen"]["height"] == 64
    assert units["LiveCaptions"]["backend"] == "transformers"
    assert apply_overrides(data, {}) == data


def test_a_call_without_the_budget_for_a_step_runs_nothing_and_says_so(tmp_path, capsys):
    assert main(["run", "--cpu-smoke", "--state", str(tmp_path), "--budget-s", "1"]) == 3
    assert "call again" in capsys.readouterr().out and not (tmp_path / "state.json").exists()


def test_the_archive_holds_the_state_and_bundles_without_images_and_replaces_the_last(tmp_path):
    state = State(tmp_path / "gpu")
    fake_result(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    (state.dir / "mix-sweep-L0-greedy" / "image-0.png").write_bytes(b"png")
    archive = tmp_path / "out" / "h200-study-gpu.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(b"an older archive")
    assert main(["archive", "--state", str(state.dir), "--archive", str(archive)]) == 0
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == [
            "gpu",
            "gpu/mix-sweep-L0-greedy",
            "gpu/mix-sweep-L0-greedy/result.json",
            "gpu/state.json",
        ]
    assert [p.name for p in archive.parent.iterdir()] == [archive.name]


def test_archive_without_a_path_says_what_is_missing(tmp_path, capsys):
    assert main(["archive", "--state", str(tmp_path)]) == 2
    assert "archive needs --archive PATH" in capsys.readouterr().err


@pytest.mark.models
def test_a_run_cut_by_the_calls_time_is_dropped_but_one_past_the_run_limit_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    study = Study(tmp_path / "state", smoke=True)
    state = State(study.state_dir)
    step = next(plan(study, state))
    prepare_models(workflow_of(study, step))
    cut = run_step(study, state, step, 0.5)
    assert cut["status"] == "cut" and "runs again" in cut["error"]
    assert state.get(step) is None and not (study.state_dir / step.key.replace("/", "-")).exists()
    monkeypatch.setitem(RUN_LIMIT_S, "smoke", 0.5)
    failed = run_step(study, state, step, 0.5)
    assert failed["status"] == "failed" and state.get(step) == failed
    assert json.loads((study.state_dir / failed["bundle"] / "result.json").read_text())["reason"] == (
        TIME_LIMIT_REASON.format(0.5)
    )


@pytest.mark.models
def test_cpu_smoke_runs_the_whole_study_and_writes_the_summary_in_the_issue_shape(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    assert main(["prepare", "--cpu-smoke", "--state", str(state)]) == 0
    assert [p.name for p in (tmp_path / "cache" / "models").glob("*.gguf")] == ["llama-tiny@random-v1.gguf"]
    archive = tmp_path / "out" / "h200-study-gpu.tar.gz"
    run = ["run", "--cpu-smoke", "--state", str(state), "--budget-s", "400"]
    assert main([*run, "--archive", str(archive)]) == 0
    # Every step is recorded, and archived as it was recorded: a second call has nothing left to do.
    steps = json.loads((state / "state.json").read_text())["steps"]
    with tarfile.open(archive) as tar:
        state_file = tar.extractfile("state/state.json")
        assert state_file is not None and json.loads(state_file.read())["steps"] == steps
    assert main(["run", "--cpu-smoke", "--state", str(state), "--budget-s", "400"]) == 0
    assert json.loads((state / "state.json").read_text())["steps"] == steps
    md = tmp_path / "out.md"
    md.write_text(f"# old\n\n{HAND_WRITTEN_MARKER}\n\n## How to run\n\nthe exact device calls\n")
    assert (
        main(
            [
                "summarize",
                "--cpu-smoke",
                "--state",
                str(state),
                "--json",
                str(tmp_path / "out.json"),
                "--md",
                str(md),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "out.json").read_text())
    assert set(summary) == {"platform", "workflows"}
    assert set(summary["workflows"]) == {"mix", "content-creation"}
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
    sweep = json.loads((tmp_path / "out-sweep.json").read_text())
    assert sweep["level"]["name"] in ("L0", "L1")
    assert (sweep["sweep"][0]["level"], sweep["sweep"][0]["scheduler"]) == ("L0", "greedy")
    assert "no GPU to partition" in sweep["breaks"]["partition"]["ended"]
    text = md.read_text()
    assert "## Workflow mix" in text and "| greedy |" in text
    assert text.endswith("## How to run\n\nthe exact device calls\n")  # the hand-written part is kept


def run_result(state: State, step: Step, ttfts: list[float], error: str | None = None) -> None:
    """Record a finished run of the mix whose chat made one request per TTFT (SLO 0.5 s), 1 s apart,
    from t = 2 s on; its GPM telemetry reads 0 % before then (loading) and 80 % after."""
    bundle = state.dir / step.key.replace("/", "-")
    (bundle / "telemetry").mkdir(parents=True)
    requests = [
        {
            "status": "ok",
            "warmup": False,
            "arrival": 2.0 + i,
            "start": 2.0 + i,
            "end": 2.5 + i,
            "metrics": {"ttft": ttft},
        }
        for i, ttft in enumerate(ttfts)
    ]
    app = {"name": "chat", "type": "Chatbot", "slo": ["ttft<=0.5s"], "requests": requests}
    app |= application_metrics(requests, [parse_slo("ttft<=0.5s")])
    met = app["slo_attainment"]
    result = {
        "mean_attainment": met,
        "fairness": 1.0,
        "makespan_s": 2.5 + len(ttfts),
        "platform": {"gpus": [{"name": "NVIDIA H200"}]},
        "telemetry": {"run": {"sm_activity_mean_pct": 40.0, "gpu_energy_j": 100.0}},
        "applications": [app],
    }
    (bundle / "result.json").write_text(json.dumps(result))
    rows = "".join(f"{t / 2},gpu0,{0.0 if t < 4 else 80.0},\n" for t in range(30))
    (bundle / "telemetry" / "gpm.csv").write_text("t,entity,sm_activity_pct,sm_occupancy_pct\n" + rows)
    entry = {"bundle": bundle.name, "status": "completed", "wall_s": 1.0}
    state.put(step, entry | ({"error": error} if error else {}))


def test_credit_and_partition_walk_from_the_knee_to_their_own_break_levels(tmp_path):
    study, state = Study(tmp_path), State(tmp_path)
    run_result(state, Step("mix", "sweep", "L0", "greedy"), [0.1])
    run_result(state, Step("mix", "sweep", "L1", "greedy"), [0.1, 0.9])  # greedy's knee: L1
    run_result(state, Step("mix", "mix", "L1", "credit"), [0.1])
    run_result(state, Step("mix", "mix", "L1", "partition"), [0.9])
    keys = [s.key for s in plan(study, state)]
    # Credit meets the goal at the knee, so it walks up; partition misses, so it walks down.
    assert keys[-2:] == ["mix/sweep/L2/credit", "mix/sweep/L0/partition"]
    run_result(state, Step("mix", "sweep", "L2", "credit"), [0.1] * 19 + [0.9])  # 95 %: holds
    run_result(state, Step("mix", "sweep", "L0", "partition"), [0.1])
    assert [s.key for s in plan(study, state)][-3:] == [
        "mix/sweep/L2/credit",
        "mix/sweep/L3/credit",
        "mix/sweep/L0/partition",
    ]
    run_result(state, Step("mix", "sweep", "L3", "credit"), [0.1, 0.9])
    # Credit breaks above the knee: each application alone there says whether the load alone misses.
    keys = [s.key for s in plan(study, state)]
    assert keys[-3:] == ["mix/solo/L3/chat", "mix/solo/L3/image", "mix/solo/L3/captions"]
    run_result(state, Step("mix", "solo", "L3", "greedy", "chat"), [0.9, 0.9])
    summary = summarize(study)
    assert summary["breaks"] == {
        "greedy": {"level": "L1", "pending": None, "ended": None},
        "credit": {"level": "L3", "pending": None, "ended": None},
        "partition": {"level": "L1", "pending": None, "ended": None},
    }
    rows = [(r["scheduler"], r["level"], r["mean_attainment"], r["alone"]) for r in summary["sweep"]]
    assert rows == [
        ("greedy", "L0", 1.0, {}),
        ("greedy", "L1", 0.5, {}),
        ("credit", "L1", 1.0, {}),
        ("credit", "L2", 0.95, {}),
        ("credit", "L3", 0.5, {"chat": 0.0}),
        ("partition", "L0", 1.0, {}),
        ("partition", "L1", 0.0, {}),
    ]


def test_a_scheduler_that_misses_at_every_level_down_to_l0_breaks_at_l0_and_a_failed_level_ends_a_walk(
    tmp_path,
):
    study, state = Study(tmp_path / "state"), State(tmp_path / "state")
    run_result(state, Step("mix", "sweep", "L0", "greedy"), [0.1])
    run_result(state, Step("mix", "sweep", "L1", "greedy"), [0.9])
    run_result(state, Step("mix", "mix", "L1", "partition"), [0.9])
    run_result(state, Step("mix", "sweep", "L0", "partition"), [0.1, 0.9])
    run_result(state, Step("mix", "mix", "L1", "credit"), [0.1])
    oom = {"status": "not run", "error": "CUDA out of memory", "wall_s": 9}
    state.put(Step("mix", "sweep", "L2", "credit"), oom)
    assert "mix/sweep/L3/credit" not in [s.key for s in plan(study, state)]
    write_summary(study, tmp_path / "s.json", tmp_path / "s.md")
    breaks = json.loads((tmp_path / "s-sweep.json").read_text())["breaks"]
    assert breaks["partition"]["level"] == "L0"
    assert breaks["credit"] == {"level": None, "pending": None, "ended": "L2: CUDA out of memory"}
    text = (tmp_path / "s.md").read_text()
    assert (
        "Break levels: greedy L1, credit none before its sweep ended (L2: CUDA out of memory), partition L0."
        in text
    )
    assert "| L0 | one user of each application | partition | 50 % | chat 50 % |" in text


def test_the_summary_pools_the_runs_of_a_scheduler_and_reads_sm_activity_while_serving(tmp_path):
    study, state = Study(tmp_path, repeats=2), State(tmp_path)
    run_result(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])
    run_result(state, Step("mix", "mix", "L0", "greedy", repeat=2), [0.1, 0.2])
    run_result(state, Step("mix", "solo", "L0", "greedy", "chat"), [0.1, 0.1])
    run_result(state, Step("mix", "mix", "L0", "credit"), [0.1, 0.3])
    run_result(state, Step("mix", "mix", "L0", "credit", repeat=2), [0.1, 0.3], error="chat: exit code -11")
    state.put(Step("mix", "mix", "L0", "partition"), {"status": "not run", "error": "no GPU", "wall_s": 0.1})
    summary = summarize(study)
    greedy = summary["workflows"]["mix"]["greedy"]
    assert greedy["runs"] == 2 and greedy["mean_attainment"] == pytest.approx(0.75)
    assert [r["mean_attainment"] for r in greedy["per_run"]] == [0.5, 1.0]
    assert greedy["sm_activity"] == pytest.approx(80.0) and greedy["sm_activity_run"] == 40.0
    chat = greedy["apps"]["chat"]
    assert (
        chat["requests"] == 4 and chat["slo_attainment"] == 0.75 and chat["slo_attainment_runs"] == [0.5, 1.0]
    )
    assert chat["latency_s"]["ttft"]["p50"] == pytest.approx(0.15)  # over the 4 requests pooled
    assert chat["solo_attainment"] == 1.0 and chat["slowdown_vs_solo"]["ttft"] == pytest.approx(1.5)
    # A run with a failed application is a broken measurement: reported, not averaged in.
    credit = summary["workflows"]["mix"]["credit"]
    assert credit["runs"] == 1 and credit["error"] == "run 2: chat: exit code -11"
    partition = summary["workflows"]["mix"]["partition"]
    assert partition["runs"] == 0 and partition["mean_attainment"] is None
    assert partition["error"] == "run 1: no GPU"
    assert summary["workflows"]["content-creation"]["greedy"]["runs"] == 0


def test_the_markdown_keeps_its_hand_written_part_and_shows_the_plots(tmp_path):
    study, state = Study(tmp_path / "state", repeats=2), State(tmp_path / "state")
    run_result(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])
    run_result(state, Step("mix", "mix", "L0", "greedy", repeat=2), [0.1, 0.2])
    md = tmp_path / "s.md"
    md.write_text(f"# old tables\n\n{HAND_WRITTEN_MARKER}\n\n## Findings\n\nby hand\n")
    write_summary(study, tmp_path / "s.json", md)
    text = md.read_text()
    assert "old tables" not in text and text.endswith(f"{HAND_WRITTEN_MARKER}\n\n## Findings\n\nby hand\n")
    assert "| greedy | 2 | 75 % (50 %, 100 %) | 80.0 % (40.0 %) |" in text
    for name in ("s-attainment.svg", "s-sm-activity.svg"):
        assert f"![{name}]({name})" in text
        svg = ElementTree.parse(tmp_path / name).getroot()
        assert svg.tag.endswith("svg")
    bars = (
        ElementTree.parse(tmp_path / "s-attainment.svg").getroot().iter("{http://www.w3.org/2000/svg}title")
    )
    assert [b.text for b in bars] == ["mix chat greedy: 75%"]
