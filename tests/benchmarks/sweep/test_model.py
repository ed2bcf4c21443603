"""The sweep file: what a good one builds, and what a bad one reports (what and where: path and line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.spec.load import from_dict
from benchmarks.sweep.model import SweepFileError, apply_overrides, load_sweep, only_node, units_of
from tests.benchmarks.sweep.conftest import h200

WORKFLOW = """\
naps:
  type: Sleep
  num_requests: 4
  sleep_time: 0.01
chat:
  type: Chatbot
  model: llama-tiny@random
  num_requests: 6
workflows:
  nap: {uses: naps}
  talk: {uses: chat}
"""

GOOD = """\
name: small
workflows:
  w: w.yml
schedulers: [greedy, credit]
levels:
  - name: L0
  - name: L1
    types:
      Chatbot: {concurrency: 3}
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "w.yml").write_text(WORKFLOW)
    path = tmp_path / "sweep.yml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str, smoke: bool = False) -> list[tuple[int | None, str, str]]:
    with pytest.raises(SweepFileError) as info:
        load_sweep(write(tmp_path, text), smoke=smoke)
    assert "problem(s) in the sweep file" in str(info.value)
    return [(e.line, e.path, e.message) for e in info.value.errors]


def test_a_good_file_loads_with_its_workflows_relative_to_it(tmp_path):
    sweep = load_sweep(write(tmp_path, GOOD))
    assert list(sweep.base) == ["w"] and [lv.name for lv in sweep.levels] == ["L0", "L1"]
    assert sweep.spec.repeats == 1 and sweep.spec.search is None and sweep.search_workflow == "w"


def test_invalid_yaml_is_reported_with_its_line(tmp_path):
    [(line, _, message)] = problems(tmp_path, GOOD.replace("name: L1", "name: L1: x"))
    assert line == 7 and message.startswith("not valid YAML")


def test_an_unknown_key_is_reported_at_its_path_and_line(tmp_path):
    [(line, path, message)] = problems(tmp_path, GOOD.replace("  - name: L0\n", "  - name: L0\n    lod: x\n"))
    assert (line, path, message) == (7, "levels[0].lod", "unknown key")


def test_every_field_problem_is_reported_together_with_its_line(tmp_path):
    found = problems(tmp_path, GOOD + "search: {threshold: 1.5}\nrepeats: 0\nrun_limit_s: -1\n")
    assert [(line, path) for line, path, _ in found] == [(10, "search"), (11, "repeats"), (12, "run_limit_s")]
    assert "between 0 (excluded) and 1" in found[0][2] and "greater than or equal to 1" in found[1][2]


def test_a_duplicate_key_is_reported_with_the_files_other_problems(tmp_path):
    found = problems(tmp_path, GOOD + "repeats: 0\nrepeats: 2\n")
    assert [(line, path) for line, path, _ in found] == [(10, "repeats"), (11, "repeats")]
    assert "greater than or equal to 1" in found[0][2] and found[1][2] == "duplicate key 'repeats'"


def test_model_checks_name_the_file_problem(tmp_path):
    for text, expected in [
        (GOOD.replace("[greedy, credit]", "[greedy, fifo]"), "unknown scheduler fifo"),
        (GOOD.replace("name: L1", "name: L0"), "level names must be unique: L0 repeated"),
        (GOOD.replace("  w: w.yml", "  ../w: w.yml"), "workflow name '../w' must be an identifier"),
        (GOOD.replace("- name: L1", "- name: ../L1"), "String should match pattern"),
        (GOOD + "search: {threshold: {greedy: 0.9}}\n", "one threshold for each scheduler"),
        (GOOD + "search: {workflow: nope, threshold: 0.9}\n", "search.workflow 'nope'"),
        (GOOD + "repeat_groups: [[greedy]]\n", "every scheduler of the sweep exactly once"),
    ]:
        messages = [m for _, _, m in problems(tmp_path, text)]
        assert any(expected in m for m in messages), (expected, messages)


def test_a_missing_or_invalid_workflow_is_reported_at_its_entry(tmp_path):
    [(line, path, message)] = problems(tmp_path, GOOD.replace("w: w.yml", "w: missing.yml"))
    assert (line, path) == (3, "workflows.w") and "cannot read the file" in message
    (tmp_path / "bad.yml").write_text("x:\n  type: Sleep\n  colour: red\nworkflows:\n  x: {uses: x}\n")
    [(_, path, message)] = problems(tmp_path, GOOD.replace("w: w.yml", "w: bad.yml"))
    assert path == "workflows.w" and "line 3" in message and "unknown key" in message


