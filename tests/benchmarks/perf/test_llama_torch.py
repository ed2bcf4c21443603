"""The probe of the traced llama.cpp crash (benchmarks.perf.llama_torch): each order of torch and
llama.cpp in a process of its own, how it ended, and what it had mapped; on the CPU, the mechanics."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from benchmarks.perf import llama_torch as tool

pytestmark = pytest.mark.models


def test_each_variant_runs_in_its_own_process_and_reports_how_it_ended(capsys: Any) -> None:
    assert tool.main(["llama", "torch-available", "--model", "smollm2-135m"]) == 0
    out = capsys.readouterr().out
    sections = out.split("## ")[1:]
    assert [s.split(":")[0] for s in sections] == ["llama", "torch-available"]
    for section in sections:
        assert ": exit 0 after " in section and "generated 16 tokens" in section
        assert "  libraries: " in section
    # Only the torch variant maps the libraries torch brings (its C++ runtime or OpenMP).
    assert "torch" not in sections[0].split("libraries: ")[1]
    assert "torch/lib/" in sections[1].split("libraries: ")[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CUDA step would succeed")
def test_a_failing_variant_is_reported_with_its_error_and_a_hung_one_as_timed_out(capsys: Any) -> None:
    assert tool.main(["torch-context", "--model", "smollm2-135m"]) == 0
    out = capsys.readouterr().out
    assert "## torch-context: " in out and ": exit 1 after " in out and "stderr (last 25 lines):" in out
    assert tool.main(["llama", "--model", "smollm2-135m", "--timeout-s", "0.05"]) == 0
    assert ": timed out after " in capsys.readouterr().out


def test_an_unknown_variant_is_refused_with_the_known_ones(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        tool.main(["llama", "nope"])
    assert exited.value.code == 2
    assert "unknown variant(s) nope; known: llama, torch-import" in capsys.readouterr().err


def test_a_timeout_outside_0_to_600_s_is_refused(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        tool.main(["llama", "--timeout-s", "0"])
    assert exited.value.code == 2 and "--timeout-s 0: give seconds in (0, 600]" in capsys.readouterr().err
