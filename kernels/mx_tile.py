"""Triton helpers that dequantise MXFP8 weight tiles in registers (the layout of kernels/mx.py).

Two ways to use a tile. Dequantising it (`dequantize_tile`) feeds tl.dot. For a product on CUDA cores,
`scaled_group_sums` sums each 32-group's products first and scales the sums: the scale tile then meets a tile 32x
smaller than the weights (H200, warp decode at one token: 9.3 / 8.3 us against 13.2 / 14.9 us for gate_up / down
with every weight scaled first).

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


@triton.jit
def scaled_group_sums(products, s, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """products [ROWS, BLOCK_K] fp32 (w[r, k] * x[k]) and s [ROWS, BLOCK_K // 32] -> [ROWS] fp32 =
    sum_g 2**(s[r, g] - 127) * sum_{k in group g} products[r, k]."""
    sums = tl.sum(tl.reshape(products, [ROWS, BLOCK_K // 32, 32]), axis=2)
    return tl.sum(sums * scale_values(s), axis=1)
