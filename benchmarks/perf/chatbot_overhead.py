"""Chatbot overhead: TTFT and TPOT through the harness vs a bare llama-cpp-python loop, in one run.

Usage: python -m benchmarks.perf.chatbot_overhead [--device cpu|cuda] [--model NAME] [--rounds 2]
       [--requests N] [--max-tokens N] [--threads N] [--prompts FILE] [--grid | --no-grid]
       [--out DIR]

Both sides run the same prompts with the same model, context, threads, llama.cpp settings and sampling
(greedy, with the harness's top-k/top-p/min-p chain), one after the other in rounds (bare then harness,
harness then bare, ...) so that drift on a shared machine hits both:
- bare: the chat template from the GGUF, ``Llama.tokenize`` and a ``Llama.generate`` loop in this
  process, timed the same way (first non-empty token, then the gaps between tokens);
- harness: ``run_workflow`` on a Chatbot unit: a spawned application process, the scheduler gate at
  every token, events over the pipe, the system monitor, the result document; and the same with the
  monitor off, which tells the monitor's share.

TTFT's breakdown: the harness records when each stage before the first token ended (the Chatbot's
``info.ttft_marks``: the request set-up and its ``request_start`` event, the chat template, the
tokenisation, the scheduler gate's admission of the prefill, the prefill with the GPU's
synchronisation and the first sample, the first token's text), the bare loop the same stages on the
same clock; the table gives each stage's median duration on both sides and the difference.

``--device cuda`` (the GPU mode; defaults: ``llama-3.2-3b@random``, f16, every layer offloaded, 8 turns
of 128 tokens on ~256-token prompts) adds a grid of llama.cpp settings (flash attention, batch sizes,
KV cache type), each loaded into the bare loop, with its TTFT, its TPOT and the TPOT of llama.cpp's
decode alone (``Llama.eval`` of one token, no sampling), against the weights' bandwidth floor: the GGUF
file's bytes (every weight is read once per token) over the GPU's memory bandwidth, from a table of
spec-sheet figures by GPU name, else derived from NVML (bus width x peak memory clock x 2); the JSON
says which. Goals: harness / bare <= 1.02 (TTFT and TPOT medians; 1.03 on the CPU, where the 2 cores
are shared); TPOT <= 2.5x the floor with the best settings. ``--out DIR`` writes
``chatbot-overhead-<device>.json`` there (docs/results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.apps.chatbot import load_prompts
from benchmarks.apps.datasets import Input
from benchmarks.apps.runtime import default_threads, share_cpu_politely
from benchmarks.apps.textgen import PHASES, LlamaCppOptions, llama_chat_prompt, llama_kwargs, local_file
from benchmarks.data import DATA_DIR
from benchmarks.models import resolve
from benchmarks.platform import gpus, nvml_memory_bandwidth_gbs
from benchmarks.runner import run_workflow
from benchmarks.spec.load import load_yaml
from benchmarks.status import RequestStatus
from benchmarks.table import markdown_table, text_table

GOALS = {"cpu": 1.03, "cuda": 1.02}
FLOOR_GOAL = 2.5
N_CTX = 2048
ROOT = Path(__file__).resolve().parents[2]
DEFAULTS: dict[str, dict[str, Any]] = {
    "cpu": {"model": "smollm2-135m", "requests": 6, "max_tokens": 32, "prompts": DATA_DIR / "prompts.jsonl"},
    "cuda": {
        "model": "llama-3.2-3b@random",
        "requests": 8,
        "max_tokens": 128,
        "prompts": ROOT / "studies" / "h200" / "prompts-256.jsonl",
    },
}
# The settings grid of the GPU mode: llama-cpp-python's defaults first (flash attention off, n_batch and
# n_ubatch 512, an f16 KV cache), then one change at a time from flash attention on.
GRID: list[dict[str, Any]] = [
    {},
    {"flash_attn": True},
    {"flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"},
    {"type_k": "q8_0"},
    {"flash_attn": True, "n_batch": 2048, "n_ubatch": 2048},
    {"flash_attn": True, "n_batch": 128, "n_ubatch": 128},
]
# Memory bandwidth of GPUs by name (spec sheets, GB/s): the first entry whose words are all in the
# name wins, so the more specific names come first.
BANDWIDTH_GBS: list[tuple[tuple[str, ...], float]] = [
    (("H200",), 4800.0),
    (("H100", "NVL"), 3900.0),
    (("H100", "PCIe"), 2000.0),
    (("H100",), 3350.0),
    (("GH200",), 4000.0),
    (("B200",), 8000.0),
    (("A100", "80GB", "PCIe"), 1935.0),
    (("A100", "80GB"), 2039.0),
    (("A100",), 1555.0),
    (("L40S",), 864.0),
    (("L4",), 300.0),
    (("A10",), 600.0),
    (("RTX 4090",), 1008.0),
    (("RTX 4080",), 717.0),
    (("RTX 4060", "Laptop"), 256.0),
    (("RTX 3090",), 936.0),
]
DECODE_ONLY_TOKENS = 64


def bandwidth(name: str, nvml_gbs: float | None) -> tuple[float | None, str]:
    """Return (GB/s, where it came from) for a GPU: the spec-sheet table by name, else NVML's figure."""
    for words, gbs in BANDWIDTH_GBS:
        if all(w in name for w in words):
            return gbs, f"spec sheet ({' '.join(words)})"
    if nvml_gbs:
        return nvml_gbs, "NVML: bus width x peak memory clock x 2"
    return None, "unknown"


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def bare_requests(
    llm: Any, formatter: Any, turns: list[Any], max_tokens: int, temperature: float
) -> list[dict[str, Any]]:
    """Serve each turn with a plain llama-cpp-python loop; return TTFT, TPOT and the TTFT marks."""
    import llama_cpp

    out = []
    vocab = llm._model.vocab
    for turn in turns:
        start = time.monotonic()
        marks: dict[str, float] = {"started": 0.0}
        text, add_bos = formatter(turn)
        marks["templated"] = time.monotonic() - start
        tokens = llm.tokenize(text.encode(), add_bos=add_bos, special=True)
        marks["tokenised"] = time.monotonic() - start
        llm.reset()
        stream = llm.generate(tokens, temp=temperature, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0)
        marks["admitted"] = time.monotonic() - start
        times: list[float] = []
        first: float | None = None
        for token in stream:
            if not times:
                marks["first_token"] = time.monotonic() - start
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            t = time.monotonic()
            times.append(t)
            if first is None and llm.detokenize([token]):
                first = t
                marks["first_text"] = t - start
            if len(times) == max_tokens:
                break
        stream.close()
        if first is not None and len(times) > 1:
            out.append(
                {"ttft": first - start, "tpot": (times[-1] - times[0]) / (len(times) - 1), "marks": marks}
            )
    return out


