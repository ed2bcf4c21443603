"""The Triton kernels of the attention forward (imported lazily: importing this imports Triton).

FlashAttention-2's loop: each program owns ``BLOCK_M`` query rows of one (batch, head), walks the keys and
values ``BLOCK_N`` rows at a time and keeps, per query row, the running maximum ``m_i`` and sum ``l_i``
of the softmax in fp32 next to the fp32 output accumulator (the online softmax). Scores are taken in
base 2: ``scale * log2(e)`` is folded into one multiplier so that ``exp2`` replaces ``exp``.

Ragged shapes: the head dim is padded to the power of two ``HEAD_DIM`` (masked loads; the ``tma``
variant's descriptors zero-fill past ``D``); the key/value loop runs unmasked over whole blocks and then
once, masked, over the tail (4,429 tokens = 69 blocks of 64 + 13); query rows past the end are not stored.

Whether Triton interprets these kernels on the CPU is decided when this module is imported
(``TRITON_INTERPRET=1`` at decoration time): import it lazily.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from cbkernels.attention.op import interpreting


def _interpreter_fixes() -> None:
    """Make Triton 3.6's CPU interpreter run these kernels as the GPU does (tests, TRITON_INTERPRET=1).

    Two bugs of the interpreter, not of the kernels: (1) it holds each scalar as a one-element array and
    converts it with ``int(array)``, which NumPy 2.4 turned into a TypeError, so a loop with a run-time
    bound fails: convert through the element instead; (2) ``tl.dot`` on bfloat16 multiplies the raw
    16-bit patterns as integers: widen them to float32 first (exact: bf16 is the top half of an fp32).
    Applied once, and only when interpreting.
    """
    import numpy as np
    from triton.runtime import interpreter

    original_patch = interpreter._patch_lang_tensor
    if getattr(original_patch, "cb_fixed", False):
        return

    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    builder = interpreter.InterpreterBuilder
    original_dot = builder.create_dot

    def widen(handle: Any) -> Any:
        if handle.dtype.scalar == tl.bfloat16:
            bits = handle.data.astype(np.uint32) << 16
            return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
        return handle

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any) -> Any:
        return original_dot(self, widen(a), widen(b), d, *args)

    patch_lang_tensor.cb_fixed = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_lang_tensor
    builder.create_dot = create_dot


if interpreting():
    _interpreter_fixes()


@triton.jit
def _online_softmax_step(
    acc, l_i, m_i, q, kt, v, qk_scale, cols, SEQ_KV, MASK_COLS: tl.constexpr, DOT_PRECISION: tl.constexpr
):
    # One key/value block: scores, the new running maximum, rescale what was summed so far, add P @ V.
    qk = tl.dot(q, kt, input_precision=DOT_PRECISION)
    if MASK_COLS:
        qk = tl.where(cols[None, :] < SEQ_KV, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
    return acc, l_i, m_new


@triton.jit
def attn_fwd_pointer(
    Q, K, V, Out, qk_scale,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    H, SEQ_Q, SEQ_KV, D,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    EVEN_D: tl.constexpr, DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Forward attention with plain masked pointer loads (any GPU Triton supports; the interpreter)."""
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh
    o_base = Out + off_b * stride_ob + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    d_ok = offs_d < D
    row_ok = offs_m < SEQ_Q
    q = tl.load(
        q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
        mask=row_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    # K is read transposed (HEAD_DIM x BLOCK_N) so that the first product is a plain q @ kt.
    kt_ptrs = k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
    v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    n_full = (SEQ_KV // BLOCK_N) * BLOCK_N
    for start_n in range(0, n_full, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        if EVEN_D:
            kt = tl.load(kt_ptrs + start_n * stride_kn)
            v = tl.load(v_ptrs + start_n * stride_vn)
        else:
            kt = tl.load(kt_ptrs + start_n * stride_kn, mask=d_ok[:, None], other=0.0)
            v = tl.load(v_ptrs + start_n * stride_vn, mask=d_ok[None, :], other=0.0)
        acc, l_i, m_i = _online_softmax_step(
            acc, l_i, m_i, q, kt, v, qk_scale, offs_n, SEQ_KV, False, DOT_PRECISION
        )
    if n_full < SEQ_KV:
        cols = n_full + offs_n
        col_ok = cols < SEQ_KV
        kt = tl.load(kt_ptrs + n_full * stride_kn, mask=col_ok[None, :] & d_ok[:, None], other=0.0)
        v = tl.load(v_ptrs + n_full * stride_vn, mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        acc, l_i, m_i = _online_softmax_step(
            acc, l_i, m_i, q, kt, v, qk_scale, cols, SEQ_KV, True, DOT_PRECISION
        )

    out = acc / l_i[:, None]
    tl.store(
        o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
        out.to(Out.dtype.element_ty),
        mask=row_ok[:, None] & d_ok[None, :],
    )


@triton.jit
def attn_fwd_tma(
    Q, K, V, Out, qk_scale,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_om,
    H, SEQ_Q, SEQ_KV, D,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr, DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Forward attention through tensor descriptors (TMA bulk copies on sm90+).

    One 2-D descriptor per (batch, head) and operand, made on the device: its shape ends at that head's
    sequence length and head dim, so the copy engine zero-fills the ragged tails on load and clips them
    on store (the last dimension must be contiguous, rows 16-byte aligned: the host checks).
    """
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    q_desc = tl.make_tensor_descriptor(
        Q + off_b * stride_qb + off_h * stride_qh, shape=[SEQ_Q, D], strides=[stride_qm, 1],
        block_shape=[BLOCK_M, HEAD_DIM],
    )  # fmt: skip
    k_desc = tl.make_tensor_descriptor(
        K + off_b * stride_kb + off_h * stride_kh, shape=[SEQ_KV, D], strides=[stride_kn, 1],
        block_shape=[BLOCK_N, HEAD_DIM],
    )  # fmt: skip
    v_desc = tl.make_tensor_descriptor(
        V + off_b * stride_vb + off_h * stride_vh, shape=[SEQ_KV, D], strides=[stride_vn, 1],
        block_shape=[BLOCK_N, HEAD_DIM],
    )  # fmt: skip
    o_desc = tl.make_tensor_descriptor(
        Out + off_b * stride_ob + off_h * stride_oh, shape=[SEQ_Q, D], strides=[stride_om, 1],
        block_shape=[BLOCK_M, HEAD_DIM],
    )  # fmt: skip

    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    q = q_desc.load([start_m * BLOCK_M, 0])
    n_full = (SEQ_KV // BLOCK_N) * BLOCK_N
    for start_n in tl.range(0, n_full, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        kt = k_desc.load([start_n, 0]).T
        v = v_desc.load([start_n, 0])
        acc, l_i, m_i = _online_softmax_step(
            acc, l_i, m_i, q, kt, v, qk_scale, offs_n, SEQ_KV, False, DOT_PRECISION
        )
    if n_full < SEQ_KV:
        kt = k_desc.load([n_full, 0]).T
        v = v_desc.load([n_full, 0])
        acc, l_i, m_i = _online_softmax_step(
            acc, l_i, m_i, q, kt, v, qk_scale, n_full + offs_n, SEQ_KV, True, DOT_PRECISION
        )
    o_desc.store([start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(Out.dtype.element_ty))
