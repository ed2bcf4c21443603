"""The project's client against NVIDIA's AIPerf on one LLMServer: the standing cross-check of its timings.

Usage: python -m benchmarks.perf.aiperf_check [--model smollm2-135m] [--requests 8] [--max-tokens 48]
       [--prompts FILE] [--device cpu|gpu] [--aiperf PATH] [--tolerance 0.02] [--json FILE]

Starts one ``LLMServer`` (llama.cpp's llama-server, one slot, as an LLMServer node starts it), then sends
the same requests to it twice, one after the other, one at a time (closed loop, after one warm-up
request each):

- the project's client: a Chatbot's client of a model server (``benchmarks.apps.textgen.
  ServerGenerator``), timed on the shared clock as in a run;
- AIPerf (``aiperf profile``, NVIDIA's benchmarking client), replaying the very request bodies the
  project's client sends (its ``raw-payload`` dataset: the same messages, seeds, ``max_tokens`` and
  temperature) with the server's token counts (``--use-server-token-count``).

Prints TTFT, TPOT (AIPerf: inter-token latency), request latency, output tokens and throughput of both
side by side with the server's own timings of the project's requests (llama-server's ``timings``:
``prompt_ms``, its prefill, is no TTFT: the client's TTFT adds queueing and transport;
``predicted_per_token_ms`` is its decode time per token over the whole reply), then the project's TPOT
over the server's own time per token over the very tokens the client timed (its ``predicted_ms``
between the first and the last chunk with text: on a busy machine the server's steps vary, and the
first chunk's are no decode time of the client's), request by request, whether each is within
``--tolerance`` (exit status 1 when one is not), and the same ratio to the whole reply's figure.
Throughput is over the serving window (the first request's start to the last one's end; the server's
load is not in it). The server counts the token it stopped on, which it does not send; the project does
not (docs/metrics.md), AIPerf's server token count does, so its output tokens are one more per reply
that stopped. AIPerf is an optional development tool (the ``aiperf`` extra of pyproject.toml), best
installed into an environment of its own, since its many dependencies need not agree with the project's
(``python -m venv .aiperf && .aiperf/bin/pip install aiperf==0.13.0``); ``--aiperf`` names its
``aiperf`` program, else ``CB_AIPERF``, else the one beside this Python, else on ``PATH``). Without it
the project's side and the server's timings are printed and the AIPerf column says it is missing.
``--prompts`` is a Chatbot prompts file (default: the shipped prompts); a Japanese one shows the tokens
a chunk may bring together. ``--json FILE`` writes every figure and the setup.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.apps.base import AppContext
from benchmarks.apps.chatbot import PROMPTS, load_prompts
from benchmarks.apps.datasets import prompts_input
from benchmarks.apps.server import ServerDriver
from benchmarks.apps.textgen import ServerGenerator, local_file
from benchmarks.clock import now
from benchmarks.metrics import serving_window
from benchmarks.models import resolve
from benchmarks.schedulers.base import OpenGate
from benchmarks.spec.load import load_yaml
from benchmarks.table import text_table

AIPERF_ENV = "CB_AIPERF"
# The seconds AIPerf may take for its whole run (its start-up, a few seconds, included).
AIPERF_TIMEOUT_S = 900
# AIPerf's export, in its artifact folder, and the metrics read from it (its tags; times in ms).
AIPERF_EXPORT = "profile_export_aiperf.json"


def aiperf_program(named: str | None) -> str | None:
    """Return the ``aiperf`` program to run: ``named``, else CB_AIPERF, else beside this Python, else on
    PATH; None when there is none."""
    for candidate in (named, os.environ.get(AIPERF_ENV), str(Path(sys.executable).parent / "aiperf")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("aiperf")


def workflow_text(model: str, device: str, requests: int, max_tokens: int, prompts: Path | None) -> str:
    """Return the YAML of the server and of the Chatbot whose requests both clients send."""
    chat = f"type: Chatbot, server: llm, num_requests: {requests}, max_tokens: {max_tokens}, temperature: 0"
    if prompts is not None:
        chat += f", prompts: {json.dumps(str(prompts))}"
    return (
        f"llm: {{type: LLMServer, model: {model}, device: {device}, parallel: 1}}\n"
        f"chat: {{{chat}}}\n"
        "workflows:\n  serve: {uses: llm, background: true}\n  c: {uses: chat}\n"
    )


@contextlib.contextmanager
def llm_server(unit: Any, scratch: Path) -> Iterator[str]:
    """Start an LLMServer unit as its node does (ungated); yield its base URL; stop it."""
    ctx = AppContext("serve", lambda kind, **f: None, OpenGate(), lambda: False, unit.device, scratch, 0)
    driver = ServerDriver(unit, ctx)
    try:
        yield str(driver.load()["url"])
    finally:
        driver.close()


def export_tokenizer(unit: Any, folder: Path) -> Path:
    """Write the served model's tokenizer, read from its GGUF file by transformers, as a Hugging Face
    tokenizer folder; return the folder. AIPerf loads one even when it counts the server's tokens, and
    its default downloads one: this one is of the very model served, and on disk."""
    from transformers import AutoTokenizer

    path = local_file(resolve(unit.model or "", ("gguf",), "LLMServer"))
    if path is None:
        raise ValueError(f"model '{unit.model}' is not a local GGUF file")
    AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).save_pretrained(folder)
    return folder


def _no_gate(kind: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def project_side(gen: ServerGenerator, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send each body's request with the project's client, one at a time, after one warm-up (the first
    body); return one row per measured request: its times (s), token counts and server timings."""
    rows = []
    for i, body in enumerate([bodies[0], *bodies]):
        arrival = now()
        reply = gen.generate(
            body["messages"],
            max_tokens=body["max_tokens"],
            temperature=body["temperature"],
            seed=body["seed"],
            step=_no_gate,
        )
        end = now()
        if i == 0:
            continue
        metrics, _ = reply.latency_metrics(arrival)
        rows.append(
            {
                "arrival": arrival,
                "end": end,
                "ttft": metrics.get("ttft"),
                "tpot": metrics.get("tpot"),
                "e2e": end - arrival,
                "tokens_out": reply.tokens_out,
                "chunks": reply.chunks,
                "server_tpot_ms": reply.server_tpot_ms,
                "finish_reason": reply.finish_reason,
                "server": reply.server_timings,
            }
        )
    return rows


