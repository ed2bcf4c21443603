"""``consumerbench doctor``: what this machine can run, each missing piece with its fix.

Each check asks the library that would do the work (NVML for the GPU and driver, llama-cpp-python for
its GPU offload, CTranslate2 for its CUDA devices, torch for CUDA and Apple's MPS, the LLMServer
application for its llama-server binary, the monitor's own sources for NVML, GPM, DCGM and RAPL), so
the answer is the one a run would meet. Nothing here fails:
a missing piece is a line with its fix (docs/install.md's "GPU machine" section says the same).
"""

from __future__ import annotations

import platform as _platform
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass

from benchmarks import platform
from benchmarks.apps.server import HOW_TO_GET, ServerError, server_binary
from benchmarks.monitor.base import SourceUnavailable
from benchmarks.monitor.sources import SOURCES

# What to do about each missing piece; the CUDA rebuild is the Makefile's own (README "GPU machine").
FIX_DRIVER = "install the NVIDIA driver (nvidia-smi must list the GPU); without a GPU, runs use the CPU"
FIX_NVCC = (
    "install the CUDA toolkit (nvcc on PATH): `make install` then builds llama.cpp with CUDA where "
    "nvidia-smi lists a GPU (force it with make install GPU=cuda)"
)
FIX_LLAMA = "rebuild llama-cpp-python for the GPU: make install GPU=cuda (Apple silicon: GPU=metal)"
FIX_CT2 = (
    "faster-whisper on a GPU needs CTranslate2's CUDA libraries (cuBLAS 12, cuDNN 9): .venv/bin/pip "
    "install nvidia-cublas-cu12 nvidia-cudnn-cu12==9.*; or name a transformers Whisper (a hub id, a "
    "folder, NAME@random), which backend: auto runs on transformers"
)
FIX_TORCH = "install a CUDA build of torch (PyPI's torch for Linux x86-64 is one; a +cpu build is not)"


@dataclass(frozen=True)
class Check:
    """One line of the doctor: what was checked, whether it is there, what was found, how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, object]:
        """Return the check as JSON-ready fields (``--json``)."""
        return asdict(self)


def run_checks() -> list[Check]:
    """Return every check of this machine, in the order the doctor prints them."""
    return [check() for check in CHECKS]


def check_gpu() -> Check:
    """The NVIDIA GPUs NVML sees, with the driver and the CUDA version it supports."""
    found = platform.gpus()
    if not found:
        return Check("GPU", False, "no NVIDIA GPU found through NVML", FIX_DRIVER)
    names = ", ".join(f"{g['index']}: {g['name']} ({g['memory_total_bytes'] / 2**30:.0f} GiB)" for g in found)
    return Check("GPU", True, f"{names}; driver {found[0]['driver']}, CUDA {found[0]['cuda']}")


def check_cuda_toolkit() -> Check:
    """nvcc (what ``make install`` looks for to build llama.cpp with CUDA)."""
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Check("CUDA toolkit", True, f"nvcc at {nvcc}")
    return Check("CUDA toolkit", False, "nvcc is not on PATH", FIX_NVCC)


def check_llama_offload() -> Check:
    """Whether llama-cpp-python can offload layers to a GPU."""
    if platform.llama_gpu_offload():
        return Check("llama.cpp GPU offload", True, "llama-cpp-python was built with a GPU backend")
    return Check("llama.cpp GPU offload", False, "llama-cpp-python is a CPU build (or missing)", FIX_LLAMA)


def check_llama_server() -> Check:
    """llama.cpp's ``llama-server``, found as an LLMServer unit's run finds it (only those units need it)."""
    try:
        found = server_binary()
    except ServerError as exc:
        # Only workflows with an LLMServer unit need it: the demo and most workflows run without it.
        why = str(exc).replace(f": {HOW_TO_GET}", "")
        return Check("llama-server", False, f"{why} (only LLMServer units need it)", HOW_TO_GET)
    return Check("llama-server", True, f"{found} (for LLMServer units)")


def check_ctranslate2() -> Check:
    """Whether CTranslate2 (faster-whisper) sees a CUDA device."""
    count = platform.ctranslate2_cuda_devices()
    if count:
        return Check(
            "CTranslate2 CUDA", True, f"{count} CUDA device(s): captions use faster-whisper on the GPU"
        )
    return Check("CTranslate2 CUDA", False, "no CUDA device CTranslate2 can use", FIX_CT2)


def check_torch() -> Check:
    """torch's accelerator: CUDA, or Apple's MPS on Apple silicon."""
    try:
        import torch
    except ImportError:
        return Check("torch GPU", False, "torch is not installed", "make install")
    if torch.cuda.is_available():
        return Check("torch GPU", True, f"CUDA {torch.version.cuda}: {torch.cuda.get_device_name(0)}")
    if torch.backends.mps.is_available():
        return Check("torch GPU", True, "Apple MPS (device: gpu runs image and Whisper models on Metal)")
    fix = "torch on Apple silicon needs macOS 12.3+" if _platform.system() == "Darwin" else FIX_TORCH
    return Check("torch GPU", False, f"torch {torch.__version__} sees neither CUDA nor MPS", fix)


def check_accelerator() -> Check:
    """Where ``device: gpu`` runs here: ``benchmarks.platform.accelerator``'s answer, as a run gets it."""
    try:
        chosen = platform.accelerator("gpu")
    except ValueError:
        return Check("device: gpu", False, "no GPU: units with device: gpu are refused", FIX_DRIVER)
    return Check("device: gpu", True, f"runs on {chosen.label}")


def _source_check(name: str, what: str, fix: str) -> Callable[[], Check]:
    def check() -> Check:
        source = SOURCES[name]()
        try:
            source.open(1.0)
        except SourceUnavailable as exc:
            return Check(what, False, str(exc), fix)
        finally:
            source.close()
        return Check(what, True, "available to the monitor")

    check.__doc__ = f"The monitor's {name} source."
    return check


CHECKS: tuple[Callable[[], Check], ...] = (
    check_gpu,
    check_cuda_toolkit,
    check_llama_offload,
    check_llama_server,
    check_ctranslate2,
    check_torch,
    check_accelerator,
    _source_check(
        "nvml", "NVML (GPU utilisation, memory, power)", "install nvidia-ml-py and the NVIDIA driver"
    ),
    _source_check("gpm", "NVML GPM (SM activity, occupancy)", "needs a Hopper or newer GPU and driver 520+"),
    _source_check("dcgm", "DCGM (dcgmi dmon)", "optional: install DCGM (datacenter-gpu-manager) for dcgmi"),
    _source_check(
        "rapl",
        "RAPL (CPU package energy)",
        "needs /sys/class/powercap readable: sudo chmod a+r on its energy_uj",
    ),
)
