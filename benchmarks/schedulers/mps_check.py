"""Do matrix products come out right inside an MPS SM share? The check a partitioned run makes first.

On an H100 (driver 580.159, CUDA 13.0, PyTorch 2.11) cuBLAS's half-precision products leave whole output
tiles unwritten, with no error, in a process that is an MPS client at most SM shares (33 %: 42 SMs; 50 %
and 100 % are fine): the outputs keep whatever the memory held (docs/results/mps-gemm-h100.md). Every
application on such a share computes on garbage (SD 3.5's images all NaN, Whisper's captions all token
0), and its times are those of work partly not done. So before a partitioned run, a process that is a
client of the run's daemon at each share multiplies matrices of the shapes that showed it into outputs
filled with a sentinel, and compares every output with float64 products on the CPU.

  python -m benchmarks.perf.mps_shares --shares 25,33,50   # a table: share, SMs, each product

The check passes no verdict on shapes it does not try: on that H100, 66 % passed it and SD 3.5's
denoiser still went NaN there. ImageGen's own check of its images (``finite``) stays the last word.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# (dtype, m, n, k): a denoiser's adaptive-norm projection (2 rows), a 64-row product and a square one.
# On the H100 the 2-row product alone failed at 20, 30 and 33 %, the square one alone at 45, 65, 67, 75
# and 80 %, the 64-row one only where the other two failed too; bfloat16 failed where float16 did, kept
# because it runs other kernels.
CASES: tuple[tuple[str, int, int, int], ...] = (
    ("float16", 2, 9216, 1536),
    ("float16", 64, 4096, 1536),
    ("float16", 2048, 2048, 2048),
    ("bfloat16", 2, 9216, 1536),
    ("bfloat16", 64, 4096, 1536),
    ("bfloat16", 2048, 2048, 2048),
)
# What the output holds before the product: about 6 standard deviations of a correct output, so one
# still equal to it was not written.
SENTINEL = 7.0
# An output is wrong when it is further from the float64 product than this share of the largest one
# (bfloat16's own error here is ~0.4 %).
TOLERANCE = 0.05
# The child's exit code when it cannot check (no torch, no CUDA device): the run goes on, saying so.
CANNOT_CHECK = 3
TIMEOUT_S = 180.0
CHILD = (
    "import sys; from benchmarks.schedulers.mps_check import child_main; sys.exit(child_main(sys.argv[1:]))"
)


@dataclass
class ProductCheck:
    """One product's outcome: how many outputs were wrong, and how many of them never written."""

    dtype: str
    m: int
    n: int
    k: int
    wrong: int  # outputs not finite or off by more than TOLERANCE
    unwritten: int  # outputs still holding the sentinel
    max_rel_err: float  # of the finite outputs, relative to the largest float64 output


@dataclass
class ShareCheck:
    """The outcome at one share: ``passed``; ``failed`` (a product came out wrong); ``error`` (the check
    itself broke, ``reason`` says how: the share is not cleared); ``not run`` (no torch or no CUDA device in
    the check's process, ``reason``)."""

    share: int
    status: str
    sms: int | None = None
    products: list[ProductCheck] = field(default_factory=list)
    reason: str = ""

    def record(self) -> dict[str, Any]:
        """The outcome as the run's result keeps it: the wrong products only."""
        wrong = [
            f"{p.dtype} {p.m}x{p.k} @ {p.k}x{p.n}: {p.wrong} of {p.m * p.n} wrong"
            for p in self.products
            if p.wrong
        ]
        return {"status": self.status, "sms": self.sms, "wrong": wrong, "reason": self.reason}


