"""Loading workflows (benchmarks.spec.load): dialects, canonical export, and errors users can act on."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.spec.export import dump_yaml, to_dict
from benchmarks.spec.load import from_dict, load_file, load_yaml
from benchmarks.spec.model import (
    MAX_FILE_BYTES,
    MAX_REPORTED_ERRORS,
    SpecError,
    Workflow,
    WorkflowValidationError,
)

EXAMPLES = sorted(
    p for p in (Path(__file__).parents[3] / "examples").iterdir() if p.suffix in (".yml", ".json")
)

ORIGINAL_SLEEP = """\
sleep1:
  type: SleepApplication
  sleep_time: 1.5
  num_requests: 3

sleep2:
  type: SleepApplication
  sleep_time: 2.5
  num_requests: 2

workflows:
  first_sleep:
    uses: sleep1

  second_sleep:
    uses: sleep2
    depend_on: ["first_sleep"]
"""


def errors_of(text: str) -> list[SpecError]:
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(textwrap.dedent(text))
    return info.value.errors


def only_error(text: str) -> SpecError:
    errors = errors_of(text)
    assert len(errors) == 1, errors
    return errors[0]


# --------------------------------------------------------------------------------------------------
# Dialects
# --------------------------------------------------------------------------------------------------


def test_original_sleep_config_loads_unchanged_with_legacy_type_name() -> None:
    wf = load_yaml(ORIGINAL_SLEEP, name="sleep_test")
    assert wf.name == "sleep_test"
    assert wf.applications["sleep1"].type == "Sleep"
    assert wf.applications["sleep1"].options.sleep_time == 1.5  # type: ignore[attr-defined]
    assert wf.applications["sleep2"].num_requests == 2
    assert wf.nodes["second_sleep"].depend_on == ("first_sleep",)
    assert wf.topological_order() == ["first_sleep", "second_sleep"]


def test_native_units_accept_device_mps_and_num_requests_on_every_type() -> None:
    wf = load_yaml(
        """
        a:
          type: synthetic
          device: cpu
          mps: 40
          num_requests: 2
        b:
          type: sleep
          device: CPU
          mps: 60
        workflows:
          x: {uses: a}
          y: {uses: b, background: true}
    """.replace("\n        ", "\n")
    )
    assert wf.applications["a"].mps == 40
    assert wf.applications["b"].device == "cpu"
    assert wf.nodes["y"].background is True


def test_server_model_becomes_model_and_client_model_is_kept() -> None:
    wf = load_yaml("""
s:
  type: Sleep
  server_model: /models/llama.gguf
  client_model: openai/meta-llama/Llama-3.2-3B-Instruct
workflows:
  n: {uses: s}
""")
    assert wf.applications["s"].model == "/models/llama.gguf"
    assert wf.applications["s"].client_model == "openai/meta-llama/Llama-3.2-3B-Instruct"


def test_missing_workflows_section_runs_every_unit_as_its_own_node() -> None:
    wf = load_yaml("a: {type: Sleep}\nb: {type: Sleep}\n")
    assert list(wf.nodes) == ["a", "b"]
    assert wf.nodes["b"].uses == "b"


def test_task_list_dialect_with_slo_strings_and_depends_on_by_name_or_type() -> None:
    wf = load_yaml("""
content:
  scheduler: greedy
  tasks:
    - name: draft
      type: Synthetic
      slo: ["E2E<2s", "step<=250ms"]
    - type: Sleep
      depends_on: [Synthetic]
    - name: final
      type: Sleep
      depends_on: [draft, sleep]
""")
    assert wf.name == "content"
    assert list(wf.applications) == ["draft", "sleep", "final"]
    slos = wf.applications["draft"].slo
    assert [(s.metric, s.op, s.threshold_s) for s in slos] == [("e2e", "<", 2.0), ("step", "<=", 0.25)]
    assert wf.nodes["sleep"].depend_on == ("draft",)
    assert wf.nodes["final"].depend_on == ("draft", "sleep")


def test_task_list_ambiguous_type_dependency_is_reported() -> None:
    error = only_error("""
        wf:
          tasks:
            - {type: Sleep, name: a}
            - {type: Sleep, name: b}
            - {type: Synthetic, depends_on: [Sleep]}
    """)
    assert "matches several tasks" in error.message and error.line == 6


def test_plain_dict_from_the_web_side_gives_the_same_workflow_as_yaml() -> None:
    data = yaml.safe_load(ORIGINAL_SLEEP)
    assert from_dict(data, name="w") == load_yaml(ORIGINAL_SLEEP, name="w")


def test_extensions_slo_priority_arrival_warmup_seed_dataset_repeat_scheduler() -> None:
    wf = load_yaml("""
