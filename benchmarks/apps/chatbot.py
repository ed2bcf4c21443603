"""Chatbot: streamed chat turns on a local LLM (llama-cpp-python, or transformers).

Each request is one chat turn from the prompt set, streamed token by token through the scheduler gate.
Recorded per request: TTFT (arrival to the first non-empty token), TPOT (decode time / (tokens - 1)),
e2e, the inter-token latencies (series ``itl``) and the exact token counts in and out. With
``server: <unit>`` the turns go to that model server (``LLMServer``) instead of a model of its own,
and the server's own timings of each request are kept beside the client's (``server_timings``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from benchmarks.apps.base import AppType, Driver, RequestRecord, check_unit
from benchmarks.apps.datasets import Input, prompts_input, read_jsonl
from benchmarks.apps.textgen import LlamaCppOptions, load_generator, model_formats, server_generator
from benchmarks.files import UNRESTRICTED, FileAccessError, FilePolicy
from benchmarks.metrics import QualityMeasure, info_mean, series_rate
from benchmarks.spec.model import DATA_FILE

if TYPE_CHECKING:
    from benchmarks.apps.textgen import Generator
    from benchmarks.spec.model import Application

ROLES = ("system", "user", "assistant")


class ChatbotOptions(LlamaCppOptions):
    backend: Literal["llama_cpp", "transformers"] = Field(
        "llama_cpp", description="llama_cpp (GGUF) or transformers (folder, hub id or GGUF)"
    )
    max_tokens: int = Field(128, ge=1, le=32_768, description="most tokens generated per reply")
    n_ctx: int = Field(2048, ge=64, le=131_072, description="context window (llama_cpp)")
    temperature: float = Field(0.7, ge=0, le=10, description="sampling temperature; 0 is greedy")
    prompts: Annotated[str | None, DATA_FILE] = Field(
        None, description="JSONL of {messages: [...]} or {prompt: ...}; default: shipped"
    )
    n_threads: int | None = Field(
        None, ge=1, le=1024, description="CPU threads (default: all this process may use)"
    )


def load_prompts(source: Input, files: FilePolicy = UNRESTRICTED) -> list[list[dict[str, str]]]:
    """Return the chat turns of a prompts input; raise ValueError naming the field and entry of a bad one."""
    turns: list[list[dict[str, str]]] = []
    for n, row in enumerate(read_jsonl(source, files), start=1):
        if "messages" in row:
            messages = row["messages"]
            ok = (
                isinstance(messages, list)
                and messages
                and all(
                    isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)
                    for m in messages
                )
            )
            if not ok:
                raise FileAccessError(
                    f"{source.where}, entry {n}: 'messages' must be a non-empty list of "
                    f"{{role: {'|'.join(ROLES)}, content: text}}"
                )
            turns.append([{"role": m["role"], "content": m["content"]} for m in messages])
        elif isinstance(row.get("prompt"), str) and row["prompt"].strip():
            turn = [{"role": "user", "content": row["prompt"]}]
            if isinstance(row.get("system"), str):
                turn.insert(0, {"role": "system", "content": row["system"]})
            turns.append(turn)
        else:
            raise FileAccessError(f"{source.where}, entry {n}: needs 'messages' (a chat) or 'prompt' (text)")
    return turns


# The unit's prompts: ``prompts:``, else ``dataset:``, else the shipped set.
PROMPTS = "prompts.jsonl"


def check(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this unit here: its model and its prompts file."""
    opts: Any = unit.options
    formats = model_formats(opts.backend)
    return check_unit(unit, files, formats, lambda: load_prompts(prompts_input(unit, PROMPTS), files))


class ChatbotDriver(Driver):
    gen: Generator | None = None

    def load(self) -> dict[str, Any]:
        opts = self.options
        prompts = prompts_input(self.unit, PROMPTS)
        self.turns = load_prompts(prompts, self.ctx.files)
        if self.unit.server is not None:
            self.gen = server_generator(self.unit.server, self.ctx.server_url, self.unit.client_model)
            return {**self.gen.describe(), "prompts": prompts.name}
        model = self.ctx.files.resolve_model(self.unit, model_formats(opts.backend), "Chatbot")
        self.gen = load_generator(
            model,
            backend=opts.backend,
            n_ctx=opts.n_ctx,
            device=self.ctx.device,
            seed=self.ctx.seed,
            n_threads=opts.n_threads,
            settings=opts.llama_settings(),
        )
        return {**model.record(), **self.gen.describe(), "prompts": prompts.name}

    def payloads(self) -> list[list[dict[str, str]]]:
        return self.turns

    def overlaps_requests(self) -> bool:
        # A server's client holds no state between turns: an open loop may overlap them.
        return self.unit.server is not None

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        assert self.gen is not None
        opts = self.options
        reply = self.gen.generate(
            payload,
            max_tokens=opts.max_tokens,
            temperature=opts.temperature,
            seed=self.ctx.seed + record.index,
            step=self.ctx.gpu_step,
        )
        metrics, series = reply.latency_metrics(record.arrival)
        record.metrics.update(metrics)
        record.series.update(series)
        record.info.update(
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            finish_reason=reply.finish_reason,
            reply=reply.text,
        )
        if reply.server_timings:
            record.info["server_timings"] = reply.server_timings
            record.info["chunks"] = reply.chunks
            record.info["server_tpot_ms"] = reply.server_tpot_ms
        if reply.marks:
            # TTFT's breakdown: when each stage before the first token ended, in seconds from arrival.
            record.info["ttft_marks"] = {
                "started": reply.started - record.arrival,
                **{k: t - record.arrival for k, t in reply.marks.items()},
            }

    def close(self) -> None:
        gen = getattr(self, "gen", None)
        if gen is not None:
            gen.close()
            self.gen = None


APP = AppType(
    name="Chatbot",
    aliases=("chatbot", "ChatbotApplication"),
    options=ChatbotOptions,
    slo_metrics=("ttft", "tpot", "e2e"),
    default_slo=("ttft<=1s", "tpot<=0.25s"),
    default_priority="high",
    default_num_requests=5,
    driver="benchmarks.apps.chatbot:ChatbotDriver",
    default_model="smollm2-135m",
    needs_model=True,
    server_client=True,
    description="Streamed chat turns on a local LLM (llama.cpp GGUF or transformers); TTFT, TPOT, ITL.",
    check=check,
    quality=(
        QualityMeasure("tokens_in", "tokens/request", info_mean("tokens_in")),
        QualityMeasure("tokens_out", "tokens/request", info_mean("tokens_out")),
        # Decode rate: the tokens after the first over the time between them (the ITL series).
        QualityMeasure("decode_rate", "tokens/s", series_rate("itl")),
    ),
)
