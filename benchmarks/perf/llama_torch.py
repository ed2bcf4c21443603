"""Which step of a kernel-traced llama.cpp process kills it (docs/monitor.md, "Kernel traces").

Usage: python -m benchmarks.perf.llama_torch [--model llama-3.2-3b@random] [--timeout-s 90] [VARIANT ...]

A traced node imports torch and asks torch.cuda.is_available() before its application loads; a traced
llama.cpp chat was killed by SIGSEGV while loading (session 35, H100). Each variant below is one order of
those steps in a process of its own, which loads the model on the GPU (every layer offloaded) and
generates 16 tokens. Prints, per variant, how its process ended (exit code, signal, or timed out) and the
CUDA and C++ runtime libraries it had mapped (before any profiler starts), with the last lines of its
standard error when it failed. Without a GPU the CUDA steps fail and the rest runs on the CPU: the
mechanics only. On the GPU machine, after studies/h200/device.sh's set-up (STUDY_PREPARE_ONLY=1):
  PYTHONPATH=$PWD CB_CACHE_DIR=$PWD/results/h200-study/cache python3 -m benchmarks.perf.llama_torch
"""

from __future__ import annotations

import argparse
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
    """Return the CUDA (and C++ runtime) libraries this process has mapped, by path."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line}
    return sorted(p for p in paths if LIBS.search(os.path.basename(p)))


def gguf(model: str) -> str:
    """Return the GGUF file of ``model`` (a random twin is written on first use); imports no torch."""
    from benchmarks.apps.textgen import local_file
    from benchmarks.models import resolve

    return str(local_file(resolve(model, ("gguf",), "Chatbot")))


def load_and_generate(path: str) -> Any:
    """Load the model with every layer offloaded, generate 16 tokens, return the ``Llama``."""
    import llama_cpp

    began = time.monotonic()
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_gpu_layers=-1, seed=7, verbose=False)
    print(f"  loaded in {time.monotonic() - began:.1f} s", flush=True)
    out: Any = llm.create_completion("The quick brown fox", max_tokens=16)
    print(f"  generated {out['usage']['completion_tokens']} tokens", flush=True)
    return llm


def variant(name: str, model: str) -> None:
    """Run one variant in this process."""
    path = gguf(model)
    if name in ("llama", "llama-then-torch"):
        load_and_generate(path)
        if name == "llama-then-torch":
            import torch

            print(f"  torch {torch.__version__} imported after llama.cpp", flush=True)
        print("  libraries: " + " ".join(mapped()), flush=True)
        return
    import torch

    if name == "torch-available":
        print(f"  torch.cuda.is_available() = {torch.cuda.is_available()}", flush=True)
    elif name == "torch-context":
        print(f"  {torch.zeros(1, device='cuda').device}", flush=True)
    elif name == "nvml-check":
        from benchmarks.platform import gpus

        print(f"  NVML: {len(gpus())} GPU(s)", flush=True)
    llm = load_and_generate(path)
    print("  libraries: " + " ".join(mapped()), flush=True)
    if name == "nvml-check":
        from torch.profiler import ProfilerActivity, profile

        # As a traced node: the profiler starts once the application has loaded.
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            llm.create_completion("The quick brown fox", max_tokens=16)
        print(f"  profiler: {len(prof.events())} events", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help=f"of {', '.join(VARIANTS)} (default: every one)")
    parser.add_argument("--model", default="llama-3.2-3b@random", help="a Chatbot model with a GGUF file")
    parser.add_argument("--timeout-s", type=float, default=90.0, help="per variant")
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # the child process's
    args = parser.parse_args(argv)
    if unknown := [v for v in [*args.variants, args.variant] if v is not None and v not in VARIANTS]:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    if not 0 < args.timeout_s <= 600:
        parser.error(
            f"--timeout-s {args.timeout_s:g}: give seconds in (0, 600] (a device command may run 600 s)"
        )
    if args.variant:
        variant(args.variant, args.model)
        return 0
    print(f"GGUF: {gguf(args.model)}", flush=True)
    for name in args.variants or list(VARIANTS):
        began = time.monotonic()
        command = [sys.executable, "-X", "faulthandler", "-m", __spec__.name if __spec__ else __name__]
        try:
            proc = subprocess.run(
                [*command, "--variant", name, "--model", args.model],
                capture_output=True,
                text=True,
                timeout=args.timeout_s,
            )
            code: int | None = proc.returncode
            stdout, stderr = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code = None
            stdout, stderr = (_text(exc.stdout), _text(exc.stderr))
        ended = "timed out" if code is None else f"killed by signal {-code}" if code < 0 else f"exit {code}"
        print(f"## {name}: {VARIANTS[name]}: {ended} after {time.monotonic() - began:.1f} s")
        print(stdout.rstrip())
        if code != 0:
            print("  stderr (last 25 lines):")
            print("\n".join("    " + line for line in stderr.splitlines()[-25:]))
        sys.stdout.flush()
    return 0


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


if __name__ == "__main__":
    sys.exit(main())
