"""The spec model (benchmarks.spec.model) on its own: no YAML, no loader, no registry.

Every kind of invalid workflow is built through the model directly and refused with an error that
names the problem; valid SLO expressions parse and compare as documented.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from benchmarks.spec.model import (
    DEFAULT_MAX_IN_FLIGHT,
    SLO,
    Application,
    AppOptions,
    Arrival,
    Node,
    Workflow,
    dependency_cycles,
    parse_slo,
)


def unit(name: str = "a", **fields: Any) -> Application:
    return Application(
        **{
            "name": name,
            "type": "Sleep",
            "num_requests": 1,
            "priority": "low",
            "options": AppOptions(),
            **fields,
        }
    )


def node(name: str, uses: str = "a", *deps: str, background: bool = False) -> Node:
    return Node(name=name, uses=uses, depend_on=deps, background=background)


def workflow(*nodes: Node, units: tuple[Application, ...] | None = None, **fields: Any) -> Workflow:
    apps = units if units is not None else (unit(),)
    return Workflow(
        **{
            "name": "w",
            "applications": {a.name: a for a in apps},
            "nodes": {n.name: n for n in nodes},
            **fields,
        }
    )


def refused(build: Any) -> str:
    """Return the message of the error ``build()`` raises (it must raise a ValidationError)."""
    with pytest.raises(ValidationError) as info:
        build()
    return str(info.value)


# -- the DAG rules ----------------------------------------------------------------------------------


def test_a_valid_workflow_is_built_and_ordered() -> None:
    wf = workflow(node("x"), node("y", "a", "x"), node("z", "a", "x", "y"))
    assert wf.topological_order() == ["x", "y", "z"]


def test_a_node_using_a_unit_that_does_not_exist_is_refused() -> None:
    message = refused(lambda: workflow(node("x", "ghost")))
    assert "workflows.x.uses" in message and "'ghost', which is not an application unit" in message


def test_a_dependency_on_an_unknown_node_is_refused_with_the_nearest_name() -> None:
    message = refused(lambda: workflow(node("outline"), node("x", "a", "outlin")))
    assert "workflows.x.depend_on[0]" in message and "depends on 'outlin', which is not a node" in message
    assert "did you mean 'outline'" in message


def test_a_node_depending_on_itself_is_refused() -> None:
    assert "node 'x' depends on itself" in refused(lambda: workflow(node("x", "a", "x")))


def test_a_dependency_named_twice_is_refused() -> None:
    message = refused(lambda: workflow(node("x"), node("y", "a", "x", "x")))
    assert "workflows.y.depend_on[1]" in message and "depends on 'x' twice" in message


def test_a_cycle_is_refused_naming_every_node_of_it_in_order() -> None:
    message = refused(lambda: workflow(node("x", "a", "z"), node("y", "a", "x"), node("z", "a", "y")))
    assert "dependency cycle: x -> z -> y -> x" in message


def test_every_separate_cycle_is_reported() -> None:
    nodes = {
        "a": node("a", "a", "b"),
        "b": node("b", "a", "a"),
        "c": node("c", "a", "d"),
        "d": node("d", "a", "c"),
        "e": node("e", "a", "a", "c"),
    }
    assert sorted(dependency_cycles(nodes)) == [["a", "b"], ["c", "d"]]
    message = refused(lambda: workflow(*nodes.values()))
    assert "dependency cycle: a -> b -> a" in message and "dependency cycle: c -> d -> c" in message


def test_node_names_that_differ_only_in_case_are_refused() -> None:
    message = refused(lambda: workflow(node("chat"), node("Chat")))
    assert "differ only in case" in message


@pytest.mark.parametrize("name", ["../etc", "-rf", ".hidden", "a b", "x" * 65, ""])
def test_a_node_name_that_is_not_an_identifier_is_refused(name: str) -> None:
    assert "name" in refused(lambda: node(name))


@pytest.mark.parametrize("name", ["../etc", "a/b", " lead", "x" * 65])
def test_a_unit_name_that_is_not_a_label_is_refused(name: str) -> None:
    assert "name" in refused(lambda: unit(name))


def test_a_unit_or_node_filed_under_another_name_is_refused() -> None:
    apps = {"b": unit("a")}
    message = refused(lambda: Workflow(name="w", applications=apps, nodes={"x": node("x", "b")}))
    assert "unit 'b' holds a unit named 'a'" in message
    message = refused(lambda: Workflow(name="w", applications={"a": unit()}, nodes={"y": node("x")}))
    assert "node 'y' holds a node named 'x'" in message


def test_a_workflow_without_units_or_nodes_is_refused() -> None:
    message = refused(lambda: Workflow(name="w", applications={}, nodes={}))
    assert "no application units" in message and "defines no nodes" in message


def test_a_blank_workflow_name_and_bad_workflow_fields_are_refused() -> None:
    assert "must not be empty" in refused(lambda: workflow(node("x"), name="  "))
    assert "repeat" in refused(lambda: workflow(node("x"), repeat=0))
    assert "extra" in refused(lambda: workflow(node("x"), priority="high"))


def test_background_must_be_a_real_boolean() -> None:
    assert "background" in refused(lambda: Node(name="x", uses="a", background="yes"))


def test_model_validate_checks_the_dag_like_the_constructor() -> None:
    data = {
        "name": "w",
        "applications": {"a": unit()},
        "nodes": {
            "x": {"name": "x", "uses": "a", "depend_on": ["y"]},
            "y": {"name": "y", "uses": "a", "depend_on": ["x"]},
        },
    }
    assert "dependency cycle: x -> y -> x" in refused(lambda: Workflow.model_validate(data))


def test_model_copy_with_an_update_cannot_break_the_dag() -> None:
    wf = workflow(node("x"), node("y", "a", "x"))
    cyclic = {"x": node("x", "a", "y"), "y": node("y", "a", "x")}
    assert "dependency cycle" in refused(lambda: wf.model_copy(update={"nodes": cyclic}))
    message = refused(lambda: wf.model_copy(update={"applications": {"b": unit("b")}}))
    assert "node 'x' uses 'a', which is not an application unit" in message
    renamed = wf.model_copy(update={"name": "v"})
    assert renamed.name == "v" and renamed.nodes == wf.nodes


def test_model_copy_of_a_unit_or_node_with_a_bad_update_is_refused() -> None:
    assert "num_requests" in refused(lambda: unit().model_copy(update={"num_requests": 0}))
    assert "name" in refused(lambda: node("x").model_copy(update={"name": "../x"}))
    assert "rate" in refused(lambda: Arrival().model_copy(update={"rate": 2.0}))


def test_a_workflow_is_frozen() -> None:
    wf = workflow(node("x"))
    with pytest.raises(ValidationError, match="frozen"):
        wf.nodes = {}  # type: ignore[misc]


# -- units, arrivals, SLOs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "word"),
    [
        ({"num_requests": 0}, "num_requests"),
        ({"mps": 101}, "mps"),
        ({"device": "tpu"}, "device"),
        ({"priority": "urgent"}, "priority"),
        ({"concurrency": 0}, "concurrency"),
        ({"warmup_requests": -1}, "warmup_requests"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_unit_with_a_bad_field_is_refused_naming_it(fields: dict[str, Any], word: str) -> None:
    assert word in refused(lambda: unit(**fields))


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"kind": "poisson"}, "needs 'rate'"),
        ({"kind": "trace"}, "needs 'trace'"),
        ({"kind": "fixed", "rate": 1, "think_time_s": 2}, "only to the closed loop"),
        ({"kind": "closed", "rate": 1}, "'rate' does not apply"),
        ({"kind": "fixed", "rate": 0}, "rate"),
        ({"kind": "closed", "max_in_flight": 2}, "only to the open loops"),
        ({"kind": "poisson", "rate": 1, "max_in_flight": 0}, "max_in_flight"),
        ({"kind": "poisson", "rate": 1, "max_in_flight": 65}, "max_in_flight"),
    ],
)
def test_an_impossible_arrival_is_refused(fields: dict[str, Any], words: str) -> None:
    assert words in refused(lambda: Arrival(**fields))


def test_the_in_flight_cap_is_one_in_a_closed_loop_and_the_default_or_the_given_one_in_an_open_loop() -> None:
    assert Arrival().in_flight_cap == 1
    assert Arrival(kind="fixed", rate=2).in_flight_cap == DEFAULT_MAX_IN_FLIGHT
    assert Arrival(kind="trace", trace="t.txt", max_in_flight=3).in_flight_cap == 3


def test_an_slo_threshold_must_be_positive() -> None:
    assert "threshold_s" in refused(lambda: SLO(metric="ttft", threshold_s=0))


@pytest.mark.parametrize(
    ("text", "metric", "op", "seconds"),
    [
        ("TTFT<1s", "ttft", "<", 1.0),
        ("tpot <= 250ms", "tpot", "<=", 0.25),
        ("chunk<2", "chunk", "<", 2.0),
        ("step<=1500us", "step", "<=", 0.0015),
        ("e2e<1e-1s", "e2e", "<", 0.1),
    ],
)
def test_slo_expressions_parse_with_units(text: str, metric: str, op: str, seconds: float) -> None:
    slo = parse_slo(text)
    assert (slo.metric, slo.op) == (metric, op)
    assert slo.threshold_s == pytest.approx(seconds)
    assert parse_slo(str(slo)) == slo


@pytest.mark.parametrize("text", ["TTFT", "ttft>1s", "ttft<0s", "ttft<1h"])
def test_malformed_slo_expressions_are_refused_saying_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="SLO"):
        parse_slo(text)


def test_slo_met_respects_strict_and_inclusive_bounds() -> None:
    assert parse_slo("e2e<=1s").met(1.0) and not parse_slo("e2e<1s").met(1.0)


# -- the bottom layer -------------------------------------------------------------------------------


def test_importing_the_model_loads_no_other_engine_module() -> None:
    code = "import sys, benchmarks.spec.model\nprint(sorted(m for m in sys.modules if 'benchmarks' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['benchmarks', 'benchmarks.spec', 'benchmarks.spec.model']"
