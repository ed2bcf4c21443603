"""Timing of GPU work with CUDA events: warm, then the median of N (one home for the kernels' timings)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any


def cuda_times_us(fn: Callable[[], Any], repeats: int, warmup: int = 3) -> list[float]:
    """Return ``repeats`` timings of ``fn()`` in microseconds, each between two CUDA events.

    ``warmup`` calls run first (compilation, caches, clocks) and are not timed. Each timed call is
    bracketed by its own events on the current stream, so the host's launch overhead between calls is
    not counted but a slow launch that starves the GPU is.
    """
    import torch

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) * 1000.0 for start, end in pairs]


def median_us(times: list[float]) -> float:
    """Return the median of ``times``."""
    return float(statistics.median(times))