def check_products(
    device: str = "cuda", cases: Sequence[tuple[str, int, int, int]] = CASES
) -> list[ProductCheck]:
    """Multiply each case's random matrices on ``device`` into a sentinel-filled output; return each
    product's outcome against the float64 product on the CPU."""
    import torch

    generator = torch.Generator().manual_seed(0)
    checks = []
    for dtype_name, m, n, k in cases:
        dtype = getattr(torch, dtype_name)
        a = (torch.randn(m, k, generator=generator) * 0.5).to(dtype)
        b = (torch.randn(k, n, generator=generator) * 0.05).to(dtype)
        ref = a.double() @ b.double()
        out = torch.full((m, n), SENTINEL, dtype=dtype, device=device)
        torch.mm(a.to(device), b.to(device), out=out)
        got = out.cpu().double()
        finite = torch.isfinite(got)
        err = torch.where(finite, (got - ref).abs(), torch.zeros_like(got)) / ref.abs().max()
        checks.append(
            ProductCheck(
                dtype_name,
                m,
                n,
                k,
                wrong=int((~finite).sum() + (err > TOLERANCE).sum()),
                unwritten=int((got == SENTINEL).sum()),
                max_rel_err=round(float(err.max()), 5),
            )
        )
    return checks


def check_share(
    env: Mapping[str, str],
    share: int,
    device: str = "cuda",
    cases: Sequence[tuple[str, int, int, int]] = CASES,
    timeout_s: float = TIMEOUT_S,
) -> ShareCheck:
    """Run the check in a new process with ``env`` (an MPS client's at ``share``) and return its outcome."""
    command = [sys.executable, "-c", CHILD, device, *(":".join(map(str, c)) for c in cases)]
    try:
        done = subprocess.run(
            command, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return ShareCheck(share, "error", reason=f"the check took over {timeout_s:g} s")
    last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    if done.returncode == CANNOT_CHECK:
        return ShareCheck(share, "not run", reason=last[0] if last else "the check could not run")
    try:
        said = json.loads(last[0]) if done.returncode == 0 and last else None
    except json.JSONDecodeError:
        said = None
    if said is None:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return ShareCheck(share, "error", reason=f"the check's process exited {done.returncode}: {tail}")
    products = [ProductCheck(**p) for p in said["products"]]
    status = "failed" if any(p.wrong for p in products) else "passed"
    return ShareCheck(share, status, said["sms"], products)


def refusal(check: ShareCheck, nodes: Sequence[str]) -> str:
    """The partitioned run's error for a share that failed or whose check broke: what, where, what to do."""
    if check.status == "error":
        return (
            f"partition: the check of matrix products under MPS at {check.share} % of the SMs, the share "
            f"of {', '.join(nodes)}, could not run ({check.reason}), so nothing says the share computes "
            "right; `python -m benchmarks.perf.mps_shares --shares "
            f"{check.share}` runs it alone (docs/schedulers.md, 'MPS shares that compute wrong')"
        )
    what = "; ".join(check.record()["wrong"])
    sms = f" ({check.sms} SMs)" if check.sms is not None else ""
    return (
        f"partition: under MPS at {check.share} % of the SMs{sms}, the share of {', '.join(nodes)}, matrix "
        f"products on this GPU come out wrong ({what}), so every application there would compute on garbage "
        "and its times would be of work not done. Give the nodes other shares (each unit's mps:), or use "
        "greedy or credit; `python -m benchmarks.perf.mps_shares --shares 25,33,50` tries shares here "
        "(docs/schedulers.md, 'MPS shares that compute wrong')"
    )


def child_main(argv: Sequence[str]) -> int:
    """The check's process: ``[DEVICE [DTYPE:M:N:K ...]]``; prints its outcome as JSON on one line."""
    device = argv[0] if argv else "cuda"
    cases = [(d, int(m), int(n), int(k)) for d, m, n, k in (c.split(":") for c in argv[1:])] or CASES
    try:
        import torch
    except ImportError:
        print("not run: torch is not installed in this Python")
        return CANNOT_CHECK
    if device == "cuda" and not torch.cuda.is_available():
        print("not run: torch sees no CUDA device")
        return CANNOT_CHECK
    sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else None
    products = check_products(device, cases)
    print(json.dumps({"sms": sms, "products": [asdict(p) for p in products]}))
    return 0
