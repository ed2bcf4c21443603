"""LiveCaptions: a real-time audio stream transcribed chunk by chunk with Whisper.

The driver plays each audio file as a live stream: it cuts the audio into ``chunk_s`` chunks and
releases chunk i when its audio has been "spoken", at wall-clock pace from the start of the stream.
Every chunk is one request record whose latency (``chunk``) runs from the end of the chunk's audio to
the moment its transcript is emitted, so queueing counts: a model that falls behind sees its latency
grow, as a user would.

Transcription follows the local-agreement policy of streaming Whisper systems (whisper_streaming):
each step transcribes the buffer (the audio since the last committed sentence end), and the new words
on which two consecutive hypotheses agree are committed (emitted). The last chunk commits everything.
Per chunk: the ``chunk`` latency (seconds, a metric) and, in the record's info, ``rtf`` (processing
time / chunk duration), the newly committed text and, on a stream's last chunk, the transcript and its
``wer`` against the reference transcript when there is one (not with random weights: their transcript
is noise). The recognition itself is a backend from ``benchmarks.apps.asr``: faster-whisper (default)
or transformers Whisper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from benchmarks.apps.asr import (
    SAMPLE_RATE,
    TORCH_DTYPES,
    Backend,
    DecodeSettings,
    Hypothesis,
    Word,
    choose_backend,
    load_backend,
    model_formats,
)
from benchmarks.apps.base import (
    AppOptions,
    AppStopped,
    AppType,
    Driver,
    NonFinite,
    RequestFailed,
    RequestRecord,
    _sleep_until,
    check_unit,
    gate_waited,
    nonfinite_failure,
)
from benchmarks.apps.datasets import unit_input
from benchmarks.apps.runtime import default_threads, share_cpu_politely
from benchmarks.clock import now
from benchmarks.files import UNRESTRICTED, FileAccessError, FilePolicy, where
from benchmarks.metrics import QualityMeasure, info_mean, info_share
from benchmarks.models import ModelError
from benchmarks.platform import ctranslate2_cuda_devices
from benchmarks.spec.model import AUDIO_FILE_OR_FOLDER, DATA_FILE
from benchmarks.status import RequestStatus

if TYPE_CHECKING:
    import numpy as np

    from benchmarks.spec.model import Application

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")


class CaptionsOptions(AppOptions):
    backend: Literal["auto", "faster_whisper", "transformers"] = Field(
        "auto",
        description="auto (by the model and the GPU: docs/models.md), faster_whisper (CTranslate2 folder) "
        "or transformers (folder, hub id or NAME@random)",
    )
    audio: Annotated[str | list[str] | None, AUDIO_FILE_OR_FOLDER] = Field(
        None, description="audio file(s) or a folder of them (WAV/FLAC); default: the shipped clips"
    )
    client_command_file: Annotated[str | None, AUDIO_FILE_OR_FOLDER] = Field(
        None, description="the original's key for the audio file"
    )
    reference: Annotated[str | None, DATA_FILE] = Field(
        None, description="reference transcript of a single audio file (default: <audio>.txt next to it)"
    )
    chunk_s: float = Field(2.0, gt=0, le=30, description="seconds of audio per chunk")
    language: str | None = Field("en", description="spoken language, or null to detect it")
    beam_size: int = Field(1, ge=1, le=10)
    compute_type: str | None = Field(
        None,
        description="CTranslate2 compute type (default int8 on CPU, float16 on GPU); transformers: "
        "float32, float16 or bfloat16 (default float16 on GPU, float32 on CPU)",
    )
    max_new_tokens: int | None = Field(
        None,
        ge=1,
        le=440,
        description="most tokens decoded per chunk (default: until the text ends; 24 with random weights)",
    )
    max_buffer_s: float = Field(
        12.0, gt=0, le=30, description="uncommitted audio kept before forcing a commit"
    )
    nonfinite: NonFinite = Field(
        "fail",
        description="a chunk whose encoder states or logits held NaN or inf (transformers backend): fail "
        "(the chunk and the node fail, saying where) or record (served and timed, info.finite false)",
    )
    n_threads: int | None = Field(
        None, ge=1, le=1024, description="CPU threads (default: all this process may use)"
    )

    @model_validator(mode="after")
    def _one_audio_key(self) -> CaptionsOptions:
        if self.audio is not None and self.client_command_file is not None:
            raise ValueError("give the audio either as 'audio' or as 'client_command_file', not both")
        return self


@dataclass(frozen=True)
class Clip:
    """One audio stream and its reference transcript (when there is one), checked by the policy."""

    path: Path
    reference: Path | None
    # How errors name the reference: the field and unit (or the file's name next to its audio).
    reference_where: str = ""
    # The policy the reference is read through (the shipped clips' transcripts are the engine's own).
    files: FilePolicy = UNRESTRICTED


def clips_of(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[Clip]:
    """Return the unit's audio streams: ``audio``/``client_command_file``/``dataset``, or the shipped clips.

    Every file the spec names is read through ``files``. Raises ValueError naming the field and unit
    of a refused or missing file or a folder without audio.
    """
    opts: Any = unit.options
    source = unit_input(unit, ("audio", "client_command_file", "dataset"), "audio")
    policy = source.policy(files)
    given = source.value
    items = [given] if isinstance(given, str | Path) else list(given)
    paths: list[Path] = []
    for i, item in enumerate(items):
        at = source.where if len(items) == 1 else f"{source.where} (item {i})"
        if policy.check(str(item), AUDIO_FILE_OR_FOLDER, at).is_dir():
            found = policy.folder_files(item, AUDIO_FILE_OR_FOLDER, at, AUDIO_SUFFIXES)
            if not found:
                raise FileAccessError(f"{at}: the folder holds no {'/'.join(AUDIO_SUFFIXES)} files")
            paths += found
        else:
            paths.append(policy.regular_file(item, AUDIO_FILE_OR_FOLDER, at))
    if opts.reference is not None:
        if len(paths) != 1:
            raise FileAccessError(
                f"'reference' names one transcript but there are {len(paths)} audio files; put "
                "each transcript next to its audio as <name>.txt instead"
            )
        at = where(unit.name, "reference")
        return [Clip(paths[0], files.regular_file(opts.reference, DATA_FILE, at), at, files)]
    clips = []
    for p in paths:
        txt = p.with_suffix(".txt")
        ref = policy.regular_file(txt, DATA_FILE, f"{source.where} ({txt.name})") if txt.is_file() else None
        clips.append(Clip(p, ref, f"{source.where} ({txt.name})", policy))
    return clips


def check(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this unit here: the model, the audio files and transcripts."""
    opts: Any = unit.options
    return check_unit(unit, files, model_formats(opts.backend), more=lambda: _stream_problems(unit, files))


