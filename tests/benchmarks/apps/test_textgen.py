"""The chat backends' shared pieces (the drivers' own tests run them on real models)."""

from __future__ import annotations

from benchmarks.apps.textgen import plain_transcript


def test_a_chat_without_template_becomes_a_plain_transcript_for_the_assistant():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert plain_transcript(messages) == "System: Be brief.\nUser: Hi\nAssistant:"
