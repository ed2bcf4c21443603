"""The chat backends' shared pieces (the drivers' own tests run them on real models)."""

from __future__ import annotations

import pytest

from benchmarks.apps.textgen import plain_transcript


def test_a_chat_without_template_becomes_a_plain_transcript_for_the_assistant():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert plain_transcript(messages) == "System: Be brief.\nUser: Hi\nAssistant:"


def test_llama_settings_are_validated_and_unset_ones_stay_the_backends_defaults():
    from pydantic import ValidationError

    from benchmarks.apps.textgen import LlamaCppOptions

    assert LlamaCppOptions().llama_settings() == {}
    chosen = LlamaCppOptions(flash_attn=True, n_batch=1024, n_ubatch=256, type_k="q8_0", type_v="q8_0")
    assert chosen.llama_settings() == {
        "flash_attn": True,
        "n_batch": 1024,
        "n_ubatch": 256,
        "type_k": "q8_0",
        "type_v": "q8_0",
    }
    with pytest.raises(ValidationError, match=r"n_ubatch \(512\) must not exceed n_batch \(256\)"):
        LlamaCppOptions(n_batch=256, n_ubatch=512)
    with pytest.raises(ValidationError, match="needs flash_attn: true"):
        LlamaCppOptions(type_v="q4_0")
    with pytest.raises(ValidationError):
        LlamaCppOptions(type_k="q3_k")
    # A quantized K alone needs no flash attention.
    assert LlamaCppOptions(type_k="q8_0").llama_settings() == {"type_k": "q8_0"}


def test_kv_types_are_ggml_type_ids_and_reach_each_backend_in_its_own_words():
    import llama_cpp

    from benchmarks.apps.textgen import KV_TYPES, llama_kwargs, llama_server_args

    for name, ggml_id in KV_TYPES.items():
        constant = getattr(llama_cpp, f"GGML_TYPE_{name.upper()}", None)
        assert constant is None or constant == ggml_id, name
    settings = {"flash_attn": True, "n_batch": 1024, "n_ubatch": 256, "type_k": "q8_0", "type_v": "f16"}
    assert llama_kwargs(settings) == {
        "flash_attn": True,
        "n_batch": 1024,
        "n_ubatch": 256,
        "type_k": 8,
        "type_v": 1,
    }
    assert llama_server_args(settings) == [
        "--flash-attn", "on", "--batch-size", "1024", "--ubatch-size", "256",
        "--cache-type-k", "q8_0", "--cache-type-v", "f16",
    ]  # fmt: skip
    assert llama_server_args({"flash_attn": False}) == ["--flash-attn", "off"]


@pytest.mark.models
def test_a_chat_becomes_a_prompt_by_the_models_template_else_as_a_plain_transcript():
    from llama_cpp import Llama

    from benchmarks.apps.textgen import llama_chat_prompt, local_file
    from benchmarks.models import resolve

    chat = [{"role": "user", "content": "Name a colour."}]
    for name, templated in (("smollm2-135m", True), ("llama-tiny@random", False)):
        path = local_file(resolve(name, ("gguf",), "Chatbot"))
        llm = Llama(model_path=str(path), n_ctx=256, verbose=False)
        text, add_bos = llama_chat_prompt(llm)(chat)
        if templated:
            # SmolLM2's own template: its role markers, and the BOS it writes itself (none added).
            assert "<|im_start|>user\nName a colour.<|im_end|>" in text and text.endswith("assistant\n")
        else:
            # A random twin carries no template (what broke the bare loop of chatbot_overhead on the GPU).
            assert (text, add_bos) == (plain_transcript(chat), True)
        llm.close()


def test_tpot_and_itl_count_the_tokens_after_the_first_ones_arrival():
    from benchmarks.apps.textgen import Generation

    # One token at a time (a local backend): (last - first) / (tokens - 1).
    metrics, series = Generation(token_times=[1.0, 1.5, 2.0], first_text_time=1.0).latency_metrics(0.5)
    assert metrics == {"ttft": 0.5, "tpot": 0.5} and series == {"itl": [0.5, 0.5]}
    # A server's chunks: two tokens came with the first (no decode time of the client's), two at 2.0.
    metrics, series = Generation(token_times=[1.0, 1.0, 2.0, 2.0, 3.0], first_text_time=1.0).latency_metrics(
        0
    )
    assert metrics["tpot"] == pytest.approx(2 / 3) and series == {"itl": [1.0, 0.0, 1.0]}
    # Every token in one chunk: no decode time to speak of.
    assert Generation(token_times=[1.0, 1.0], first_text_time=1.0).latency_metrics(0) == ({"ttft": 1.0}, {})


