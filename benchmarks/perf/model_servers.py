"""One served model against separate models: three chat applications, equal load.

Usage: python -m benchmarks.perf.model_servers [--model smollm2-135m] [--requests 6] [--max-tokens 32]
       [--device cpu|cuda] [--rounds 1] [--settings JSON] [--out DIR] [--json FILE]

Two workflows with the same three Chatbot units (the same prompts, requests, reply length and SLOs,
closed loops started together), run one after the other (in rounds, alternating the order):
- shared: one ``LLMServer`` (llama.cpp's llama-server, ``parallel: 3``, continuous batching) and three
  clients that stream from it;
- separate: three Chatbots, each loading its own copy of the model (llama-cpp-python);
- serial: the shared case with ``parallel: 1``: one sequence at a time, as a server without batching
  across requests serves them (llama-cpp-python's own ``llama_cpp.server`` is one: one ``Llama``
  behind a lock), so the gap to ``shared`` is what continuous batching brings;
- gated: the shared case under the credit scheduler, every batch through the server's step gate (the
  clients are HIGH, so no batch is held back): the gap to ``shared`` is what the gate costs.
Every case but ``gated`` runs under greedy.
Prints, per case: mean SLO attainment, TTFT and TPOT p50/p99 over every request of the three, the
peak resident memory of the run's processes (their children included: the server's llama-server),
peak GPU memory (none on the CPU), the load time (the longest of the case's nodes' model loads, the
server's start included; the separate models load side by side) and throughput: output tokens per
second of the serving window, from the first request's arrival to the last one's end, over the three
applications, so that the load is not in it (the makespan, which includes it, is kept in the JSON).
Definitions: docs/metrics.md. On the CPU the threads are given, not taken: each separate Chatbot gets a
third of the cores, the server all of them, so both cases use the same cores.

GPU memory, per case: the run's monitor samples NVML's device-wide memory in use (every process's)
through the case's own run; the table gives its peak less what was in use just before the case
started (read from NVML then), so a case is charged only for what its own processes allocated, and
the JSON keeps both figures and what was in use again after the case (the check that the case's
processes gave their memory back before the next one). ``--device cuda`` (or ``gpu``) offloads every
layer; its defaults are the issue's H200 case: ``llama-3.2-3b@random`` (f16), 6 requests of 128
tokens per application, and the same llama.cpp settings on both sides (``--settings``, default
``{"flash_attn": true}``: llama-server's default is flash attention on where the GPU has it,
llama-cpp-python's is off, and a comparison of the two would otherwise measure that).
``--json FILE`` writes every row (docs/results/model-servers.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.apps.runtime import default_threads
from benchmarks.apps.textgen import LlamaCppOptions
from benchmarks.metrics import percentile, serving_window
from benchmarks.platform import gpu_memory_used_bytes, gpus
from benchmarks.results import ResultDocument, write_bundle
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml
from benchmarks.status import RequestStatus
from benchmarks.table import markdown_table, text_table

CLIENTS = ("chat_a", "chat_b", "chat_c")
CASES = ("shared", "gated", "serial", "separate")


DEFAULTS: dict[str, dict[str, Any]] = {
    "cpu": {"model": "smollm2-135m", "requests": 6, "max_tokens": 32, "settings": "{}"},
    "gpu": {
        "model": "llama-3.2-3b@random",
        "requests": 6,
        "max_tokens": 128,
        "settings": '{"flash_attn": true}',
    },
}


def workflow_text(
    case: str, model: str, requests: int, max_tokens: int, device: str, settings: dict[str, Any] | None = None
) -> str:
    """Return the YAML of one case: ``shared`` (one server, three slots), ``serial`` (one slot) or
    ``separate`` (three models); ``settings`` (llama.cpp's, as LlamaCppOptions) go to every model."""
    threads = default_threads()
    chat = f"type: Chatbot, num_requests: {requests}, max_tokens: {max_tokens}, temperature: 0"
    llama = "".join(f", {k}: {json.dumps(v)}" for k, v in (settings or {}).items())
    lines = ["start_together: true"]
    if case in ("shared", "serial"):
        slots = 3 if case == "shared" else 1
        lines.append(
            f"llm: {{type: LLMServer, model: {model}, device: {device}, parallel: {slots}, "
            f"n_threads: {threads}{llama}}}"
        )
        lines += [f"{c}: {{{chat}, server: llm}}" for c in CLIENTS]
        lines += ["workflows:", "  serve: {uses: llm, background: true}"]
    else:
        own = max(1, threads // len(CLIENTS))
        lines += [
            f"{c}: {{{chat}, model: {model}, device: {device}, n_threads: {own}{llama}}}" for c in CLIENTS
        ]
        lines.append("workflows:")
    lines += [f"  {c}: {{uses: {c}}}" for c in CLIENTS]
    return "\n".join(lines) + "\n"


def figures(result: ResultDocument, gpu_before: int | None = None) -> dict[str, Any]:
    """Return one case's row: attainment, TTFT/TPOT p50/p99 (s), memory peaks (MiB), the load time
    (s), the serving window (s) and output tokens per second of it.

    ``gpu_mib`` is the run's peak of GPU memory in use less ``gpu_before`` (what was in use before the
    case started), when both are known; ``gpu_peak_mib`` the peak itself.
    """
    ok = [r for a in result.applications for r in a.requests if r.status is RequestStatus.OK and not r.warmup]
    ttft = [r.metrics["ttft"] for r in ok if "ttft" in r.metrics]
    tpot = [r.metrics["tpot"] for r in ok if "tpot" in r.metrics]
    tokens = sum(int(r.info.get("tokens_out", 0)) for r in ok)
    telemetry = result.telemetry
    rss = sum(a.rss_peak_bytes or 0 for a in telemetry.applications.values()) if telemetry else 0
    gpu = telemetry.run.gpu_memory_peak_bytes if telemetry else None
    own = gpu - gpu_before if gpu is not None and gpu_before is not None else gpu
    window = serving_window([vars(r) for r in ok])
    loads = [n.load_time_s for n in result.nodes if n.load_time_s is not None]
    return {
        "attainment": result.mean_attainment,
        "ttft": (percentile(ttft, 50), percentile(ttft, 99)) if ttft else None,
        "tpot": (percentile(tpot, 50), percentile(tpot, 99)) if tpot else None,
        "rss_mib": rss / 2**20 if rss else None,
        "gpu_mib": own / 2**20 if own else None,
        "gpu_peak_mib": gpu / 2**20 if gpu else None,
        "gpu_before_mib": gpu_before / 2**20 if gpu_before is not None else None,
        "requests": len(ok),
        "tokens_out": tokens,
        "load_s": max(loads) if loads else None,
        "serving_s": window,
        "makespan_s": result.makespan_s,
        "tokens_per_s": tokens / window if window else None,
        "failed": [n.name for n in result.nodes if n.status == "failed"],
        # The server's batches that passed its step gate (the gated case; the scheduler's count).
        "gated_batches": (result.scheduler.get("apps") or {}).get("serve", {}).get("steps"),
    }


def _pair(value: tuple[float, float] | None) -> str:
    return "-" if value is None else f"{value[0] * 1000:.0f} / {value[1] * 1000:.0f}"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: smollm2-135m, llama-3.2-3b@random on a GPU")
    parser.add_argument("--requests", type=int, default=None, help="requests per chat application")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu", "cuda"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--settings", default=None, help="llama.cpp settings of every model, as JSON")
    parser.add_argument("--out", type=Path, default=None, help="keep each run's bundle here")
    parser.add_argument("--json", type=Path, default=None, help="write the rows and the setup here")
    args = parser.parse_args(argv)
    device = "gpu" if args.device == "cuda" else args.device
    defaults = DEFAULTS[device]
    model = args.model or str(defaults["model"])
    requests = args.requests or int(defaults["requests"])
    max_tokens = args.max_tokens or int(defaults["max_tokens"])
    settings = LlamaCppOptions(**json.loads(args.settings or str(defaults["settings"]))).llama_settings()
    rows: list[list[str]] = [
        [
            "case",
            "round",
            "attainment",
            "TTFT p50/p99 ms",
            "TPOT p50/p99 ms",
            "RSS MiB",
            "GPU MiB",
            "load s",
            "serving s",
            "tok/s serving",
        ]
    ]
    records: list[dict[str, Any]] = []
    for round_ in range(1, args.rounds + 1):
        order = CASES if round_ % 2 else CASES[::-1]
        for case in order:
            shape = "shared" if case == "gated" else case
            text = workflow_text(shape, model, requests, max_tokens, device, settings)
            before = gpu_memory_used_bytes() if device == "gpu" else None
            with tempfile.TemporaryDirectory() as scratch:
                out = args.out / f"{case}-{round_}" if args.out else Path(scratch)
                workflow = load_yaml(text, name=f"model-servers-{case}")
                scheduler = "credit" if case == "gated" else "greedy"
                result = run_workflow(workflow, scheduler=scheduler, out_dir=out)
                write_bundle(result, out)
            f = figures(result, before)
            f["gpu_after_mib"] = (
                (used / 2**20) if device == "gpu" and (used := gpu_memory_used_bytes()) else None
            )
            records.append({"case": case, "round": round_, **f})
            rows.append(
                [
                    case + (f" (failed: {', '.join(f['failed'])})" if f["failed"] else ""),
                    str(round_),
                    _num(f["attainment"], ".3f"),
                    _pair(f["ttft"]),
                    _pair(f["tpot"]),
                    _num(f["rss_mib"], ".0f"),
                    _num(f["gpu_mib"], ".0f"),
                    _num(f["load_s"], ".2f"),
                    _num(f["serving_s"], ".2f"),
                    _num(f["tokens_per_s"], ".1f"),
                ]
            )
    print(text_table(rows))
    if args.json:
        setup = {
            "model": model,
            "device": device,
            "gpu": (gpus() or [{}])[0].get("name") if device == "gpu" else None,
            "requests_per_application": requests,
            "max_tokens": max_tokens,
            "threads": default_threads(),
            "settings": settings,
            "rounds": args.rounds,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"setup": setup, "rows": records}, indent=2) + "\n")
        # The same table in Markdown beside it, for docs/results/model-servers.md.
        args.json.with_suffix(".md").write_text(f"{json.dumps(setup)}\n\n{markdown_table(rows)}\n")
        print(f"wrote {args.json} and {args.json.with_suffix('.md').name}")


if __name__ == "__main__":
    main()