name: ext
scheduler: greedy
repeat: 3
seed: 7
a:
  type: Synthetic
  slo: {e2e: 500ms}
  priority: HIGH
  arrival: {kind: poisson, rate: 4, seed: 11}
  warmup_requests: 2
  seed: 5
  dataset: prompts.jsonl
b:
  type: Synthetic
  arrival: {kind: closed, think_time_s: 0.5}
c:
  type: Synthetic
  arrival: {kind: fixed, rate: 2}
""")
    a = wf.applications["a"]
    assert (wf.repeat, wf.seed, wf.scheduler) == (3, 7, "greedy")
    assert a.slo[0].threshold_s == 0.5 and a.priority == "high"
    assert (a.arrival.kind, a.arrival.rate, a.arrival.seed) == ("poisson", 4, 11)
    assert (a.warmup_requests, a.seed, a.dataset) == (2, 5, "prompts.jsonl")
    assert wf.applications["b"].arrival.think_time_s == 0.5
    assert wf.applications["c"].arrival.kind == "fixed"


# --------------------------------------------------------------------------------------------------
# Canonical export
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_and_round_trips(path: Path) -> None:
    wf = load_file(path)
    assert load_yaml(dump_yaml(wf)) == wf


def test_round_trip_keeps_every_extension() -> None:
    wf = load_yaml("""
name: rt
description: round trip
scheduler: greedy
repeat: 2
seed: 3
a:
  type: Synthetic
  model: x
  client_model: y
  mps: 30
  slo: ["step<0.1s", "e2e<=2s"]
  priority: low
  arrival: {kind: trace, trace: t.txt}
  warmup_requests: 1
  seed: 9
  dataset: d.jsonl
  steps: 3
workflows:
  n1: {uses: a, background: true}
  n2: {uses: a, depend_on: [n1]}
""")
    again = load_yaml(dump_yaml(wf))
    assert again == wf
    assert to_dict(again) == to_dict(wf)


# --------------------------------------------------------------------------------------------------
# Errors: each kind, with its line
# --------------------------------------------------------------------------------------------------


def test_unknown_type_is_named_with_the_known_types_and_its_line() -> None:
    error = only_error("""
        a:
          type: Chatbott
    """)
    assert error.line == 3 and error.path == "a.type"
    assert "'Chatbott'" in error.message and "Sleep" in error.message and "Synthetic" in error.message


def test_unknown_key_is_named_with_the_nearest_known_key() -> None:
    error = only_error("""
        a:
          type: Sleep
          num_request: 2
    """)
    assert error.line == 4 and error.path == "a.num_request"
    assert "unknown key 'num_request'" in error.message and "did you mean 'num_requests'" in error.message


def test_uses_naming_a_missing_unit_is_reported() -> None:
    error = only_error("""
        a: {type: Sleep}
        workflows:
          n:
            uses: b
    """)
    assert error.line == 5 and "uses 'b'" in error.message


def test_depend_on_naming_a_missing_node_is_reported() -> None:
    error = only_error("""
        a: {type: Sleep}
        workflows:
          n: {uses: a}
          m:
            uses: a
            depend_on: [n, ghost]
    """)
    assert error.line == 7 and error.path == "workflows.m.depend_on[1]" and "'ghost'" in error.message


def test_cycle_in_depend_on_is_reported_with_every_node_of_the_cycle() -> None:
    error = only_error("""
        a: {type: Sleep}
        workflows:
          x: {uses: a, depend_on: [z]}
          y: {uses: a, depend_on: [x]}
          z: {uses: a, depend_on: [y]}
    """)
    assert "dependency cycle" in error.message
    assert all(n in error.message for n in ("x", "y", "z")) and error.line == 4


def test_self_dependency_is_reported() -> None:
    error = only_error("a: {type: Sleep}\nworkflows:\n  x: {uses: a, depend_on: [x]}\n")
    assert "depends on itself" in error.message and error.line == 3


def test_malformed_slo_expression_is_reported_with_the_expected_form() -> None:
    error = only_error("""
        a:
          type: Synthetic
          slo:
            - "e2e < fast"
    """)
    assert error.line == 5 and "malformed SLO" in error.message and "TTFT<1s" in error.message


def test_slo_on_a_metric_the_type_does_not_have_is_reported() -> None:
    error = only_error("a:\n  type: Sleep\n  slo: [ttft<1s]\n")
    assert "no SLO metric 'ttft'" in error.message and error.line == 3


def test_mps_out_of_range_is_reported() -> None:
    error = only_error("a:\n  type: Sleep\n  mps: 120\n")
    assert error.line == 3 and "mps" in error.message and "100" in error.message


def test_mps_shares_over_100_of_concurrent_nodes_are_reported_under_partition() -> None:
    text = """
