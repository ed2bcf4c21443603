"""Token-by-token chat generation for the applications that run a local LLM (Chatbot, DeepResearch).

Both backends stream one token per gated step, so the scheduler sees every decode step and the token
counts are exact (a token is one ``generate`` step, not a detokenised text chunk):

- ``llama_cpp`` (default): llama-cpp-python on a GGUF file; the prompt is formatted with the chat
  template stored in the GGUF (the path ``create_chat_completion`` takes), and each request starts from
  an empty KV cache so that TTFT measures a full prefill, never a cache hit;
- ``transformers``: a causal LM folder, hub id or GGUF file (dequantised by transformers) with a
  hand-written decode loop over the KV cache.

- ``server``: a shared model server (``LLMServer``, llama.cpp's ``llama-server``) reached through its
  OpenAI-compatible API, streamed and timed at the client on the shared clock. A chunk may carry
  several tokens (llama-server holds back a token that ends inside a multi-byte character until the
  character is whole), so the tokens come from the server's own counts: each chunk's ``timings``
  (asked for with ``timings_per_token``) says how many tokens it has generated so far, and the tokens
  a chunk brings all become available when it arrives. The server's own timings of the request are kept.

The end-of-sequence token is never counted as output, in any backend: a local backend stops before
it, and a server's count (``usage.completion_tokens``), which includes the token it stopped on, is
taken one less when it stopped (finish reason ``stop``).

Heavy libraries are imported inside the constructors: this module is imported by the application
modules, which the spec imports to validate keys.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from benchmarks.apps.runtime import default_threads, setup_torch, share_cpu_politely
from benchmarks.clock import now
from benchmarks.models import ResolvedModel
from benchmarks.models.random_llama import random_gguf
from benchmarks.platform import accelerator
from benchmarks.spec.model import AppOptions

Messages = Sequence[dict[str, str]]
StepGate = Callable[[str], AbstractContextManager[None]]


# KV cache element types llama.cpp accepts for K and V (ggml type ids, as llama_cpp.GGML_TYPE_*).
KV_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}
KvType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]


class LlamaCppOptions(AppOptions):
    """The llama.cpp settings that matter for decode speed, shared by Chatbot (llama-cpp-python) and
    LLMServer (llama-server); unset means the backend's own default (recorded as such)."""

    # A choice of two, not a bool: the web editor gives a bool a checkbox, whose blank is false, and
    # unset must stay the backend's own default (llama-server's is auto).
    flash_attn: Literal[True, False] | None = Field(
        None, description="flash attention (default: off in llama-cpp-python, auto in llama-server)"
    )
    n_batch: int | None = Field(
        None,
        ge=1,
        le=65_536,
        description="logical batch: most prompt tokens per decode call (default 512; server 2048)",
    )
    n_ubatch: int | None = Field(
        None, ge=1, le=65_536, description="physical batch: most tokens per compute graph (default 512)"
    )
    type_k: KvType | None = Field(None, description="KV cache type of K (default f16)")
    type_v: KvType | None = Field(
        None, description="KV cache type of V (default f16; a quantized one needs flash_attn)"
    )

    @model_validator(mode="after")
    def _check_llama(self) -> LlamaCppOptions:
        if self.n_batch is not None and self.n_ubatch is not None and self.n_ubatch > self.n_batch:
            raise ValueError(f"n_ubatch ({self.n_ubatch}) must not exceed n_batch ({self.n_batch})")
        # llama.cpp refuses a quantized V cache without flash attention (its context fails to load).
        if self.type_v not in (None, "f32", "f16", "bf16") and self.flash_attn is not True:
            raise ValueError(f"type_v: {self.type_v} (a quantized V cache) needs flash_attn: true")
        return self

    def llama_settings(self) -> dict[str, Any]:
        """Return the settings that are set, by name (what the result records and the backends read)."""
        names = ("flash_attn", "n_batch", "n_ubatch", "type_k", "type_v")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


def llama_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    """Return ``llama_settings()`` as keyword arguments of llama-cpp-python's ``Llama``."""
    kwargs = dict(settings)
    for key in ("type_k", "type_v"):
        if key in kwargs:
            kwargs[key] = KV_TYPES[kwargs[key]]
    return kwargs


