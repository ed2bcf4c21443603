"""Theoretical occupancy from registers, threads and shared memory (the CUDA occupancy rules)."""

from __future__ import annotations

import pytest

from cbkernels.profile.occupancy import SMLimits, theoretical_occupancy

H200 = SMLimits(regs=65536, threads=2048, blocks=32, shared_bytes=233472)


@pytest.mark.parametrize(
    ("regs", "threads", "blocks", "pct"),
    [
        (168, 384, 1, 18.75),  # cuDNN (issue 21's Nsight Compute anchors on the H200)
        (255, 128, 2, 12.5),  # FlashAttention-2
        (128, 128, 4, 25.0),  # memory-efficient (CUTLASS sm80)
        (96, 128, 5, 31.25),  # a register-lean kernel: 3,072 registers a warp, 21 warps fit, 5 blocks of 4
    ],
)
def test_the_register_file_limits_the_attention_kernels_as_measured(
    regs: int, threads: int, blocks: int, pct: float
) -> None:
    occ = theoretical_occupancy(regs, threads, 0, H200)
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (blocks, pct, "registers")


def test_shared_memory_and_the_thread_limit_bind_when_registers_do_not() -> None:
    # 100 KiB a block (+1 KiB reserved): two fit in 228 KiB.
    assert theoretical_occupancy(32, 128, 100 * 1024, H200).limiter == "shared memory"
    assert theoretical_occupancy(32, 128, 100 * 1024, H200).blocks_per_sm == 2
    # 1,024 threads of 16 registers: the 2,048-thread limit lets two in.
    occ = theoretical_occupancy(16, 1024, 0, H200)
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (2, 100.0, "warps")
    # tiny blocks: the 32-blocks limit
    assert theoretical_occupancy(16, 32, 0, H200).limiter == "blocks"


def test_registers_are_allocated_per_warp_in_units_of_256() -> None:
    # 65 registers round up to 72 a thread (2,304 a warp): 28 warps fit, 7 blocks of 4.
    assert theoretical_occupancy(65, 128, 0, H200).blocks_per_sm == 7


def test_a_block_without_threads_is_refused() -> None:
    with pytest.raises(ValueError, match="threads_per_block must be >= 1"):
        theoretical_occupancy(32, 0, 0, H200)