def test_an_override_that_makes_an_invalid_workflow_is_reported_at_its_level(tmp_path):
    text = GOOD.replace("Chatbot: {concurrency: 3}", "Chatbot: {concurrency: 3, temprature: 2}")
    [(line, path, message)] = problems(tmp_path, text)
    assert (line, path) == (9, "levels[1].types.Chatbot.temprature")
    assert message.startswith("level 'L1' on workflow 'w': chat.temprature: unknown key 'temprature'")
    assert "did you mean 'temperature'?" in message


def test_an_override_of_the_wrong_type_is_reported_not_crashed_on(tmp_path):
    text = (
        GOOD.replace("Chatbot: {concurrency: 3}", "Chatbot: {concurrency: many}") + "share_requests: true\n"
    )
    [(line, path, message)] = problems(tmp_path, text)
    assert (line, path) == (9, "levels[1].types.Chatbot.concurrency") and "concurrency" in message


def test_overrides_of_types_or_units_no_workflow_has_are_refused(tmp_path):
    found = problems(
        tmp_path, GOOD.replace("Chatbot:", "Chatbott:") + "    units: {napz: {num_requests: 1}}\n"
    )
    assert [(p, m) for _, p, m in found] == [
        ("levels[1].types.Chatbott", "no workflow has a application type 'Chatbott'"),
        ("levels[1].units.napz", "no workflow has a unit 'napz'"),
    ]


def test_cpu_smoke_needs_a_smoke_profile(tmp_path):
    [(_, _, message)] = problems(tmp_path, GOOD, smoke=True)
    assert "--cpu-smoke needs a 'smoke:' profile" in message


def test_a_sweep_file_that_is_not_a_mapping_or_too_deep_is_refused(tmp_path):
    assert problems(tmp_path, "- just\n- a list\n")
    [(_, _, message)] = problems(tmp_path, "a: " + "[" * 100 + "]" * 100 + "\n")
    assert "nests deeper" in message


def test_unit_overrides_come_after_type_overrides_and_star_comes_first(tmp_path):
    data = {
        "name": "w",
        "a": {"type": "Sleep", "num_requests": 1},
        "b": {"type": "Sleep", "num_requests": 1},
        "workflows": {"a": {"uses": "a"}, "b": {"uses": "b"}},
    }
    out = apply_overrides(
        data, {"*": {"num_requests": 2}, "Sleep": {"num_requests": 3}}, {"b": {"num_requests": 4}}
    )
    assert (out["a"]["num_requests"], out["b"]["num_requests"]) == (3, 4)
    assert data["a"]["num_requests"] == 1  # the base is not changed


def test_levels_override_every_unit_of_a_type_and_share_its_requests_and_solo_keeps_one_node():
    sweep = h200()
    data = sweep.workflow_dict("content-creation", sweep.levels[2])
    chats = [u for u in units_of(data).values() if u["type"] == "Chatbot"]
    assert len(chats) == 2 and all(
        c["model"] == "llama-3.2-3b@random" and c["concurrency"] == 6 for c in chats
    )
    # Sessions share the unit's requests (ceil): 6 brainstorm turns and 4 outline turns over 6 sessions.
    assert [c["num_requests"] for c in chats] == [1, 1]
    solo = from_dict(only_node(data, "captions"))
    assert list(solo.nodes) == ["captions"] and solo.nodes["captions"].depend_on == ()
    assert list(solo.applications) == ["live_captions"]
    assert (
        solo.applications["live_captions"].concurrency == 2
        and solo.applications["live_captions"].num_requests == 1
    )


def test_the_smoke_profile_puts_every_unit_on_the_cpu_with_the_tiny_models():
    sweep = h200(smoke=True)
    data = sweep.workflow_dict("mix", sweep.levels[0], audio="clip.wav")
    units = {u["type"]: u for u in units_of(data).values()}
    assert {u["device"] for u in units.values()} == {"cpu"}
    assert units["Chatbot"]["model"] == "llama-tiny@random" and units["ImageGen"]["height"] == 64
    assert units["LiveCaptions"]["backend"] == "transformers" and units["LiveCaptions"]["audio"] == "clip.wav"
    assert [lv.name for lv in sweep.levels] == ["L0", "L1"] and sweep.run_limit_s == 90


ENTRIES = GOOD.replace(
    "[greedy, credit]",
    "\n  - greedy\n  - {name: credit, pressure_threshold: 0.4}\n"
    "  - {name: credit, pressure_threshold: 0.5, label: credit-0.5}\n"
    "  - {name: credit, pressure_threshold: 0.3}",
)


