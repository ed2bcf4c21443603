"""Measure the attention kernels side by side: our variants and PyTorch's SDPA backends on one shape.

``profile`` builds the document ``consumerbench kernels profile`` prints and writes (docs/kernels.md):
``{"shape", "gpu", "rows": [{"kernel", "backend", "params", "time_us", "tflops", "regs_per_thread",
"spills", "achieved_occupancy_pct", ...}], ...}``. Rows of a backend that is unavailable carry the
reason in ``error`` instead of numbers. ``one_shot`` is what Nsight Compute runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cbkernels.attention import AttentionConfig, Trial, autotune, candidate_configs, config_from_params
from cbkernels.attention.op import default_config, launch
from cbkernels.profile import ncu as ncu_mod
from cbkernels.profile.occupancy import sm_limits, theoretical_occupancy
from cbkernels.timing import cuda_times_us, median_us

SDPA_BACKENDS = {
    "cudnn": "CUDNN_ATTENTION",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Kernels ncu may see per row: the marker and the row's own (cuDNN can add a helper or two).
NCU_KERNELS_PER_ROW = 4
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Shape:
    """The attention problem: q (batch, heads, seq_q, head_dim), k and v (batch, heads, seq_kv, head_dim).

    ``layout`` is how the tensors lie in memory: ``bhsd`` contiguous, ``bshd`` a (batch, seq, heads,
    head_dim) tensor viewed as (batch, heads, seq, head_dim), as diffusers' processors pass them.
    """

    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: str
    layout: str = "bhsd"

    def flops(self) -> float:
        """Return the multiply-adds of both products counted as 2 FLOPs: 4 * B * H * Sq * Skv * D."""
        return 4.0 * self.batch * self.heads * self.seq_q * self.seq_kv * self.head_dim

    def as_dict(self) -> dict[str, Any]:
        """Return the shape as the document's ``shape`` object."""
        return dict(self.__dict__)


def row_spec(backend: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return a row's recipe: ``cbkernels`` with the config's params, or ``sdpa-<name>``."""
    return {"backend": backend, "params": dict(params or {})}


def make_inputs(shape: Shape, seed: int = 0) -> tuple[Any, Any, Any]:
    """Return q, k, v on the GPU, drawn on the CPU (so that making them launches no GPU kernel)."""
    import torch

    dtype = getattr(torch, DTYPES[shape.dtype])
    gen = torch.Generator().manual_seed(seed)
    b, h, d = shape.batch, shape.heads, shape.head_dim
    if shape.layout == "bshd":
        return tuple(  # type: ignore[return-value]
            torch.randn(b, s, h, d, generator=gen).to(dtype).to("cuda").transpose(1, 2)
            for s in (shape.seq_q, shape.seq_kv, shape.seq_kv)
        )
    return tuple(  # type: ignore[return-value]
        torch.randn(b, h, s, d, generator=gen).to(dtype).to("cuda")
        for s in (shape.seq_q, shape.seq_kv, shape.seq_kv)
    )


@contextlib.contextmanager
def backend_context(spec: dict[str, Any]) -> Iterator[None]:
    """Enter PyTorch's SDPA backend selection for an ``sdpa-*`` row (nothing for ours)."""
    if spec["backend"].startswith("sdpa-"):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[spec["backend"][5:]])):
            yield
    else:
        yield


def row_op(spec: dict[str, Any], q: Any, k: Any, v: Any) -> Callable[[], Any]:
    """Return a call that computes the row's attention once (run it inside ``backend_context``)."""
    if spec["backend"] == "cbkernels":
        config = config_from_params(spec["params"])
        return lambda: launch(q, k, v, config=config)[0]
    import torch.nn.functional as F

    return lambda: F.scaled_dot_product_attention(q, k, v)