# A question whose answer (from smollm2-135m, greedy) is Japanese up to max_tokens: many of its tokens end
# inside a multi-byte character, which llama-server holds back and sends with the token that completes
# it; and one whose short answer ends with the end-of-sequence token.
JAPANESE = "日本の首都はどこですか。日本語で答えてください。"
STOPS = "Name three colors."


@pytest.mark.llama_server
def test_a_servers_multibyte_reply_has_the_servers_token_count_and_tpot_and_the_local_backends(tmp_path):
    import json

    from benchmarks.results import write_bundle
    from benchmarks.runner import run_workflow
    from benchmarks.spec.load import load_yaml

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"prompt": p}, ensure_ascii=False) + "\n" for p in (JAPANESE, STOPS))
    )
    chat = f"num_requests: 2, max_tokens: 48, temperature: 0, prompts: {prompts}"
    text = (
        "llm: {type: LLMServer, model: smollm2-135m, device: cpu, parallel: 1}\n"
        f"remote: {{type: Chatbot, server: llm, {chat}}}\n"
        f"local: {{type: Chatbot, model: smollm2-135m, device: cpu, {chat}}}\n"
        "workflows:\n"
        "  serve: {uses: llm, background: true}\n"
        "  r: {uses: remote}\n"
        "  l: {uses: local, depend_on: [r]}\n"  # one after the other: no contention for the cores
    )
    result = run_workflow(load_yaml(text, name="tokens"), out_dir=tmp_path / "run")
    document = json.loads(write_bundle(result, tmp_path / "run").read_text())
    apps = {a["name"]: a for a in document["applications"]}
    remote = sorted(apps["r"]["requests"], key=lambda r: r["index"])
    local = sorted(apps["l"]["requests"], key=lambda r: r["index"])
    assert [r["status"] for r in remote + local] == ["ok"] * 4
    japanese, stops = remote
    # The case at hand: Japanese text in fewer chunks than tokens, since chunks carried several tokens.
    assert any(ord(c) > 0x2FFF for c in japanese["info"]["reply"])
    assert japanese["info"]["chunks"] < japanese["info"]["tokens_out"] == 48
    # TPOT through the stream is the server's own time per decoded token over the same tokens (its
    # predicted_ms between the first and the last chunk with text). Its whole reply's figure also holds
    # the steps before the first chunk, which vary on a busy machine; counting chunks as tokens would
    # be 1.9x above it.
    tpot_ms = japanese["metrics"]["tpot"] * 1000
    assert tpot_ms == pytest.approx(japanese["info"]["server_tpot_ms"], rel=0.02)
    assert tpot_ms < 1.3 * japanese["info"]["server_timings"]["predicted_per_token_ms"]
    assert len(japanese["series"]["itl"]) <= 47
    # The server's count, less the end-of-sequence token it stopped on and did not send.
    assert stops["info"]["finish_reason"] == "stop"
    for r in remote:
        info = r["info"]
        assert info["tokens_out"] == info["server_timings"]["predicted_n"] - (info["finish_reason"] == "stop")
    # Where the local backend wrote the same text (greedy decoding of one model; the two builds' sums
    # may part ways on a long reply), it counted the same tokens in and out.
    same = [
        (r, own) for r, own in zip(remote, local, strict=True) if r["info"]["reply"] == own["info"]["reply"]
    ]
    assert same, "no reply came out the same through the server and locally"
    for r, own in same:
        assert r["info"]["finish_reason"] == own["info"]["finish_reason"]
        assert r["info"]["tokens_out"] == own["info"]["tokens_out"]
        assert r["info"]["tokens_in"] == own["info"]["tokens_in"]
