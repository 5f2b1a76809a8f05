"""Triton helpers that dequantise MXFP8 weight tiles in registers (the layout of kernels/mx.py).

A tile holds whole 32-element scale groups along K: data [ROWS, BLOCK_K] fp8 e4m3 and scales [ROWS, BLOCK_K / 32]
E8M0 bits, with BLOCK_K a multiple of 32 and the tile starting on a group boundary. Element (r, k) is
data[r, k] * 2**(scales[r, k // 32] - 127), exact in fp32; masked-off data loads as 0, so its scale does not matter.
"""

from __future__ import annotations

import triton
import triton.language as tl

GROUP = 32  # elements per scale along K (kernels/mx.py BLOCK)


@triton.jit
def scale_values(s):
    """E8M0 bits (uint8) -> fp32 2**(s - 127), exactly: s << 23 as fp32 bits, 2**-127's subnormal for s = 0."""
    return tl.where(s == 0, 0x00400000, s.to(tl.int32) << 23).to(tl.float32, bitcast=True)


@triton.jit
def dequantize_tile(w, s, ROWS: tl.constexpr, BLOCK_K: tl.constexpr, dtype: tl.constexpr):
    """w [ROWS, BLOCK_K] fp8 and s [ROWS, BLOCK_K // 32] uint8 -> [ROWS, BLOCK_K] in `dtype` (scaled in fp32)."""
    grouped = tl.reshape(w.to(tl.float32), [ROWS, BLOCK_K // 32, 32]) * scale_values(s)[:, :, None]
    return tl.reshape(grouped, [ROWS, BLOCK_K]).to(dtype)
