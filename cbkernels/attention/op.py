"""``attention()``: check the inputs, pick the config, launch the Triton kernel (torch and Triton lazily)."""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cbkernels.attention.config import MAX_HEAD_DIM, AttentionConfig, config_over, default_for

if TYPE_CHECKING:
    import torch

# The copy engine needs 16-byte aligned rows and base addresses (tl.make_tensor_descriptor's contract).
TMA_ALIGN_BYTES = 16
# The smallest tile edge tl.dot takes.
MIN_DOT = 16
LOG2_E = 1.4426950408889634
# Programs are laid out (query blocks, batch x heads): CUDA's second grid dimension holds 65,535.
MAX_GRID_Y = 65535


def interpreting() -> bool:
    """Return True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on", "yes")


def padded_head_dim(head_dim: int) -> int:
    """Return the power-of-two tile width (at least 16) that holds ``head_dim`` columns."""
    return max(MIN_DOT, 1 << (head_dim - 1).bit_length())


def check_inputs(q: Any, k: Any, v: Any, scale: float | None) -> None:
    """Raise ValueError naming what is wrong with q, k, v (shape ``(batch, heads, seq, head_dim)``)."""
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have 4 dims (batch, heads, seq, head_dim), not shape {tuple(t.shape)}"
            )
    allowed = (torch.bfloat16, torch.float16, torch.float32)
    if q.dtype not in allowed:
        raise ValueError(f"q's dtype must be bfloat16, float16 or float32, not {q.dtype}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name}'s dtype {t.dtype} differs from q's {q.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, q on {q.device}")
    b, h, _, d = q.shape
    if k.shape[:2] != (b, h) or v.shape[:2] != (b, h):
        raise ValueError(
            f"batch and heads must match: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
            "(grouped-query attention is not supported)"
        )
    if k.shape[3] != d or v.shape[3] != d:
        raise ValueError(f"head_dim must be the same in q, k and v: {d}, {k.shape[3]}, {v.shape[3]}")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be 1..{MAX_HEAD_DIM}, not {d}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v must have the same sequence length: {k.shape[2]} and {v.shape[2]}")
    if k.shape[2] < 1:
        raise ValueError("k and v need at least one token (softmax over nothing is undefined)")
    if b * h > MAX_GRID_Y:
        raise ValueError(f"batch x heads must be at most {MAX_GRID_Y} (one grid row each), not {b * h}")
    if q.device.type != "cuda" and not (q.device.type == "cpu" and interpreting()):
        raise ValueError(
            f"the tensors are on {q.device}: the kernel needs a CUDA GPU "
            "(or the Triton interpreter, TRITON_INTERPRET=1, for CPU tensors)"
        )
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0, not {scale!r}")


def tma_problem(q: Any, k: Any, v: Any, out: Any) -> str | None:
    """Return why the ``tma`` variant cannot take these tensors (None: it can)."""
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        if t.stride(3) != 1:
            return f"{name}'s last dim is not contiguous (stride {t.stride(3)})"
        size = t.element_size()
        if t.data_ptr() % TMA_ALIGN_BYTES:
            return f"{name}'s data is not {TMA_ALIGN_BYTES}-byte aligned"
        for dim in (0, 1, 2):
            if t.shape[dim] > 1 and (t.stride(dim) * size) % TMA_ALIGN_BYTES:
                return f"{name}'s stride of dim {dim} is not a multiple of {TMA_ALIGN_BYTES} bytes"
    return None


def capability(device: Any) -> tuple[int, int] | None:
    """Return the CUDA compute capability of ``device`` (None for the CPU interpreter)."""
    import torch

    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return (major, minor)


def default_config(head_dim: int, dtype: torch.dtype, device: torch.device) -> AttentionConfig:
    """Return the default config for this head dim and dtype on ``device``'s GPU architecture.

    The table (``config.DEFAULTS``) holds a profile's winner where one ran (sm90, head dims up to 64)
    and guesses elsewhere (docs/kernels.md); on the CPU it returns the interpreter's small tiles.
    """
    import torch

    return default_for(head_dim, capability(torch.device(device)), fp32=dtype == torch.float32)


@dataclass(frozen=True)
class Launch:
    """What one launch compiled: registers and spills per thread, shared memory per program, threads."""

    n_regs: int | None
    n_spills: int | None
    shared_bytes: int | None
    threads: int | None
    grid: tuple[int, int, int]


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float | None = None,
    config: AttentionConfig | None = None, params: Mapping[str, object] | None = None,
) -> torch.Tensor:  # fmt: skip
    """Return softmax(q k^T * scale) v for q (B, H, Sq, D) and k, v (B, H, Skv, D): shape and dtype of q.

    ``scale`` defaults to 1/sqrt(D); ``config`` to ``default_config`` (whose ``tma`` variant falls back
    to ``pointer`` when the tensors' layout does not suit the copy engine; an explicit ``tma`` config
    raises instead). ``params`` (instead of ``config``) changes some fields of that default
    (``config_over``): ``{"maxnreg": 128}`` is this GPU's default tile under a budget of 128 registers;
    it is explicit about the variant only when it names one. Raises ValueError naming what is wrong
    with the inputs, the config or the params.
    """
    out, _ = launch(q, k, v, scale=scale, config=config, params=params)
    return out


def launch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float | None = None,
    config: AttentionConfig | None = None, params: Mapping[str, object] | None = None,
) -> tuple[torch.Tensor, Launch]:  # fmt: skip
    """Run the kernel as ``attention`` does; return the output and what the launch compiled."""
    import torch

    if config is not None and params:
        raise ValueError("give the kernel a config or params over its default, not both")
    check_inputs(q, k, v, scale)
    b, h, seq_q, d = q.shape
    seq_kv = k.shape[2]
    out = torch.empty_like(q)
    explicit = config is not None or "variant" in (params or {})
    if config is None:
        config = default_config(d, q.dtype, q.device)
        if params:
            config = config_over(config, params)
    if config.variant == "tma":
        if q.device.type == "cuda" and torch.cuda.get_device_capability(q.device)[0] < 9:
            if explicit:
                raise ValueError("variant 'tma' needs an sm90+ GPU (Hopper or newer); use 'pointer'")
            config = _as_pointer(config)
        elif (problem := tma_problem(q, k, v, out)) is not None:
            if explicit:
                raise ValueError(f"variant 'tma' cannot take these tensors: {problem}; use 'pointer'")
            config = _as_pointer(config)
    grid = (math.ceil(seq_q / config.block_m), b * h, 1)
    if out.numel() == 0:
        return out, Launch(None, None, None, None, grid)
    qk_scale = (scale if scale is not None else 1.0 / math.sqrt(d)) * LOG2_E
    options: dict[str, Any] = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    if config.maxnreg is not None:
        options["maxnreg"] = config.maxnreg
    consts = {
        "HEAD_DIM": padded_head_dim(d),
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        # fp32 operands: true fp32 products (not TF32) so that fp32 means fp32.
        "DOT_PRECISION": "ieee" if q.dtype == torch.float32 else None,
    }
    # Through sys.modules, not the package attribute: the tests re-import it under the interpreter.
    kernels = importlib.import_module("cbkernels.attention.kernels")
    if config.variant == "tma":
        _set_allocator(q.device)
        compiled = kernels.attn_fwd_tma[grid[:2]](
            q, k, v, out, qk_scale,
            q.stride(0), q.stride(1), q.stride(2),
            k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            out.stride(0), out.stride(1), out.stride(2),
            h, seq_q, seq_kv, d,
            WARP_SPECIALIZE=config.warp_specialize, **consts, **options,
        )  # fmt: skip
    else:
        compiled = kernels.attn_fwd_pointer[grid[:2]](
            q, k, v, out, qk_scale,
            *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            h, seq_q, seq_kv, d,
            EVEN_D=padded_head_dim(d) == d, **consts, **options,
        )  # fmt: skip
    return out, _launch_info(compiled, grid)


def _as_pointer(config: AttentionConfig) -> AttentionConfig:
    return AttentionConfig(
        config.block_m, config.block_n, config.num_warps, config.num_stages, config.maxnreg, "pointer"
    )


def _set_allocator(device: Any) -> None:
    # Device-side tensor descriptors live in a global scratch buffer that Triton asks an allocator for.
    import torch
    import triton

    def alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        return torch.empty(size, device=device, dtype=torch.int8)

    triton.set_allocator(alloc)


def _launch_info(compiled: Any, grid: tuple[int, int, int]) -> Launch:
    # The interpreter returns no compiled kernel; a GPU launch returns Triton's CompiledKernel.
    metadata = getattr(compiled, "metadata", None)
    if metadata is None:
        return Launch(None, None, None, None, grid)
    warps = getattr(metadata, "num_warps", None)
    return Launch(
        n_regs=getattr(compiled, "n_regs", None),
        n_spills=getattr(compiled, "n_spills", None),
        shared_bytes=getattr(metadata, "shared", None),
        threads=warps * 32 if warps is not None else None,
        grid=grid,
    )
