"""``NAME@random`` Whisper: transformers ``WhisperForConditionalGeneration`` with a dummy vocabulary of
the real size, its special tokens at the real ids."""

from __future__ import annotations

from typing import Any

from benchmarks.models.catalogue import ModelError, RandomModel

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