scheduler: partition
a: {type: Sleep, mps: 60}
b: {type: Sleep, mps: 50}
workflows:
  x: {uses: a}
  y: {uses: b}
"""
    from benchmarks.schedulers import SCHEDULERS

    if "partition" not in SCHEDULERS:
        pytest.skip("the partition scheduler is not registered yet")
    error = only_error(text)
    assert "110 %" in error.message and "x" in error.message and "y" in error.message


def test_mps_shares_of_sequential_nodes_do_not_add_up() -> None:
    from benchmarks.spec.graph import concurrent_sets_max

    wf = load_yaml("""
a: {type: Sleep, mps: 60}
b: {type: Sleep, mps: 60}
c: {type: Sleep, mps: 30}
workflows:
  x: {uses: a}
  y: {uses: b, depend_on: [x]}
  bg: {uses: c, background: true}
  z: {uses: c, depend_on: [bg]}
""")
    total, nodes = concurrent_sets_max(wf, {n: wf.unit_of(n).mps or 0 for n in wf.nodes})
    # x and y never overlap; the background node overlaps with its dependent z.
    assert total == 120
    assert set(nodes) in ({"bg", "z", "x"}, {"bg", "z", "y"})


@pytest.mark.parametrize(
    ("key", "value"), [("num_requests", 0), ("num_requests", -3), ("warmup_requests", -1)]
)
def test_non_positive_counts_are_reported(key: str, value: int) -> None:
    error = only_error(f"a:\n  type: Sleep\n  {key}: {value}\n")
    assert error.line == 3 and key in error.message


def test_not_yaml_is_reported_with_its_line() -> None:
    error = only_error("a:\n  type: Sleep\n  b: [1, 2\n")
    assert "not valid YAML" in error.message and error.line is not None


def test_not_a_mapping_is_reported() -> None:
    assert "must be a mapping" in only_error("- a\n- b\n").message


def test_duplicate_keys_are_reported_not_silently_merged() -> None:
    error = only_error("a:\n  type: Sleep\n  type: Synthetic\n")
    assert "duplicate key 'type'" in error.message and error.line == 3


def test_a_duplicate_key_does_not_hide_the_other_problems() -> None:
    errors = errors_of("""
        a:
          type: Sleep
          sleep_time: 0.1
          sleep_time: 0.2
          num_requests: 0
        b:
          type: Sleep
          bogus: 1
        workflows:
          x: {uses: ghost}
    """)
    assert [(e.line, e.path) for e in errors] == [
        (5, "a.sleep_time"),
        (6, "a.num_requests"),
        (9, "b.bogus"),
        (11, "workflows.x.uses"),
    ], errors


def test_an_invalid_option_does_not_hide_the_units_common_keys() -> None:
    errors = errors_of("""
        a:
          type: Sleep
          sleep_time: -1
          num_requests: 0
          mps: 150
    """)
    assert [e.path for e in errors] == ["a.sleep_time", "a.num_requests", "a.mps"], errors


def test_a_problem_inside_a_unit_does_not_hide_the_checks_of_the_whole_workflow() -> None:
    errors = errors_of("""
        scheduler: partition
        a:
          type: Sleep
          mps: 80
          bogus: 1
        b:
          type: Sleep
          mps: 80
          num_requests: 200000
    """)
    assert [e.path for e in errors] == ["workflows", "a.bogus", "b.num_requests"], errors
    assert "sum to 160 %" in errors[0].message and "over the limit of 100,000" in errors[2].message


def test_a_merge_of_a_non_mapping_is_reported_with_the_rest() -> None:
    errors = errors_of("""
        x: &x [1]
        a:
          <<: *x
          type: Sleep
          num_requests: 0
    """)
    assert "merge key" in errors[1].message and errors[2].path == "a.num_requests", errors


def test_a_long_error_list_is_cut_at_the_first_hundred_and_says_how_many_more() -> None:
    keys = "".join(f"  k{i}: 1\n" for i in range(700))
    units = "".join(f"u{j}:\n  <<: *a\n" for j in range(60))
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(f"base: &a\n  type: Sleep\n{keys}{units}")
    error = info.value
    assert error.total == 61 * 700 and len(error.errors) == MAX_REPORTED_ERRORS + 1
    assert error.errors[-1].message.startswith(f"... and {61 * 700 - MAX_REPORTED_ERRORS} more problem(s)")
    assert len(str(error).splitlines()) == MAX_REPORTED_ERRORS + 2
    assert str(error).startswith(f"{61 * 700} problem(s)")


def test_nested_merge_keys_count_every_merged_value_against_the_limit() -> None:
    laughs = "l0: &l0 {type: Sleep, x: 1}\n"
    for i in range(1, 12):
        laughs += f"l{i}: &l{i}\n  <<: [" + ", ".join([f"*l{i - 1}"] * 5) + f"]\n  y{i}: 1\n"
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(laughs)
    assert len(info.value.errors) == 1 and "expands to more than" in info.value.errors[0].message


def test_file_over_one_mebibyte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yml"
    path.write_text("# " + "x" * MAX_FILE_BYTES + "\na: {type: Sleep}\n")
    with pytest.raises(WorkflowValidationError) as info:
        load_file(path)
    assert "limit" in info.value.errors[0].message


def test_every_problem_in_a_file_is_reported_at_once_in_line_order() -> None:
    errors = errors_of("""
        a:
          type: Sleep
          num_requests: 0
        b:
          type: Nope
        c:
          type: Synthetic
          stepz: 3
        workflows:
          x: {uses: a, depend_on: [ghost]}
          y: {uses: missing}
    """)
    lines = [e.line for e in errors]
    assert len(errors) == 5 and lines == sorted(lines), errors
    assert {e.path for e in errors} == {
        "a.num_requests",
        "b.type",
        "c.stepz",
        "workflows.x.depend_on[0]",
        "workflows.y.uses",
    }


def test_error_report_is_json_ready_and_says_where() -> None:
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml("a: {type: Sleep, bogus: 1}\n", source="w.yml")
    assert info.value.to_json() == [
        {"path": "a.bogus", "line": 1, "message": "unknown key 'bogus' in unit 'a' (Sleep)"}
    ]
    assert str(info.value).startswith("w.yml: 1 problem(s)")


def test_alias_bomb_is_refused_instead_of_expanding() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += f"a{i}: &a{i} [" + ", ".join([f"*a{'' if i == 1 else i - 1}"] * 9) + "]\n"
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(bomb)
    assert "expands" in info.value.errors[0].message


def test_python_tags_are_refused() -> None:
    with pytest.raises(WorkflowValidationError):
        load_yaml("a: !!python/object/apply:os.system ['true']\n")


# --------------------------------------------------------------------------------------------------
# Property-based: any input gives a Workflow or the project's validation error, nothing else
# --------------------------------------------------------------------------------------------------

KEYS = st.sampled_from(
    [
        "type",
        "model",
        "num_requests",
        "device",
        "mps",
        "slo",
        "priority",
        "arrival",
        "uses",
        "depend_on",
        "background",
        "workflows",
        "tasks",
        "sleep_time",
        "steps",
        "Sleep",
        "Synthetic",
        "sleep",
        "a",
        "b",
        "name",
        "repeat",
        "seed",
        "scheduler",
        "kind",
        "rate",
        "warmup_requests",
        "depends_on",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 200),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["Sleep", "Synthetic", "gpu", "cpu", "high", "poisson", "e2e<1s", "step<=5ms", "a", "b"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.integers(0, 3)), children, max_size=5),
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.one_of(KEYS, st.integers(), st.none()), VALUES, max_size=6))
def test_random_mappings_give_a_workflow_or_a_validation_error(data: dict[object, object]) -> None:
    try:
        wf = from_dict(data)
    except WorkflowValidationError as exc:
        assert exc.errors and all(isinstance(e.message, str) and e.message for e in exc.errors)
        return
    assert isinstance(wf, Workflow)
    assert load_yaml(dump_yaml(wf)) == wf


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), VALUES.map(lambda v: yaml.safe_dump(v))))
def test_random_yaml_text_gives_a_workflow_or_a_validation_error(text: str) -> None:
    try:
        load_yaml(text)
    except WorkflowValidationError as exc:
        assert exc.errors
