"""Denoising step time of a real diffusers pipeline per ImageGen attention choice, side by side.

Usage: python -m benchmarks.perf.attention_steps [--model sd3.5-medium@random] [--size 1024] [--steps N]
       [--choices sdpa,cudnn,flash,efficient,cbkernels,cbkernels:maxnreg=128] [--device cuda] [--json PATH]

A choice is an ImageGen ``attention:`` value; ``cbkernels:KEY=VALUE:...`` is cbkernels with those
``attention_params`` (checked by ``cbkernels.attention.config_from_params``).

One pipeline (random weights of the model's real shapes) is built once; each choice wraps its denoiser's
attention with ``benchmarks.apps.attention`` (as ImageGen's ``attention:`` does) and generates one image
of ``--warmup`` + ``--steps`` steps, timed per step like ImageGen's ``step`` (the GPU synchronised at
each step's end); the warm-up steps (first-call compilation, autotuning) are left out. Printed: the
median step time, its ratio to ``sdpa``'s, and the attention calls per step with the backends that
served them; ``--json`` writes the same rows. The first row, ``unwrapped``, is the pipeline as diffusers
runs it, without the switch: the switch's own cost is its difference to ``sdpa``. A choice that cannot
run here or cannot serve a call is a row with its error, never another kernel's time.

On the H200 (about 2 minutes: SD 3.5 medium at 1024x1024, 6 choices of 2 + 20 steps, cbkernels'
first calls compiling its kernel):
    python3 -m benchmarks.perf.attention_steps --model sd3.5-medium@random --size 1024 --device cuda \\
        --json $OUT/attention-steps-h200.json
On a CPU (a tiny model; only sdpa and math run there):
    python -m benchmarks.perf.attention_steps --model sd3-tiny@random --size 64 --steps 4 \\
        --choices sdpa,math --device cpu
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.apps.attention import CHOICES as KNOWN
from benchmarks.apps.attention import AttentionSwitch, AttentionUnavailable, check_params
from benchmarks.models.catalogue import RANDOM
from benchmarks.table import text_table

# The register-lean variant is issue 21's sharing question: 128 registers per thread or fewer.
CHOICES = ("sdpa", "cudnn", "flash", "efficient", "cbkernels", "cbkernels:maxnreg=128")
PROMPT = "a lighthouse on a rocky coast at dusk, oil painting"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", default="sd3.5-medium@random", help="an image NAME@random model")
    parser.add_argument("--size", type=int, default=1024, help="image height and width in pixels")
    parser.add_argument("--steps", type=int, default=20, help="timed denoising steps per choice")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first, per choice")
    parser.add_argument("--choices", default=",".join(CHOICES), help="comma-separated attention choices")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--dtype", choices=("auto", "float16", "bfloat16", "float32"), default="auto")
    parser.add_argument("--guidance", type=float, default=7.0, help="> 1: guided, batch 2 per step")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    name = args.model.removesuffix("@random")
    if (
        not args.model.endswith("@random")
        or name not in RANDOM
        or RANDOM[name].family not in ("sd", "sdxl", "sd3")
    ):
        parser.error(f"--model: {args.model} is not an image NAME@random model")
    if args.size % 8 or args.steps < 1 or args.warmup < 0:
        parser.error("--size must be a multiple of 8, --steps >= 1 and --warmup >= 0")
    try:
        args.choices = [_choice(c.strip()) for c in args.choices.split(",") if c.strip()]
    except ValueError as exc:
        parser.error(f"--choices: {exc}")
    if not args.choices:
        parser.error("--choices: none given")
    return args


def _choice(text: str) -> tuple[str, str, dict[str, Any]]:
    """Return (label, choice, params) of one ``--choices`` entry: ``NAME`` or ``cbkernels:K=V:...``
    (values read as YAML scalars: 128 is a number)."""
    import yaml

    name, *pairs = text.split(":")
    if name not in KNOWN:
        raise ValueError(f"unknown {name!r}; known: {', '.join(KNOWN)}")
    if pairs and name != "cbkernels":
        raise ValueError(f"{text}: only cbkernels takes parameters")
    params: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(f"{text}: parameters are KEY=VALUE")
        params[key] = yaml.safe_load(value)
    return text, name, params


def step_times(pipe: Any, torch: Any, steps: int, size: int, guidance: float, device: str) -> list[float]:
    """Return the time of each denoising step of one image (seconds), the GPU synchronised after each."""
    times: list[float] = []
    last = time.perf_counter()

    def on_step_end(pipeline: Any, i: int, timestep: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        nonlocal last
        if device == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - last)
        last = now
        return kwargs

    with torch.inference_mode():
        pipe(
            prompt=PROMPT,
            num_inference_steps=steps,
            height=size,
            width=size,
            guidance_scale=guidance,
            generator=torch.Generator(device="cpu").manual_seed(0),
            output_type="latent",
            callback_on_step_end=on_step_end,
        )
    return times


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Return the run's description and one row per choice: median step time, ratio to sdpa, the
    attention calls per step and their backends, or the choice's error."""
    import torch

    from benchmarks.models.random_image import build_random_pipeline

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this torch build sees no CUDA device")
    model = RANDOM[args.model.removesuffix("@random")]
    dtype_name = args.dtype if args.dtype != "auto" else ("float16" if args.device == "cuda" else "float32")
    pipe = build_random_pipeline(model, 0, getattr(torch, dtype_name), args.device)
    denoiser = pipe.transformer if model.family == "sd3" else pipe.unet
    plain = denoiser.attn_processors
    total = args.warmup + args.steps
    # The pipeline as diffusers runs it, no switch: what the switch's own cost is measured against.
    times = step_times(pipe, torch, total, args.size, args.guidance, args.device)
    rows: list[dict[str, Any]] = [
        {"label": "unwrapped", "choice": None, "params": {}, **_figures(times[args.warmup :])}
    ]
    for label, choice, params in args.choices:
        denoiser.set_attn_processor(dict(plain))
        row: dict[str, Any] = {"label": label, "choice": choice, "params": params}
        try:
            if params:  # checked as a workflow's attention_params are
                check_params(choice, params)
            switch = AttentionSwitch(choice, params, args.device)
            switch.install(denoiser)
            times = step_times(pipe, torch, total, args.size, args.guidance, args.device)
        except (AttentionUnavailable, ValueError) as exc:
            rows.append({**row, "error": str(exc)})
            continue
        served = switch.take()
        rows.append(
            {
                **row,
                **_figures(times[args.warmup :]),
                "attention_calls_per_step": sum(served.values()) / total,
                "backends": served,
                "configs": switch.describe().get("configs"),
            }
        )
    base = next((r["median_step_s"] for r in rows if r["choice"] == "sdpa" and "median_step_s" in r), None)
    for r in rows:
        if "median_step_s" in r:
            r["ratio_to_sdpa"] = r["median_step_s"] / base if base else None
    return {
        "model": args.model,
        "pipeline": type(pipe).__name__,
        "size": args.size,
        "dtype": dtype_name,
        "guidance_scale": args.guidance,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "torch": torch.__version__,
        "warmup_steps": args.warmup,
        "rows": rows,
    }


