"""``NAME@random`` image models: diffusers pipelines (SD 1.x/2.x and SDXL U-Nets, SD 3 MMDiT), random
weights.

The CLIP tokenizer is built from the BPE vocabulary open-clip-torch ships, so no hub download is needed.
"""

from __future__ import annotations

import gzip
from typing import Any

from benchmarks.models.catalogue import ModelError, RandomModel, package_dir

# The noise schedule Stable Diffusion 1.x and SDXL base were trained with, as their DDIM settings (DDIM
# for both: Euler's sigmas cannot be built on the ``meta`` device); a model's config may change or add to it.
SD_NOISE_SCHEDULE: dict[str, Any] = {
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "clip_sample": False,
    "set_alpha_to_one": False,
    "steps_offset": 1,
}


def clip_tokenizer() -> Any:
    """Return a transformers ``CLIPTokenizer`` built from the BPE vocabulary open-clip-torch ships.

    The vocabulary is OpenAI CLIP's (49 408 tokens), so token ids equal the real tokenizer's.
    """
    from transformers import CLIPTokenizer

    root = package_dir("open_clip")
    bpe = root / "bpe_simple_vocab_16e6.txt.gz" if root else None
    if bpe is None or not bpe.is_file():
        raise ModelError(
            "the CLIP tokenizer of the @random image models needs open-clip-torch's vocabulary: "
            ".venv/bin/pip install --no-deps open-clip-torch==3.3.0"
        )
    lines = gzip.decompress(bpe.read_bytes()).decode("utf-8").split("\n")
    # The same slice and vocabulary order as CLIP's own SimpleTokenizer.
    merges: Any = [tuple(line.split()) for line in lines[1 : 49152 - 256 - 2 + 1]]
    base = list(_bytes_to_unicode().values())
    words = (
        base
        + [b + "</w>" for b in base]
        + ["".join(m) for m in merges]
        + ["<|startoftext|>", "<|endoftext|>"]
    )
    return CLIPTokenizer(
        vocab={w: i for i, w in enumerate(words)},
        merges=merges,
        model_max_length=77,
        unk_token="<|endoftext|>",
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible map from bytes to printable characters."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def build_random_pipeline(model: RandomModel, seed: int, dtype: Any, device: str = "cpu") -> Any:
    """Return a diffusers pipeline of the architecture with weights drawn from ``seed`` (no download).

    The modules are created directly on ``device`` (random init of a full-size model on a CPU takes
    minutes; ``meta`` builds the shapes alone, for checking a config).
    """
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        pipe = _build_random(model)
    pipe.set_progress_bar_config(disable=True)
    return pipe if dtype == torch.float32 else pipe.to(dtype=dtype)


def _build_random(model: RandomModel) -> Any:
    from diffusers import AutoencoderKL
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    cfg = model.config
    tokenizer = clip_tokenizer()

    def clip(config: dict[str, Any], projection: bool) -> Any:
        text_config = CLIPTextConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=77,
            bos_token_id=49406,
            eos_token_id=49407,
            pad_token_id=49407,
            **config,
        )
        cls = CLIPTextModelWithProjection if projection else CLIPTextModel
        return cls(text_config)

    blocks = len(cfg["vae"]["block_out_channels"])
    vae: Any = AutoencoderKL(
        down_block_types=["DownEncoderBlock2D"] * blocks,
        up_block_types=["UpDecoderBlock2D"] * blocks,
        **cfg["vae"],
    )
    if model.family == "sd":
        from diffusers import DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

        unet = UNet2DConditionModel(
            **{"sample_size": 8, **cfg["unet"]},
            in_channels=vae.config.latent_channels,
            out_channels=vae.config.latent_channels,
        )
        return StableDiffusionPipeline(
            vae=vae,
            text_encoder=clip(cfg["text_encoder"], False),
            tokenizer=tokenizer,
            unet=unet,
            scheduler=DDIMScheduler(**{**SD_NOISE_SCHEDULE, **cfg.get("scheduler", {})}),
            safety_checker=None,
            feature_extractor=None,
            image_encoder=None,
            requires_safety_checker=False,
        )
    if model.family == "sdxl":
        from diffusers import DDIMScheduler, StableDiffusionXLPipeline, UNet2DConditionModel

        return StableDiffusionXLPipeline(
            vae=vae,
            text_encoder=clip(cfg["text_encoder"], False),
            text_encoder_2=clip(cfg["text_encoder_2"], True),
            tokenizer=tokenizer,
            tokenizer_2=tokenizer,
            unet=UNet2DConditionModel(
                **cfg["unet"],
                in_channels=vae.config.latent_channels,
                out_channels=vae.config.latent_channels,
            ),
            scheduler=DDIMScheduler(**SD_NOISE_SCHEDULE),
        )
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline

    return StableDiffusion3Pipeline(
        transformer=SD3Transformer2DModel(**cfg["transformer"]),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        vae=vae,
        text_encoder=clip(cfg["text_encoder"], True),
        tokenizer=tokenizer,
        text_encoder_2=clip(cfg["text_encoder_2"], True),
        tokenizer_2=tokenizer,
        text_encoder_3=None,
        tokenizer_3=None,
    )
