"""The MXFP8 quantiser's kernel: what loading runs on each weight as it reaches the device (kernels/mx.py has the
rule, the PyTorch definition and the MXTensor; both give the same bits).

One program per (block of BLOCK_R rows, one 32-wide group of K):
    amax = max |w| over the group (columns past K read as 0)
    e    = E - 8 + (mantissa(amax) > 0x600000), E amax's unbiased exponent; -127 when amax is subnormal or zero;
           clamped to [-127, 127]: the smallest e with amax <= 448 * 2**e, from the fp32 bits alone
    data = round_to_nearest_even_e4m3(w * 2**-e),   scale = e + 127
The multiply by 2**-e is exact (a power of two, no result below fp32's normal range for finite weights), so the
only rounding is the one to E4M3, done on the bits (`_e4m3_codes`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_R = 64


@triton.jit
def _quantize_mxfp8_kernel(
    w_ptr,
    data_ptr,
    scales_ptr,
    R,
    K,
    stride_wr,
    stride_dr,
    stride_sr,
    BLOCK_R: tl.constexpr,
    GROUP: tl.constexpr,
):
    row_block = tl.program_id(0)
    group = tl.program_id(1)
    rows = row_block * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = group * GROUP + tl.arange(0, GROUP)
    row_mask = rows < R
    mask = row_mask[:, None] & (cols < K)[None, :]
    w = tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_wr + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(w), axis=1)
    bits = amax.to(tl.int32, bitcast=True)
    biased = (bits >> 23) & 0xFF
    e = biased - 135 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    e = tl.where(biased == 0, -127, e)
    e = tl.minimum(tl.maximum(e, -127), 127)
    # 2**-e from the bits: -e is in [-127, 127]; 2**-127 is the subnormal 0x00400000
    inverse = tl.where(e == 127, 0x00400000, (127 - e) << 23).to(tl.float32, bitcast=True)
    codes = _e4m3_codes(w * inverse[:, None])
    tl.store(data_ptr + rows[:, None].to(tl.int64) * stride_dr + cols[None, :], codes, mask=mask)
    tl.store(scales_ptr + rows.to(tl.int64) * stride_sr + group, (e + 127).to(tl.uint8), mask=row_mask)


@triton.jit
def _e4m3_codes(v):
    """E4M3 codes (uint8) of fp32 v with |v| <= 448, rounded to nearest even, in integer arithmetic: the same bits
    on the GPU and in Triton's interpreter (whose own fp8 conversion does not round ties to even)."""
    bits = v.to(tl.int32, bitcast=True)
    sign = ((bits >> 24) & 0x80).to(tl.uint8)
    magnitude = bits & 0x7FFFFFFF
    # normal range [2**-6, 448]: E4M3's exponent is fp32's minus 120, its 3 mantissa bits the top 3 of 23
    kept = magnitude >> 20
    rest = magnitude & 0xFFFFF
    round_up = (rest > 0x80000) | ((rest == 0x80000) & ((kept & 1) == 1))
    normal = kept - (120 << 3) + round_up.to(tl.int32)
    # below 2**-6: multiples of E4M3's subnormal step 2**-9; adding and removing 2**23 rounds v * 512 (exact) to the
    # nearest even integer in fp32's own round-to-nearest-even
    steps = (tl.abs(v) * 512.0 + 8388608.0) - 8388608.0
    subnormal = steps.to(tl.int32)
    code = tl.where(magnitude < (121 << 23), subnormal, normal)
    return sign | code.to(tl.uint8)


def quantize_rows(flat: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, group: int) -> None:
    """flat [R, K] float (on the GPU, or anywhere under TRITON_INTERPRET) -> data [R, K] (E4M3 codes as uint8) and
    scales [R, ceil(K / group)] uint8, written in place (the module docstring's rule; kernels/mx.py allocates them
    and owns the group size and the MXTensor)."""
    rows, k = flat.shape
    if rows and k:
        _quantize_mxfp8_kernel[(triton.cdiv(rows, BLOCK_R), scales.shape[1])](
            flat, data, scales, rows, k, flat.stride(0), data.stride(0), scales.stride(0), BLOCK_R=BLOCK_R, GROUP=group
        )