def _figures(timed: list[float]) -> dict[str, Any]:
    return {"median_step_s": statistics.median(timed), "min_step_s": min(timed), "steps": len(timed)}


def table(report: dict[str, Any]) -> str:
    """Return the rows as a text table (header, one line per choice)."""
    lines = [["attention", "median step", "ratio to sdpa", "calls/step", "served by"]]
    for r in report["rows"]:
        if "error" in r:
            lines.append([r["label"], "-", "-", "-", "error: " + r["error"]])
            continue
        ratio = f"{r['ratio_to_sdpa']:.3f}x" if r.get("ratio_to_sdpa") else "-"
        if r["choice"] is None:
            calls, served = "-", "diffusers' processors, no switch"
        else:
            calls = f"{r['attention_calls_per_step']:g}"
            served = ", ".join(f"{k} {v}" for k, v in sorted(r["backends"].items()))
        lines.append([r["label"], f"{r['median_step_s'] * 1e3:.2f}ms", ratio, calls, served])
    return text_table(lines, align="<>>><")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, write the JSON when asked; return 0, or 1 when no choice ran."""
    args = _parse(argv)
    report = measure(args)
    where = report["gpu"] or "CPU"
    print(
        f"{report['pipeline']} ({report['model']}) at {args.size}x{args.size}, {report['dtype']}, "
        f"guidance {args.guidance:g}, on {where}: median of {args.steps} steps after {args.warmup} warm-up"
    )
    print(table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if any("median_step_s" in r for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
