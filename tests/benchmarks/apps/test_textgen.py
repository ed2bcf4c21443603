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
