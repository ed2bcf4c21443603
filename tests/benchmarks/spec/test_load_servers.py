"""Model servers in the spec (benchmarks.spec.model ``server_problems``, benchmarks.spec.load): the
LLMServer unit, its clients' ``server:`` key, and the rules that make a client/server pair runnable."""

from __future__ import annotations

import pytest

from benchmarks.spec.export import dump_yaml
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import SpecError, Workflow, WorkflowValidationError

# The YAML of issue 23, as written there.
SHARED = """\
llm:
  type: LLMServer
  model: smollm2-135m        # any model the Chatbot accepts
  device: cpu                # or gpu
  parallel: 3                # concurrent sequences batched together
chat_a: {type: Chatbot, server: llm, num_requests: 4}
chat_b: {type: Chatbot, server: llm, num_requests: 4}
research: {type: DeepResearch, server: llm, num_requests: 1}
workflows:
  serve: {uses: llm, background: true}
  a: {uses: chat_a}
  b: {uses: chat_b}
  r: {uses: research}
"""


def errors_of(text: str) -> list[SpecError]:
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(text)
    return info.value.errors


def test_the_shared_server_yaml_loads_with_each_client_waiting_for_the_server_node() -> None:
    wf = load_yaml(SHARED)
    assert wf.applications["llm"].options.parallel == 3
    assert wf.applications["chat_a"].server == "llm" and wf.applications["chat_a"].model is None
    assert [wf.dependencies(n) for n in ("serve", "a", "b", "r")] == [(), ("serve",), ("serve",), ("serve",)]
    assert wf.topological_order()[0] == "serve"
    # Export keeps the server key and no model on a client; it loads back to the same workflow.
    text = dump_yaml(wf)
    assert "server: llm" in text
    assert load_yaml(text, name=wf.name) == wf


def test_a_client_naming_an_unknown_server_is_reported_at_its_server_key_with_a_suggestion() -> None:
    (error,) = errors_of(
        SHARED.replace("chat_b: {type: Chatbot, server: llm", "chat_b: {type: Chatbot, server: lm")
    )
    assert (error.path, error.line) == ("chat_b.server", 7)
    assert "names server 'lm', which is not a unit here (did you mean 'llm'?)" in error.message


def test_a_client_naming_a_unit_that_is_no_server_is_reported_with_the_server_types() -> None:
    text = SHARED.replace("server: llm, num_requests: 1", "server: chat_a, num_requests: 1")
    (error,) = errors_of(text)
    assert (error.path, error.line) == ("research.server", 8)
    assert "'chat_a', a Chatbot unit, which is not a model server (server types: LLMServer)" in error.message


def test_types_that_cannot_use_a_server_and_clients_with_a_model_are_reported_together() -> None:
    errors = errors_of(
        SHARED.replace(
            "chat_a: {type: Chatbot, server: llm,", "chat_a: {type: Chatbot, server: llm, model: x,"
        )
        + "img: {type: ImageGen, server: llm}\n"
    )
    assert [(e.path, e.line) for e in errors] == [("chat_a.model", 6), ("img.server", 14)]
    assert "names a server, whose model it uses: remove 'model'" in errors[0].message
    assert (
        "(ImageGen) cannot use a model server; the types that can: Chatbot, DeepResearch" in errors[1].message
    )


def test_a_server_node_must_run_in_the_background_and_alone() -> None:
    (error,) = errors_of(SHARED.replace("serve: {uses: llm, background: true}", "serve: {uses: llm}"))
    assert (error.path, error.line) == ("workflows.serve.background", 10)
    assert "needs background: true" in error.message
    errors = errors_of(SHARED + "  serve2: {uses: llm, background: true}\n")
    assert [e.path for e in errors] == ["chat_a.server", "chat_b.server", "research.server"]
    assert all(
        "which nodes serve, serve2 all run; a server unit needs exactly one node" in e.message for e in errors
    )


def test_a_server_unit_without_a_node_and_a_cycle_through_a_server_are_reported() -> None:
    no_node = SHARED.replace("  serve: {uses: llm, background: true}\n", "")
    assert {e.message for e in errors_of(no_node)} == {
        f"unit '{u}' names server 'llm', but no node runs 'llm' (add one with background: true)"
        for u in ("chat_a", "chat_b", "research")
    }
    (error,) = errors_of(
        SHARED.replace(
            "serve: {uses: llm, background: true}", "serve: {uses: llm, background: true, depend_on: [a]}"
        )
    )
    assert (
        error.path == "workflows.serve"
        and "dependency cycle through a model server: serve -> a -> serve" in error.message
    )


def test_the_model_refuses_a_server_rule_broken_after_loading() -> None:
    wf = load_yaml(SHARED)
    with pytest.raises(ValueError, match="needs background: true"):
        Workflow.model_validate(
            {
                **wf.model_dump(),
                "nodes": {**wf.model_dump()["nodes"], "serve": {"name": "serve", "uses": "llm"}},
            }
        )


def test_server_model_and_client_model_give_a_chatbot_a_server_of_its_own() -> None:
    wf = load_yaml("""\
Brainstorm (chatbot):
  type: Chatbot
  server_model: smollm2-135m
  client_model: openai/llama
  device: cpu
  n_ctx: 1024
  num_requests: 2
workflows:
  brainstorm: {uses: Brainstorm (chatbot)}
""")
    client = wf.applications["Brainstorm (chatbot)"]
    assert (client.server, client.model, client.client_model) == (
        "Brainstorm (chatbot) server",
        None,
        "openai/llama",
    )
    server = wf.applications["Brainstorm (chatbot) server"]
    assert (server.type, server.model, server.device, server.options.n_ctx) == (
        "LLMServer",
        "smollm2-135m",
        "cpu",
        1024,
    )
    assert wf.nodes["Brainstorm_chatbot_server"].background
    assert wf.dependencies("brainstorm") == ("Brainstorm_chatbot_server",)
    # Without 'workflows:' the server is a background node of its own name.
    wf = load_yaml("c: {type: DeepResearch, server_model: smollm2-135m, client_model: x, num_requests: 1}\n")
    assert [(n.name, n.uses, n.background) for n in wf.nodes.values()] == [
        ("c", "c", False),
        ("c_server", "c_server", True),
    ]
    assert wf.applications["c_server"].options.n_ctx == 4096  # DeepResearch's default context
    # Other types keep server_model as their model.
    sleep = load_yaml("s: {type: Sleep, server_model: m.gguf, client_model: x}\n").applications["s"]
    assert (sleep.model, sleep.server) == ("m.gguf", None)


def test_a_servers_whole_context_is_bounded() -> None:
    (error,) = errors_of(SHARED.replace("parallel: 3 ", "parallel: 64\n  n_ctx: 4096 "))
    assert (
        error.path == "llm"
        and "n_ctx x parallel is 262,144 tokens, over the server's limit of 131,072" in error.message
    )
