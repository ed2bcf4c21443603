"""NAME@random image models: the hub-free CLIP tokenizer and the full-size SD 3.5 medium shapes."""

from __future__ import annotations

from benchmarks.models.catalogue import RANDOM
from benchmarks.models.random_image import build_random_pipeline, clip_tokenizer


def test_the_clip_tokenizer_built_from_open_clip_gives_clip_token_ids():
    tokenizer = clip_tokenizer()
    assert len(tokenizer) == 49408
    assert tokenizer("a photo of a cat").input_ids == [49406, 320, 1125, 539, 320, 2368, 49407]


def test_the_full_size_random_model_has_the_shapes_of_sd35_medium():
    import torch

    pipe = build_random_pipeline(RANDOM["sd3.5-medium"], 0, torch.float16, device="meta")

    def params(module):
        return sum(p.numel() for p in module.parameters())

    # CLIP ViT-L/14 and OpenCLIP bigG/14 text towers with projections, the 16-channel SD3 VAE.
    assert params(pipe.text_encoder) == 123_650_304
    assert params(pipe.text_encoder_2) == 694_659_840
    assert params(pipe.vae) == 83_819_683
    assert 2.2e9 < params(pipe.transformer) < 2.6e9 and len(pipe.transformer.transformer_blocks) == 24
    assert pipe.transformer.dtype == torch.float16
