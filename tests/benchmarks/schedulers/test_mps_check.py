"""The check of matrix products inside an MPS share (benchmarks.schedulers.mps_check)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.schedulers.mps import MpsDaemon, client_env, find_control_binary
from benchmarks.schedulers.mps_check import ProductCheck, ShareCheck, check_products, check_share, refusal

SMALL = (("float16", 2, 96, 64), ("bfloat16", 16, 32, 48))


def test_products_on_the_cpu_come_out_right() -> None:
    checks = check_products("cpu", SMALL)
    assert [(c.dtype, c.m, c.n, c.k) for c in checks] == list(SMALL)
    assert all(c.wrong == 0 and c.unwritten == 0 for c in checks)
    # bfloat16's own rounding is there, and far inside the tolerance.
    assert 0 < checks[1].max_rel_err < 0.05


def test_a_product_that_leaves_a_tile_unwritten_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The one mock: a GPU whose product skips an output tile, which this machine does not have.
    real_mm = torch.mm

    def skipping_mm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        full = real_mm(a, b)
        out[:, 16:] = full[:, 16:]
        return out

    monkeypatch.setattr(torch, "mm", skipping_mm)
    checks = check_products("cpu", SMALL)
    assert [c.unwritten for c in checks] == [2 * 16, 16 * 16]
    assert [c.wrong for c in checks] == [2 * 16, 16 * 16]


def test_a_product_gone_wrong_without_the_sentinel_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real_mm = torch.mm

    def nan_mm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        out.copy_(real_mm(a, b))
        out[0, 0] = float("nan")
        out[1, 1] += 10
        return out

    monkeypatch.setattr(torch, "mm", nan_mm)
    first = check_products("cpu", SMALL[:1])[0]
    assert (first.wrong, first.unwritten) == (2, 0)


def test_the_check_runs_in_its_own_process_and_says_it_passed() -> None:
    check = check_share({}, 40, device="cpu", cases=SMALL)
    assert check.status == "passed" and check.share == 40 and check.sms is None
    assert [p.wrong for p in check.products] == [0, 0]
    assert check.record() == {"status": "passed", "sms": None, "wrong": [], "reason": ""}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a CUDA device")
def test_without_a_cuda_device_the_check_says_it_did_not_run() -> None:
    check = check_share({}, 33)
    assert check.status == "not run"
    assert check.reason == "not run: torch sees no CUDA device"


def test_a_check_process_that_breaks_is_an_error_with_its_last_words_not_a_wrong_product() -> None:
    check = check_share({}, 33, device="cpu", cases=(("float99", 2, 2, 2),))
    assert check.status == "error"
    assert check.reason.startswith("the check's process exited 1: AttributeError")
    assert "float99" in check.reason


def test_a_check_that_hangs_is_an_error() -> None:
    check = check_share({}, 33, device="cpu", cases=(("float32", 4096, 4096, 4096),), timeout_s=0.5)
    assert (check.status, check.reason) == ("error", "the check took over 0.5 s")


def test_the_refusal_names_the_share_the_nodes_the_wrong_products_and_the_way_out() -> None:
    wrong = ProductCheck("float16", 2, 9216, 1536, wrong=2048, unwritten=2048, max_rel_err=0.0)
    right = ProductCheck("float16", 64, 4096, 1536, wrong=0, unwritten=0, max_rel_err=0.0004)
    check = ShareCheck(33, "failed", 42, [wrong, right])
    said = refusal(check, ["image", "captions"])
    assert "at 33 % of the SMs (42 SMs), the share of image, captions" in said
    assert "float16 2x1536 @ 1536x9216: 2048 of 18432 wrong" in said
    assert "64x1536" not in said
    assert "mps:" in said and "greedy" in said and "benchmarks.perf.mps_shares" in said
    broken = refusal(ShareCheck(33, "error", reason="the check took over 180 s"), ["image"])
    assert "could not run (the check took over 180 s), so nothing says the share computes right" in broken
    assert "come out wrong" not in broken


@pytest.mark.gpu
def test_the_whole_gpu_as_an_mps_client_computes_right() -> None:
    daemon = MpsDaemon(find_control_binary())
    daemon.start()
    try:
        check = check_share(client_env(daemon.env, 100, None), 100)
    finally:
        daemon.stop()
    assert check.status == "passed", check.record()
    assert check.sms == torch.cuda.get_device_properties(0).multi_processor_count
