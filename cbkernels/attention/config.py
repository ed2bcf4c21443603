"""The attention kernel's launch parameters: one frozen dataclass, its checks, and the default table.

Everything here is plain Python (no torch, no Triton), so a workflow or a CLI can validate parameters on a
machine without a GPU. ``AttentionConfig`` checks itself on construction; ``config_from_params`` turns a
mapping from YAML, JSON or ``NAME=VALUE`` flags into one and names the key that is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

VARIANTS = ("pointer", "tma")
BLOCK_SIZES = (16, 32, 64, 128, 256)
WARPS = (1, 2, 4, 8, 16)
MAX_STAGES = 8
# ptxas's .maxnreg: below 24 nothing useful compiles; 255 is the hardware's per-thread maximum.
MAXNREG_RANGE = (24, 255)
MAX_HEAD_DIM = 256


@dataclass(frozen=True)
class AttentionConfig:
    """One way to launch the forward kernel; every field has a default, every field is checked.

    ``block_m`` query rows and ``block_n`` key/value rows per tile; ``num_warps`` warps per program;
    ``num_stages`` software-pipelining depth of the key/value loop; ``maxnreg`` the register budget per
    thread (PTX ``.maxnreg``; None: the compiler's choice); ``variant`` ``pointer`` (masked pointer loads,
    any GPU Triton supports) or ``tma`` (tensor descriptors: Hopper's bulk tensor copies, sm90+);
    ``warp_specialize`` asks Triton to split the ``tma`` loop into producer and consumer warps.
    """

    block_m: int = 128
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3
    maxnreg: int | None = None
    variant: str = "pointer"
    warp_specialize: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            if not _is_int(value) or value not in BLOCK_SIZES:
                raise ValueError(f"{name} must be one of {list(BLOCK_SIZES)}, not {value!r}")
        if not _is_int(self.num_warps) or self.num_warps not in WARPS:
            raise ValueError(f"num_warps must be one of {list(WARPS)}, not {self.num_warps!r}")
        if not _is_int(self.num_stages) or not 1 <= self.num_stages <= MAX_STAGES:
            raise ValueError(f"num_stages must be an integer from 1 to {MAX_STAGES}, not {self.num_stages!r}")
        lo, hi = MAXNREG_RANGE
        if self.maxnreg is not None and (not _is_int(self.maxnreg) or not lo <= self.maxnreg <= hi):
            raise ValueError(f"maxnreg must be None or an integer from {lo} to {hi}, not {self.maxnreg!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {list(VARIANTS)}, not {self.variant!r}")
        if not isinstance(self.warp_specialize, bool):
            raise ValueError(f"warp_specialize must be true or false, not {self.warp_specialize!r}")
        if self.warp_specialize and self.variant != "tma":
            raise ValueError("warp_specialize needs variant 'tma' (the pointer loop has no async copies)")

    def params(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict (what ``config_from_params`` reads back)."""
        return asdict(self)

    @property
    def label(self) -> str:
        """Return a short name, e.g. ``tma-128x64-w4-s3-r128-ws`` (``r``: the register budget)."""
        label = f"{self.variant}-{self.block_m}x{self.block_n}-w{self.num_warps}-s{self.num_stages}"
        if self.maxnreg is not None:
            label += f"-r{self.maxnreg}"
        return label + ("-ws" if self.warp_specialize else "")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


PARAM_NAMES = tuple(f.name for f in fields(AttentionConfig))


def config_from_params(params: Mapping[str, object]) -> AttentionConfig:
    """Return the config that ``params`` describes (missing keys keep their defaults).

    Values may be typed (YAML, JSON) or strings (``NAME=VALUE`` flags): ``"128"``, ``"none"`` for
    ``maxnreg``, ``"true"``/``"false"`` for ``warp_specialize``. Raises ValueError that names the key.
    """
    unknown = sorted(set(params) - set(PARAM_NAMES))
    if unknown:
        raise ValueError(f"unknown attention parameter {unknown[0]!r} (known: {', '.join(PARAM_NAMES)})")
    values: dict[str, Any] = {}
    for key, raw in params.items():
        try:
            values[key] = _coerce(key, raw)
        except ValueError as exc:
            raise ValueError(f"attention parameter {key!r}: {exc}") from None
    try:
        return AttentionConfig(**values)
    except ValueError as exc:
        raise ValueError(f"attention parameter {_named_key(str(exc))!r}: {exc}") from None


def config_over(base: AttentionConfig, params: Mapping[str, object]) -> AttentionConfig:
    """Return ``base`` with the keys ``params`` sets replaced, checked as ``config_from_params`` checks
    them: ``{maxnreg: 128}`` over a GPU's default is that default under a register budget of 128."""
    return config_from_params({**base.params(), **params})


def _coerce(key: str, raw: object) -> object:
    if key == "variant":
        return raw
    if key == "warp_specialize":
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return raw.strip().lower() in ("true", "1", "yes")
        return raw
    if key == "maxnreg" and (
        raw is None or (isinstance(raw, str) and raw.strip().lower() in ("none", "null"))
    ):
        return None
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            raise ValueError(f"expected an integer, not {raw!r}") from None
    return raw


def _named_key(message: str) -> str:
    # AttentionConfig's messages start with the field they are about (see __post_init__).
    first = message.split(" ", 1)[0]
    return first if first in PARAM_NAMES else "variant"


# --------------------------------------------------------------------------------------------------
# Defaults per GPU architecture
# --------------------------------------------------------------------------------------------------

# (architecture, head-dim bucket) -> config. Head-dim buckets: the padded HEAD_DIM (16..256) rounded up
# to 64, 128 or 256. sm90 at 64: the autotuned winner of `consumerbench kernels profile --autotune` on an
# H100 (sm90) at 2,24,4429,64 bf16, 2026-12-05: 558 us against cuDNN's 587, 128 registers, no spills
# (docs/results/kernels-h100.json), and the H200's too (566 us against cuDNN's 584, 128 registers, no
# spills: docs/results/kernels-h200.json). The other rows are GUESSES until a profile replaces them
# (docs/kernels.md): sm90 from the Triton tutorial's Hopper settings, sm80 from FlashAttention-2's tiles.
DEFAULTS: dict[tuple[str, int], AttentionConfig] = {
    ("sm90", 64): AttentionConfig(64, 64, 4, 3, None, "pointer"),
    ("sm90", 128): AttentionConfig(128, 64, 8, 3, None, "tma"),
    ("sm90", 256): AttentionConfig(64, 32, 4, 2, None, "pointer"),
    ("sm80", 64): AttentionConfig(128, 64, 4, 3),
    ("sm80", 128): AttentionConfig(128, 32, 8, 3),
    ("sm80", 256): AttentionConfig(64, 32, 4, 2),
    # The Triton interpreter (CPU tensors): small tiles run fastest there; stages and warps are ignored.
    ("cpu", 64): AttentionConfig(32, 32, 4, 1),
    ("cpu", 128): AttentionConfig(32, 32, 4, 1),
    ("cpu", 256): AttentionConfig(16, 16, 4, 1),
}


def arch_key(capability: tuple[int, int] | None) -> str:
    """Return the table's architecture key for a CUDA compute capability (None: the interpreter).

    Hopper and newer use the sm90 row, Ampere and Ada (and older, untested) the sm80 row.
    """
    if capability is None:
        return "cpu"
    return "sm90" if capability[0] >= 9 else "sm80"


def head_dim_bucket(head_dim: int) -> int:
    """Return the table's head-dim bucket (64, 128 or 256) for a head dim of 1..256."""
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be 1..{MAX_HEAD_DIM}, not {head_dim}")
    return 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256


def default_for(head_dim: int, capability: tuple[int, int] | None, fp32: bool = False) -> AttentionConfig:
    """Return the table's config for a head dim on a GPU of ``capability`` (None: the interpreter).

    fp32 operands take twice the shared memory and registers of 16-bit ones: their tiles are halved.
    """
    config = DEFAULTS[(arch_key(capability), head_dim_bucket(head_dim))]
    if fp32 and capability is not None:
        config = AttentionConfig(64, 32, 4, 2)
    return config
