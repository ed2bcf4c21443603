"""The attention forward against a float64 reference, in Triton's CPU interpreter (small shapes).

Tolerance: the largest absolute error may be 4 units of roundoff of the input dtype, times the largest
|output| (at least 1): bf16 4 * 2^-8 = 1.6e-2, fp16 4 * 2^-11 = 2.0e-3, fp32 1e-5 (the kernel rounds
the softmax weights P to the input dtype before P @ V, as FlashAttention does, and the output once).
Both variants run here: the interpreter emulates tensor descriptors; warp specialisation is a compiler
pass, a no-op in the interpreter, so only the GPU profile (docs/kernels.md) tells whether it compiles.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import sys
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("triton") is None:
    pytest.skip("Triton is not installed (pip install -e '.[dev]' on Linux x86-64)", allow_module_level=True)

from cbkernels.attention import AttentionConfig, attention, default_config  # noqa: E402

KERNELS = "cbkernels.attention.kernels"
TOLERANCE = {torch.bfloat16: 4 * 2**-8, torch.float16: 4 * 2**-11, torch.float32: 1e-5}
SMALL = AttentionConfig(block_m=16, block_n=32, num_warps=4, num_stages=1)


def forget_triton() -> None:
    """Drop Triton's Python modules and our kernels from sys.modules (its compiled core stays loaded)."""
    for name in [n for n in sys.modules if n == KERNELS or (n.split(".")[0] == "triton" and "._C" not in n)]:
        del sys.modules[name]


@pytest.fixture(scope="module", autouse=True)
def interpreter() -> Iterator[None]:
    """Run this module's kernels in Triton's CPU interpreter, and leave no trace for other tests.

    ``@triton.jit`` reads TRITON_INTERPRET when it decorates, and Triton's own library (``tl.zeros``,
    ``tl.maximum``...) is decorated when Triton is imported: so set the variable, then import Triton
    and the kernels afresh; afterwards restore the variable and forget the interpreted modules, so the
    next importer of Triton gets the compiler again.
    """
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    forget_triton()
    importlib.import_module(KERNELS)
    try:
        yield
    finally:
        forget_triton()
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    scores = (q.double() @ k.double().transpose(-1, -2)) * scale
    return torch.softmax(scores, dim=-1) @ v.double()


def assert_close(out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: float) -> None:
    expected = reference(q, k, v, **kw)
    assert out.shape == q.shape and out.dtype == q.dtype
    error = (out.double() - expected).abs().max().item()
    bound = TOLERANCE[q.dtype] * max(1.0, expected.abs().max().item())
    assert error <= bound, f"max abs error {error:.3g} > {bound:.3g}"