def base_configs(
    shape: Shape, variants: Sequence[str], budgets: Sequence[int | None], tune: bool, q: Any, k: Any, v: Any,
    repeats: int, budget_s: float | None = None,
) -> tuple[list[AttentionConfig], list[dict[str, Any]]]:  # fmt: skip
    """Return the configs to measure: for each variant and register budget, the fastest autotuned
    candidate under that budget (else the variant's fastest with the budget imposed, else the default
    with it), and the autotune trials."""
    import torch

    default = default_config(shape.head_dim, q.dtype, q.device)
    trials: list[Trial] = []
    if tune:
        major, minor = torch.cuda.get_device_capability(q.device)
        candidates = [c for c in candidate_configs(shape.head_dim, (major, minor)) if c.variant in variants]
        with contextlib.suppress(RuntimeError):  # no candidate worked: the default rows will say why
            _, trials = autotune(q, k, v, configs=candidates, repeats=max(5, repeats // 2), budget_s=budget_s)
    timed = [t for t in trials if t.time_us is not None]

    def fastest(pool: list[Trial]) -> AttentionConfig | None:
        return min(pool, key=lambda t: t.time_us or 0.0).config if pool else None

    configs = []
    for variant in variants:
        ours = [t for t in timed if t.config.variant == variant]
        base = fastest([t for t in ours if t.config.maxnreg is None]) or _with(default, variant=variant)
        for budget in budgets:
            config = fastest([t for t in ours if t.config.maxnreg == budget]) or _with(base, maxnreg=budget)
            if config not in configs:
                configs.append(config)
    records = [{"params": t.config.params(), "time_us": t.time_us, "error": t.error} for t in trials]
    return configs, records


def _with(config: AttentionConfig, **changes: Any) -> AttentionConfig:
    params = config.params() | changes
    if params["variant"] != "tma":
        params["warp_specialize"] = False
    return AttentionConfig(**params)


def measure_row(
    spec: dict[str, Any], shape: Shape, q: Any, k: Any, v: Any, ref: Any, repeats: int
) -> dict[str, Any]:
    """Return one row: time (CUDA events, warm, median of ``repeats``), TFLOP/s and the compiled resources."""
    row: dict[str, Any] = {
        "kernel": config_from_params(spec["params"]).label
        if spec["backend"] == "cbkernels"
        else spec["backend"][5:],
        "backend": spec["backend"],
        "params": spec["params"],
        "time_us": None,
        "tflops": None,
        "regs_per_thread": None,
        "spills": None,
        "achieved_occupancy_pct": None,
    }
    try:
        with backend_context(spec):
            op = row_op(spec, q, k, v)
            out = op()
            row["max_abs_error"] = float((out.float() - ref).abs().max().item())
            times = cuda_times_us(op, repeats)
    except Exception as exc:  # an unavailable backend or a config that does not compile: a row that says so
        row["error"] = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
        )
        return row
    row["time_us"] = round(median_us(times), 2)
    row["tflops"] = round(shape.flops() / (row["time_us"] * 1e-6) / 1e12, 1)
    if spec["backend"] == "cbkernels":
        _, info = launch(q, k, v, config=config_from_params(spec["params"]))
        row["regs_per_thread"], row["spills"] = info.n_regs, info.n_spills
        row["shared_bytes"], row["threads_per_block"] = info.shared_bytes, info.threads
        _occupancy(row, q.device, info.n_regs, info.threads, info.shared_bytes)
    return row


def _occupancy(row: dict[str, Any], device: Any, regs: Any, threads: Any, shared: Any) -> None:
    if regs is None or threads is None:
        return
    occ = theoretical_occupancy(int(regs), int(threads), int(shared or 0), sm_limits(device))
    row["blocks_per_sm"] = occ.blocks_per_sm
    row["theoretical_occupancy_pct"] = round(occ.occupancy_pct, 2)
    row["occupancy_limiter"] = occ.limiter


def profile(
    shape: Shape, *, variants: Sequence[str], budgets: Sequence[int | None], backends: Sequence[str],
    tune: bool, repeats: int, use_ncu: bool | None, ncu_timeout_s: float = 240.0, seed: int = 0,
    tune_budget_s: float | None = None, log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:  # fmt: skip
    """Measure every row on this GPU; return the document (see the module's docstring).

    ``use_ncu``: True requires Nsight Compute (its absence is recorded, not fatal), None uses it when
    found, False skips it. Raises RuntimeError when there is no CUDA GPU.
    """
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU visible to PyTorch")
    q, k, v = make_inputs(shape, seed)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    log("autotuning..." if tune else "using the default configs")
    configs, trials = base_configs(shape, variants, budgets, tune, q, k, v, repeats, tune_budget_s)
    specs = [row_spec("cbkernels", c.params()) for c in configs] + [row_spec(f"sdpa-{n}") for n in backends]
    rows = []
    for spec in specs:
        rows.append(measure_row(spec, shape, q, k, v, ref, repeats))
        log(f"  {rows[-1]['kernel']}: {rows[-1]['time_us']} us {rows[-1].get('error', '')}")
    del ref
    ncu_info = _add_ncu(rows, specs, shape, use_ncu, ncu_timeout_s, seed, q.device, log)
    cudnn = next((r["time_us"] for r in rows if r["backend"] == "sdpa-cudnn" and r["time_us"]), None)
    for row in rows:
        row["vs_cudnn"] = round(row["time_us"] / cudnn, 3) if cudnn and row["time_us"] else None
    import triton

    capability = torch.cuda.get_device_capability()
    return {
        "shape": shape.as_dict(),
        "gpu": torch.cuda.get_device_name(),
        "capability": f"{capability[0]}.{capability[1]}",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "repeats": repeats,
        "ncu": ncu_info,
        "rows": rows,
        "autotune": trials,
    }


def _add_ncu(
    rows: list[dict[str, Any]], specs: list[dict[str, Any]], shape: Shape, use_ncu: bool | None,
    timeout_s: float, seed: int, device: Any, log: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    if use_ncu is False:
        return {"used": False, "reason": "--no-ncu"}
    path = ncu_mod.find_ncu()
    if path is None:
        return {"used": False, "reason": "ncu (Nsight Compute) not found"}
    # The math backend launches a dozen kernels and takes ~100x longer under replay: not worth the minutes.
    profiled = [i for i, s in enumerate(specs) if s["backend"] != "sdpa-math" and "error" not in rows[i]]
    log(f"Nsight Compute over {len(profiled)} rows ({path})...")
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "rows.json"
        spec_file.write_text(
            json.dumps({"shape": shape.as_dict(), "seed": seed, "rows": [specs[i] for i in profiled]})
        )
        target = [sys.executable, "-m", "cbkernels.profile", "--one-shot", str(spec_file)]
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        )
        try:
            text = ncu_mod.run_ncu(target, NCU_KERNELS_PER_ROW * len(profiled), timeout_s, ROOT, env)
            kernels = ncu_mod.parse_csv(text)
        except ncu_mod.NcuError as exc:
            return {"used": False, "path": path, "reason": str(exc)}
    for i, kernel in zip(profiled, ncu_mod.split_by_marker(kernels, len(profiled)), strict=True):
        if kernel is None:
            rows[i]["ncu_error"] = "no kernel of this row in ncu's output"
            continue
        rows[i].update(ncu_mod.ncu_extras(kernel))
        rows[i]["achieved_occupancy_pct"] = kernel.values.get("achieved_occupancy_pct")
        if rows[i]["regs_per_thread"] is None and kernel.values.get("regs_per_thread") is not None:
            rows[i]["regs_per_thread"] = int(kernel.values["regs_per_thread"] or 0)
            threads = kernel.values.get("threads_per_block")
            shared = (kernel.values.get("shared_static_bytes") or 0) + (
                kernel.values.get("shared_dynamic_bytes") or 0
            )
            rows[i]["threads_per_block"], rows[i]["shared_bytes"] = threads, shared
            _occupancy(rows[i], device, rows[i]["regs_per_thread"], threads, shared)
    return {"used": True, "path": path, "kernels_profiled": len(kernels)}


def one_shot(spec_file: Path) -> int:
    """Launch each row of ``spec_file`` once, a marker kernel before each, and nothing else on the GPU."""
    import torch

    from cbkernels.profile.marker import cb_profile_marker

    doc = json.loads(spec_file.read_text())
    shape = Shape(**doc["shape"])
    q, k, v = make_inputs(shape, doc["seed"])
    flag = torch.zeros(1, dtype=torch.int32).to("cuda")
    for spec in doc["rows"]:
        cb_profile_marker[(1,)](flag)
        try:
            with backend_context(spec):
                row_op(spec, q, k, v)()
        except Exception as exc:  # the row is then missing from ncu's list, and the report says so
            print(f"one-shot {spec}: {exc}", file=sys.stderr)
        torch.cuda.synchronize()
    return 0