def llama_server_args(settings: dict[str, Any]) -> list[str]:
    """Return ``llama_settings()`` as llama-server's command-line options."""
    flags = {
        "n_batch": "--batch-size",
        "n_ubatch": "--ubatch-size",
        "type_k": "--cache-type-k",
        "type_v": "--cache-type-v",
    }
    args: list[str] = []
    for key, value in settings.items():
        if key == "flash_attn":
            args += ["--flash-attn", "on" if value else "off"]
        else:
            args += [flags[key], str(value)]
    return args


class PromptTooLong(ValueError):
    """The prompt plus the tokens to generate do not fit the context window."""


@dataclass
class Generation:
    """One streamed reply: its text, token counts and when each token became available."""

    text: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    started: float = 0.0
    token_times: list[float] = field(default_factory=list)
    first_text_time: float | None = None
    finish_reason: str = "length"
    # A model server's own timings of the request (llama-server's ``timings``: prompt_n, prompt_ms,
    # predicted_n, predicted_ms, ...) and the slot that served it; empty for a local model.
    server_timings: dict[str, float] = field(default_factory=dict)
    # The streamed chunks that carried text (a model server's reply; fewer than the tokens where a
    # chunk brought several); 0 for a local model.
    chunks: int = 0
    # A model server's own decode time per token (ms) over the tokens the client timed: its
    # predicted_ms between the first and the last chunk with text over the tokens in between; the
    # figure TPOT matches even where the server's steps vary (a busy machine). None for a local model.
    server_tpot_ms: float | None = None
    # When each stage before the first token ended, on the shared clock (llama_cpp backend): TTFT's
    # breakdown, in the order of PHASES.
    marks: dict[str, float] = field(default_factory=dict)

    def latency_metrics(self, arrival: float) -> tuple[dict[str, float], dict[str, list[float]]]:
        """Return (metrics, series) in seconds: TTFT from ``arrival`` to the first non-empty token, TPOT,
        and the inter-token latencies ``itl``.

        TPOT is (last token - first token) / the tokens that came after the first one's arrival, and
        ``itl`` holds those tokens' gaps to the token before (0 for one that arrived with it). One token
        at a time (a local backend) that is (last - first) / (tokens - 1); a server's tokens that came
        in the first chunk with the first one are no decode time of the client's.
        """
        metrics: dict[str, float] = {}
        series: dict[str, list[float]] = {}
        if self.first_text_time is not None:
            metrics["ttft"] = self.first_text_time - arrival
        times = self.token_times
        if times:
            gaps = [b - a for a, b in itertools.pairwise(times) if b > times[0]]
            if gaps:
                metrics["tpot"] = (times[-1] - times[0]) / len(gaps)
                series["itl"] = gaps
        return metrics, series


# The stages of a llama_cpp request before its first token, each ending at its mark: the chat
# template, tokenisation, the request set-up (KV reset, seed, sampler) and the scheduler gate's
# admission of the prefill step, the prefill itself (llama_decode of the prompt, the GPU's
# synchronisation and the first sample), and the first token's text.
PHASES = ("templated", "tokenised", "admitted", "first_token", "first_text")


