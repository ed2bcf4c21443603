"""The partition scheduler's share policy (benchmarks.schedulers.mps): one policy for validation,
the launch check and the scheduler."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.schedulers import SCHEDULERS
from benchmarks.schedulers.mps import ShareError, partition_share_plan
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import WorkflowValidationError


def problems(call: Any) -> str:
    with pytest.raises(WorkflowValidationError) as info:
        call()
    return "\n".join(e.message for e in info.value.errors)


def test_validation_uses_the_schedulers_share_policy_for_nodes_without_a_share() -> None:
    text = """
scheduler: partition
a: {type: Sleep, mps: 100}
b: {type: Sleep}
workflows:
  x: {uses: a}
  y: {uses: b}
"""
    assert "no share is left for y" in problems(lambda: load_yaml(text))
    wf = load_yaml(text.replace("scheduler: partition", "scheduler: greedy"))
    with pytest.raises(ShareError, match="no share is left for y"):
        partition_share_plan(wf, ["x", "y"])
    assert partition_share_plan(wf, ["x"]) == {"x": 100}


def test_only_the_partition_scheduler_refuses_shares_it_cannot_honour() -> None:
    wf = load_yaml("a: {type: Sleep, mps: 60}\nworkflows:\n  x: {uses: a}\n  y: {uses: a}\n")
    refusing = {name for name, cls in SCHEDULERS.items() if cls.spec_problems(wf)}
    assert refusing == {"partition"}
    (message,) = SCHEDULERS["partition"].spec_problems(wf)
    assert message.startswith("under the partition scheduler") and "120 %" in message


SERVED = """
scheduler: partition
llm: {type: LLMServer, device: gpu, parallel: 3}
chat_a: {type: Chatbot, server: llm}
chat_b: {type: Chatbot, server: llm}
research: {type: DeepResearch, server: llm}
image: {type: Synthetic, device: gpu}
workflows:
  serve: {uses: llm, background: true}
  a: {uses: chat_a}
  b: {uses: chat_b}
  r: {uses: research}
  i: {uses: image}
"""


def test_a_model_server_gets_the_share_its_clients_hold_at_one_time_and_they_get_none() -> None:
    wf = load_yaml(SERVED)
    # Three clients and the image generator split the GPU four ways; the server holds its clients' three.
    assert partition_share_plan(wf, ["serve", "i"]) == {"i": 25, "serve": 75}
    # Given shares count as given; clients that never overlap (a chain: a at 30 %, then b, then r at the
    # equal 50 % they share with i) need only the largest of theirs at one time.
    chained = SERVED.replace(
        "chat_a: {type: Chatbot, server: llm}", "chat_a: {type: Chatbot, server: llm, mps: 30}"
    )
    chained = chained.replace("b: {uses: chat_b}", "b: {uses: chat_b, depend_on: [a]}")
    chained = chained.replace("r: {uses: research}", "r: {uses: research, depend_on: [b]}")
    assert partition_share_plan(load_yaml(chained), ["serve", "i"]) == {"i": 50, "serve": 50}
    # A server with a share of its own keeps it; its clients then take no part in the split.
    own = load_yaml(SERVED.replace("parallel: 3}", "parallel: 3, mps: 40}"))
    assert partition_share_plan(own, ["serve", "i"]) == {"serve": 40, "i": 60}


def test_validation_refuses_client_shares_that_leave_nothing_for_the_others() -> None:
    text = SERVED.replace(
        "chat_a: {type: Chatbot, server: llm}", "chat_a: {type: Chatbot, server: llm, mps: 100}"
    )
    assert "no share is left for b, i, r" in problems(lambda: load_yaml(text))
