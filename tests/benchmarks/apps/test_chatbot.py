"""Chatbot on the packaged SmolLM2 GGUF with the real llama.cpp (and transformers) backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.apps.base import RequestRecord
from benchmarks.apps.chatbot import APP, check, load_prompts
from benchmarks.apps.datasets import Input
from benchmarks.metrics import quality_figures
from benchmarks.models import resolve

CHAT = """
chat:
  type: Chatbot
  model: smollm2-135m
  num_requests: 2
  max_tokens: {max_tokens}
  temperature: 0
  device: cpu
  backend: {backend}
  prompts: {prompts}
"""


def prompts_file(tmp_path: Path, *contents: str) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        "".join(json.dumps({"messages": [{"role": "user", "content": c}]}) + "\n" for c in contents)
    )
    return path


@pytest.mark.models
def test_replies_stream_with_ttft_tpot_and_token_counts_equal_to_llama_cpp(run_driver, tmp_path):
    prompts = prompts_file(tmp_path, "Name three colours.", "What is the capital of France?")
    run = run_driver(CHAT.format(max_tokens=12, backend="llama_cpp", prompts=prompts))
    records = run.records
    assert len(records) == 2
    assert run.loaded["sha256"] and run.loaded["source"] == "catalogue"

    from llama_cpp import Llama

    bare = Llama(model_path=str(resolve("smollm2-135m", ("gguf",), "t").path), n_ctx=2048, verbose=False)
    stopped_early = 0
    for record, turn in zip(records, load_prompts(Input("chat", "prompts", prompts)), strict=True):
        m, info = record["metrics"], record["info"]
        assert m["ttft"] > 0 and m["tpot"] > 0 and m["e2e"] >= m["ttft"]
        assert len(record["series"]["itl"]) == info["tokens_out"] - 1
        direct = bare.create_chat_completion(messages=turn, max_tokens=12, temperature=0)
        assert info["tokens_out"] == direct["usage"]["completion_tokens"]
        assert info["tokens_in"] == direct["usage"]["prompt_tokens"]
        assert record["info"]["reply"].strip() == direct["choices"][0]["message"]["content"].strip()
        stopped_early += record["info"]["finish_reason"] == "stop"
    bare.close()
    # Every token is one gated step: one prefill per request, then one decode per further token
    # (plus the step that produced the end-of-turn token when a reply ended on its own).
    total = sum(r["info"]["tokens_out"] for r in records)
    assert run.gate.steps["prefill"] == 2
    assert run.gate.steps["prefill"] + run.gate.steps["decode"] == total + stopped_early


@pytest.mark.models
def test_transformers_backend_runs_the_packaged_gguf_dequantised(run_driver, tmp_path):
    prompts = prompts_file(tmp_path, "Say hello.")
    run = run_driver(
        CHAT.format(max_tokens=6, backend="transformers", prompts=prompts).replace(
            "num_requests: 2", "num_requests: 1"
        )
    )
    (record,) = run.records
    assert run.loaded["backend"] == "transformers"
    assert 1 <= record["info"]["tokens_out"] <= 6
    assert record["metrics"]["ttft"] > 0
    assert run.gate.steps["prefill"] == 1


def test_a_bad_prompts_file_is_reported_with_its_line(tmp_path, make_unit):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": \n')
    problems = check(make_unit(CHAT.format(max_tokens=4, backend="llama_cpp", prompts=bad)))
    assert len(problems) == 1
    assert problems[0].startswith("field 'prompts' of unit 'chat', line 2: not valid JSON (")


def test_a_prompt_without_messages_or_prompt_is_reported(tmp_path):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"text": "hi"}\n')
    with pytest.raises(ValueError, match=r"entry 2: needs 'messages'"):
        load_prompts(Input("chat", "prompts", bad))


def test_the_shipped_prompts_are_chat_turns():
    from benchmarks.data import DATA_DIR

    turns = load_prompts(Input("chat", None, DATA_DIR / "prompts.jsonl"))
    assert len(turns) >= 20
    assert all(turn[-1]["role"] == "user" for turn in turns)


def test_device_gpu_without_a_gpu_build_of_llama_cpp_is_an_error_not_a_cpu_run(run_driver, tmp_path):
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python has GPU support")
    prompts = prompts_file(tmp_path, "Hi.")
    with pytest.raises(ValueError, match="built without GPU support"):
        run_driver(CHAT.format(max_tokens=4, backend="llama_cpp", prompts=prompts), device="gpu")


@pytest.mark.models
def test_a_random_llama_gguf_is_written_once_loaded_by_llama_cpp_and_decodes_max_tokens(
    run_driver, tmp_path, monkeypatch
):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
    prompts = prompts_file(tmp_path, "Explain how two applications share one GPU.", "Name three colours.")
    text = CHAT.format(max_tokens=16, backend="llama_cpp", prompts=prompts).replace(
        "smollm2-135m", "llama-tiny@random"
    )
    run = run_driver(text.replace("temperature: 0", "temperature: 0.7"))
    loaded = run.loaded
    assert loaded["weights"] == "random" and loaded["config"]["block_count"] == 2
    gguf = tmp_path / "cache" / "models" / loaded["file"]
    assert gguf.read_bytes()[:4] == b"GGUF"
    for record in run.records:
        # </s> has a zero output row: a random model decodes every token it is allowed.
        assert record["info"]["tokens_out"] == 16 and record["info"]["finish_reason"] == "length"
        assert record["metrics"]["ttft"] > 0 and record["metrics"]["tpot"] > 0
        # The dummy vocabulary holds the prompts' words: about one token per word, not per letter.
        assert record["info"]["tokens_in"] < 40
    mtime = gguf.stat().st_mtime_ns
    again = run_driver(text)
    assert again.loaded["file"] == gguf.name and gguf.stat().st_mtime_ns == mtime


def test_a_random_llama_too_large_for_the_memory_is_refused_on_a_cpu_with_its_size(make_unit, tmp_path):
    prompts = prompts_file(tmp_path, "Hi.")
    unit = make_unit(
        CHAT.format(max_tokens=4, backend="llama_cpp", prompts=prompts).replace(
            "smollm2-135m", "llama-3.1-70b@random"
        )
    )
    (problem,) = check(unit)
    assert problem.startswith(
        "model 'llama-3.1-70b@random' (llama-3.1-70b shapes, 70.55 B parameters) needs about 141.1 GB of "
        "memory on the CPU"
    )


def test_quality_is_the_mean_token_counts_and_the_decode_rate_over_every_decoded_token():
    def turn(index: int, tokens_in: int, itl: list[float], warmup: bool = False) -> dict:
        record = RequestRecord(index=index, arrival=0.0, warmup=warmup, series={"itl": itl})
        record.info.update(tokens_in=tokens_in, tokens_out=len(itl) + 1, finish_reason="length", reply="...")
        return record.to_event()

    records = [turn(0, 999, [9.0], warmup=True), turn(1, 30, [0.1, 0.1, 0.1]), turn(2, 50, [0.2])]
    assert quality_figures(records, APP.quality) == {
        "tokens_in": {"value": 40.0, "unit": "tokens/request", "count": 2},
        "tokens_out": {"value": 3.0, "unit": "tokens/request", "count": 2},
        "decode_rate": {"value": pytest.approx(4 / 0.5), "unit": "tokens/s", "count": 2},
    }
    # A reply of one token has no decode time: it counts for the token means, not the rate.
    assert quality_figures([turn(0, 10, [])], APP.quality) == {
        "tokens_in": {"value": 10.0, "unit": "tokens/request", "count": 1},
        "tokens_out": {"value": 1.0, "unit": "tokens/request", "count": 1},
    }


@pytest.mark.models
def test_llama_settings_reach_llama_cpp_and_ttft_is_broken_down_into_ordered_stages(run_driver, tmp_path):
    prompts = prompts_file(tmp_path, "Name three colours.")
    text = CHAT.format(max_tokens=6, backend="llama_cpp", prompts=prompts) + (
        "  flash_attn: true\n  n_batch: 256\n  n_ubatch: 64\n  type_k: q8_0\n  type_v: q8_0\n"
    )
    run = run_driver(text)
    assert run.loaded["llama"] == {
        "flash_attn": True, "n_batch": 256, "n_ubatch": 64, "type_k": "q8_0", "type_v": "q8_0"
    }  # fmt: skip
    for record in run.records:
        marks = record["info"]["ttft_marks"]
        assert list(marks) == ["started", "templated", "tokenised", "admitted", "first_token", "first_text"]
        times = list(marks.values())
        assert times == sorted(times) and times[0] >= 0
        # The last stage ends at the first non-empty token: TTFT itself.
        assert marks["first_text"] == pytest.approx(record["metrics"]["ttft"])


@pytest.mark.models
def test_the_default_llama_settings_are_recorded_as_llama_cpp_pythons(run_driver, tmp_path):
    prompts = prompts_file(tmp_path, "Hi.")
    run = run_driver(CHAT.format(max_tokens=2, backend="llama_cpp", prompts=prompts))
    assert run.loaded["llama"] == {
        "flash_attn": False, "n_batch": 512, "n_ubatch": 512, "type_k": "f16", "type_v": "f16"
    }  # fmt: skip
