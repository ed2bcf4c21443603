"""Theoretical occupancy from a kernel's launch resources and the SM's limits (the CUDA occupancy rules).

Pure arithmetic, testable anywhere: ``sm_limits`` reads the limits off a torch device; the rest takes
numbers. Occupancy here is warps resident per SM over the SM's maximum, the figure Nsight Compute calls
theoretical occupancy; achieved occupancy (``sm__warps_active``) can only be measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Registers are allocated per warp in units of 256 (sm50 and newer); every block reserves 1 KiB of shared
# memory for the system on sm80 and newer.
REG_ALLOC_UNIT = 256
SHARED_RESERVED_PER_BLOCK = 1024
# Resident blocks per SM by compute capability (CUDA programming guide, "Compute capabilities").
MAX_BLOCKS_PER_SM = {(7, 0): 32, (7, 5): 16, (8, 0): 32, (8, 6): 16, (8, 7): 16, (8, 9): 24, (9, 0): 32}


@dataclass(frozen=True)
class SMLimits:
    """One SM's resources: registers, threads, resident blocks, shared memory (bytes)."""

    regs: int = 65536
    threads: int = 2048
    blocks: int = 32
    shared_bytes: int = 233472
    warp_size: int = 32


@dataclass(frozen=True)
class Occupancy:
    """Blocks resident per SM, the warps they hold as % of the SM's maximum, and what limits them."""

    blocks_per_sm: int
    occupancy_pct: float
    limiter: str


def sm_limits(device: Any) -> SMLimits:
    """Return the SM limits of a CUDA device as torch reports them (blocks per SM from the table)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    capability = (props.major, props.minor)
    return SMLimits(
        regs=int(getattr(props, "regs_per_multiprocessor", 65536)),
        threads=int(getattr(props, "max_threads_per_multi_processor", 2048)),
        blocks=MAX_BLOCKS_PER_SM.get(capability, 32),
        shared_bytes=int(getattr(props, "shared_memory_per_multiprocessor", 233472)),
        warp_size=int(getattr(props, "warp_size", 32)),
    )


def theoretical_occupancy(
    regs_per_thread: int, threads_per_block: int, shared_bytes: int, limits: SMLimits
) -> Occupancy:
    """Return how many blocks of this kernel fit one SM and the occupancy that gives.

    Issue 21's anchors on an H200: FlashAttention-2 (255 registers, 128 threads) fits 2 blocks (12.5 %),
    cuDNN (168, 384) 1 block (18.75 %), the memory-efficient kernel (128, 128) 4 blocks (25 %).
    """
    if threads_per_block < 1 or regs_per_thread < 0 or shared_bytes < 0:
        raise ValueError("threads_per_block must be >= 1, registers and shared memory >= 0")
    warps = math.ceil(threads_per_block / limits.warp_size)
    max_warps = limits.threads // limits.warp_size
    regs_per_warp = math.ceil(max(regs_per_thread, 1) * limits.warp_size / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    bounds = {
        "warps": max_warps // warps,
        "blocks": limits.blocks,
        "registers": (limits.regs // regs_per_warp) // warps,
    }
    if shared_bytes:
        bounds["shared memory"] = limits.shared_bytes // (shared_bytes + SHARED_RESERVED_PER_BLOCK)
    limiter = min(bounds, key=lambda name: bounds[name])
    blocks = bounds[limiter]
    return Occupancy(blocks, 100.0 * blocks * warps / max_warps, limiter)
