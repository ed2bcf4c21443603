"""What the profiler measures, decided before any GPU work: the rows' configs and the FLOP count."""

from __future__ import annotations

import pytest

from cbkernels.attention import AttentionConfig, candidate_configs
from cbkernels.profile.run import Shape, base_configs

torch = pytest.importorskip("torch")


def test_without_autotune_each_variant_gets_the_default_under_each_register_budget() -> None:
    q = k = v = torch.zeros(1, 1, 8, 64, dtype=torch.bfloat16)  # CPU: the interpreter's default tiles
    shape = Shape(1, 1, 8, 8, 64, "bf16")
    configs, trials = base_configs(shape, ["tma", "pointer"], [None, 128, 96], False, q, k, v, repeats=5)
    assert trials == []
    assert [c.label for c in configs] == [
        "tma-32x32-w4-s1", "tma-32x32-w4-s1-r128", "tma-32x32-w4-s1-r96",
        "pointer-32x32-w4-s1", "pointer-32x32-w4-s1-r128", "pointer-32x32-w4-s1-r96",
    ]  # fmt: skip


def test_the_candidates_put_hopper_first_and_include_register_lean_tiles() -> None:
    hopper = candidate_configs(64, (9, 0))
    assert hopper[0].variant == "tma" and hopper[-1].variant == "pointer"
    assert AttentionConfig(128, 64, 8, 3, 128, "tma") in hopper
    assert not any(c.warp_specialize for c in hopper)
    assert any(c.warp_specialize for c in candidate_configs(64, (10, 0)))
    ampere = candidate_configs(128, (8, 0))
    assert {c.variant for c in ampere} == {"pointer"} and not any(c.warp_specialize for c in ampere)
    assert all(c.block_m <= 128 and c.block_n <= 32 for c in candidate_configs(256, (9, 0)))


def test_the_flop_count_is_four_b_h_sq_skv_d() -> None:
    # issue 21's anchor: cuDNN's 598 us at 2 x 24 x 4429^2 x 64 is 403 TFLOP/s
    flops = Shape(2, 24, 4429, 4429, 64, "bf16").flops()
    assert flops == 4 * 2 * 24 * 4429 * 4429 * 64
    assert flops / 598e-6 / 1e12 == pytest.approx(403, abs=1)
