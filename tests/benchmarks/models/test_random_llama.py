"""NAME@random Llama GGUFs: the real parameter counts, the dummy vocabulary, one file in the cache."""

from __future__ import annotations

import math

import pytest

from benchmarks.models import ModelError
from benchmarks.models.catalogue import RANDOM
from benchmarks.models.random_llama import dummy_spm_vocabulary, llama_tensor_shapes, random_gguf


@pytest.mark.parametrize(("name", "billions"), [("llama-3.2-3b", 3.21), ("llama-3.1-8b", 8.03)])
def test_random_llama_ggufs_have_the_parameter_counts_of_the_real_models(name, billions):
    shapes = llama_tensor_shapes(RANDOM[name].config)
    assert round(sum(math.prod(s) for _, s in shapes) / 1e9, 2) == billions


def test_the_dummy_spm_vocabulary_has_the_real_size_and_unique_pieces():
    tokens, scores, types = dummy_spm_vocabulary(128256)
    assert len(tokens) == len(set(tokens)) == len(scores) == len(types) == 128256
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[3] == "<0x00>"
    assert "\u2581GPU" in tokens and "\u2581GP" in tokens  # every prefix, so SPM merges reach the word


def test_the_tiny_gguf_is_written_once_under_its_final_name(tmp_path):
    path = random_gguf(RANDOM["llama-tiny"])
    assert path.parent == tmp_path / "cache" / "models" and path.read_bytes()[:4] == b"GGUF"
    mtime = path.stat().st_mtime_ns
    assert random_gguf(RANDOM["llama-tiny"]) == path and path.stat().st_mtime_ns == mtime
    assert not list(path.parent.glob("*.tmp"))


def test_only_llama_architectures_have_a_gguf():
    with pytest.raises(ModelError, match="'sd-tiny@random' is not a GGUF chat model"):
        random_gguf(RANDOM["sd-tiny"])
