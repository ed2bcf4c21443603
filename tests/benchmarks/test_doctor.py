"""`consumerbench doctor` on this machine: every check answered, a fix for each missing piece, exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.doctor import CHECKS, Check, check_accelerator, check_gpu, check_llama_server
from benchmarks.platform import accelerator, gpus, has_gpu
from tests.benchmarks.test_engine_isolation import WEB_STACK, run_without

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
        "llama-server",
        "CTranslate2 CUDA",
        "torch GPU",
        "device: gpu",
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


def test_the_device_check_says_where_device_gpu_runs_as_a_run_gets_it():
    check = check_accelerator()
    assert check.ok == has_gpu()
    if check.ok:
        assert check.detail == f"runs on {accelerator('gpu').label}"
    else:
        assert "refused" in check.detail and check.fix


def test_the_gpu_check_agrees_with_nvml():
    check = check_gpu()
    assert check.ok == bool(gpus())
    if not check.ok:
        assert "NVIDIA driver" in check.fix


# What a GPU machine's image may lack: the web stack, and the optional pieces the doctor reports on
# (faster-whisper and CTranslate2, llama-cpp-python before its CUDA build, matplotlib, jiwer, DCGM's
# bindings). studies/h200/device.sh runs `python3 -m benchmarks.cli doctor` with only the image and
# the carried .device wheels.
DEVICE_LACKS = (
    *WEB_STACK,
    "environ",
    "redis",
    "kombu",
    "ctranslate2",
    "faster_whisper",
    "llama_cpp",
    "matplotlib",
    "jiwer",
    "dcgm_fields",
    "pydcgm",
)
DOCTOR = """
import contextlib, io, json, sys
from benchmarks.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["doctor", "--json"])
print(json.dumps({"code": code, "report": json.loads(out.getvalue()),
                  "loaded": sorted({m.split(".")[0] for m in sys.modules} & set(%r))}))
"""


def test_doctor_runs_where_the_web_stack_and_the_optional_pieces_are_missing():
    result = run_without(DOCTOR % (DEVICE_LACKS,), DEVICE_LACKS)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.splitlines()[-1])
    assert answer["code"] == 0 and answer["loaded"] == []
    checks = {c["name"]: c for c in answer["report"]["checks"]}
    assert len(checks) == len(CHECKS)
    assert not checks["llama.cpp GPU offload"]["ok"] and not checks["CTranslate2 CUDA"]["ok"]
    assert checks["CTranslate2 CUDA"]["fix"] and checks["llama.cpp GPU offload"]["fix"]


def test_an_engine_command_loads_no_plugged_in_command_so_never_the_web_stack():
    # Nothing blocked: the installed `worker` plug-in would import the workers package and Celery if it
    # were loaded. (Django itself may be: llama-cpp-python's diskcache imports it when installed.)
    ours = ("workers", "cbweb", "celery", "rest_framework")
    result = run_without(DOCTOR % (ours,), ())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["loaded"] == []


def test_a_missing_llama_server_is_listed_with_how_to_build_it_and_how_long_it_takes(monkeypatch):
    monkeypatch.setenv("CB_LLAMA_SERVER", "/nonexistent/llama-server")
    check = check_llama_server()
    assert not check.ok
    named = "CB_LLAMA_SERVER=/nonexistent/llama-server"
    assert check.detail == f"{named} is not an executable file (only LLMServer units need it)"
    assert "make llama-server" in check.fix and "10 min" in check.fix


def test_an_installed_llama_server_is_listed_with_its_path(monkeypatch, tmp_path):
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("CB_LLAMA_SERVER", str(binary))
    check = check_llama_server()
    assert check.ok and check.detail == f"{binary} (for LLMServer units)"