def _stream_problems(unit: Application, files: FilePolicy) -> list[str]:
    """Return the problems of the unit's options and audio: backend and compute type, then each
    clip (refused, missing, empty or unreadable audio, a reference transcript without words)."""
    opts: Any = unit.options
    problems: list[str] = []
    if opts.backend == "faster_whisper" and (unit.model or "").endswith("@random"):
        problems.append("random Whisper models run on the transformers backend: set backend: transformers")
    if opts.backend == "auto" and unit.device != "cpu":
        try:
            model = files.resolve_model(unit, model_formats("auto"), "LiveCaptions")
            choose_backend("auto", model.format, unit.device, ctranslate2_cuda_devices())
        except ModelError:
            pass  # reported by the model check
        except ValueError as exc:
            problems.append(str(exc))
    if opts.backend == "transformers" and opts.compute_type not in (None, *TORCH_DTYPES):
        problems.append(
            f"compute_type '{opts.compute_type}' is a CTranslate2 type; backend: transformers takes "
            f"{', '.join(TORCH_DTYPES)}"
        )
    try:
        clips = clips_of(unit, files)
    except ValueError as exc:
        return [*problems, str(exc)]
    import soundfile

    for clip in clips:
        try:
            info = soundfile.info(str(clip.path))
            if info.frames == 0:
                problems.append(f"audio file {clip.path.name} of unit '{unit.name}' holds no samples")
        except Exception:
            problems.append(
                f"audio file {clip.path.name} of unit '{unit.name}' is not readable audio (WAV or FLAC)"
            )
        if clip.reference is not None:
            try:
                if not normalize(read_reference(clip)):
                    problems.append(f"{clip.reference_where}: the reference transcript has no words")
            except ValueError as exc:
                problems.append(str(exc))
    return problems


def read_reference(clip: Clip) -> str:
    """Return a clip's reference transcript (read through the policy; FileAccessError names the field)."""
    assert clip.reference is not None
    return clip.files.read_text(clip.reference, DATA_FILE, clip.reference_where)


_PUNCT = re.compile(r"[^\w\s']")


