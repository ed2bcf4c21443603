"""Issue 22 item 5's workflows in the original ConsumerBench format (studies/h200/native/) and their sweep
(studies/h200/native-configs.yml): they load as written, every model runs as its random twin, and the
sweep runs them on this CPU with the tiny models (--cpu-smoke), each to a row of the summary."""

from __future__ import annotations

import json

import pytest

from benchmarks.apps.server import ServerError, server_binary
from benchmarks.cli import main
from benchmarks.spec.load import load_file
from tests.benchmarks.sweep.conftest import ROOT

STUDIES = ROOT / "studies" / "h200"
NATIVE = sorted((STUDIES / "native").glob("*.yml"))
LLAMA_GGUF = "models/Llama-3.2-3B-Instruct-GGUF/Llama-3.2-3B-Instruct-f16.gguf"
SERVED = {"deep_research", "content_creation"}  # a deep_research unit with server_model/client_model


def test_the_native_files_are_in_the_original_format_and_every_model_gets_its_random_twin():
    assert len(NATIVE) == 6
    types = set()
    for path in NATIVE:
        text = path.read_text()
        assert "model" in text and "device: gpu" in text and "type: " in text
        workflow = load_file(path, weights="random")
        for unit in workflow.applications.values():
            types.add(unit.type)
            if unit.server is None:
                # Every model name tells its architecture: none keeps a real name that must be found.
                assert unit.model is not None and unit.model.endswith("@random"), (path.name, unit.name)
    assert types == {"Chatbot", "ImageGen", "LiveCaptions", "DeepResearch", "LLMServer"}
    content = load_file(STUDIES / "native" / "content_creation.yml", weights="random")
    assert content.nodes["analysis"].background
    # server_model + client_model: the unit's own llama-server, a background node the client depends on.
    server = content.unit_of("Analysis_deep_research_server")
    assert server.type == "LLMServer" and server.model == f"{LLAMA_GGUF}@random"


def test_the_sweep_file_runs_every_native_file_once_under_greedy_on_random_weights(capsys):
    assert main(["sweep", str(STUDIES / "native-configs.yml"), "--plan", "--state", "/nonexistent"]) == 0
    planned = capsys.readouterr().out.splitlines()
    names = sorted(p.stem for p in NATIVE)
    assert sorted(line.split("/")[0] for line in planned if "/mix/" in line) == names
    assert all(line.endswith("/mix/as-written/greedy: pending") for line in planned if "/mix/" in line)


@pytest.mark.models
def test_cpu_smoke_runs_the_native_files_as_written_or_says_why_a_served_one_did_not_run(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    state = tmp_path / "state"
    smoke = ["sweep", str(STUDIES / "native-configs.yml"), "--cpu-smoke", "--state", str(state)]
    assert main(smoke) == 0
    capsys.readouterr()
    assert main([*smoke, "--summarize"]) == 0
    per = json.loads((state / "h200-native-configs.json").read_text())["workflows"]
    assert sorted(per) == sorted(p.stem for p in NATIVE)
    try:
        server_binary()
        missing = None
    except ServerError as exc:
        missing = str(exc)
    for name, schedulers in per.items():
        greedy = schedulers["greedy"]
        if name in SERVED and missing:
            assert greedy["runs"] == 0 and missing in greedy["error"]
            continue
        assert greedy["runs"] == 1 and greedy["makespan_s"] > 0, name
        if name == "deep_research":  # a research agent has no SLO by default: no attainment
            assert greedy["mean_attainment"] is None and greedy["apps"]["research"]["slo"] == []
        else:
            assert 0 <= greedy["mean_attainment"] <= 1, name
    assert set(per["chatbot_imagegen_live_captions_mps"]["greedy"]["apps"]) == {
        "chat_summary",
        "generate_image",
        "transcript",
    }
    markdown = (state / "h200-native-configs.md").read_text()
    # A run that could not start is one row of its table, its reason on that row.
    rows = [line for line in markdown.splitlines() if "not run:" in line]
    assert len(rows) == (len(SERVED) if missing else 0)
    assert all(row.startswith("| greedy | 0 | not run: run 1: the run cannot start: unit '") for row in rows)
