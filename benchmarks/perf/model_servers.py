"""One served model against separate models: three chat applications, equal load (issue 23).

Usage: python -m benchmarks.perf.model_servers [--model smollm2-135m] [--requests 6] [--max-tokens 32]
       [--device cpu] [--rounds 1] [--out DIR]

Two workflows with the same three Chatbot units (the same prompts, requests, reply length and SLOs,
closed loops started together), run one after the other (in rounds, alternating the order):
- shared: one ``LLMServer`` (llama.cpp's llama-server, ``parallel: 3``, continuous batching) and three
  clients that stream from it;
- separate: three Chatbots, each loading its own copy of the model (llama-cpp-python);
- serial: the shared case with ``parallel: 1``: one sequence at a time, as a server without batching
  across requests serves them (llama-cpp-python's own ``llama_cpp.server`` is one: one ``Llama``
  behind a lock), so the gap to ``shared`` is what continuous batching brings.
Prints, per case: mean SLO attainment, TTFT and TPOT p50/p99 over every request of the three, the
peak resident memory of the run's processes (their children included: the server's llama-server),
peak GPU memory (none on the CPU), and throughput (output tokens over the makespan). Definitions:
docs/metrics.md. On the CPU the threads are given, not taken: each separate Chatbot gets a third of
the cores, the server all of them, so both cases use the same cores.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.apps.runtime import default_threads
from benchmarks.metrics import percentile
from benchmarks.results import ResultDocument, write_bundle
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml
from benchmarks.status import RequestStatus
from benchmarks.table import text_table

CLIENTS = ("chat_a", "chat_b", "chat_c")


def workflow_text(case: str, model: str, requests: int, max_tokens: int, device: str) -> str:
    """Return the YAML of one case: ``shared`` (one server, three slots), ``serial`` (one slot) or
    ``separate`` (three models)."""
    threads = default_threads()
    chat = f"type: Chatbot, num_requests: {requests}, max_tokens: {max_tokens}, temperature: 0"
    lines = ["start_together: true"]
    if case in ("shared", "serial"):
        slots = 3 if case == "shared" else 1
        lines.append(
            f"llm: {{type: LLMServer, model: {model}, device: {device}, parallel: {slots}, "
            f"n_threads: {threads}}}"
        )
        lines += [f"{c}: {{{chat}, server: llm}}" for c in CLIENTS]
        lines += ["workflows:", "  serve: {uses: llm, background: true}"]
    else:
        own = max(1, threads // len(CLIENTS))
        lines += [f"{c}: {{{chat}, model: {model}, device: {device}, n_threads: {own}}}" for c in CLIENTS]
        lines.append("workflows:")
    lines += [f"  {c}: {{uses: {c}}}" for c in CLIENTS]
    return "\n".join(lines) + "\n"


def figures(result: ResultDocument) -> dict[str, Any]:
    """Return one case's row: attainment, TTFT/TPOT p50/p99 (s), memory peaks (MiB), tokens/s."""
    ok = [r for a in result.applications for r in a.requests if r.status is RequestStatus.OK and not r.warmup]
    ttft = [r.metrics["ttft"] for r in ok if "ttft" in r.metrics]
    tpot = [r.metrics["tpot"] for r in ok if "tpot" in r.metrics]
    tokens = sum(int(r.info.get("tokens_out", 0)) for r in ok)
    telemetry = result.telemetry
    rss = sum(a.rss_peak_bytes or 0 for a in telemetry.applications.values()) if telemetry else 0
    gpu = telemetry.run.gpu_memory_peak_bytes if telemetry else None
    return {
        "attainment": result.mean_attainment,
        "ttft": (percentile(ttft, 50), percentile(ttft, 99)) if ttft else None,
        "tpot": (percentile(tpot, 50), percentile(tpot, 99)) if tpot else None,
        "rss_mib": rss / 2**20 if rss else None,
        "gpu_mib": gpu / 2**20 if gpu else None,
        "tokens_per_s": tokens / result.makespan_s if result.makespan_s else None,
        "failed": [n.name for n in result.nodes if n.status == "failed"],
    }


def _pair(value: tuple[float, float] | None) -> str:
    return "-" if value is None else f"{value[0] * 1000:.0f} / {value[1] * 1000:.0f}"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--requests", type=int, default=6, help="requests per chat application")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="keep each run's bundle here")
    args = parser.parse_args(argv)
    rows: list[list[str]] = [
        ["case", "round", "attainment", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "RSS MiB", "GPU MiB", "tok/s"]
    ]
    for round_ in range(1, args.rounds + 1):
        order = ("shared", "serial", "separate") if round_ % 2 else ("separate", "serial", "shared")
        for case in order:
            text = workflow_text(case, args.model, args.requests, args.max_tokens, args.device)
            with tempfile.TemporaryDirectory() as scratch:
                out = args.out / f"{case}-{round_}" if args.out else Path(scratch)
                result = run_workflow(load_yaml(text, name=f"model-servers-{case}"), out_dir=out)
                write_bundle(result, out)
            f = figures(result)
            rows.append(
                [
                    case + (f" (failed: {', '.join(f['failed'])})" if f["failed"] else ""),
                    str(round_),
                    _num(f["attainment"], ".3f"),
                    _pair(f["ttft"]),
                    _pair(f["tpot"]),
                    _num(f["rss_mib"], ".0f"),
                    _num(f["gpu_mib"], ".0f"),
                    _num(f["tokens_per_s"], ".1f"),
                ]
            )
    print(text_table(rows))


if __name__ == "__main__":
    main()
