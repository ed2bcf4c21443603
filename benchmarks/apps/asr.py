"""Speech recognition backends for LiveCaptions: faster-whisper (CTranslate2) and transformers Whisper.

Both turn one audio window into words with times in the clip, so the streaming policy in
``benchmarks.apps.captions`` (chunking, local agreement, latency per chunk) is the same for both:

- ``auto`` (default) picks one of the two below (``choose_backend``): the model's format decides, and a
  CTranslate2 model on a GPU needs CTranslate2's CUDA libraries; the choice is recorded in the result;
- ``faster_whisper``: CTranslate2 folders (the packaged ``whisper-tiny.en``/``whisper-base``),
  with Whisper's own word timestamps;
- ``transformers``: ``WhisperForConditionalGeneration`` from a transformers folder, a hub id or
  ``NAME@random`` (``whisper-tiny@random``, ``whisper-large-v3-turbo@random``). It decodes without
  timestamps: transformers' word timestamps need the cross-attention weights, which switches the whole
  model to eager attention and would slow the encoder (and distort a GPU measurement). Word times are
  spread over the window by length, which only moves where the buffer restarts after a sentence.

Heavy libraries are imported inside the constructors (the spec imports this module's users).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.apps.runtime import setup_torch
from benchmarks.models import ResolvedModel
from benchmarks.models.random_whisper import build_random_whisper
from benchmarks.platform import accelerator

if TYPE_CHECKING:
    # Not at run time: see test_app_process_entry_does_not_load_numpy (llama.cpp's CUDA build).
    import numpy as np

SAMPLE_RATE = 16_000
BACKENDS = ("auto", "faster_whisper", "transformers")
TORCH_DTYPES = ("float32", "float16", "bfloat16")
# Decoded tokens per window when random weights are loaded and no max_new_tokens is given: random
# weights never end a transcript, and the reference measurement used 24 per 2 s chunk.
RANDOM_MAX_NEW_TOKENS = 24


@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Hypothesis:
    """What a backend heard in one window: the words and how many tokens it decoded for them."""

    words: list[Word]
    tokens: int


def model_formats(backend: str) -> tuple[Any, ...]:
    """Return the model formats a captions backend loads (for ``benchmarks.models.resolve``)."""
    if backend == "auto":
        return ("ctranslate2", "transformers")
    return ("ctranslate2",) if backend == "faster_whisper" else ("transformers",)


@dataclass(frozen=True)
class BackendChoice:
    """The captions backend a unit runs and why (recorded in the result as ``backend_choice``)."""

    backend: str
    reason: str


def choose_backend(requested: str, model_format: str, device: str, ct2_cuda_devices: int) -> BackendChoice:
    """Return the backend for ``backend: auto`` (or the one asked for): transformers for a transformers
    Whisper (a folder, a hub repository, ``NAME@random``); faster-whisper for a CTranslate2 model on the
    CPU, or on a GPU when CTranslate2 sees a CUDA device (``ct2_cuda_devices``, from
    ``benchmarks.platform.ctranslate2_cuda_devices``). Raises ValueError for a CTranslate2 model on a
    GPU that CTranslate2 cannot use, naming the fix."""
    if requested != "auto":
        return BackendChoice(requested, "backend set in the workflow")
    if model_format == "transformers":
        return BackendChoice("transformers", "auto: the model is a transformers Whisper")
    if device == "cpu":
        return BackendChoice("faster_whisper", "auto: a CTranslate2 model on the CPU")
    if ct2_cuda_devices > 0:
        return BackendChoice("faster_whisper", f"auto: CTranslate2 sees {ct2_cuda_devices} CUDA device(s)")
    raise ValueError(
        "device: gpu with a CTranslate2 model, but CTranslate2 sees no CUDA device (its cuBLAS 12 and "
        "cuDNN 9 libraries are missing; `consumerbench doctor` says what to install; on Apple silicon "
        "CTranslate2 has no Metal backend); or name a transformers Whisper (a hub id, a folder, "
        "NAME@random) to run on the transformers backend"
    )


@dataclass(frozen=True)
class DecodeSettings:
    """How a captions backend loads its model and decodes: the unit's options and the run's device."""

    device: str
    compute_type: str | None
    threads: int
    language: str | None
    beam_size: int
    max_new_tokens: int | None
    seed: int


class FasterWhisperBackend:
    """faster-whisper on a CTranslate2 folder, with word timestamps."""

    name = "faster_whisper"

    def __init__(self, model: ResolvedModel, settings: DecodeSettings) -> None:
        from faster_whisper import WhisperModel

        self.accelerator = accelerator(settings.device)
        gpu = self.accelerator.kind != "cpu"
        if self.accelerator.kind == "mps":
            raise ValueError(
                "device: gpu on Apple silicon, but CTranslate2 (faster-whisper) has no Metal backend; "
                "use backend: transformers (mps) or device: cpu"
            )
        if gpu:
            import ctranslate2

            if ctranslate2.get_cuda_device_count() == 0:
                raise ValueError(
                    "device: gpu, but this CTranslate2 build sees no CUDA device (a CPU-only build?)"
                )
        self.compute_type = settings.compute_type or ("float16" if gpu else "int8")
        self.threads = settings.threads
        self.language, self.beam_size = settings.language, settings.beam_size
        self.max_new_tokens = settings.max_new_tokens
        self.model: Any = WhisperModel(
            str(model.path or model.hub_id),
            device=self.accelerator.torch_device,
            compute_type=self.compute_type,
            cpu_threads=self.threads,
        )

    def describe(self) -> dict[str, Any]:
        """Return what the result records about the loaded backend."""
        return {
            "backend": self.name,
            "accelerator": self.accelerator.label,
            "compute_type": self.compute_type,
            "threads": self.threads,
            "max_new_tokens": self.max_new_tokens,
        }

    @staticmethod
    def decode(path: Path) -> np.ndarray:
        """Return the audio file as 16 kHz mono float32 samples (any format PyAV reads)."""
        from faster_whisper import decode_audio

        samples: np.ndarray = decode_audio(str(path), sampling_rate=SAMPLE_RATE)
        return samples

    def transcribe(self, window: np.ndarray, offset: float, prompt: str | None) -> Hypothesis:
        """Return the words heard in ``window`` with times in the clip (``offset`` = window start)."""
        options: dict[str, Any] = {}
        if self.max_new_tokens is not None:
            options["max_new_tokens"] = self.max_new_tokens
        segments, _ = self.model.transcribe(
            window,
            language=self.language,
            beam_size=self.beam_size,
            word_timestamps=True,
            initial_prompt=prompt,
            condition_on_previous_text=False,
            vad_filter=False,
            **options,
        )
        done = list(segments)  # a generator: the decoding happens here
        words = [
            Word(w.word, offset + float(w.start), offset + float(w.end)) for s in done for w in s.words or []
        ]
        return Hypothesis(words, sum(len(s.tokens) for s in done))

    def nonfinite_in(self) -> list[str] | None:
        """CTranslate2 hands back tokens, not the values behind them: never known (None)."""
        return None

    def close(self) -> None:
        self.model = None


class TransformersWhisperBackend:
    """transformers ``WhisperForConditionalGeneration`` (folder, hub id or NAME@random), greedy decode."""

    name = "transformers"

    def __init__(self, model: ResolvedModel, settings: DecodeSettings) -> None:
        # transformers warns on every generate about settings the Whisper generation config holds.
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import torch

        self.torch = torch
        self.accelerator, self.threads = setup_torch(torch, settings.device, settings.threads)
        self.device = self.accelerator.torch_device
        self.dtype_name = settings.compute_type or ("float32" if self.device == "cpu" else "float16")
        if self.dtype_name not in TORCH_DTYPES:
            raise ValueError(
                f"compute_type '{self.dtype_name}' is not one the transformers backend takes: "
                f"{', '.join(TORCH_DTYPES)}"
            )
        dtype = getattr(torch, self.dtype_name)
        self.random = model.random is not None
        if model.random is not None:
            self.model, self.tokenizer, self.features = build_random_whisper(
                model.random, settings.seed, dtype, self.device
            )
        else:
            from transformers import AutoTokenizer, WhisperFeatureExtractor, WhisperForConditionalGeneration

            where = str(model.path) if model.path is not None else str(model.hub_id)
            self.tokenizer = AutoTokenizer.from_pretrained(where)
            self.features = WhisperFeatureExtractor.from_pretrained(where)
            loaded: Any = WhisperForConditionalGeneration.from_pretrained(where, dtype=dtype)
            self.model = loaded.to(self.device).eval()
        config = self.model.generation_config
        self.multilingual = bool(getattr(config, "is_multilingual", True))
        self.language = settings.language if self.multilingual else None
        self.beam_size = settings.beam_size
        self.max_new_tokens = settings.max_new_tokens or (RANDOM_MAX_NEW_TOKENS if self.random else None)
        self.prev_sot = getattr(config, "prev_sot_token_id", None) or self.tokenizer.convert_tokens_to_ids(
            "<|startofprev|>"
        )
        self.special_ids = set(self.tokenizer.all_special_ids) | set(self.tokenizer.added_tokens_decoder)
        self.text_vocab = len(self.tokenizer)
        # Whisper takes at most half its context as prompt (transformers refuses more).
        self.max_prompt_tokens = self.model.config.max_target_positions // 2 - 1
        # What the last transcribe computed: the encoder's hidden states and every decoding step's
        # logits, kept (no copy, no kernel) for nonfinite_in, which the driver calls after its clock.
        self._outputs: dict[str, list[Any]] = {"encoder": [], "decoder": []}
        self.model.get_encoder().register_forward_hook(self._keep("encoder"))
        self.model.proj_out.register_forward_hook(self._keep("decoder"))

    def _keep(self, stage: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, output: Any) -> None:
            # The encoder returns a model output (its hidden states first), the projection a tensor.
            self._outputs[stage].append(output if stage == "decoder" else output[0])

        return hook

    def nonfinite_in(self) -> list[str] | None:
        """Return the stages whose outputs in the last transcribe held NaN or inf: "encoder" (its
        hidden states), "decoder" (the logits of a decoding step: NaN or +inf, since generate masks
        tokens it rules out with -inf, in place); None if nothing ran since the last call. A few small
        kernels and a wait for the GPU: call it after the chunk's clock stops."""
        torch = self.torch
        if not any(self._outputs.values()):
            return None
        bad = []
        for stage, kept in self._outputs.items():
            if not kept:
                continue
            # One flag a tensor, then one wait a stage: no copy of the logits (a prompt's step holds a row
            # a token).
            wrong = _nan_or_posinf if stage == "decoder" else _nonfinite
            if bool(torch.stack([wrong(t).any() for t in kept]).any()):
                bad.append(stage)
        for kept in self._outputs.values():
            kept.clear()
        return bad

    def describe(self) -> dict[str, Any]:
        """Return what the result records about the loaded backend."""
        return {
            "backend": self.name,
            "device": self.device,
            "accelerator": self.accelerator.label,
            "dtype": self.dtype_name,
            "threads": self.threads,
            "max_new_tokens": self.max_new_tokens,
            "attention": self.model.config._attn_implementation,
        }

    @staticmethod
    def decode(path: Path) -> np.ndarray:
        """Return a WAV/FLAC file as 16 kHz mono float32 samples (soundfile; linear resampling)."""
        import numpy as np
        import soundfile

        samples, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        mono: np.ndarray = samples.mean(axis=1)
        if rate != SAMPLE_RATE and mono.size:
            n = max(1, round(mono.size * SAMPLE_RATE / rate))
            mono = np.interp(np.arange(n) * (rate / SAMPLE_RATE), np.arange(mono.size), mono).astype(
                np.float32
            )
        return mono

    def transcribe(self, window: np.ndarray, offset: float, prompt: str | None) -> Hypothesis:
        """Return the words heard in ``window`` with times in the clip (spread over the window by length)."""
        torch = self.torch
        for kept in self._outputs.values():
            kept.clear()
        features = self.features(
            window, sampling_rate=SAMPLE_RATE, return_tensors="pt", device=self.device
        ).input_features.to(self.device, self.model.dtype)
        options: dict[str, Any] = {"num_beams": self.beam_size, "do_sample": False}
        if self.max_new_tokens is not None:
            options["max_new_tokens"] = self.max_new_tokens
        if self.multilingual:
            options.update(language=self.language, task="transcribe")
        if prompt:
            ids = self.tokenizer(" " + prompt.strip(), add_special_tokens=False).input_ids
            options["prompt_ids"] = torch.tensor(
                [self.prev_sot, *ids[-self.max_prompt_tokens + 1 :]], device=self.device
            )
        with torch.inference_mode():
            tokens = self.model.generate(features, **options)
        # Timestamp ids may lie past the tokenizer's vocabulary (tokenizer.json files often omit them).
        ids = [i for i in tokens[0].tolist() if i not in self.special_ids and i < self.text_vocab]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        words = text.split()
        duration = window.size / SAMPLE_RATE
        total = sum(len(w) for w in words) or 1
        out, t = [], offset
        for w in words:
            end = t + duration * len(w) / total
            out.append(Word(" " + w, t, end))
            t = end
        return Hypothesis(out, len(ids))

    def close(self) -> None:
        self.model = None
        for kept in self._outputs.values():
            kept.clear()


def _nonfinite(values: Any) -> Any:
    """Where values are NaN or inf."""
    return ~values.isfinite()


def _nan_or_posinf(values: Any) -> Any:
    """Where logits are NaN or +inf (generate masks ruled-out tokens with -inf, which is no fault)."""
    return values.isnan() | values.isposinf()


Backend = FasterWhisperBackend | TransformersWhisperBackend


def load_backend(model: ResolvedModel, backend: str, settings: DecodeSettings) -> Backend:
    """Return a loaded captions backend (``faster_whisper`` or ``transformers``)."""
    if backend == "faster_whisper":
        return FasterWhisperBackend(model, settings)
    return TransformersWhisperBackend(model, settings)
