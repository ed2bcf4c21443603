"""Which step of a kernel-traced llama.cpp process kills it (docs/monitor.md, "Kernel traces").

A traced node imports torch and asks torch.cuda.is_available() before its application loads; a traced
llama.cpp chat was killed by SIGSEGV while loading (session 35, H100). Each variant below is one order
of those steps, in a process of its own, loading the chat's model (Llama 3.2 3B, random f16 GGUF) on the
GPU and generating a few tokens; the report says how each process ended and which CUDA libraries it had
mapped. On the GPU machine, after device.sh's setup (STUDY_PREPARE_ONLY=1):
  PYTHONPATH=$PWD CB_CACHE_DIR=$PWD/results/h200-study/cache python3 studies/h200/llama_torch_probe.py
CB_PROBE_MODEL=smollm2-135m runs it on a packaged model (on a machine without a GPU: the mechanics only).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import Any

VARIANTS = {
    "llama": "llama.cpp alone (an untraced chat)",
    "torch-import": "import torch, then llama.cpp",
    "torch-available": "import torch, torch.cuda.is_available(), then llama.cpp (what a traced node did)",
    "torch-context": "import torch, a CUDA tensor (a context of torch's), then llama.cpp",
    "nvml-check": "import torch, check the devices with NVML, then llama.cpp, then the profiler",
    "llama-then-torch": "llama.cpp, then import torch",
}
LIBS = re.compile(
    r"lib(cublas|cublasLt|cudart|cuda|cupti|nvrtc|nvJitLink|ggml-cuda|ggml-cpu|stdc\+\+|gomp)(-[0-9a-f]+)?\.so[.\d]*$"
)


def mapped() -> list[str]:
    """The CUDA (and C++ runtime) libraries this process has mapped, by path."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line}
    return sorted(p for p in paths if LIBS.search(os.path.basename(p)))


def gguf() -> str:
    from benchmarks.apps.textgen import local_file
    from benchmarks.models import resolve

    model = os.environ.get("CB_PROBE_MODEL", "llama-3.2-3b@random")
    return str(local_file(resolve(model, ("gguf",), "Chatbot")))


def load_and_generate(path: str) -> Any:
    import llama_cpp

    began = time.monotonic()
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_gpu_layers=-1, seed=7, verbose=False)
    print(f"  loaded in {time.monotonic() - began:.1f} s", flush=True)
    out = llm.create_completion("The quick brown fox", max_tokens=16)
    print(f"  generated {out['usage']['completion_tokens']} tokens", flush=True)
    return llm


def variant(name: str) -> None:
    path = gguf()
    if name == "llama-then-torch":
        load_and_generate(path)
        import torch

        print(f"  torch {torch.__version__} imported after llama.cpp", flush=True)
    elif name == "llama":
        load_and_generate(path)
    else:
        import torch

        if name == "torch-available":
            print(f"  torch.cuda.is_available() = {torch.cuda.is_available()}", flush=True)
        elif name == "torch-context":
            print(f"  {torch.zeros(1, device='cuda').device}", flush=True)
        elif name == "nvml-check":
            from benchmarks.platform import gpus

            print(f"  NVML: {len(gpus())} GPU(s)", flush=True)
        llm = load_and_generate(path)
        if name == "nvml-check":
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                llm.create_completion("The quick brown fox", max_tokens=16)
            kernels = sum(1 for e in prof.profiler.kineto_results.events() if e.device_type().name == "CUDA")
            print(f"  profiler: {kernels} GPU activities", flush=True)
    print("  libraries: " + " ".join(mapped()), flush=True)


def main() -> None:
    if len(sys.argv) > 1:
        variant(sys.argv[1])
        return
    print(f"GGUF: {gguf()}", flush=True)
    for name in VARIANTS:
        began = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", __file__, name],
            capture_output=True,
            text=True,
            timeout=300,
        )
        code = proc.returncode
        ended = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        print(f"## {name}: {VARIANTS[name]}: {ended} after {time.monotonic() - began:.1f} s")
        print(proc.stdout.rstrip())
        if code:
            print("  stderr (last 25 lines):")
            print("\n".join("    " + line for line in proc.stderr.splitlines()[-25:]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