def decode_only_tpot(llm: Any, turn_tokens: list[int], n: int = DECODE_ONLY_TOKENS) -> float:
    """Return llama.cpp's own decode time per token: ``Llama.eval`` of one token at a time after a
    prompt, with no sampling (what the sampler and the Python loop add is the rest of TPOT)."""
    llm.reset()
    llm.eval(turn_tokens)
    token = turn_tokens[-1]
    start = time.monotonic()
    for _ in range(n):
        llm.eval([token])
    return (time.monotonic() - start) / n


def harness_requests(
    model: str,
    prompts: Path,
    n: int,
    max_tokens: int,
    threads: int,
    device: str,
    settings: dict[str, Any],
    temperature: float,
    monitor: bool = True,
) -> list[dict[str, Any]]:
    """Serve the same turns through ``run_workflow``; return TTFT, TPOT and marks per counted request."""
    extra = "".join(f"\n  {k}: {json.dumps(v)}" for k, v in settings.items())
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
  temperature: {temperature}
  prompts: {prompts}
  device: {"gpu" if device == "cuda" else "cpu"}{extra}
""",
        name="chatbot-overhead",
    )
    kwargs: dict[str, Any] = {} if monitor else {"monitor_hz": None}
    result = run_workflow(workflow, **kwargs)
    (app,) = result.applications
    rows = [r for r in app.requests if r.status is RequestStatus.OK and not r.warmup]
    return [
        {"ttft": r.metrics["ttft"], "tpot": r.metrics["tpot"], "marks": r.info.get("ttft_marks", {})}
        for r in rows
        if "ttft" in r.metrics and "tpot" in r.metrics
    ]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the medians and means (s) of TTFT and TPOT over some requests, and their count."""
    out: dict[str, Any] = {"requests": len(rows)}
    for metric in ("ttft", "tpot"):
        values = [r[metric] for r in rows]
        out[f"{metric}_p50"] = median(values)
        out[f"{metric}_mean"] = statistics.fmean(values) if values else None
    return out


