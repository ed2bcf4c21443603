"""Where ``device: gpu`` runs (benchmarks.platform.accelerator): CUDA, Apple's Metal or the CPU.

Apple silicon is absent where these tests run: its case is decided from injected platform facts (the
machine's own facts are what ``PlatformFacts.here`` reads); the CPU path runs for real.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.apps.runtime import setup_torch
from benchmarks.platform import NO_GPU, PlatformFacts, accelerator, gpus, has_gpu, visible_indices

H200 = PlatformFacts(nvidia_gpus=("NVIDIA H200", "NVIDIA H200"))
MAC = PlatformFacts(apple_silicon=True)
CPU_ONLY = PlatformFacts()


def test_gpu_means_the_first_visible_cuda_device_where_nvml_sees_an_nvidia_gpu():
    chosen = accelerator("gpu", H200)
    assert (chosen.kind, chosen.label, chosen.torch_device, chosen.gpu_layers) == (
        "cuda",
        "cuda:0 (NVIDIA H200)",
        "cuda",
        -1,
    )


def test_gpu_means_metal_on_apple_silicon_torch_mps_and_every_llama_layer_offloaded():
    chosen = accelerator("gpu", MAC)
    assert (chosen.kind, chosen.label, chosen.torch_device, chosen.gpu_layers) == (
        "mps",
        "mps (Apple silicon)",
        "mps",
        -1,
    )


def test_an_nvidia_gpu_wins_over_apple_silicon_facts():
    assert accelerator("gpu", PlatformFacts(("NVIDIA RTX 4090",), apple_silicon=True)).kind == "cuda"


def test_cpu_is_the_cpu_whatever_the_machine_has():
    for facts in (H200, MAC, CPU_ONLY):
        chosen = accelerator("cpu", facts)
        assert (chosen.label, chosen.torch_device, chosen.gpu_layers) == ("cpu", "cpu", 0)


def test_gpu_on_a_machine_with_neither_is_refused_with_what_was_looked_for():
    assert not has_gpu(CPU_ONLY) and has_gpu(MAC) and has_gpu(H200)
    with pytest.raises(ValueError, match="NVML sees no NVIDIA GPU and it is not Apple silicon") as err:
        accelerator("gpu", CPU_ONLY)
    assert str(err.value) == NO_GPU


def test_this_machines_facts_decide_for_real():
    facts = PlatformFacts.here()
    assert facts.nvidia_gpus == tuple(g["name"] for g in gpus())
    if not has_gpu():
        with pytest.raises(ValueError, match="no GPU the engine can use"):
            accelerator("gpu")
    assert accelerator("cpu").label == "cpu"


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks a torch that cannot use Metal")
def test_setup_torch_refuses_metal_on_a_torch_build_without_it():
    before = torch.get_num_threads()
    try:
        with pytest.raises(ValueError, match="this torch build cannot use Metal"):
            setup_torch(torch, "gpu", 1, MAC)
    finally:
        torch.set_num_threads(before)


UUIDS = ("GPU-1a2b3c4d-0000-0000-0000-000000000000", "GPU-1a2b9999-0000-0000-0000-000000000000", "GPU-77")


@pytest.mark.parametrize(
    ("visible", "indices"),
    [
        (None, [0, 1, 2]),
        ("", []),
        ("2,0", [2, 0]),
        # CUDA stops at the first entry that names no GPU.
        ("0,-1,1", [0]),
        ("0,7,1", [0]),
        ("1,1,2", [1]),
        # GPU UUIDs, whole or a prefix that matches exactly one GPU.
        (f"{UUIDS[1]}", [1]),
        ("GPU-77,GPU-1a2b3", [2, 0]),
        ("GPU-1a2b", []),  # ambiguous: two GPUs start so
        ("MIG-5c6d,0", []),
        (" 1 , GPU-77 ", [1, 2]),
    ],
)
def test_the_visible_gpus_are_read_as_cuda_reads_its_environment(monkeypatch, visible, indices):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_indices(len(UUIDS), UUIDS.__getitem__) == indices
