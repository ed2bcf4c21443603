"""``NAME@random`` Llama: an f16 GGUF with the architecture's shapes and a dummy SPM vocabulary, written
once into the cache under the model's name."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.data import DATA_DIR
from benchmarks.models.cache import cache_dir, file_lock
from benchmarks.models.catalogue import ModelError, RandomModel

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
    with file_lock(target.with_name(f".{target.name}.lock")):
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


def dummy_spm_vocabulary(size: int) -> tuple[list[str], list[float], list[int]]:
    """Return (tokens, scores, types) of a SentencePiece vocabulary of ``size`` tokens for random models.

    ``<unk> <s> </s>``, the 256 byte tokens, printable ASCII, then the words of the shipped prompts and
    documents with all their ``▁``-prefixes (so llama.cpp's SPM merges build each word, about one token
    per word as a real vocabulary gives), then fillers ``▁x<n>`` that only the model can emit.
    """
    from gguf import TokenType

    text = " ".join(
        p.read_text(encoding="utf-8") for p in sorted(DATA_DIR.rglob("*")) if p.suffix in (".jsonl", ".md")
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
