"""DeepResearch: the agent loop on the packaged SmolLM2 with the offline tools."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import pytest

from benchmarks.apps.datasets import Input
from benchmarks.apps.research import APP, Library, action_grammar, calculate, check
from benchmarks.data import DATA_DIR
from benchmarks.metrics import quality_figures
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml

RESEARCH = """
research:
  type: DeepResearch
  model: smollm2-135m
  num_requests: 1
  max_steps: 3
  device: cpu
"""


@pytest.mark.models
def test_the_agent_calls_a_tool_and_answers(run_driver, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "How many planets does the solar system have?"}) + "\n")
    run = run_driver(RESEARCH + f"  questions: {questions}\n")
    (record,) = run.records
    info = record["info"]
    assert info["tool_calls"] >= 1
    assert info["trace"][0]["action"] == "search" and info["trace"][0]["observation_chars"] > 0
    # The question's entry, not its text, and no document text: file contents stay out of results.
    assert info["question_index"] == 0 and "question" not in info
    assert all("observation" not in step for step in info["trace"])
    assert info["answer"].strip()
    assert info["llm_calls"] == 1 + info["steps"]  # the plan, then one call per step
    assert info["tokens_in"] > info["tokens_out"] > 0
    assert run.gate.steps["prefill"] == info["llm_calls"]
    assert record["metrics"]["e2e"] > 0


@pytest.mark.models
def test_the_llama_settings_reach_the_agents_model(run_driver, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "What is 2 + 2?"}) + "\n")
    settings = "  flash_attn: true\n  n_batch: 128\n  n_ubatch: 64\n  type_k: q8_0\n  type_v: q8_0\n"
    spec = RESEARCH.replace("max_steps: 3", "max_steps: 2") + f"  questions: {questions}\n" + settings
    run = run_driver(spec)
    assert run.loaded["llama"] == {
        "flash_attn": True, "n_batch": 128, "n_ubatch": 64, "type_k": "q8_0", "type_v": "q8_0"
    }  # fmt: skip
    assert [r["status"] for r in run.records] == ["ok"]


@pytest.mark.models
def test_the_quality_figures_summarise_steps_tool_calls_and_the_found_rate(run_driver, tmp_path):
    questions = tmp_path / "q.jsonl"
    rows = [
        {"question": "How many planets does the solar system have?", "expected": ["planet"]},
        {"question": "What is 12 times 7?", "expected": ["no model says this: xq-17"]},
        {"question": "Name a moon of Jupiter."},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = run_driver(RESEARCH.replace("num_requests: 1", "num_requests: 3") + f"  questions: {questions}\n")
    infos = [r["info"] for r in run.records]
    quality = quality_figures(run.records, APP.quality)
    assert set(quality) == {"steps", "tool_calls", "found_rate"}
    assert quality["steps"] == {
        "value": pytest.approx(sum(i["steps"] for i in infos) / 3),
        "unit": "steps/request",
        "count": 3,
    }
    assert quality["tool_calls"]["value"] == pytest.approx(sum(i["tool_calls"] for i in infos) / 3)
    assert quality["tool_calls"]["value"] >= 1
    # Only the two questions that name expected words count; the made-up word is never found.
    assert "expected_found" not in infos[2] and infos[1]["expected_found"] is False
    assert quality["found_rate"] == {"value": infos[0]["expected_found"] / 2, "unit": "fraction", "count": 2}


@pytest.mark.models
def test_old_tool_exchanges_are_dropped_when_the_context_window_fills(run_driver):
    spec = (
        RESEARCH.replace("max_steps: 3", "max_steps: 6")
        + "  n_ctx: 512\n  max_tokens: 16\n  answer_tokens: 16\n"
    )
    run = run_driver(spec)
    (record,) = run.records
    assert record["status"] == "ok" and record["info"]["steps"] >= 5
    assert record["info"]["dropped_exchanges"] >= 1 and record["info"]["answer"]


class Stops:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))


@pytest.mark.models
def test_background_research_stops_within_two_seconds_of_the_foreground_finishing():
    workflow = load_yaml(
        RESEARCH.replace("max_steps: 3", "max_steps: 20")
        + """
pause:
  type: Sleep
  sleep_time: 1
workflows:
  research_bg: {uses: research, background: true}
  pause_node: {uses: pause, depend_on: [research_bg]}
""",
        name="bg",
    )
    sink = Stops()
    started = time.monotonic()
    result = run_workflow(workflow, sink=sink)
    assert time.monotonic() - started < 60
    node = next(n for n in result.nodes if n.name == "research_bg")
    assert node.status == "stopped"
    asked = next(e["t"] for e in sink.events if e["kind"] == "node_status" and e.get("status") == "stopping")
    # finished_at is when the process was reaped, after it saw the stop at a token boundary.
    assert node.finished_at - asked < 2.0


def test_search_ranks_the_document_that_answers_first():
    library = Library(Input("research", None, DATA_DIR / "documents"))
    assert library.search("real-time factor live captions whisper")[0][0] == "speech-recognition"
    assert library.search("zzzz qqqq") == []


def test_the_calculator_does_arithmetic_and_nothing_else():
    assert calculate("200 / 40") == 5
    assert calculate("(1 + 0.05) ** 5 * 1000") == pytest.approx(1276.28, abs=0.01)
    for bad in ("__import__('os')", "2 ** 1000", "1 / 0", "x + 1"):
        with pytest.raises(ValueError):
            calculate(bad)


@pytest.mark.parametrize("expression", ["-" * 995 + "1", "(" * 400 + "1" + ")" * 400, "1+" * 2000 + "1"])
def test_the_calculator_refuses_deep_or_long_model_output_without_crashing(expression: str) -> None:
    with pytest.raises(ValueError):
        calculate(expression)


def test_every_action_grammar_compiles_in_llama_cpp():
    from llama_cpp import LlamaGrammar

    ids = list(Library(Input("research", None, DATA_DIR / "documents")).docs)
    for actions in (("plan",), ("search",), ("read",), ("answer",), ("search", "read", "calc", "answer")):
        LlamaGrammar.from_string(action_grammar(actions, ids), verbose=False)


def test_a_missing_documents_folder_and_bad_questions_are_both_reported(make_unit, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": ""}\n')
    problems = check(make_unit(RESEARCH + f"  questions: {questions}\n  documents: {tmp_path / 'none'}\n"))
    assert problems == [
        "field 'questions' of unit 'research', entry 1: 'question' must be a non-empty string",
        "field 'documents' of unit 'research': no such folder",
    ]