def breakdown(bare: list[dict[str, Any]], harness: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return each TTFT stage's median duration (s) on both sides and the harness's extra."""
    stages = ("started", *PHASES)
    rows = []
    for i, stage in enumerate(stages):

        def durations(side: list[dict[str, Any]], stage: str = stage, i: int = i) -> list[float]:
            marks = [r["marks"] for r in side]
            prev = stages[i - 1] if i else None
            return [
                m[stage] - (m[prev] if prev else 0.0) for m in marks if stage in m and (not prev or prev in m)
            ]

        b, h = median(durations(bare)), median(durations(harness))
        rows.append(
            {
                "stage": stage,
                "bare_s": b,
                "harness_s": h,
                "extra_s": None if b is None or h is None else h - b,
            }
        )
    return rows


def _ms(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value * 1000, spec)


def load_llama(path: Path, device: str, threads: int, settings: dict[str, Any]) -> Any:
    """Return a ``Llama`` on the model file with the given llama.cpp settings (every layer offloaded on
    the GPU), as the Chatbot loads it."""
    from llama_cpp import Llama

    return Llama(
        model_path=str(path),
        n_ctx=N_CTX,
        n_gpu_layers=-1 if device == "cuda" else 0,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
        **llama_kwargs(settings),
    )


def grid(
    path: Path,
    device: str,
    threads: int,
    turns: list[Any],
    max_tokens: int,
    temperature: float,
    settings_grid: Sequence[dict[str, Any]] = tuple(GRID),
) -> list[dict[str, Any]]:
    """Return the bare loop's TTFT/TPOT and llama.cpp's decode-only TPOT under each of ``settings_grid``."""
    rows = []
    for settings in settings_grid:
        LlamaCppOptions(**settings)  # the unit's own validation
        started = time.monotonic()
        try:
            llm = load_llama(path, device, threads, settings)
        except Exception as exc:  # a setting this build refuses is a result, not the end of the grid
            rows.append({"settings": settings, "error": f"{type(exc).__name__}: {exc}"})
            continue
        try:
            formatter = llama_chat_prompt(llm)
            measured = bare_requests(llm, formatter, turns, max_tokens, temperature)[1:]
            text, add_bos = formatter(turns[1])
            tokens = llm.tokenize(text.encode(), add_bos=add_bos, special=True)
            decode = decode_only_tpot(llm, tokens)
        except Exception as exc:
            rows.append({"settings": settings, "error": f"{type(exc).__name__}: {exc}"})
            continue
        finally:
            llm.close()
        row = {"settings": settings, **summary(measured), "decode_only_tpot": decode}
        row["seconds"] = round(time.monotonic() - started, 1)
        rows.append(row)
        print(
            f"grid {json.dumps(settings)}: TTFT {_ms(row['ttft_p50'])} ms, TPOT {_ms(row['tpot_p50'])} ms, "
            f"decode alone {_ms(decode)} ms ({row['seconds']} s)"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model", default=None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--prompts", type=Path, default=None, help="JSONL of chats (default per device)")
    parser.add_argument("--settings", default="{}", help="llama.cpp settings of both sides, as JSON")
    parser.add_argument("--grid", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write chatbot-overhead-<device>.json here")
    args = parser.parse_args(argv)
    defaults = DEFAULTS[args.device]
    model = args.model or str(defaults["model"])
    requests = args.requests or int(defaults["requests"])
    max_tokens = args.max_tokens or int(defaults["max_tokens"])
    prompts_file = args.prompts or Path(defaults["prompts"])
    settings = LlamaCppOptions(**json.loads(args.settings)).llama_settings()
    run_grid = args.device == "cuda" if args.grid is None else args.grid

    # The harness's application process waits passively in OpenMP; so must the bare loop, or the
    # comparison measures the wait policy instead of the harness.
    share_cpu_politely()
    import llama_cpp

    if args.device == "cuda" and not llama_cpp.llama_supports_gpu_offload():
        raise SystemExit("--device cuda: this llama-cpp-python was built without GPU support")
    turns = load_prompts(Input("bench", None, prompts_file))
    # The harness warms up on the first turn; the bare loop does the same below.
    chosen = [turns[0], *[turns[1 + i % (len(turns) - 1)] for i in range(requests)]]
    path = local_file(resolve(model, ("gguf",), "Chatbot"))
    assert path is not None
    llm = load_llama(path, args.device, args.threads, settings)
    formatter = llama_chat_prompt(llm)
    bare: list[dict[str, Any]] = []
    harness: list[dict[str, Any]] = []
    quiet: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"messages": t}) + "\n" for t in chosen))
        common = (model, prompts, requests, max_tokens, args.threads, args.device, settings, args.temperature)
        for r in range(args.rounds):
            # Alternate which side goes first, so that neither always runs on a warmer (or busier) machine.
            sides = [0, 1, 2] if r % 2 == 0 else [2, 1, 0]
            for side in sides:
                if side == 0:
                    bare += bare_requests(llm, formatter, chosen, max_tokens, args.temperature)[1:]
                elif side == 1:
                    harness += harness_requests(*common)
                else:
                    quiet += harness_requests(*common, monitor=False)
            print(
                f"round {r + 1}/{args.rounds}: {len(bare)} bare, {len(harness)} harness and {len(quiet)} "
                "harness-without-monitor requests so far"
            )
    llm.close()

    goal = GOALS[args.device]
    results = {"bare": summary(bare), "harness": summary(harness), "harness_no_monitor": summary(quiet)}
    ratios = {
        f"{name}_{metric}": results[name][f"{metric}_p50"] / results["bare"][f"{metric}_p50"]
        for name in ("harness", "harness_no_monitor")
        for metric in ("ttft", "tpot")
        if results[name][f"{metric}_p50"] and results["bare"][f"{metric}_p50"]
    }
    stages = breakdown(bare, harness)
    gpu = (gpus() or [{}])[0] if args.device == "cuda" else {}
    gbs, source = (None, "no GPU")
    if gpu:
        gbs, source = bandwidth(str(gpu.get("name", "")), nvml_memory_bandwidth_gbs())
    model_bytes = path.stat().st_size
    floor = model_bytes / (gbs * 1e9) if gbs else None
    report: dict[str, Any] = {
        "device": args.device,
        "gpu": gpu.get("name"),
        "model": model,
        "model_bytes": model_bytes,
        "requests": requests,
        "max_tokens": max_tokens,
        "prompts": prompts_file.name,
        "threads": args.threads,
        "temperature": args.temperature,
        "settings": settings,
        "rounds": args.rounds,
        "sides": results,
        "ratios": ratios,
        "ttft_breakdown": stages,
        "bandwidth_gbs": gbs,
        "bandwidth_source": source,
        "floor_tpot_s": floor,
        "grid": [],
        "best": None,
        "goals": {
            "ratio": goal,
            "ratio_met": bool(ratios)
            and max(ratios.get("harness_ttft", 9), ratios.get("harness_tpot", 9)) <= goal,
            "floor_x": FLOOR_GOAL,
            "best_floor_x": None,
        },
    }
    target = args.out / f"chatbot-overhead-{args.device}.json" if args.out else None
    if target is not None and run_grid:
        # The comparison is kept even if the grid does not finish (a device call's time limit).
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({**report, "grid": "pending"}, indent=2) + "\n")
    if run_grid:
        rows = grid(path, args.device, args.threads, chosen, max_tokens, args.temperature)
        best = min((g for g in rows if g.get("tpot_p50")), key=lambda g: g["tpot_p50"], default=None)
        report["grid"], report["best"] = rows, best
        report["goals"]["best_floor_x"] = best["tpot_p50"] / floor if best and floor else None
    print(render(report))
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2) + "\n")
        target.with_suffix(".md").write_text(render(report, markdown_table) + "\n")
        print(f"\nwrote {target} and {target.with_suffix('.md').name}")


def render(report: dict[str, Any], table: Callable[[list[list[str]]], str] = text_table) -> str:
    """Return the comparison, TTFT's breakdown and the settings grid as text with ``table``'s tables
    (text_table for the terminal, markdown_table for docs/results/)."""
    out: list[str] = []
    sides = report["sides"]
    out.append(
        f"\nChatbot {report['model']} on {report['gpu'] or report['device']}, {report['max_tokens']} tokens, "
        f"{report['threads']} threads, temperature {report['temperature']}, "
        f"settings {report['settings'] or 'default'}; "
        f"{sides['bare']['requests']} bare vs {sides['harness']['requests']} harness requests"
    )
    rows = [["side", "TTFT p50 ms", "ratio", "TPOT p50 ms", "ratio", "TTFT mean ms", "TPOT mean ms"]]
    for name, side in sides.items():
        ratios = report["ratios"]
        rows.append(
            [
                name,
                _ms(side["ttft_p50"]),
                f"{ratios.get(name + '_ttft', 1.0):.3f}",
                _ms(side["tpot_p50"], ".3f"),
                f"{ratios.get(name + '_tpot', 1.0):.3f}",
                _ms(side["ttft_mean"]),
                _ms(side["tpot_mean"], ".3f"),
            ]
        )
    out.append("\n" + table(rows) + "\n")
    out.append("\nTTFT breakdown (median duration of each stage, ms):")
    rows = [["stage", "bare", "harness", "harness - bare"]]
    for s in report["ttft_breakdown"]:
        rows.append(
            [s["stage"], _ms(s["bare_s"], ".3f"), _ms(s["harness_s"], ".3f"), _ms(s["extra_s"], "+.3f")]
        )
    out.append("\n" + table(rows) + "\n")
    goals = report["goals"]
    out.append(f"\nharness / bare <= {goals['ratio']}: {'met' if goals['ratio_met'] else 'missed'}")
    if report["grid"]:
        floor = report["floor_tpot_s"]
        out.append(
            f"\nSettings grid (bare loop); bandwidth floor {_ms(floor, '.3f')} ms/token = "
            f"{report['model_bytes'] / 1e9:.2f} GB / {report['bandwidth_gbs']} GB/s "
            f"({report['bandwidth_source']})"
        )
        rows = [["settings", "TTFT p50 ms", "TPOT p50 ms", "x floor", "decode alone ms", "x floor"]]
        for g in report["grid"]:
            label = json.dumps(g["settings"]) if g["settings"] else "defaults"
            if "error" in g:
                rows.append([label, g["error"][:60], "", "", "", ""])
                continue
            rows.append(
                [
                    label,
                    _ms(g["ttft_p50"]),
                    _ms(g["tpot_p50"], ".3f"),
                    f"{g['tpot_p50'] / floor:.2f}" if floor and g["tpot_p50"] else "-",
                    _ms(g["decode_only_tpot"], ".3f"),
                    f"{g['decode_only_tpot'] / floor:.2f}" if floor else "-",
                ]
            )
        out.append("\n" + table(rows) + "\n")
        if goals["best_floor_x"] is not None:
            verdict = "met" if goals["best_floor_x"] <= goals["floor_x"] else "missed"
            out.append(
                f"best TPOT {goals['best_floor_x']:.2f}x the floor (goal <= {goals['floor_x']}x): {verdict}"
            )
    return "\n".join(out)


if __name__ == "__main__":
    main()
