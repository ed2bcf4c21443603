"""LiveCaptions on the shipped clips with the packaged whisper-tiny.en and the real faster-whisper."""

from __future__ import annotations

import itertools
import math

import pytest

from benchmarks.apps.captions import Word, agreed_prefix, check, normalize, word_error_rate
from benchmarks.apps.datasets import DATA_DIR

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
        assert final["info"]["wer"] <= 0.35, (final["info"]["transcript"], final["info"]["reference"])
        assert "".join(c["info"]["text"] + " " for c in chunks).split() == final["info"]["transcript"].split()
    assert run.gate.steps["audio_chunk"] == len(records)


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
    assert len(latencies) == 12
    assert latencies[-1] > latencies[1] + 0.25
    assert all(b >= a - 0.02 for a, b in itertools.pairwise(latencies[1:]))
    assert "wer" not in run.records[-1]["info"]  # no short.txt next to it


def test_missing_and_unreadable_audio_are_reported_by_name(make_unit, tmp_path):
    bad = tmp_path / "noise.wav"
    bad.write_bytes(b"RIFF....WAVEfmt definitely not audio")
    problems = check(make_unit(CAPTIONS + f"  audio: {bad}\n"))
    assert len(problems) == 1 and str(bad) in problems[0] and "not readable audio" in problems[0]
    missing = tmp_path / "missing.flac"
    problems = check(make_unit(CAPTIONS + f"  client_command_file: {missing}\n"))
    assert problems == [f"audio file {missing} does not exist"]


def test_an_empty_reference_transcript_is_reported(make_unit, tmp_path):
    import shutil

    clip = tmp_path / "talk.flac"
    shutil.copy(DATA_DIR / "audio" / "clip-1.flac", clip)
    (tmp_path / "talk.txt").write_text(" ...\n")
    assert check(make_unit(CAPTIONS + f"  audio: {clip}\n")) == [
        f"reference transcript {tmp_path / 'talk.txt'} has no words"
    ]


def test_audio_and_client_command_file_together_are_rejected(make_unit):
    from benchmarks.spec import WorkflowValidationError

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