def aiperf_side(
    program: str, url: str, bodies: Sequence[dict[str, Any]], tokenizer: Path, folder: Path
) -> tuple[dict[str, Any] | None, str | None]:
    """Run AIPerf on ``bodies`` (one at a time, one warm-up); return (its metrics by tag, None) or
    (None, why it gave none)."""
    payloads = folder / "payloads.jsonl"
    payloads.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    artifacts = folder / "aiperf"
    command = [
        program,
        "profile",
        "--model",
        str(bodies[0]["model"]),
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--custom-dataset-type",
        "raw-payload",
        "--input-file",
        str(payloads),
        "--request-count",
        str(len(bodies)),
        "--warmup-request-count",
        "1",
        "--concurrency",
        "1",
        "--tokenizer",
        str(tokenizer),
        "--use-server-token-count",
        "--artifact-dir",
        str(artifacts),
        "--ui-type",
        "none",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=AIPERF_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return None, f"AIPerf did not finish within {AIPERF_TIMEOUT_S} s"
    exports = sorted(artifacts.rglob(AIPERF_EXPORT))
    if done.returncode != 0 or not exports:
        tail = (done.stdout + done.stderr).strip()[-1500:]
        return None, f"AIPerf exited with {done.returncode} and wrote no {AIPERF_EXPORT}:\n{tail}"
    data: dict[str, Any] = json.loads(exports[0].read_text())
    return data, None


def _aiperf_metric(data: dict[str, Any] | None, tag: str) -> float | None:
    """Return the mean (``avg``) of one of AIPerf's metrics, None when absent."""
    if data is None:
        return None
    entry = data.get(tag)
    if entry is None and isinstance(data.get("records"), dict):
        entry = data["records"].get(tag)
    value = entry.get("avg") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def figures(rows: Sequence[dict[str, Any]], aiperf: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Return each figure of the table: {name: {unit, project, aiperf, server}}, times in ms."""
    window = serving_window(rows)
    tokens = sum(r["tokens_out"] for r in rows)
    server = [r["server"] for r in rows]

    def ms(values: Sequence[float | None]) -> float | None:
        mean = _mean(values)
        return None if mean is None else mean * 1000

    busy = sum(s.get("prompt_ms", 0) + s.get("predicted_ms", 0) for s in server) / 1000
    return {
        "TTFT": {
            "unit": "ms",
            "project": ms([r["ttft"] for r in rows]),
            "aiperf": _aiperf_metric(aiperf, "time_to_first_token"),
            "server": _mean([s.get("prompt_ms") for s in server]),
            "server_is": "prompt_ms (prefill)",
        },
        "TPOT / ITL": {
            "unit": "ms",
            "project": ms([r["tpot"] for r in rows]),
            "aiperf": _aiperf_metric(aiperf, "inter_token_latency"),
            "server": _mean([s.get("predicted_per_token_ms") for s in server]),
            "server_is": "predicted_per_token_ms",
        },
        "request latency": {
            "unit": "ms",
            "project": ms([r["e2e"] for r in rows]),
            "aiperf": _aiperf_metric(aiperf, "request_latency"),
            "server": _mean([s.get("prompt_ms", 0) + s.get("predicted_ms", 0) for s in server]),
            "server_is": "prompt_ms + predicted_ms",
        },
        "output tokens": {
            "unit": "tokens/request",
            "project": _mean([r["tokens_out"] for r in rows]),
            "aiperf": _aiperf_metric(aiperf, "output_sequence_length"),
            "server": _mean([s.get("predicted_n") for s in server]),
            "server_is": "predicted_n (the stop token included)",
        },
        "output throughput": {
            "unit": "tokens/s",
            "project": tokens / window if window else None,
            "aiperf": _aiperf_metric(aiperf, "output_token_throughput"),
            "server": sum(s.get("predicted_n", 0) for s in server) / busy if busy else None,
            "server_is": "predicted_n per second of prefill and decode",
        },
        "request throughput": {
            "unit": "requests/s",
            "project": len(rows) / window if window else None,
            "aiperf": _aiperf_metric(aiperf, "request_throughput"),
            "server": None,
            "server_is": "",
        },
    }


def tpot_ratios(rows: Sequence[dict[str, Any]], *, streamed: bool = True) -> list[float]:
    """Return each request's project TPOT over the server's own time per token: over the tokens the
    client timed (``streamed``: the server's predicted_ms between the first and the last chunk with
    text), else over the whole reply (``predicted_per_token_ms``, the first token's chunk included)."""
    out = []
    for r in rows:
        server = r.get("server_tpot_ms") if streamed else r["server"].get("predicted_per_token_ms")
        if r["tpot"] is not None and server:
            out.append(r["tpot"] * 1000 / server)
    return out


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--requests", type=int, default=8, help="measured requests of each client")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompts", type=Path, default=None, help="a Chatbot prompts file (JSONL)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu", "cuda"))
    parser.add_argument("--aiperf", default=None, help="the aiperf program (default: found)")
    parser.add_argument("--tolerance", type=float, default=0.02, help="TPOT against the server's, relative")
    parser.add_argument("--json", type=Path, default=None, help="write the figures and the setup here")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.max_tokens < 2:
        parser.error("--requests must be at least 1 and --max-tokens at least 2")
    device = "gpu" if args.device == "cuda" else args.device
    workflow = load_yaml(
        workflow_text(args.model, device, args.requests, args.max_tokens, args.prompts), name="aiperf"
    )
    chat = workflow.applications["chat"]
    turns = load_prompts(prompts_input(chat, PROMPTS))
    program = aiperf_program(args.aiperf)
    with (
        tempfile.TemporaryDirectory(prefix="cb-aiperf-") as scratch,
        llm_server(workflow.applications["llm"], Path(scratch) / "server") as url,
    ):
        gen = ServerGenerator(url, server="llm", client_model=None)
        # The bodies of a Chatbot's requests 0..n-1 (its seed is the run's, 0, plus the request's index).
        bodies = [
            gen.body(turns[i % len(turns)], max_tokens=args.max_tokens, temperature=0.0, seed=i)
            for i in range(args.requests)
        ]
        rows = project_side(gen, bodies)
        aiperf: dict[str, Any] | None
        missing: str | None
        if program is None:
            aiperf, missing = None, "AIPerf is not installed (pip install aiperf, or --aiperf PATH)"
        else:
            tokenizer = export_tokenizer(workflow.applications["llm"], Path(scratch) / "tokenizer")
            aiperf, missing = aiperf_side(program, url, bodies, tokenizer, Path(scratch))
    table = figures(rows, aiperf)
    lines = [["figure", "unit", "project", "AIPerf", "server's own", "the server's figure"]]
    for name, f in table.items():
        lines.append(
            [name, f["unit"], _cell(f["project"]), _cell(f["aiperf"]), _cell(f["server"]), f["server_is"]]
        )
    print(text_table(lines))
    if missing:
        print(f"\nAIPerf: {missing}")
    ratios = tpot_ratios(rows)
    whole = tpot_ratios(rows, streamed=False)
    chunks, tokens = sum(r["chunks"] for r in rows), sum(r["tokens_out"] for r in rows)
    print(f"\n{len(rows)} requests; {tokens} output tokens in {chunks} chunks with text")
    within = bool(ratios) and all(abs(r - 1) <= args.tolerance for r in ratios)
    if ratios:
        print(
            f"project TPOT / the server's time per token over the same tokens: mean {_mean(ratios):.4f}, "
            f"min {min(ratios):.4f}, max {max(ratios):.4f}: "
            + ("within" if within else "NOT within")
            + f" {args.tolerance:.0%} for every request"
        )
    if whole:
        print(
            f"project TPOT / server predicted_per_token_ms (whole reply): mean {_mean(whole):.4f}, "
            f"min {min(whole):.4f}, max {max(whole):.4f}"
        )
    else:
        print("no request produced two tokens: no TPOT to compare")
    if args.json:
        setup = {
            "model": args.model,
            "device": device,
            "requests": args.requests,
            "max_tokens": args.max_tokens,
        }
        record = {
            "setup": setup,
            "figures": table,
            "tpot_ratios": ratios,
            "tpot_ratios_whole_reply": whole,
            "aiperf_missing": missing,
            "rows": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
