"""The MPS share check as a table (benchmarks.perf.mps_shares): a private daemon, one check per share."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.perf import mps_shares as tool
from benchmarks.schedulers.mps_check import CASES, ProductCheck, ShareCheck


def test_without_mps_it_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tool.main(["--shares", "33"]) == 2
    assert "nvidia-cuda-mps-control" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the checks would find the GPU")
def test_each_share_is_checked_in_a_client_of_its_own_daemon_and_tabled(fake_mps: Path, capsys: Any) -> None:
    # The daemon is the stand-in (no MPS here); the checks run for real and find no CUDA device.
    assert tool.main(["--shares", "25,50"]) == 3  # none could be checked
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [r[:4] for r in rows] == [["25", "-", "not", "run"], ["50", "-", "not", "run"]]
    assert "not run: torch sees no CUDA device" in out
    assert not any(
        os.environ.get(k) for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    )


def test_a_row_tells_right_from_wrong_products_and_how_many_were_never_written() -> None:
    wrong = ProductCheck("float16", 2, 9216, 1536, wrong=2048, unwritten=2048, max_rel_err=0.0)
    right = [ProductCheck(d, m, n, k, 0, 0, 0.001) for d, m, n, k in CASES[1:]]
    assert tool.row(ShareCheck(33, "failed", 42, [wrong, *right])) == [
        "33",
        "42",
        "failed",
        "2048 wrong (2048 unwritten)",
        *["right"] * (len(CASES) - 1),
    ]


@pytest.mark.parametrize("shares", ["33,x", "0", "101"])
def test_shares_that_are_no_percentages_are_refused(shares: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        tool.main(["--shares", shares])
    assert exit_.value.code == 2
    assert "--shares" in capsys.readouterr().err
