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