def qkv(b: int, h: int, sq: int, skv: int, d: int, dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    shapes = [(b, h, sq, d), (b, h, skv, d), (b, h, skv, d)]
    return [torch.randn(s, generator=gen).to(dtype) for s in shapes]


@pytest.mark.parametrize("variant", ["pointer", "tma"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("head_dim", [40, 64, 128])
def test_cross_attention_with_ragged_tails_matches_the_float64_reference(
    head_dim: int, dtype: torch.dtype, variant: str
) -> None:
    # 37 queries over 77 keys (SD 1.5's text tokens): neither is a multiple of the 16 x 32 tiles, and the
    # head dim 40 is padded to 64 with masked loads.
    q, k, v = qkv(2, 3, 37, 77, head_dim, dtype)
    config = AttentionConfig(16, 32, 4, 1, None, variant)
    assert_close(attention(q, k, v, config=config), q, k, v)


@pytest.mark.parametrize("variant", ["pointer", "tma"])
@pytest.mark.parametrize(("sq", "skv"), [(45, 45), (1, 5), (64, 96), (33, 1)])
def test_sequence_lengths_below_at_and_past_the_block_are_exact(sq: int, skv: int, variant: str) -> None:
    q, k, v = qkv(1, 2, sq, skv, 64, torch.float16, seed=sq * 100 + skv)
    assert_close(attention(q, k, v, config=AttentionConfig(32, 32, 4, 1, None, variant)), q, k, v)


@pytest.mark.parametrize("variant", ["pointer", "tma"])
def test_a_transposed_layout_as_diffusers_passes_it_is_read_through_its_strides(variant: str) -> None:
    # diffusers builds (batch, seq, heads, dim) and hands attention its (batch, heads, seq, dim) view.
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv(2, 4, 29, 29, 64, torch.float16))
    assert not q.is_contiguous()
    assert_close(attention(q, k, v, config=AttentionConfig(16, 16, 4, 1, None, variant)), q, k, v)


def test_large_scores_stay_finite_and_a_custom_scale_is_used() -> None:
    # Scores in the hundreds: exp without the running maximum would overflow fp32.
    q, k, v = qkv(1, 2, 20, 50, 64, torch.float32)
    out = attention(q * 30, k * 30, v, scale=0.5, config=SMALL)
    assert torch.isfinite(out).all()
    assert_close(out, q * 30, k * 30, v, scale=0.5)


def test_the_default_config_runs_on_the_interpreter() -> None:
    q, k, v = qkv(1, 2, 40, 40, 64, torch.bfloat16)
    config = default_config(64, torch.bfloat16, torch.device("cpu"))
    assert config.variant == "pointer" and config.block_m <= 32
    assert_close(attention(q, k, v), q, k, v)


def test_the_tma_variant_refuses_rows_the_copy_engine_cannot_address_and_the_default_falls_back() -> None:
    # 36 fp16 values are 72 bytes a row: not a multiple of the 16 bytes tensor descriptors need.
    q, k, v = qkv(1, 1, 20, 20, 36, torch.float16)
    with pytest.raises(ValueError, match="variant 'tma' cannot take these tensors: q's stride of dim 2"):
        attention(q, k, v, config=AttentionConfig(16, 16, 4, 1, None, "tma"))
    assert_close(attention(q, k, v), q, k, v)


def test_params_change_the_default_config_and_a_variant_among_them_is_explicit() -> None:
    q, k, v = qkv(1, 2, 40, 40, 64, torch.bfloat16)
    assert_close(attention(q, k, v, params={"block_n": 16, "maxnreg": 128}), q, k, v)
    with pytest.raises(ValueError, match="a config or params over its default, not both"):
        attention(q, k, v, config=SMALL, params={"maxnreg": 128})
    q, k, v = qkv(1, 1, 20, 20, 36, torch.float16)
    with pytest.raises(ValueError, match="variant 'tma' cannot take these tensors"):
        attention(q, k, v, params={"variant": "tma"})


def test_empty_queries_give_an_empty_output() -> None:
    q, k, v = qkv(1, 2, 0, 7, 64, torch.float16)
    assert attention(q, k, v, config=SMALL).shape == (1, 2, 0, 64)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda q, k, v: (q[0], k, v),
            r"q must have 4 dims \(batch, heads, seq, head_dim\), not shape \(2, 5, 8\)",
        ),
        (lambda q, k, v: (q.int(), k, v), "q's dtype must be bfloat16, float16 or float32, not torch.int32"),
        (lambda q, k, v: (q, k.half(), v), "k's dtype torch.float16 differs from q's torch.float32"),
        (lambda q, k, v: (q, k[:, :1], v[:, :1]), "batch and heads must match"),
        (lambda q, k, v: (q, k[..., :4], v), "head_dim must be the same in q, k and v: 8, 4, 8"),
        (lambda q, k, v: (q, k, v[:, :, :3]), "k and v must have the same sequence length: 6 and 3"),
        (lambda q, k, v: (q, k[:, :, :0], v[:, :, :0]), "k and v need at least one token"),
        (lambda q, k, v: (q, k, [1.0]), "v must be a torch.Tensor, not list"),
    ],
)
def test_unsupported_inputs_raise_a_value_error_that_names_the_problem(make: object, message: str) -> None:
    q, k, v = qkv(1, 2, 5, 6, 8, torch.float32)
    with pytest.raises(ValueError, match=message):
        attention(*make(q, k, v), config=SMALL)  # type: ignore[operator]


def test_a_head_dim_over_256_and_a_bad_scale_are_refused() -> None:
    q, k, v = qkv(1, 1, 2, 2, 260, torch.float16)
    with pytest.raises(ValueError, match=r"head_dim must be 1\.\.256, not 260"):
        attention(q, k, v)
    q, k, v = qkv(1, 1, 2, 2, 16, torch.float16)
    with pytest.raises(ValueError, match=r"scale must be a finite number > 0, not -1\.0"):
        attention(q, k, v, scale=-1.0)


def test_more_batch_x_heads_than_one_grid_dimension_holds_is_refused() -> None:
    q = torch.zeros(1, 65536, 1, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="batch x heads must be at most 65535"):
        attention(q, q, q)


def test_cpu_tensors_without_the_interpreter_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    q, k, v = qkv(1, 1, 4, 4, 16, torch.float16)
    with pytest.raises(ValueError, match="the tensors are on cpu: the kernel needs a CUDA GPU"):
        attention(q, k, v)