def normalize(text: str) -> str:
    """Return text lower-cased with punctuation removed and spaces collapsed (for WER and agreement)."""
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Return the word error rate of ``hypothesis`` against ``reference`` after normalisation."""
    import jiwer

    ref = normalize(reference)
    if not ref:
        raise ValueError("the reference transcript is empty")
    return float(jiwer.wer(ref, normalize(hypothesis)))


def agreed_prefix(previous: list[Word], current: list[Word]) -> int:
    """Return how many leading words two consecutive hypotheses share (the local-agreement rule)."""
    n = 0
    for a, b in zip(previous, current, strict=False):
        if normalize(a.text) != normalize(b.text):
            break
        n += 1
    return n


# Where a non-finite chunk's values came from (info.nonfinite_in), in words.
_NONFINITE_WHERE = {"encoder": "encoder's hidden states", "decoder": "decoder's logits"}


class CaptionsDriver(Driver):
    def load(self) -> dict[str, Any]:
        share_cpu_politely()
        opts = self.options
        self.clips = clips_of(self.unit, self.ctx.files)
        model = self.ctx.files.resolve_model(self.unit, model_formats(opts.backend), "LiveCaptions")
        self.random_weights = model.random is not None
        cuda = ctranslate2_cuda_devices() if opts.backend == "auto" and self.ctx.device != "cpu" else 0
        choice = choose_backend(opts.backend, model.format, self.ctx.device, cuda)
        settings = DecodeSettings(
            device=self.ctx.device,
            compute_type=opts.compute_type,
            threads=opts.n_threads or default_threads(),
            language=opts.language,
            beam_size=opts.beam_size,
            max_new_tokens=opts.max_new_tokens,
            seed=self.ctx.seed,
        )
        self.backend: Backend | None = load_backend(model, choice.backend, settings)
        self.audio = {clip.path: self._decode(clip.path) for clip in self.clips}
        return {
            **model.record(),
            **self.backend.describe(),
            "backend_choice": choice.reason,
            "audio": [c.path.name for c in self.clips],
            "prime_s": self._prime(),
        }

    def _prime(self) -> float:
        """Transcribe one chunk of silence; return how long it took (seconds).

        A captioning app is started before the speaker talks: the backend's one-off start-up (CUDA
        context, kernel selection: ~1.9 s on an H200 against ~0.13 s a chunk) is paid here, at load,
        and not by the first caption. The runner loads each session in the thread that then runs it,
        so what CUDA libraries keep per thread is set up here too.
        """
        import numpy as np

        assert self.backend is not None
        started = now()
        self.backend.transcribe(np.zeros(round(self.options.chunk_s * SAMPLE_RATE), np.float32), 0.0, None)
        took = round(now() - started, 3)
        self.backend.nonfinite_in()  # the silence's outputs are no chunk's
        return took

    def _decode(self, path: Path) -> np.ndarray:
        assert self.backend is not None
        try:
            samples = self.backend.decode(path)
        except Exception as exc:
            raise ValueError(
                f"audio file {path.name} of unit '{self.unit.name}' cannot be decoded ({type(exc).__name__})"
            ) from None
        if samples.size == 0:
            raise ValueError(f"audio file {path.name} of unit '{self.unit.name}' holds no samples")
        return samples

    def planned_records(self) -> int:
        """Return the chunks of the measured streams (each clip cut into ``chunk_s`` pieces)."""
        unit = self.unit
        step = round(self.options.chunk_s * SAMPLE_RATE)
        streams = range(unit.warmup_requests, unit.warmup_requests + unit.num_requests)
        return sum(max(1, -(-self.audio[self.clips[s % len(self.clips)].path].size // step)) for s in streams)

    def run(self) -> None:
        unit = self.unit
        index = 0
        for stream in range(unit.warmup_requests + unit.num_requests):
            clip = self.clips[stream % len(self.clips)]
            index = self._stream(stream, clip, index, warmup=stream < unit.warmup_requests)

    def _stream(self, stream: int, clip: Clip, index: int, warmup: bool) -> int:
        """Play one clip as a live stream; report one record per chunk; return the next record index."""
        opts = self.options
        audio = self.audio[clip.path]
        duration = audio.size / SAMPLE_RATE
        n_chunks = max(1, -(-audio.size // round(opts.chunk_s * SAMPLE_RATE)))
        committed: list[Word] = []
        pending: list[Word] = []
        buffer_start = 0.0
        t0 = now()
        for k in range(n_chunks):
            chunk_end = min((k + 1) * opts.chunk_s, duration)
            final = k == n_chunks - 1
            due = t0 + chunk_end
            _sleep_until(due, self.ctx.stop_requested)
            self.ctx.emit("request_start", index=index, arrival=due)
            record = RequestRecord(index=index, arrival=due, start=now(), warmup=warmup)
            held = self.ctx.gate_wait
            try:
                with self.ctx.gpu_step("audio_chunk"):
                    # rtf is the model's own speed: its clock starts once the gate admitted the chunk.
                    started = now()
                    heard = self._transcribe(audio, buffer_start, chunk_end, committed)
                    busy = now() - started
            except AppStopped:
                record.end, record.status = now(), RequestStatus.INTERRUPTED
                self.ctx.send_record(gate_waited(record, self.ctx.gate_wait - held))
                raise
            gate_waited(record, self.ctx.gate_wait - held)
            words = heard.words
            agreed = len(words) if final else agreed_prefix(pending, words)
            new, pending = words[:agreed], words[agreed:]
            committed += new
            # The buffer restarts at a sentence end (Whisper transcribes whole sentences best), or after
            # the last committed word once it holds more than max_buffer_s.
            if new and (new[-1].text.strip()[-1:] in ".?!" or chunk_end - buffer_start > opts.max_buffer_s):
                buffer_start = new[-1].end
            record.end = now()
            record.metrics["chunk"] = record.end - due
            record.info.update(
                rtf=busy / max(chunk_end - k * opts.chunk_s, 1e-6),
                stream=stream,
                clip=clip.path.name,
                chunk=k,
                audio_end_s=round(chunk_end, 3),
                tokens=heard.tokens,
                text="".join(w.text for w in new).strip(),
            )
            # Checked after the clock stopped, so that the check is in no timed figure.
            nonfinite = self.backend.nonfinite_in() if self.backend is not None else None
            if nonfinite is not None:
                record.info.update(finite=not nonfinite, nonfinite_in=nonfinite)
            if final:
                self._finish_stream(record, clip, committed)
            if nonfinite and opts.nonfinite == "fail":
                record.status = RequestStatus.ERROR
                record.error = nonfinite_failure(
                    f"chunk {k} of stream {stream}", [_NONFINITE_WHERE[s] for s in nonfinite]
                )
                self.ctx.send_record(record)
                raise RequestFailed(record.error)
            self.ctx.send_record(record)
            index += 1
        return index

    def _transcribe(self, audio: np.ndarray, start: float, end: float, committed: list[Word]) -> Hypothesis:
        """Return the new words heard in ``audio[start:end]`` (times in the clip) and the tokens decoded."""
        assert self.backend is not None
        window = audio[int(start * SAMPLE_RATE) : int(end * SAMPLE_RATE)]
        if window.size < SAMPLE_RATE // 10:
            return Hypothesis([], 0)
        # The committed text before the buffer as prompt keeps spelling and casing consistent.
        prompt = "".join(w.text for w in committed if w.end <= start)[-200:].strip() or None
        hypothesis = self.backend.transcribe(window, start, prompt)
        heard = hypothesis.words
        last_end = committed[-1].end if committed else 0.0
        # The buffer may still hold committed words: drop those by time, then by a repeated n-gram.
        words = [w for w in heard if w.start > last_end - 0.1 and normalize(w.text)]
        tail = [normalize(w.text) for w in committed[-5:]]
        for n in range(min(len(tail), len(words)), 0, -1):
            if tail[-n:] == [normalize(w.text) for w in words[:n]]:
                return Hypothesis(words[n:], hypothesis.tokens)
        return Hypothesis(words, hypothesis.tokens)

    def _finish_stream(self, record: RequestRecord, clip: Clip, committed: list[Word]) -> None:
        transcript = "".join(w.text for w in committed).strip()
        record.info["transcript"] = transcript
        if clip.reference is not None and not self.random_weights:
            # The reference is summarised by its word error rate only: file contents stay out of results.
            record.info["wer"] = word_error_rate(read_reference(clip), transcript)

    def close(self) -> None:
        if getattr(self, "backend", None) is not None:
            assert self.backend is not None
            self.backend.close()
            self.backend = None


APP = AppType(
    name="LiveCaptions",
    aliases=("live_captions", "livecaptions", "LiveCaptionsApplication"),
    options=CaptionsOptions,
    slo_metrics=("chunk",),
    default_slo=("chunk<=2s",),
    default_priority="high",
    default_num_requests=1,
    driver="benchmarks.apps.captions:CaptionsDriver",
    default_model="whisper-tiny.en",
    needs_model=True,
    record="chunk",
    description="A live audio stream cut into chunks at wall-clock pace, transcribed by Whisper "
    "(faster-whisper or transformers).",
    check=check,
    quality=(
        # Per stream (on its last chunk), only against a reference transcript with trained weights.
        QualityMeasure("wer", "fraction", info_mean("wer")),
        QualityMeasure("rtf", "s/s", info_mean("rtf")),
        QualityMeasure("finite_chunks", "fraction", info_share("finite")),
    ),
)
