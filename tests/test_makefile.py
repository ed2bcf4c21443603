"""The Makefile's GPU detection: the command lines `make install` would run (``make -n``), on a machine
with and without nvcc and an NVIDIA GPU on PATH (fake tools that answer as the real ones do)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _tool(folder: Path, name: str, output: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    path.chmod(0o755)


def _install_plan(tmp_path: Path, *, nvcc: bool, gpu: bool, args: tuple[str, ...] = ()) -> str:
    """Return what `make -n -B install` prints with only the given fake tools beside the system's."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    if nvcc:
        _tool(tools, "nvcc", "Cuda compilation tools, release 12.8")
    if gpu:
        _tool(tools, "nvidia-smi", "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-0)")
    # /usr/local/bin is left out: a machine may hold a real nvcc there.
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin", "CB_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("GPU", None)
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), "install", *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_nvcc_and_an_nvidia_gpu_build_llama_cpp_with_cuda_into_the_cuda_wheel_folder(tmp_path):
    plan = _install_plan(tmp_path, nvcc=True, gpu=True)
    wheels = f"{tmp_path}/cache/wheels/llama-cpp-python-"
    build = next(line for line in plan.splitlines() if "CMAKE_ARGS=" in line)
    assert "-DGGML_CUDA=on" in build and "--no-cache-dir" in plan
    assert f"--wheel-dir {wheels}" in plan and "-cuda llama-cpp-python==" in plan
    assert "--no-index --find-links " + wheels in plan and "touch .venv/.llama-cpp-cuda" in plan


def test_without_nvcc_llama_cpp_is_built_for_the_cpu(tmp_path):
    plan = _install_plan(tmp_path, nvcc=False, gpu=False)
    assert "-DGGML_CUDA" not in plan and "-cpu llama-cpp-python==" in plan
    assert "warning" not in plan and "touch .venv/.llama-cpp-cpu" in plan


def test_a_gpu_without_nvcc_gets_the_cpu_build_and_a_warning(tmp_path):
    plan = _install_plan(tmp_path, nvcc=False, gpu=True)
    assert "-DGGML_CUDA" not in plan and "an NVIDIA GPU but no nvcc" in plan


def test_nvcc_alone_without_a_gpu_builds_for_the_cpu(tmp_path):
    assert "-DGGML_CUDA" not in _install_plan(tmp_path, nvcc=True, gpu=False)


def test_gpu_overrides_the_detection_both_ways(tmp_path):
    assert "-DGGML_CUDA=on" in _install_plan(tmp_path, nvcc=False, gpu=False, args=("GPU=cuda",))
    plan = _install_plan(tmp_path, nvcc=True, gpu=True, args=("GPU=cpu",))
    assert "-DGGML_CUDA" not in plan and "-cpu llama-cpp-python==" in plan


def test_an_unknown_flavour_is_refused(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "install", "GPU=rocm"], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0 and "GPU=rocm: expected cuda, metal or cpu" in done.stderr


def test_make_check_leaves_out_every_need_the_tiers_name_and_nothing_else():
    from tests.conftest import SLOW_NEEDS

    plan = subprocess.run(
        ["make", "-n", "-o", "install", "-C", str(ROOT), "check"], capture_output=True, text=True, check=True
    ).stdout
    (line,) = [line for line in plan.splitlines() if "pytest" in line]
    markers = line.split('-m "')[1].split('"')[0]
    assert markers == " and ".join(f"not {need}" for need in SLOW_NEEDS)
    assert " -n " in line


def test_make_install_times_each_step_and_reports_the_compiles_progress(tmp_path):
    plan = _install_plan(tmp_path, nvcc=False, gpu=False)
    assert 'step "torch 2.13.0" --' in plan and 'echo "    $name: $(( $(date +%s) - start )) s"' in plan
    assert "pip wheel -v" in plan and "compiling llama.cpp: ${pct:-configuring}" in plan
