"""Chatbot overhead: TTFT and TPOT through the harness vs a bare llama-cpp-python loop, in one run.

Usage: python -m benchmarks.perf.chatbot_overhead [--model smollm2-135m] [--rounds 2] [--requests 6]
       [--max-tokens 32] [--threads N]

Both sides run the same prompts greedily with the same model, context and threads, one after the
other in rounds (bare then harness, harness then bare, ...) so that drift on a shared machine hits both:
- bare: the chat template from the GGUF, ``Llama.tokenize`` and a ``Llama.generate`` loop in this
  process, timed the same way (first non-empty token, then the gaps between tokens);
- harness: ``run_workflow`` on a Chatbot unit: a spawned application process, the scheduler gate at
  every token, events over the pipe, the result document.
Prints medians and means side by side with the ratio harness / bare. Goal: ratio <= 1.03.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.apps.chatbot import load_prompts
from benchmarks.apps.datasets import Input
from benchmarks.apps.runtime import default_threads, share_cpu_politely
from benchmarks.data import DATA_DIR
from benchmarks.models import resolve
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml
from benchmarks.status import RequestStatus
from benchmarks.table import text_table

GOAL = 1.03
N_CTX = 2048


def bare_requests(llm: Any, formatter: Any, turns: list[Any], max_tokens: int) -> list[dict[str, float]]:
    """Serve each turn with a plain llama-cpp-python loop; return TTFT and TPOT per request."""
    import llama_cpp

    out = []
    vocab = llm._model.vocab
    for turn in turns:
        start = time.monotonic()
        prompt = formatter(messages=turn)
        tokens = llm.tokenize(prompt.prompt.encode(), add_bos=not prompt.added_special, special=True)
        llm.reset()
        times: list[float] = []
        first: float | None = None
        for token in llm.generate(tokens, temp=0.0):
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            t = time.monotonic()
            times.append(t)
            if first is None and llm.detokenize([token]):
                first = t
            if len(times) == max_tokens:
                break
        if first is not None and len(times) > 1:
            out.append({"ttft": first - start, "tpot": (times[-1] - times[0]) / (len(times) - 1)})
    return out


def harness_requests(
    model: str, prompts: Path, n: int, max_tokens: int, threads: int
) -> list[dict[str, float]]:
    """Serve the same turns through ``run_workflow``; return TTFT and TPOT per counted request."""
    workflow = load_yaml(
        f"""
chat:
  type: Chatbot
  model: {model}
  num_requests: {n}
  warmup_requests: 1
  max_tokens: {max_tokens}
  n_ctx: {N_CTX}
  n_threads: {threads}
  temperature: 0
  prompts: {prompts}
  device: cpu
""",
        name="chatbot-overhead",
    )
    result = run_workflow(workflow)
    (app,) = result.applications
    rows = [r.metrics for r in app.requests if r.status is RequestStatus.OK and not r.warmup]
    return [{"ttft": m["ttft"], "tpot": m["tpot"]} for m in rows if "ttft" in m and "tpot" in m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args()

    # The harness's application process waits passively in OpenMP; so must the bare loop, or the
    # comparison measures the wait policy instead of the harness.
    share_cpu_politely()
    from llama_cpp import Llama, llama_chat_format

    turns = load_prompts(Input("bench", None, DATA_DIR / "prompts.jsonl"))
    # The harness warms up on the first turn; the bare loop does the same below.
    chosen = [turns[0], *turns[1 : args.requests + 1]]
    path = resolve(args.model, ("gguf",), "Chatbot").path
    llm = Llama(
        model_path=str(path),
        n_ctx=N_CTX,
        n_gpu_layers=0,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        verbose=False,
    )
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=llm._model.token_get_text(llm.token_eos()),
        bos_token=llm._model.token_get_text(llm.token_bos()),
    )
    bare: list[dict[str, float]] = []
    harness: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"messages": t}) + "\n" for t in chosen))
        for r in range(args.rounds):
            # Alternate which side goes first, so that neither always runs on a warmer (or busier) machine.
            sides = [0, 1] if r % 2 == 0 else [1, 0]
            for side in sides:
                if side == 0:
                    bare += bare_requests(llm, formatter, chosen, args.max_tokens)[1:]
                else:
                    harness += harness_requests(
                        args.model, prompts, args.requests, args.max_tokens, args.threads
                    )
            print(f"round {r + 1}/{args.rounds}: {len(bare)} bare and {len(harness)} harness requests so far")
    llm.close()

    print(
        f"\nChatbot {args.model}, {args.max_tokens} tokens, {args.threads} threads, greedy; "
        f"{len(bare)} bare vs {len(harness)} harness requests"
    )
    rows = [["metric", "bare p50", "harness p50", "ratio", "bare mean", "harness mean", "ratio"]]
    worst = 0.0
    for metric in ("ttft", "tpot"):
        b = [x[metric] for x in bare]
        h = [x[metric] for x in harness]
        med = statistics.median(h) / statistics.median(b)
        mean = statistics.fmean(h) / statistics.fmean(b)
        worst = max(worst, med)
        rows.append(
            [
                metric,
                f"{statistics.median(b) * 1000:.2f}ms",
                f"{statistics.median(h) * 1000:.2f}ms",
                f"{med:.3f}",
                f"{statistics.fmean(b) * 1000:.2f}ms",
                f"{statistics.fmean(h) * 1000:.2f}ms",
                f"{mean:.3f}",
            ]
        )
    print(text_table(rows))
    verdict = "meets" if worst <= GOAL else "misses"
    print(f"\nworst median ratio {worst:.3f}: {verdict} the goal of <= {GOAL}")


if __name__ == "__main__":
    main()
