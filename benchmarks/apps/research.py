"""DeepResearch: an agent loop (plan -> tool calls -> read -> answer) on a local LLM with offline tools.

Tools: ``search`` (BM25 over a local document collection), ``read`` (a document by id) and ``calc``
(arithmetic). Every action the LLM takes is decoded under a llama.cpp grammar, so even a very small
model always produces a well-formed call: the first step may only call a tool, and the last step may
only answer. Every token goes through the scheduler gate, so a background research job yields to
latency-sensitive work at token boundaries and stops within one token of a stop request.
Recorded per question: e2e, steps, tool calls, LLM calls, tokens in and out, the answer and the trace
(actions and arguments; of each observation only its size: the question and documents stay out of results).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from benchmarks.apps.base import AppType, Driver, RequestRecord, check_unit
from benchmarks.apps.datasets import Input, prompts_input, read_jsonl, text_field, unit_input
from benchmarks.apps.textgen import (
    Generation,
    LlamaCppGenerator,
    LlamaCppOptions,
    PromptTooLong,
    ServerGenerator,
    server_generator,
)
from benchmarks.files import UNRESTRICTED, FileAccessError, FilePolicy
from benchmarks.metrics import QualityMeasure, info_mean, info_share
from benchmarks.spec.model import DATA_FILE, DATA_FILE_OR_FOLDER

if TYPE_CHECKING:
    from benchmarks.spec.model import Application

DOC_SUFFIXES = (".md", ".txt")
# The system prompt, the question and the plan stay in the conversation; tool exchanges may be dropped.
KEPT_MESSAGES = 3
SYSTEM = (
    "You are a careful research assistant. You answer the user's question using these tools:\n"
    "search: <keywords> finds documents in the library\n"
    "read: <document id> shows a document\n"
    "calc: <arithmetic> computes a number\n"
    "answer: <text> gives the final answer.\n"
    "Reply with exactly one line: a tool call or the answer."
)


class ResearchOptions(LlamaCppOptions):
    questions: Annotated[str | None, DATA_FILE] = Field(
        None, description="JSONL of {question, expected?}; default: shipped"
    )
    documents: Annotated[str | None, DATA_FILE_OR_FOLDER] = Field(
        None, description="folder of .md/.txt documents; default: shipped"
    )
    max_steps: int = Field(6, ge=2, le=50, description="tool steps per question, the answer included")
    max_tokens: int = Field(48, ge=8, le=32_768, description="most tokens per tool call")
    answer_tokens: int = Field(96, ge=8, le=32_768, description="most tokens of the answer")
    n_ctx: int = Field(4096, ge=512, le=131_072)
    temperature: float = Field(0.2, ge=0, le=10)
    n_threads: int | None = Field(
        None, ge=1, le=1024, description="CPU threads (default: all this process may use)"
    )


# --------------------------------------------------------------------------------------------------
# The offline tools
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


_WORD = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class Library:
    """A folder of documents with BM25 search (k1 = 1.5, b = 0.75, the usual defaults)."""

    def __init__(self, folder: Input, files: FilePolicy = UNRESTRICTED) -> None:
        policy = folder.policy(files)
        self.docs: dict[str, Document] = {}
        assert not isinstance(folder.value, list)  # 'documents' names one folder
        for path in policy.folder_files(folder.value, DATA_FILE_OR_FOLDER, folder.where, DOC_SUFFIXES):
            text = policy.read_text(path, DATA_FILE_OR_FOLDER, f"{folder.where} ({path.name})")
            first = text.strip().splitlines()[0] if text.strip() else path.stem
            title = first.lstrip("# ").strip() if first.startswith("#") else path.stem
            self.docs[path.stem] = Document(path.stem, title, text.strip())
        if not self.docs:
            raise FileAccessError(f"{folder.where}: the folder holds no {'/'.join(DOC_SUFFIXES)} files")
        self._tf = {d.id: Counter(_terms(d.text)) for d in self.docs.values()}
        self._len = {i: sum(tf.values()) for i, tf in self._tf.items()}
        self._avg = sum(self._len.values()) / len(self._len)
        df = Counter(t for tf in self._tf.values() for t in tf)
        n = len(self.docs)
        self._idf = {t: math.log((n - f + 0.5) / (f + 0.5) + 1) for t, f in df.items()}

    def search(self, query: str, k: int = 3) -> list[tuple[str, float]]:
        """Return the ids and BM25 scores of the ``k`` best documents for ``query`` (score > 0 only)."""
        scores: dict[str, float] = {}
        for doc_id, tf in self._tf.items():
            norm = 1.5 * (0.25 + 0.75 * self._len[doc_id] / self._avg)
            score = sum(self._idf[t] * tf[t] * 2.5 / (tf[t] + norm) for t in set(_terms(query)) if t in tf)
            if score > 0:
                scores[doc_id] = score
        return sorted(scores.items(), key=lambda kv: -kv[1])[:k]


_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


MAX_EXPRESSION_CHARS = 1000


def calculate(expression: str) -> float:
    """Return the value of an arithmetic expression (numbers, + - * / // % **, parentheses).

    Raises ValueError for anything else, and for powers too large to be useful.
    """

    def walk(node: ast.AST) -> float:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
        ):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("exponent too large")
            return float(_OPS[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return float(_OPS[type(node.op)](walk(node.operand)))
        raise ValueError(f"not arithmetic: {ast.unparse(node)}")

    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return walk(tree.body)
    except (SyntaxError, ZeroDivisionError, OverflowError) as exc:
        raise ValueError(str(exc)) from None
    except (RecursionError, MemoryError):
        # walk() recurses over the parse tree: a model's deeply nested output must not crash the agent.
        raise ValueError("expression nested too deeply") from None


def action_grammar(actions: tuple[str, ...], doc_ids: list[str]) -> str:
    """Return the GBNF grammar of one agent step: one line that is one of ``actions``.

    Free text excludes ``<``, ``>`` and ``|`` so that chat-template special tokens cannot be emitted.
    """
    ids = " | ".join(f'"{d}"' for d in doc_ids) or '"none"'
    return "\n".join(
        [
            f'root ::= ({" | ".join(actions)}) "\\n"',
            'search ::= "search: " text',
            f'read ::= "read: " ({ids})',
            'calc ::= "calc: " [0-9+*/(). -]{1,60}',
            'answer ::= "answer: " text',
            "plan ::= text",
            "text ::= [^\\n<>|]{1,160}",
        ]
    )


# --------------------------------------------------------------------------------------------------
# Inputs and preflight
# --------------------------------------------------------------------------------------------------


def load_questions(source: Input, files: FilePolicy = UNRESTRICTED) -> list[dict[str, Any]]:
    """Return the questions (``question`` and optional ``expected`` phrases); ValueError names a bad entry."""
    out = []
    for n, row in enumerate(read_jsonl(source, files), start=1):
        expected = row.get("expected", [])
        if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
            raise FileAccessError(f"{source.where}, entry {n}: 'expected' must be a list of strings")
        question = text_field(row, "question", source, n)
        out.append({"index": n - 1, "question": question, "expected": expected})
    return out


def _inputs(unit: Application) -> tuple[Input, Input]:
    return (
        prompts_input(unit, "research_questions.jsonl", key="questions"),
        unit_input(unit, ("documents",), "documents"),
    )


def check(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this unit here: its model, questions and documents."""
    questions, documents = _inputs(unit)
    return check_unit(
        unit, files, ("gguf",), lambda: load_questions(questions, files), lambda: Library(documents, files)
    )


# --------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------


@dataclass
class _Calls:
    """The LLM calls of one question: their seed base, the replies so far and how many tool exchanges
    were dropped to fit the context window."""

    seed: int
    replies: list[Generation] = field(default_factory=list)
    dropped: int = 0


class ResearchDriver(Driver):
    gen: LlamaCppGenerator | ServerGenerator | None = None

    def load(self) -> dict[str, Any]:
        from benchmarks.apps.textgen import load_generator

        opts = self.options
        questions, documents = _inputs(self.unit)
        self.questions = load_questions(questions, self.ctx.files)
        self.library = Library(documents, self.ctx.files)
        described = {
            "questions": questions.name,
            "documents": documents.name,
            "document_count": len(self.library.docs),
        }
        if self.unit.server is not None:
            self.gen = server_generator(self.unit.server, self.ctx.server_url, self.unit.client_model)
            return {**self.gen.describe(), **described}
        model = self.ctx.files.resolve_model(self.unit, ("gguf",), "DeepResearch")
        gen = load_generator(
            model,
            backend="llama_cpp",
            n_ctx=opts.n_ctx,
            device=self.ctx.device,
            seed=self.ctx.seed,
            n_threads=opts.n_threads,
            settings=opts.llama_settings(),
        )
        assert isinstance(gen, LlamaCppGenerator)
        self.gen = gen
        return {**model.record(), **gen.describe(), **described}

    def payloads(self) -> list[dict[str, Any]]:
        return self.questions

    def overlaps_requests(self) -> bool:
        # A server's client keeps each question's state in its own _Calls: questions may overlap.
        return self.unit.server is not None

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        opts = self.options
        question: str = payload["question"]
        calls = _Calls(seed=self.ctx.seed + record.index * 1000)
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {question}"},
        ]
        ask_plan = {"role": "user", "content": "First write a one-sentence plan for answering the question."}
        plan = self._llm(calls, [*messages, ask_plan], opts.max_tokens, ("plan",), []).strip()
        messages.append({"role": "assistant", "content": f"Plan: {plan}"})
        trace: list[dict[str, Any]] = []
        answer = ""
        found: list[str] = []
        for step in range(1, opts.max_steps + 1):
            # The scaffold of a research agent: search first, then read one of the hits, then act
            # freely; the last step must answer.
            if step == opts.max_steps:
                actions: tuple[str, ...] = ("answer",)
                messages.append({"role": "user", "content": "Now give the answer in one or two sentences."})
            elif step == 1:
                actions = ("search",)
            elif step == 2 and found:
                actions = ("read",)
            else:
                actions = ("search", "read", "calc", "answer")
            ids = found if actions == ("read",) else list(self.library.docs)
            tokens = opts.answer_tokens if actions == ("answer",) else opts.max_tokens
            line = self._llm(calls, messages, tokens, actions, ids).strip()
            action, _, argument = line.partition(": ")
            argument = argument.strip()
            if action == "answer":
                answer = argument
                trace.append({"action": "answer", "argument": answer})
                break
            observation, hits = self._tool(action, argument)
            found = hits or found
            # The observation's size, not its text: document contents stay out of results.
            trace.append({"action": action, "argument": argument, "observation_chars": len(observation)})
            messages += [
                {"role": "assistant", "content": line},
                {"role": "user", "content": f"Result: {observation}"},
            ]
        tool_calls = sum(1 for t in trace if t["action"] in ("search", "read", "calc"))
        record.info.update(
            steps=len(trace),
            tool_calls=tool_calls,
            llm_calls=len(calls.replies),
            tokens_in=sum(c.tokens_in for c in calls.replies),
            tokens_out=sum(c.tokens_out for c in calls.replies),
            dropped_exchanges=calls.dropped,
            **({"server_timings": [c.server_timings for c in calls.replies]} if self.unit.server else {}),
            question_index=payload["index"],
            answer=answer,
            plan=plan,
            trace=trace,
        )
        if payload["expected"]:
            record.info["expected_found"] = all(e.lower() in answer.lower() for e in payload["expected"])

    def _llm(
        self,
        calls: _Calls,
        messages: list[dict[str, str]],
        max_tokens: int,
        actions: tuple[str, ...],
        ids: list[str],
    ) -> str:
        """Run one grammar-constrained LLM call; return its text.

        When the conversation outgrows the context window, the oldest tool exchanges (after the
        system prompt, the question and the plan) are dropped, as agents with a bounded memory do.
        """
        assert self.gen is not None
        while True:
            try:
                reply = self.gen.generate(
                    messages,
                    max_tokens=max_tokens,
                    temperature=self.options.temperature,
                    seed=calls.seed + len(calls.replies),
                    step=self.ctx.gpu_step,
                    grammar=action_grammar(actions, ids),
                )
                break
            except PromptTooLong:
                if len(messages) < KEPT_MESSAGES + 2:
                    raise
                del messages[KEPT_MESSAGES : KEPT_MESSAGES + 2]
                calls.dropped += 1
        calls.replies.append(reply)
        return reply.text

    def _tool(self, action: str, argument: str) -> tuple[str, list[str]]:
        """Run one tool call; return its observation and the document ids it found.

        Errors are observations too: the agent can act on them.
        """
        if action == "search":
            hits = [d for d, _ in self.library.search(argument)]
            if not hits:
                return "no document matches; try other keywords", []
            return " | ".join(f"[{d}] {self.library.docs[d].title}" for d in hits), hits
        if action == "read":
            doc = self.library.docs.get(argument)
            return (doc.text[:700] if doc else f"no document '{argument}'"), []
        if action == "calc":
            try:
                return f"{calculate(argument):g}", []
            except ValueError as exc:
                return f"cannot compute '{argument}': {exc}", []
        return f"unknown tool '{action}'", []

    def close(self) -> None:
        if getattr(self, "gen", None) is not None:
            assert self.gen is not None
            self.gen.close()
            self.gen = None


APP = AppType(
    name="DeepResearch",
    aliases=("deep_research", "deepresearch", "DeepResearchApplication"),
    options=ResearchOptions,
    slo_metrics=("e2e",),
    default_slo=(),
    default_priority="low",
    default_num_requests=2,
    driver="benchmarks.apps.research:ResearchDriver",
    default_model="smollm2-135m",
    needs_model=True,
    server_client=True,
    description="An agent loop on a local LLM with offline search, read and calculator tools.",
    check=check,
    quality=(
        QualityMeasure("steps", "steps/request", info_mean("steps")),
        QualityMeasure("tool_calls", "calls/request", info_mean("tool_calls")),
        # Only questions that name expected words record expected_found.
        QualityMeasure("found_rate", "fraction", info_share("expected_found")),
    ),
)
