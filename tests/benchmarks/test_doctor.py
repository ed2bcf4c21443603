"""`consumerbench doctor` on this machine: every check answered, a fix for each missing piece, exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.doctor import CHECKS, Check, check_gpu
from benchmarks.platform import gpus

ROOT = Path(__file__).parents[2]


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", "doctor", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_doctor_answers_every_check_and_exits_0_whatever_is_missing():
    out = doctor("--json")
    assert out.returncode == 0, out.stderr
    checks = [Check(**c) for c in json.loads(out.stdout)["checks"]]
    assert [c.name for c in checks] == [
        "GPU",
        "CUDA toolkit",
        "llama.cpp GPU offload",
        "CTranslate2 CUDA",
        "torch GPU",
        "NVML (GPU utilisation, memory, power)",
        "NVML GPM (SM activity, occupancy)",
        "DCGM (dcgmi dmon)",
        "RAPL (CPU package energy)",
    ]
    assert len(checks) == len(CHECKS)
    assert all(c.fix for c in checks if not c.ok), [c for c in checks if not c.ok and not c.fix]


def test_the_text_report_prints_the_fix_under_each_missing_piece():
    out = doctor()
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("no "):
            assert lines[n + 1].strip().startswith("fix: ")


def test_the_gpu_check_agrees_with_nvml():
    check = check_gpu()
    assert check.ok == bool(gpus())
    if not check.ok:
        assert "NVIDIA driver" in check.fix
