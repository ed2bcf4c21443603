"""The machine a run executes on: its fingerprint (CPU, RAM, OS, GPU, driver, library versions), what
its libraries can use (CTranslate2's CUDA, llama.cpp's offload), and where ``device: gpu`` runs
(``accelerator``: CUDA, Apple's Metal or the CPU)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform as _platform
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, Literal

import psutil

LIBRARIES = (
    "consumerbench",
    "torch",
    "llama-cpp-python",
    "faster-whisper",
    "ctranslate2",
    "transformers",
    "diffusers",
    "nvidia-ml-py",
    "numpy",
    "pydantic",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def library_versions() -> dict[str, str]:
    """Return installed versions of the libraries that shape results, without importing them."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def visible_indices(count: int, uuid_of: Callable[[int], str]) -> list[int]:
    """Return the NVML indices this process may use, of ``count`` GPUs whose UUIDs ``uuid_of(index)``
    gives (asked only for an entry that is a UUID).

    ``CUDA_VISIBLE_DEVICES`` as CUDA reads it when set: a comma-separated list of indices or GPU UUIDs
    (``GPU-...``, whole or a prefix matching one GPU), in the order given; the first entry that names
    no GPU (``-1``, an unknown or repeated one, a MIG instance) ends the list, as it does for CUDA.
    Unset: every GPU.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    out: list[int] = []
    uuids: list[str] = []
    for entry in (v.strip() for v in visible.split(",")):
        if entry.isdigit():
            matches = [int(entry)] if int(entry) < count else []
        elif entry.startswith("GPU-"):
            uuids = uuids or [uuid_of(i) for i in range(count)]
            matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
        else:
            matches = []
        if len(matches) != 1 or matches[0] in out:
            break
        out.append(matches[0])
    return out


def visible_gpus(nvml: Any) -> list[tuple[int, Any, str]]:
    """Return (NVML index, handle, name) of every GPU this process may use; ``nvml`` is initialised."""

    def uuid_of(index: int) -> str:
        return nvml_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index)))

    out = []
    for i in visible_indices(nvml.nvmlDeviceGetCount(), uuid_of):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        out.append((i, handle, nvml_text(nvml.nvmlDeviceGetName(handle))))
    return out


def nvml_text(value: bytes | str) -> str:
    """Return an NVML string (bytes in older nvidia-ml-py releases, str in newer ones) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


