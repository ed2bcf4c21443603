"""Workflow files of studies/h200 that no sweep file loads (probes run by hand on the GPU machine)."""

from __future__ import annotations

import yaml

from benchmarks.spec.load import load_file
from tests.benchmarks.sweep.conftest import ROOT

WORKFLOWS = ROOT / "studies" / "h200" / "workflows"


def test_the_trace_probe_runs_the_mixs_chat_alone_with_the_same_model_and_context() -> None:
    # It reproduces the crash of the mix's traced chat, so it must load what that chat loads.
    probe = load_file(WORKFLOWS / "chat-trace-probe.yml")
    assert list(probe.nodes) == ["chat"]
    chat, mix_chat = (
        yaml.safe_load((WORKFLOWS / f).read_text())["chat"] for f in ("chat-trace-probe.yml", "mix.yml")
    )
    for key in ("type", "model", "device", "n_ctx", "prompts"):
        assert chat[key] == mix_chat[key], key