class LlamaCppGenerator:
    """llama-cpp-python on a GGUF file; ``device`` gpu offloads every layer (CUDA or Metal, whichever the
    build has: ``benchmarks.platform.accelerator`` says which the machine offers), cpu none."""

    backend = "llama_cpp"

    def __init__(
        self,
        model: ResolvedModel,
        *,
        n_ctx: int,
        device: str,
        seed: int,
        n_threads: int | None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        import llama_cpp
        from llama_cpp import Llama

        path = local_file(model)
        if path is None:
            raise ValueError(
                f"the llama_cpp backend needs a local GGUF file; model '{model.requested}' is not one"
            )
        if device == "gpu" and not llama_cpp.llama_supports_gpu_offload():
            # Otherwise n_gpu_layers is ignored and a "GPU" run silently measures the CPU.
            raise ValueError(
                "device: gpu, but this llama-cpp-python was built without GPU support; rebuild it with "
                "make install GPU=cuda (Apple silicon: GPU=metal), or use backend: transformers"
            )
        self.accelerator = accelerator(device)
        self._llama_cpp = llama_cpp
        self.threads = n_threads or default_threads()
        self.path = path
        self.settings = dict(settings or {})
        self.llm = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_gpu_layers=self.accelerator.gpu_layers,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            seed=seed,
            verbose=False,
            **llama_kwargs(self.settings),
        )
        self.n_ctx = n_ctx
        self.chat_template = bool(self.llm.metadata.get("tokenizer.chat_template"))
        self.format_chat = llama_chat_prompt(self.llm)

    def describe(self) -> dict[str, Any]:
        """Return what the result records about the loaded backend."""
        return {
            "backend": self.backend,
            "accelerator": self.accelerator.label,
            "file": Path(self.path).name,
            "n_ctx": self.n_ctx,
            "threads": self.threads,
            "chat_template": self.chat_template,
            # The llama.cpp settings in effect (the unit's, else llama-cpp-python's defaults).
            "llama": {
                "flash_attn": self.settings.get("flash_attn", False),
                "n_batch": self.llm.n_batch,
                "n_ubatch": self.llm.context_params.n_ubatch,
                "type_k": self.settings.get("type_k", "f16"),
                "type_v": self.settings.get("type_v", "f16"),
            },
        }

    def prompt_tokens(self, messages: Messages, marks: dict[str, float] | None = None) -> list[int]:
        """Return the chat prompt's token ids, formatted with the model's own template; with ``marks``,
        note when the template and the tokenisation ended."""
        text, add_bos = self.format_chat(messages)
        if marks is not None:
            marks["templated"] = now()
        tokens: list[int] = self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        if marks is not None:
            marks["tokenised"] = now()
        return tokens

    def count_tokens(self, text: str) -> int:
        """Return how many tokens a piece of text takes (no special tokens)."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def generate(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        step: StepGate,
        grammar: str | None = None,
    ) -> Generation:
        """Stream a reply one gated token at a time; return the text, counts and token times."""
        llm = self.llm
        out = Generation(started=now())
        prompt = self.prompt_tokens(messages, out.marks)
        out.tokens_in = len(prompt)
        if len(prompt) + max_tokens > self.n_ctx:
            raise PromptTooLong(
                f"the prompt has {len(prompt)} tokens; with max_tokens {max_tokens} it exceeds "
                f"n_ctx {self.n_ctx}"
            )
        compiled = None
        if grammar is not None:
            from llama_cpp import LlamaGrammar

            compiled = LlamaGrammar.from_string(grammar, verbose=False)
        # An empty KV cache per request: a prefix hit would make TTFT measure nothing.
        llm.reset()
        llm.set_seed(seed)
        stream = llm.generate(
            prompt, temp=temperature, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, grammar=compiled
        )
        tokens: list[int] = []
        vocab = llm._model.vocab
        is_eog = self._llama_cpp.llama_vocab_is_eog
        marks = out.marks
        times = out.token_times
        try:
            with step("prefill"):
                marks["admitted"] = now()
                token = next(stream, None)
            marks["first_token"] = now()
            while True:
                if token is None or is_eog(vocab, token):
                    out.finish_reason = "stop"
                    break
                tokens.append(token)
                t = now()
                times.append(t)
                # Detokenised only until the first non-empty piece (TTFT's end): the reply's text is
                # detokenised once at the end.
                if out.first_text_time is None and llm.detokenize([token]):
                    out.first_text_time = t
                    marks["first_text"] = t
                if len(tokens) >= max_tokens:
                    break
                with step("decode"):
                    token = next(stream, None)
        finally:
            stream.close()
        out.tokens_out = len(tokens)
        out.text = llm.detokenize(tokens).decode("utf-8", errors="replace")
        return out

    def close(self) -> None:
        """Free the model (llama.cpp holds native memory until the object is closed)."""
        self.llm.close()


class TransformersGenerator:
    """A transformers causal LM with a greedy or sampled decode loop over its KV cache."""

    backend = "transformers"

    def __init__(self, model: ResolvedModel, *, device: str, seed: int, n_threads: int | None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.accelerator, self.threads = setup_torch(torch, device, n_threads)
        self.device = self.accelerator.torch_device
        kwargs: dict[str, Any] = {}
        path = local_file(model)
        if path is None and model.hub_id is not None:
            where = model.hub_id
        elif path is not None and path.is_file():
            # A GGUF file: transformers dequantises it into a regular model.
            where, kwargs["gguf_file"] = str(path.parent), path.name
        else:
            where = str(path)
        # bfloat16 where CUDA runs it; Metal's bfloat16 needs macOS 14, float16 runs everywhere.
        dtype = {"cuda": torch.bfloat16, "mps": torch.float16}.get(self.device, torch.float32)
        self.tokenizer: Any = AutoTokenizer.from_pretrained(where, **kwargs)
        loaded: Any = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, **kwargs)
        self.model: Any = loaded.to(self.device).eval()
        self.seed = seed
        # transformers 5 renamed the KV-cache argument and output from past_key_values to cache.
        params = inspect.signature(self.model.forward).parameters
        self._cache_key = "cache" if "cache" in params else "past_key_values"

    def describe(self) -> dict[str, Any]:
        """Return what the result records about the loaded backend."""
        return {
            "backend": self.backend,
            "device": self.device,
            "accelerator": self.accelerator.label,
            "threads": self.threads,
            "dtype": str(self.model.dtype).removeprefix("torch."),
        }

    def prompt_tokens(self, messages: Messages) -> list[int]:
        """Return the chat prompt's token ids (the tokenizer's chat template, or a plain transcript)."""
        if self.tokenizer.chat_template:
            ids = self.tokenizer.apply_chat_template(
                list(messages), add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        return [int(i) for i in self.tokenizer(plain_transcript(messages))["input_ids"]]

    def generate(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        step: StepGate,
        grammar: str | None = None,
    ) -> Generation:
        """Stream a reply one gated token at a time; return the text, counts and token times."""
        if grammar is not None:
            raise ValueError("the transformers backend has no grammar-constrained decoding; use llama_cpp")
        torch = self.torch
        prompt = self.prompt_tokens(messages)
        out = Generation(tokens_in=len(prompt), started=now())
        gen = torch.Generator(device="cpu").manual_seed(seed)
        eos = self._eos_ids()
        tokens: list[int] = []
        past = None
        inputs = torch.tensor([prompt], device=self.device)
        with torch.inference_mode():
            while len(tokens) < max_tokens:
                with step("prefill" if not tokens else "decode"):
                    result = self.model(input_ids=inputs, use_cache=True, **{self._cache_key: past})
                    logits = result.logits[0, -1].float().cpu()
                    token = self._pick(logits, temperature, gen)
                past = getattr(result, self._cache_key)
                if token in eos:
                    out.finish_reason = "stop"
                    break
                tokens.append(token)
                t = now()
                out.token_times.append(t)
                if out.first_text_time is None and self.tokenizer.decode(tokens, skip_special_tokens=True):
                    out.first_text_time = t
                inputs = torch.tensor([[token]], device=self.device)
        out.tokens_out = len(tokens)
        out.text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return out

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id if self.model.generation_config else None
        found = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
        if self.tokenizer.eos_token_id is not None:
            found.add(int(self.tokenizer.eos_token_id))
        return found

    def _pick(self, logits: Any, temperature: float, gen: Any) -> int:
        torch = self.torch
        if temperature <= 0:
            return int(torch.argmax(logits))
        top = torch.topk(logits / temperature, k=min(40, logits.shape[-1]))
        probs = torch.softmax(top.values, dim=-1)
        return int(top.indices[torch.multinomial(probs, 1, generator=gen)])

    def close(self) -> None:
        """Drop the model so its memory is returned before the process exits."""
        del self.model


class ServerGone(RuntimeError):
    """The model server did not answer, or broke off a reply."""


# Seconds a client waits for the server's next byte: a reply queued behind full slots waits too.
SERVER_READ_TIMEOUT_S = 600.0
# The model server's key, which the runner puts in the environment of the server's process and its
# clients' only: llama-server refuses a request without it (its --api-key-file).
SERVER_KEY_ENV = "CB_SERVER_KEY"


class _ServerStream:
    """Turns one streamed reply's chunks into tokens: their times, text and counts (``take`` each
    chunk as it arrives, then ``finish``).

    A chunk with text brings the tokens the server generated since the last such chunk, all available
    at its arrival: how many is the growth of its ``timings.predicted_n`` (a server that sends no
    per-chunk timings counts one per chunk; one that does, but not on every chunk with text, has the
    next timed chunk bring them). Text the server holds back until the end comes with the final chunk,
    whose count includes the token it stopped on; ``finish`` drops that one.
    """

    def __init__(self) -> None:
        self.counted = 0  # the server's predicted_n when the last text arrived
        self.timed = False  # whether the server sends its timings with its chunks
        self.usage_out: int | None = None
        self.final_n: int | None = None
        # The server's (predicted_n, predicted_ms) at the first and the last chunk with text.
        self.first_mark: tuple[int, float] | None = None
        self.last_mark: tuple[int, float] | None = None

    def take(self, chunk: dict[str, Any], out: Generation, pieces: list[str]) -> None:
        """Take one chunk: its text and tokens, the finish reason, usage and the server's timings."""
        t = now()
        text_came = False
        for choice in chunk.get("choices") or []:
            text = (choice.get("delta") or {}).get("content")
            if text is not None:
                text_came = True
                pieces.append(text)
                if out.first_text_time is None and text:
                    out.first_text_time = t
            if choice.get("finish_reason"):
                out.finish_reason = str(choice["finish_reason"])
        timings = chunk.get("timings")
        generated = _count(timings.get("predicted_n")) if isinstance(timings, dict) else None
        if generated is not None:
            self.timed = True
            self.final_n = generated
        if text_came:
            out.chunks += 1
            if not self.timed:
                out.token_times.append(t)
            elif generated is not None and generated > self.counted:
                out.token_times += [t] * (generated - self.counted)
                self.counted = generated
                spent = timings.get("predicted_ms") if isinstance(timings, dict) else None
                if isinstance(spent, int | float) and not isinstance(spent, bool):
                    self.last_mark = (generated, float(spent))
                    self.first_mark = self.first_mark or self.last_mark
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.tokens_in = _count(usage.get("prompt_tokens")) or 0
            self.usage_out = _count(usage.get("completion_tokens"))
        if isinstance(timings, dict):
            out.server_timings = {k: float(v) for k, v in timings.items() if _is_number(v)}

    def finish(self, out: Generation) -> None:
        """Set the reply's output token count: the server's, less the token it stopped on."""
        generated = self.usage_out if self.usage_out is not None else self.final_n
        if generated is None:  # no count from the server: one token per chunk of text
            out.tokens_out = len(out.token_times)
            return
        # finish_reason "stop": the server stopped on an end-of-generation token (or a stop word's
        # last), which it counts but does not send.
        out.tokens_out = max(0, generated - 1) if out.finish_reason == "stop" else generated
        del out.token_times[out.tokens_out :]
        if self.first_mark and self.last_mark and self.last_mark[0] > self.first_mark[0]:
            tokens = self.last_mark[0] - self.first_mark[0]
            out.server_tpot_ms = (self.last_mark[1] - self.first_mark[1]) / tokens