@cache
def gpus() -> list[dict[str, Any]]:
    """Return the NVIDIA GPUs visible to this process (name, memory, driver, CUDA), or [] with none."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        driver = nvml_text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return [
            {
                "index": i,
                "name": name,
                "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                "driver": driver,
                "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}",
            }
            for i, handle, name in visible_gpus(pynvml)
        ]
    finally:
        pynvml.nvmlShutdown()


def gpu_memory_used_bytes() -> int | None:
    """Return the memory in use on the visible GPUs now (NVML, every process's), or None with no GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        used = [int(pynvml.nvmlDeviceGetMemoryInfo(h).used) for _, h, _ in visible_gpus(pynvml)]
        return sum(used) if used else None
    finally:
        pynvml.nvmlShutdown()


def nvml_memory_bandwidth_gbs() -> float | None:
    """Return the first visible GPU's peak memory bandwidth derived from NVML (bus width x peak memory
    clock x 2, in GB/s), or None where NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        found = visible_gpus(pynvml)
        if not found:
            return None
        handle = found[0][1]
        bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
        mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        return float(bits) / 8 * float(mhz) * 1e6 * 2 / 1e9
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def fingerprint() -> dict[str, Any]:
    """Return the platform record stored with every result (``id`` hashes the hardware fields)."""
    mem = psutil.virtual_memory()
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "cpu": _cpu_model(),
        "cpu_cores": psutil.cpu_count(logical=False) or psutil.cpu_count(),
        "cpu_threads": psutil.cpu_count(),
        "ram_bytes": int(mem.total),
        "os": f"{_platform.system()} {_platform.release()}",
        "python": sys.version.split()[0],
        "libraries": library_versions(),
        "gpus": gpus(),
    }
    hardware = {k: info[k] for k in ("cpu", "cpu_threads", "ram_bytes")}
    hardware["gpus"] = [{k: g[k] for k in ("name", "memory_total_bytes")} for g in info["gpus"]]
    info["id"] = hashlib.sha256(json.dumps(hardware, sort_keys=True).encode()).hexdigest()[:16]
    return info


def ctranslate2_cuda_devices() -> int:
    """Return how many CUDA devices CTranslate2 (faster-whisper's engine) can use here: 0 without
    CTranslate2, without a GPU, or when its CUDA libraries (cuBLAS 12, cuDNN 9) cannot be loaded."""
    try:
        import ctranslate2
    except ImportError:
        return 0
    try:
        return int(ctranslate2.get_cuda_device_count())
    except (RuntimeError, OSError):
        return 0


def llama_gpu_offload() -> bool:
    """Return whether the installed llama-cpp-python was built with a GPU backend (CUDA, Metal...).

    torch is imported first when it is installed: in one process, a CUDA build of llama.cpp loaded
    before torch made torch's import abort (``free(): invalid pointer``; `consumerbench doctor` on
    an H100 with torch 2.11+cu130 and llama.cpp built with CUDA 13, 2026-12-05), and the other order
    works.
    """
    with contextlib.suppress(ImportError):
        import torch  # noqa: F401
    try:
        import llama_cpp
    except ImportError:
        return False
    return bool(llama_cpp.llama_supports_gpu_offload())


# --- Where ``device: gpu`` runs: the one decision every application asks ---------------------------


@dataclass(frozen=True)
class PlatformFacts:
    """What decides where ``device: gpu`` runs on this machine: the NVIDIA GPUs NVML sees (names, in
    ``CUDA_VISIBLE_DEVICES`` order) and whether it is Apple silicon (macOS on arm64). ``here()`` reads
    them; tests inject them (Apple hardware is absent where the tests run)."""

    nvidia_gpus: tuple[str, ...] = ()
    apple_silicon: bool = False

    @classmethod
    def here(cls) -> PlatformFacts:
        """Return the facts of this machine."""
        return cls(
            nvidia_gpus=tuple(g["name"] for g in gpus()),
            apple_silicon=sys.platform == "darwin" and _platform.machine() == "arm64",
        )


@dataclass(frozen=True)
class Accelerator:
    """Where one application runs: ``kind`` cuda, mps (Apple's Metal) or cpu, and ``label``, what the
    result records, e.g. ``cuda:0 (NVIDIA H200)``, ``mps (Apple silicon)``, ``cpu``."""

    kind: Literal["cuda", "mps", "cpu"]
    label: str

    @property
    def torch_device(self) -> str:
        """Return the torch device string: ``cuda``, ``mps`` or ``cpu``."""
        return self.kind

    @property
    def gpu_layers(self) -> int:
        """Return llama.cpp's ``n_gpu_layers``: every layer on CUDA or Metal (-1), none on the CPU."""
        return 0 if self.kind == "cpu" else -1


CPU = Accelerator("cpu", "cpu")
NO_GPU = (
    "device: gpu, but this machine has no GPU the engine can use: NVML sees no NVIDIA GPU and it is not "
    "Apple silicon; use device: cpu or auto, or run it on a GPU worker"
)


def has_gpu(facts: PlatformFacts | None = None) -> bool:
    """Return whether ``device: gpu`` can run here (an NVIDIA GPU, or Apple silicon's Metal)."""
    facts = facts or PlatformFacts.here()
    return bool(facts.nvidia_gpus) or facts.apple_silicon


def accelerator(device: str, facts: PlatformFacts | None = None) -> Accelerator:
    """Return the accelerator a unit placed on ``device`` (``gpu`` or ``cpu``, as the runner resolved
    it) uses: CUDA's first visible device where NVML sees an NVIDIA GPU, else Metal (torch ``mps``,
    llama.cpp's Metal offload) on Apple silicon, and the CPU for ``cpu``. Raises ValueError (``NO_GPU``)
    for ``gpu`` on a machine with neither. Every application asks this function, so CUDA and Metal are
    decided in one place."""
    if device == "cpu":
        return CPU
    facts = facts or PlatformFacts.here()
    if facts.nvidia_gpus:
        return Accelerator("cuda", f"cuda:0 ({facts.nvidia_gpus[0]})")
    if facts.apple_silicon:
        return Accelerator("mps", "mps (Apple silicon)")
    raise ValueError(NO_GPU)
