"""The captions backend choice (``backend: auto``): by the model's format, the device and whether
CTranslate2 sees a CUDA device (the probe's answer, given as an input here: no GPU on CI)."""

from __future__ import annotations

import pytest

from benchmarks.apps.asr import BackendChoice, choose_backend, model_formats
from benchmarks.platform import ctranslate2_cuda_devices


def test_a_transformers_whisper_runs_on_transformers_wherever_it_runs():
    for device, cuda in (("cpu", 0), ("gpu", 0), ("gpu", 1)):
        choice = choose_backend("auto", "transformers", device, cuda)
        assert choice == BackendChoice("transformers", "auto: the model is a transformers Whisper")


def test_a_ctranslate2_model_runs_on_faster_whisper_on_the_cpu_and_on_a_gpu_ctranslate2_can_use():
    assert choose_backend("auto", "ctranslate2", "cpu", 0).backend == "faster_whisper"
    on_gpu = choose_backend("auto", "ctranslate2", "gpu", 2)
    assert on_gpu.backend == "faster_whisper" and on_gpu.reason == "auto: CTranslate2 sees 2 CUDA device(s)"


def test_a_ctranslate2_model_on_a_gpu_without_ctranslate2_cuda_names_the_fix():
    with pytest.raises(ValueError, match="CTranslate2 sees no CUDA device") as err:
        choose_backend("auto", "ctranslate2", "gpu", 0)
    assert "consumerbench doctor" in str(err.value) and "transformers Whisper" in str(err.value)


def test_a_backend_set_in_the_workflow_is_kept():
    choice = choose_backend("faster_whisper", "ctranslate2", "gpu", 0)
    assert (choice.backend, choice.reason) == ("faster_whisper", "backend set in the workflow")


def test_auto_loads_both_formats_in_the_order_ctranslate2_first():
    assert model_formats("auto") == ("ctranslate2", "transformers")


def test_the_probe_answers_zero_on_a_machine_whose_ctranslate2_sees_no_gpu():
    from benchmarks.platform import gpus

    if gpus():
        pytest.skip("a GPU is visible: the probe's answer depends on CTranslate2's CUDA libraries")
    assert ctranslate2_cuda_devices() == 0