def test_scheduler_entries_with_parameters_are_named_by_their_labels(tmp_path):
    sweep = load_sweep(write(tmp_path, ENTRIES))
    assert sweep.schedulers == ["greedy", "credit(pressure_threshold=0.4)", "credit-0.5", "credit"]
    assert sweep.scheduler("greedy") == ("greedy", {})
    assert sweep.scheduler("credit(pressure_threshold=0.4)") == ("credit", {"pressure_threshold": 0.4})
    assert sweep.scheduler("credit-0.5") == ("credit", {"pressure_threshold": 0.5})
    # 0.3 is credit's default: the label names only what differs from it.
    assert sweep.scheduler("credit") == ("credit", {"pressure_threshold": 0.3})


def test_repeat_groups_and_thresholds_name_schedulers_by_label(tmp_path):
    text = ENTRIES.replace("  - {name: credit, pressure_threshold: 0.3}\n", "\n")
    text += "repeat_groups: [[greedy, credit-0.5], ['credit(pressure_threshold=0.4)']]\n"
    text += "search: {threshold: {greedy: 0.9, credit-0.5: 0.8, 'credit(pressure_threshold=0.4)': 0.8}}\n"
    sweep = load_sweep(write(tmp_path, text))
    assert sweep.threshold("credit-0.5") == 0.8
    bad = text.replace("[greedy, credit-0.5]", "[greedy, credit]")
    assert any("exactly once (by label)" in m for _, _, m in problems(tmp_path, bad))


def test_bad_scheduler_parameters_are_reported_with_their_line(tmp_path):
    text = GOOD.replace(
        "[greedy, credit]",
        "\n  - greedy\n  - {name: credit, pressure_treshold: 0.4}"
        "\n  - {name: credit, pressure_threshold: 1.5}"
        "\n  - {name: fifo}\n  - {name: credit, label: ../x}",
    )
    found = problems(tmp_path, text)
    by_line = {line: message for line, _, message in found}
    assert "pressure_treshold: unknown parameter" in by_line[6] and "pressure_threshold" in by_line[6]
    assert "pressure_threshold: must be < 1 (got 1.5" in by_line[7]
    assert "unknown scheduler fifo" in by_line[8]
    assert "String should match pattern" in by_line[9]
    paths = ["schedulers[1]", "schedulers[2]", "schedulers[3]", "schedulers[4].label"]
    assert [path for _, path, _ in found] == paths


def test_two_entries_with_the_same_label_are_an_error(tmp_path):
    text = GOOD.replace("[greedy, credit]", "[credit, {name: credit, pressure_threshold: 0.3}]")
    assert any("credit repeated" in m for _, _, m in problems(tmp_path, text))


def test_weights_random_runs_every_workflow_of_the_sweep_on_the_random_twins(tmp_path):
    from benchmarks.spec.load import from_dict

    path = write(tmp_path, GOOD + "weights: random\n")
    (tmp_path / "w.yml").write_text(WORKFLOW.replace("llama-tiny@random", "meta-llama/Llama-3.2-1B-Instruct"))
    sweep = load_sweep(path)
    workflow = from_dict(sweep.workflow_dict("w", sweep.levels[0]))
    assert workflow.weights == "random"
    assert workflow.applications["chat"].model == "meta-llama/Llama-3.2-1B-Instruct@random"
    plain = load_sweep(write(tmp_path, GOOD))
    assert from_dict(plain.workflow_dict("w", plain.levels[0])).weights == "real"


def test_solo_and_kernel_trace_name_nodes_and_an_unknown_one_is_reported_at_its_line(tmp_path):
    sweep = load_sweep(write(tmp_path, GOOD + "solo: [talk]\nkernel_trace: [talk, nap]\n"))
    assert sweep.solo_nodes("w") == ["talk"] and sweep.spec.kernel_trace == ["talk", "nap"]
    assert load_sweep(write(tmp_path, GOOD)).solo_nodes("w") == ["nap", "talk"]
    assert load_sweep(write(tmp_path, GOOD + "solo: false\n")).solo_nodes("w") == []
    assert problems(tmp_path, GOOD + "solo: [talk, sing]\nkernel_trace: [dance]\n") == [
        (10, "solo[1]", "no workflow has a node 'sing'"),
        (11, "kernel_trace[0]", "no workflow has a node 'dance'"),
    ]


def test_a_solo_list_too_long_is_refused_with_its_bound(tmp_path):
    names = ", ".join(["talk"] * 321)
    assert problems(tmp_path, GOOD + f"solo: [{names}]\n") == [(10, "solo", "at most 320 node names")]
