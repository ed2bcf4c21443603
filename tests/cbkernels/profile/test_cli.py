"""``python -m cbkernels.profile``: its arguments, its no-GPU exit, its standalone imports, its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cbkernels.profile.cli import main
from cbkernels.profile.report import table

ROOT = Path(__file__).parents[3]


def test_without_a_gpu_the_standalone_profiler_says_so_and_exits_2() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: the no-GPU path cannot be taken here")
    out = subprocess.run(
        [sys.executable, "-m", "cbkernels.profile", "--shape", "2,24,4429,64", "--autotune"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert "error: no CUDA GPU visible to PyTorch: the profiler times kernels on a GPU" in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape", "2,24,4429"], "expected B,H,S,D (four positive integers)"),
        (["--shape", "2,0,64,64"], "expected B,H,S,D"),
        (["--maxnreg", "none,12"], "a register budget is 'none' or 24..255, not '12'"),
        (["--variants", "tma,cuda"], "choose from pointer, tma"),
        (["--backends", "cudnn,xformers"], "choose from cudnn, flash, efficient, math"),
        (["--dtype", "int8"], "invalid choice: 'int8'"),
        (["--layout", "sbhd"], "invalid choice: 'sbhd'"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_the_parser_imports_neither_torch_nor_triton_nor_the_engine() -> None:
    # The profiler's door must open on a GPU machine that lacks the engine's dependencies.
    code = (
        "import sys, argparse; from cbkernels.profile.cli import add_arguments; "
        "add_arguments(argparse.ArgumentParser()); import cbkernels.attention; "
        "print(sorted(m for m in ('torch', 'triton', 'benchmarks') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_table_shows_each_row_the_reason_of_a_failed_one_and_the_ncu_status() -> None:
    doc = {
        "shape": {"batch": 2, "heads": 24, "seq_q": 4429, "seq_kv": 4429, "head_dim": 64, "dtype": "bf16"},
        "gpu": "NVIDIA H200",
        "capability": "9.0",
        "repeats": 30,
        "ncu": {"used": False, "reason": "ncu (Nsight Compute) not found"},
        "rows": [
            {"kernel": "tma-128x64-w4-s3", "backend": "cbkernels", "time_us": 640.0, "tflops": 375.4,
             "vs_cudnn": 1.07, "regs_per_thread": 168, "spills": 0, "shared_bytes": 66560,
             "achieved_occupancy_pct": None},
            {"kernel": "cudnn", "backend": "sdpa-cudnn", "time_us": 598.0, "tflops": 401.8, "vs_cudnn": 1.0,
             "regs_per_thread": None, "spills": None, "achieved_occupancy_pct": None},
            {"kernel": "flash", "backend": "sdpa-flash", "time_us": None, "tflops": None,
             "regs_per_thread": None, "spills": None, "achieved_occupancy_pct": None,
             "error": "RuntimeError: No available kernel. Aborting execution."},
        ],
    }  # fmt: skip
    text = table(doc)
    lines = text.splitlines()
    assert lines[0].startswith("NVIDIA H200 (sm90), q (2, 24, 4429, 64) kv 4429 bf16; median of 30")
    assert lines[1].split()[:5] == ["kernel", "backend", "time", "us", "TFLOP/s"]
    tma = next(line for line in lines if line.startswith("tma-128x64-w4-s3"))
    assert tma.split()[:9] == ["tma-128x64-w4-s3", "cbkernels", "640.0", "375", "1.07", "168", "0", "65", "-"]
    assert "flash (sdpa-flash): RuntimeError: No available kernel. Aborting execution." in lines
    assert lines[-1] == "ncu: not used (ncu (Nsight Compute) not found)"
    # Tensors laid out as diffusers passes them say so in the heading.
    doc["shape"] = {**doc["shape"], "layout": "bshd"}
    assert "kv 4429 bf16, laid out (batch, seq, heads, dim); median" in table(doc).splitlines()[0]


def test_the_device_scripts_arguments_parse() -> None:
    # studies/kernels/device.sh's profile steps: an argument the parser lacks would cost a GPU session.
    import argparse

    from cbkernels.profile.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--shape",
            "2,24,4429,64",
            "--dtype",
            "bf16",
            "--autotune",
            "--tune-budget",
            "90",
            "--ncu",
            "--ncu-timeout",
            "80",
        ]
    )
    assert (args.tune_budget, args.ncu, args.ncu_timeout, args.autotune) == (90.0, True, 80.0, True)
