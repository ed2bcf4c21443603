"""Autotuning: time a list of configs on the live GPU and return the fastest that is also correct."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cbkernels.attention.config import AttentionConfig
from cbkernels.attention.op import Launch, launch
from cbkernels.timing import cuda_times_us, median_us

if TYPE_CHECKING:
    import torch

# A config whose output differs from SDPA's by more than this (max abs, 16-bit inputs) is wrong, not fast.
TUNE_ATOL = 3e-2


def candidate_configs(head_dim: int, capability: tuple[int, int]) -> list[AttentionConfig]:
    """Return the configs ``autotune`` tries on a GPU of ``capability`` for this head dim.

    A short list on purpose (each costs a compilation of seconds): the tile shapes FlashAttention-2 and
    the Triton tutorial use, register-lean tiles under a budget of 128, both variants on sm90+
    (warp-specialised ``tma`` configs on sm100+), the pointer variant elsewhere.
    """
    big = head_dim > 128
    tiles = [(64, 32, 4, 2), (128, 32, 4, 2)] if big else [
        (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 4, 4),
    ]  # fmt: skip
    # Register-lean tiles under a budget of 128 a thread (issue 21's sharing goal): 8 warps split the
    # 128 x 64 fp32 accumulator and scores to 32 + 32 registers a thread; 64-row tiles halve them.
    lean = [] if big else [(128, 64, 8, 3), (64, 64, 4, 3)]
    variants = ["tma", "pointer"] if capability[0] >= 9 else ["pointer"]
    # Likeliest winners first, so that a tuning budget cuts the long tail: Hopper's copy engine first.
    configs = []
    for variant in variants:
        configs += [AttentionConfig(m, n, w, s, None, variant) for m, n, w, s in tiles]
        configs += [AttentionConfig(m, n, w, s, 128, variant) for m, n, w, s in lean]
        # Triton 3.6 warp-specialises this loop on Blackwell only: on sm90 the flag leaves the PTX
        # byte for byte the same (compiled here), so Hopper's tuning time goes elsewhere.
        if variant == "tma" and not big and capability[0] >= 10:
            configs += [
                AttentionConfig(128, 64, 4, 3, None, "tma", True),
                AttentionConfig(128, 128, 8, 3, None, "tma", True),
            ]
    return configs


@dataclass(frozen=True)
class Trial:
    """One config's outcome: its median time (None when it failed), the launch's metadata, or the error."""

    config: AttentionConfig
    time_us: float | None
    launch: Launch | None
    error: str | None


def autotune(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float | None = None,
    configs: list[AttentionConfig] | None = None, repeats: int = 20, budget_s: float | None = None,
) -> tuple[AttentionConfig, list[Trial]]:  # fmt: skip
    """Time each config on these tensors (CUDA events, median of ``repeats``); return the best and all.

    A config that does not compile, does not fit the GPU, or whose output strays from PyTorch's SDPA by
    more than ``TUNE_ATOL`` is recorded with its error and skipped; once ``budget_s`` seconds have
    passed (compilations take seconds each) the rest are recorded as skipped. Raises RuntimeError if
    none works.
    """
    import torch
    import torch.nn.functional as F

    if q.device.type != "cuda":
        raise ValueError("autotune times kernels on a CUDA GPU; q is on " + str(q.device))
    if configs is None:
        major, minor = torch.cuda.get_device_capability(q.device)
        configs = candidate_configs(q.shape[3], (major, minor))
    reference = F.scaled_dot_product_attention(q, k, v, scale=scale).float()
    trials = []
    start = time.monotonic()
    for config in configs:
        if budget_s is not None and time.monotonic() - start > budget_s:
            trials.append(
                Trial(config, None, None, f"skipped: the tuning budget of {budget_s:g} s was spent")
            )
            continue
        try:
            out, info = launch(q, k, v, scale=scale, config=config)
            error = (out.float() - reference).abs().max().item()
            if not error <= TUNE_ATOL:
                trials.append(Trial(config, None, info, f"wrong output: max abs error {error:.3g}"))
                continue

            def run(config: AttentionConfig = config) -> None:
                launch(q, k, v, scale=scale, config=config)

            times = cuda_times_us(run, repeats)
            trials.append(Trial(config, median_us(times), info, None))
        except Exception as exc:  # a compile error or out of resources: this config is out, not the run
            trials.append(
                Trial(config, None, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            )
    timed = [t for t in trials if t.time_us is not None]
    if not timed:
        raise RuntimeError("no config worked: " + "; ".join(f"{t.config.label}: {t.error}" for t in trials))
    best = min(timed, key=lambda t: t.time_us or 0.0)
    return best.config, trials
