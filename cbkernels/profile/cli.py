"""``consumerbench kernels profile`` and ``python -m cbkernels.profile``: one parser, two doors.

The engine's CLI adds ``kernels`` through ``register`` (a function-level import in benchmarks/cli.py);
the standalone door serves GPU machines that have torch and Triton but not the engine's dependencies.
Exit codes: 0 measured, 1 no row could be measured, 2 usage error or no CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cbkernels.attention.config import MAXNREG_RANGE, VARIANTS
from cbkernels.profile.report import table

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_SHAPE = "2,24,4429,64"  # SD 3.5 medium's joint attention at 1024x1024 with guidance


def shape_arg(text: str) -> tuple[int, int, int, int]:
    """Parse ``B,H,S,D`` into four positive integers."""
    try:
        dims = tuple(int(p) for p in text.split(","))
    except ValueError:
        dims = ()
    if len(dims) != 4 or min(dims) < 1:
        raise argparse.ArgumentTypeError(
            f"expected B,H,S,D (four positive integers), e.g. {DEFAULT_SHAPE}, not {text!r}"
        )
    return (dims[0], dims[1], dims[2], dims[3])


def budgets_arg(text: str) -> list[int | None]:
    """Parse ``none,128,96`` into register budgets (None: the compiler's choice)."""
    lo, hi = MAXNREG_RANGE
    budgets: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part in ("none", "0", ""):
            budgets.append(None)
        elif part.isdigit() and lo <= int(part) <= hi:
            budgets.append(int(part))
        else:
            raise argparse.ArgumentTypeError(f"a register budget is 'none' or {lo}..{hi}, not {part!r}")
    return budgets


def names_arg(choices: Sequence[str]) -> Any:
    """Return a parser of a comma-separated subset of ``choices``."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(choices)} (comma-separated), not {text!r}"
            )
        return names

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the profile command's options to ``parser``."""
    from cbkernels.profile.run import DTYPES, SDPA_BACKENDS

    parser.add_argument(
        "--shape",
        type=shape_arg,
        default=shape_arg(DEFAULT_SHAPE),
        metavar="B,H,S,D",
        help=f"batch, heads, sequence length, head dim (default {DEFAULT_SHAPE})",
    )
    parser.add_argument(
        "--kv-seq", type=int, metavar="N", help="key/value length (default: S; e.g. 77 for SD 1.5's text)"
    )
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument(
        "--layout",
        choices=["bhsd", "bshd"],
        default="bhsd",
        help="bhsd: contiguous (batch, heads, seq, dim) tensors (default); bshd: (batch, seq, heads, dim) "
        "tensors viewed as (batch, heads, seq, dim), as diffusers' attention processors pass them",
    )
    parser.add_argument(
        "--repeats", type=int, default=30, help="timed calls per row, after 3 warm-ups (median)"
    )
    parser.add_argument(
        "--variants",
        type=names_arg(VARIANTS),
        help="our variants (default: tma,pointer on sm90+, else pointer)",
    )
    parser.add_argument(
        "--maxnreg",
        type=budgets_arg,
        default=budgets_arg("none,128,96"),
        metavar="LIST",
        help="register budgets for each variant (default none,128,96)",
    )
    parser.add_argument(
        "--backends",
        type=names_arg(list(SDPA_BACKENDS)),
        default=["cudnn", "flash", "efficient"],
        help="PyTorch SDPA backends (default cudnn,flash,efficient; add math)",
    )
    parser.add_argument(
        "--autotune", action="store_true", help="search the candidate configs first (minutes)"
    )
    parser.add_argument(
        "--tune-budget",
        type=float,
        default=None,
        metavar="S",
        help="with --autotune: stop the search after S seconds and keep the best so far",
    )
    parser.add_argument(
        "--ncu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Nsight Compute's metrics (default: when ncu is found)",
    )
    parser.add_argument(
        "--ncu-timeout", type=float, default=240.0, metavar="S", help="give ncu this long (s)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the document here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one-shot", type=Path, help=argparse.SUPPRESS)


def register(subparsers: Any) -> None:
    """Add ``kernels profile`` to the ``consumerbench`` parser."""
    kernels = subparsers.add_parser("kernels", help="GPU kernels: profile our attention against PyTorch's")
    sub = kernels.add_subparsers(title="kernel commands")
    prof = sub.add_parser(
        "profile",
        help="time our attention kernel's variants and PyTorch's SDPA backends side by side",
        description="Time, TFLOP/s, registers, spills, shared memory and occupancy of our attention kernel's "
        "variants and each PyTorch SDPA backend on one shape; Nsight Compute's achieved occupancy and "
        "memory throughput where ncu is present (docs/kernels.md).",
    )
    add_arguments(prof)
    prof.set_defaults(func=run)
    kernels.set_defaults(func=lambda args: _help(kernels))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    """Run the profile command from parsed arguments; return the exit code."""
    from cbkernels.profile.run import Shape, one_shot, profile

    if args.one_shot is not None:
        return one_shot(args.one_shot)
    if args.repeats < 1:
        print("error: --repeats must be >= 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed; the profiler needs it and a CUDA GPU", file=sys.stderr)
        return EXIT_USAGE
    if not torch.cuda.is_available():
        print(
            "error: no CUDA GPU visible to PyTorch: the profiler times kernels on a GPU "
            "(the tests run the kernel on the CPU through Triton's interpreter instead)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    b, h, s, d = args.shape
    shape = Shape(b, h, s, args.kv_seq or s, d, args.dtype, args.layout)
    variants = args.variants or (
        ["tma", "pointer"] if torch.cuda.get_device_capability()[0] >= 9 else ["pointer"]
    )
    doc = profile(
        shape, variants=variants, budgets=args.maxnreg, backends=args.backends, tune=args.autotune,
        repeats=args.repeats, use_ncu=args.ncu, ncu_timeout_s=args.ncu_timeout, seed=args.seed,
        tune_budget_s=args.tune_budget,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    print(table(doc))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    return EXIT_OK if any(r["time_us"] is not None for r in doc["rows"]) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m cbkernels.profile``; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m cbkernels.profile", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
