"""Real applications inside workflows: concurrency on one timeline, the examples, and clean failures."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from benchmarks.runner import PreflightError, preflight, run_workflow
from benchmarks.spec.load import load_file, load_yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ("content-creation.yml", "three-apps.yml")


def no_children_left() -> bool:
    """True when no application process outlived its run (multiprocessing's resource tracker may)."""
    others = [
        p
        for p in psutil.Process().children(recursive=True)
        if "resource_tracker" not in " ".join(p.cmdline())
    ]
    return not multiprocessing.active_children() and not others


@pytest.mark.models
def test_chatbot_captions_and_imagegen_run_at_once_on_one_timeline(tmp_path):
    result = run_workflow(load_file(ROOT / "examples" / "three-apps.yml"), out_dir=tmp_path)
    assert [n.status for n in result.nodes] == ["succeeded"] * 3
    apps = {a.type: a for a in result.applications}
    assert apps["Chatbot"].metrics["ttft"].count == 8
    assert sum("wer" in r.info for r in apps["LiveCaptions"].requests) == 3
    assert apps["ImageGen"].metrics["step"].count == 8
    # One clock for all: every request sits on the run's timeline, and all three were busy together.
    spans = {t: (min(r.start for r in a.requests), max(r.end for r in a.requests)) for t, a in apps.items()}
    assert all(0 <= start < end <= result.makespan_s + 1 for start, end in spans.values())
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values())
    assert len(list((tmp_path / "artifacts" / "imagegen").glob("image-*.png"))) == 8
    assert no_children_left()
    # Each application's quality figures, summarised from its requests by the result builder.
    chat, captions, image = apps["Chatbot"].quality, apps["LiveCaptions"].quality, apps["ImageGen"].quality
    assert set(chat) == {"tokens_in", "tokens_out", "decode_rate"}
    assert chat["tokens_out"].value == pytest.approx(
        sum(r.info["tokens_out"] for r in apps["Chatbot"].requests) / 8
    )
    assert 0 < chat["tokens_out"].value <= 48 and chat["decode_rate"].unit == "tokens/s"
    itl = [x for r in apps["Chatbot"].requests for x in r.series["itl"]]
    assert chat["decode_rate"].value == pytest.approx(len(itl) / sum(itl))
    assert (captions["wer"].count, captions["wer"].unit) == (3, "fraction") and captions["wer"].value <= 0.35
    assert captions["rtf"].count == len(apps["LiveCaptions"].requests) and captions["rtf"].value > 0
    assert (image["images"].value, image["images"].count) == (8, 8)
    steps = [x for r in apps["ImageGen"].requests for x in r.series["step"]]
    assert len(steps) == 80 and image["steps_per_s"].value == pytest.approx(80 / sum(steps))


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_examples_validate_and_can_start_here(name):
    assert preflight(load_file(ROOT / "examples" / name)) == []


def test_a_missing_model_stops_the_run_before_anything_starts():
    workflow = load_yaml("chat:\n  type: Chatbot\n  model: llama-99b\n  device: cpu\n", name="t")
    with pytest.raises(PreflightError) as err:
        run_workflow(workflow)
    (problem,) = err.value.problems
    assert problem.startswith("unit 'chat': model 'llama-99b' is not a catalogue name")
    assert no_children_left()


def test_the_cli_reports_a_bad_audio_file_once_and_exits_2(tmp_path):
    bad = tmp_path / "talk.wav"
    bad.write_bytes(b"\x00" * 64)
    spec = tmp_path / "w.yml"
    spec.write_text(f"captions:\n  type: live_captions\n  client_command_file: {bad}\n  device: cpu\n")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", "run", str(spec), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if bad.name in line]
    assert len(lines) == 1 and "not readable audio" in lines[0] and "unit 'captions'" in lines[0]
    assert no_children_left()


@pytest.mark.models
def test_a_corrupt_model_fails_its_node_and_skips_its_dependents_without_stray_processes(tmp_path):
    corrupt = tmp_path / "broken.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 4096)
    workflow = load_yaml(
        f"""
chat:
  type: Chatbot
  model: {corrupt}
  device: cpu
after:
  type: Sleep
  sleep_time: 0
workflows:
  chat_node: {{uses: chat}}
  after_node: {{uses: after, depend_on: [chat_node]}}
""",
        name="t",
    )
    result = run_workflow(workflow)
    status = {n.name: (n.status, n.reason) for n in result.nodes}
    assert status["chat_node"][0] == "failed" and "broken.gguf" in status["chat_node"][1]
    assert status["after_node"] == ("skipped", "dependency 'chat_node' failed")
    assert no_children_left()


LEGACY = """
Brainstorm (chatbot):
    model: /models/Llama-3.2-3B-Instruct-f16.gguf
    num_requests: 10
    device: cpu
    type: Chatbot
    mps: 100

Analysis (deep_research):
    server_model: /models/Llama-3.2-3B-Instruct-f16.gguf
    client_model: openai/meta-llama/Llama-3.2-3B-Instruct
    num_requests: 1
    device: cpu
    type: DeepResearch

Generating Captions (live_captions):
    num_requests: 1
    device: cpu
    client_command_file: /datasets/earnings/chunk_002.wav
    type: LiveCaptions

workflows:
    analysis:
        uses: Analysis (deep_research)
        background: true
    brainstorm:
        uses: Brainstorm (chatbot)
    captions:
        uses: Generating Captions (live_captions)
        depend_on: ["brainstorm", "analysis"]
"""


def test_a_workflow_in_the_original_format_loads_and_its_missing_files_are_named():
    workflow = load_yaml(LEGACY, name="legacy")
    # server_model + client_model: the unit is the client of a model server of its own (issue 23).
    analysis = workflow.unit_of("analysis")
    assert (analysis.server, analysis.model) == ("Analysis (deep_research) server", None)
    assert analysis.client_model == "openai/meta-llama/Llama-3.2-3B-Instruct"
    assert workflow.unit_of("Analysis_deep_research_server").model == "/models/Llama-3.2-3B-Instruct-f16.gguf"
    assert workflow.nodes["Analysis_deep_research_server"].background
    assert workflow.unit_of("captions").options.client_command_file == "/datasets/earnings/chunk_002.wav"
    # Where llama-server is not built, that is one more problem of the server unit.
    problems = [p for p in preflight(workflow) if "llama-server is not installed" not in p]
    assert len(problems) == 3
    assert problems[0].startswith(
        "unit 'Brainstorm (chatbot)': model '/models/Llama-3.2-3B-Instruct-f16.gguf'"
    )
    assert (
        problems[1]
        == "field 'client_command_file' of unit 'Generating Captions (live_captions)': no such file"
    )
    assert problems[2].startswith(
        "unit 'Analysis (deep_research) server': model '/models/Llama-3.2-3B-Instruct-f16.gguf'"
    )
