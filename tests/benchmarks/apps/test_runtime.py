"""Process settings of the model-running drivers: torch's threads and device."""

from __future__ import annotations

import pytest
import torch

from benchmarks.apps.runtime import default_threads, setup_torch


def test_setup_torch_sets_the_threads_asked_for_else_every_core_this_process_may_use():
    before = torch.get_num_threads()
    try:
        assert setup_torch(torch, "cpu", 1) == ("cpu", 1) and torch.get_num_threads() == 1
        assert setup_torch(torch, "cpu", None) == ("cpu", default_threads())
        assert torch.get_num_threads() == default_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_device_gpu_on_a_torch_without_cuda_says_so():
    with pytest.raises(ValueError, match="device: gpu, but this torch build sees no CUDA device"):
        setup_torch(torch, "gpu", 1)
