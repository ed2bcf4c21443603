"""Process settings of the model-running drivers: torch's threads and device."""

from __future__ import annotations

import pytest
import torch

from benchmarks.apps.runtime import default_threads, setup_torch
from benchmarks.platform import CPU, PlatformFacts


def test_setup_torch_sets_the_threads_asked_for_else_every_core_this_process_may_use():
    before = torch.get_num_threads()
    try:
        assert setup_torch(torch, "cpu", 1) == (CPU, 1) and torch.get_num_threads() == 1
        assert setup_torch(torch, "cpu", None) == (CPU, default_threads())
        assert torch.get_num_threads() == default_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a torch without CUDA")
def test_device_gpu_on_a_torch_without_cuda_says_so():
    # The machine's facts are injected: an NVIDIA GPU that this torch build cannot use.
    h200 = PlatformFacts(nvidia_gpus=("NVIDIA H200",))
    with pytest.raises(
        ValueError, match=r"device: gpu \(cuda:0 \(NVIDIA H200\)\), but this torch build sees no CUDA"
    ):
        setup_torch(torch, "gpu", 1, h200)