def _count(value: Any) -> int | None:
    """Return a count the server sent (a non-negative whole number), None when it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ServerGenerator:
    """A client of a model server (``LLMServer``): one streamed chat completion per call."""

    backend = "server"

    def __init__(self, url: str, *, server: str, client_model: str | None) -> None:
        self.url = url.rstrip("/")
        self.server = server
        self.client_model = client_model
        self.headers = {"Content-Type": "application/json"}
        if key := os.environ.get(SERVER_KEY_ENV):
            self.headers["Authorization"] = f"Bearer {key}"

    def describe(self) -> dict[str, Any]:
        """Return what the result records about the backend: the server unit it sent requests to."""
        return {"backend": self.backend, "server": self.server, "client_model": self.client_model}

    def body(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        grammar: str | None = None,
    ) -> dict[str, Any]:
        """Return the JSON body of one chat completion request, as ``generate`` sends it."""
        body: dict[str, Any] = {
            "model": self.client_model or "default",
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": seed,
            "stream": True,
            "stream_options": {"include_usage": True},
            # Every chunk carries the server's timings, whose predicted_n counts the tokens so far.
            "timings_per_token": True,
            # A fresh prefill per request, as the local backends do: a prefix hit would make TTFT
            # measure nothing.
            "cache_prompt": False,
        }
        if grammar is not None:
            body["grammar"] = grammar
        return body

    def generate(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        step: StepGate,
        grammar: str | None = None,
    ) -> Generation:
        """Stream a reply from the server; return the text, counts, token times and server timings.

        Raises PromptTooLong when the server refuses the prompt for its context, ServerGone when it
        does not answer or breaks off.
        """
        body = self.body(messages, max_tokens=max_tokens, temperature=temperature, seed=seed, grammar=grammar)
        request = urllib.request.Request(
            f"{self.url}/v1/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=self.headers,
        )
        out = Generation(started=now())
        pieces: list[str] = []
        stream = _ServerStream()
        try:
            with urllib.request.urlopen(request, timeout=SERVER_READ_TIMEOUT_S) as reply:
                while True:
                    with step("prefill" if not out.token_times else "decode"):
                        line = reply.readline()
                    if not line:
                        break
                    data = line.strip().removeprefix(b"data:").strip()
                    if not data or data == b"[DONE]":
                        continue
                    stream.take(json.loads(data), out, pieces)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", errors="replace")[:500]
            if exc.code == 400 and "context" in detail:
                raise PromptTooLong(f"the model server refused the prompt: {detail}") from None
            raise ServerGone(f"the model server '{self.server}' answered {exc.code}: {detail}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ServerGone(f"the model server '{self.server}' stopped answering: {exc}") from None
        out.text = "".join(pieces)
        stream.finish(out)
        return out

    def close(self) -> None:
        """Nothing to release: the server belongs to its own node."""
        return None


Generator = LlamaCppGenerator | TransformersGenerator | ServerGenerator


def server_generator(server: str, url: str | None, client_model: str | None) -> ServerGenerator:
    """Return the client of the model server unit ``server`` at ``url`` (the runner hands the URL to
    the application once the server's node answers); ServerGone when there is none."""
    if url is None:
        raise ServerGone(f"the model server '{server}' has no address: its node is not running")
    return ServerGenerator(url, server=server, client_model=client_model)


def load_generator(
    model: ResolvedModel,
    *,
    backend: str,
    n_ctx: int,
    device: str,
    seed: int,
    n_threads: int | None,
    settings: dict[str, Any] | None = None,
) -> Generator:
    """Return a loaded generator for ``backend`` (llama_cpp or transformers); ``settings`` are the
    llama.cpp settings (``LlamaCppOptions.llama_settings``), which only llama_cpp reads."""
    share_cpu_politely()
    if backend == "llama_cpp":
        return LlamaCppGenerator(
            model, n_ctx=n_ctx, device=device, seed=seed, n_threads=n_threads, settings=settings
        )
    return TransformersGenerator(model, device=device, seed=seed, n_threads=n_threads)


def llama_chat_prompt(llm: Any) -> Callable[[Messages], tuple[str, bool]]:
    """Return how a chat becomes a prompt for a loaded llama-cpp-python ``Llama``: ``(text, whether a
    BOS token must be added)``, by the model's own chat template, else as a plain transcript (a GGUF
    without a template: the random twins)."""
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return lambda messages: (plain_transcript(messages), True)
    from llama_cpp import llama_chat_format

    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llm._model.token_get_text(llm.token_eos()),
        bos_token=llm._model.token_get_text(llm.token_bos()),
        stop_token_ids=[llm.token_eos()],
    )

    def format_chat(messages: Messages) -> tuple[str, bool]:
        result = formatter(messages=list(messages))  # type: ignore[arg-type]
        return result.prompt, not result.added_special

    return format_chat


def plain_transcript(messages: Messages) -> str:
    """Return a chat as ``Role: text`` lines ending in ``Assistant:``, for a model with no chat template."""
    return "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in messages) + "Assistant:"


def local_file(model: ResolvedModel) -> Path | None:
    """Return the model's file on this machine, writing a random GGUF into the cache when it is one."""
    return random_gguf(model.random) if model.random is not None else model.path


def model_formats(backend: str) -> tuple[Any, ...]:
    """Return the model formats a backend loads (for ``benchmarks.models.resolve``)."""
    return ("gguf",) if backend == "llama_cpp" else ("transformers", "gguf")
