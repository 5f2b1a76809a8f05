"""Triton helpers that dequantise MXFP8 weight tiles in registers (the layout of kernels/mx.py).

Two ways to use a tile. Dequantising it (`dequantize_tile`; `dot_operand_tile` for the tensor-core GEMMs;
`f16_operand_tile`, relative to each row's largest scale, for warp decode's tensor-core kernel 2) feeds tl.dot.
For a product on CUDA cores, `scaled_group_sums` sums each 32-group's products first and scales the sums: the
scale tile then meets a tile 32x smaller than the weights (faster than scaling every weight first: BENCHMARKS.md).

Weights read as int32 words (four e4m3 bytes each) are converted in the register they were loaded in
(`e4m3_words_to_f32`, `word_products`); Triton's cast of an fp8 tensor moves every byte into a register of its own
first (a byte permute per weight).

A tile holds whole 32-element scale groups along K: data [ROWS, BLOCK_K] fp8 e4m3 and scales [ROWS, BLOCK_K / 32]
E8M0 bits, with BLOCK_K a multiple of 32 and the tile starting on a group boundary. Element (r, k) is
data[r, k] * 2**(scales[r, k // 32] - 127), exact in fp32; masked-off data loads as 0, so its scale does not matter.
"""

from __future__ import annotations

import weakref

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER

_INTERPRETED = tl.constexpr(INTERPRETER)


@triton.jit
def _byte_to_f32(words, shift: tl.constexpr):
    return ((words >> shift) & 0xFF).to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float32)


@triton.jit
def e4m3_words_to_f32(words):
    """int32 words of four e4m3 weights (byte c = weight 4i + c) -> the four fp32 tensors of bytes 0..3, exactly.

    On the GPU each word is converted in the register it was loaded in (two e4m3x2 -> f16x2 conversions, four
    f16 -> f32); Triton's own cast of an fp8 tensor first moves every byte into a register of its own and packs the
    pairs again, a byte permute per weight."""
    if _INTERPRETED:
        return _byte_to_f32(words, 0), _byte_to_f32(words, 8), _byte_to_f32(words, 16), _byte_to_f32(words, 24)
    else:
        return tl.inline_asm_elementwise(
            asm="""{
            .reg .b16 low, high, h0, h1, h2, h3;
            .reg .b32 pair0, pair1;
            mov.b32 {low, high}, $4;
            cvt.rn.f16x2.e4m3x2 pair0, low;
            cvt.rn.f16x2.e4m3x2 pair1, high;
            mov.b32 {h0, h1}, pair0;
            mov.b32 {h2, h3}, pair1;
            cvt.f32.f16 $0, h0;
            cvt.f32.f16 $1, h1;
            cvt.f32.f16 $2, h2;
            cvt.f32.f16 $3, h3;
            }""",
            constraints="=f,=f,=f,=f,r",
            args=[words],
            dtype=(tl.float32, tl.float32, tl.float32, tl.float32),
            is_pure=True,
            pack=1,
        )


@triton.jit
def word_products(words, x0, x1, x2, x3):
    """sum_c w_c * x_c per word (a chain of FMAs), w_c the weight in byte c of each int32 word of `words` and x_c
    its partner (broadcastable to words' shape)."""
    w0, w1, w2, w3 = e4m3_words_to_f32(words)
    return w0 * x0 + w1 * x1 + w2 * x2 + w3 * x3


@triton.jit
def split_by_word_byte(x, SHAPE0: tl.constexpr, WORDS: tl.constexpr):
    """x [SHAPE0 * WORDS * 4] -> its elements 4i + c for c = 0..3, each [SHAPE0, WORDS] (the partners of
    e4m3_words_to_f32's four tensors for words [..., SHAPE0, WORDS])."""
    even, odd = tl.split(tl.reshape(x, [SHAPE0, WORDS, 2, 2]))  # elements 4i + 2p and 4i + 2p + 1
    x0, x2 = tl.split(even)
    x1, x3 = tl.split(odd)
    return x0, x1, x2, x3


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
def _per_weight(group_values, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """[ROWS, BLOCK_K // 32] values of the scale groups -> [ROWS, BLOCK_K], each repeated over its group's weights."""
    return tl.reshape(tl.broadcast_to(group_values[:, :, None], [ROWS, BLOCK_K // 32, 32]), [ROWS, BLOCK_K])


@triton.jit
def _convert_quads(asm: tl.constexpr, w, multiplier):
    """Inline PTX per four fp8 weights of w ($2, one register) and their 16-bit multipliers (two pairs: $3, $4) ->
    the four weights in the multipliers' dtype ($0, $1: two pairs)."""
    return tl.inline_asm_elementwise(
        asm=asm,
        constraints="=r,=r,r,r,r",
        args=[w.to(tl.uint8, bitcast=True), multiplier],
        dtype=multiplier.dtype,
        is_pure=True,
        pack=4,
    )


# dot_operand_tile's bit placement is exact for E8M0 scales up to 134 (2**7: block maxima up to 448 * 2**7); a weight
# with larger scales would overflow its bf16 multiplier, so the model's loader refuses such weights (mx_weights.py)
# and the launchers that place bits check the weights they are given (require_16_bit_tile_range).
MAX_BF16_TILE_SCALE = 134
_SCALES_IN_RANGE: dict[int, weakref.ref] = {}  # id -> a scales tensor found within range (checked once: a sync)


def require_16_bit_tile_range(weight, dtype: torch.dtype) -> None:
    """Raises ValueError when the MXTensor `weight` would be dequantised to 16-bit tiles (dtype bf16: the bit
    placement's multiplier overflows; fp16: weights above its 65,504) with a scale above MAX_BF16_TILE_SCALE, whose
    products would be inf. Each scales tensor is checked once (a device sync); not while a CUDA graph is captured,
    where no sync can run (the model's loader checks its weights as it loads them)."""
    scales = weight.scales
    if dtype not in (torch.bfloat16, torch.float16) or scales.numel() == 0:
        return
    known = _SCALES_IN_RANGE.get(key := id(scales))
    if (known is not None and known() is scales) or (scales.is_cuda and torch.cuda.is_current_stream_capturing()):
        return
    largest = int(scales.max())
    if largest > MAX_BF16_TILE_SCALE:
        limit = 448 * 2 ** (MAX_BF16_TILE_SCALE - 127)
        raise ValueError(
            f"an MX weight has a block scale of 2**{largest - 127} (magnitudes above {limit:,}), beyond what the "
            "tensor-core kernels dequantise to 16 bits: keep that weight in bf16, or run the model in fp32"
        )
    _SCALES_IN_RANGE[key] = weakref.ref(scales, lambda _: _SCALES_IN_RANGE.pop(key, None))


@triton.jit
def dot_operand_tile(w, s, ROWS: tl.constexpr, BLOCK_K: tl.constexpr, dtype: tl.constexpr):
    """dequantize_tile for the tensor-core GEMMs. For bf16 on the GPU, without a detour through fp32: each e4m3 byte
    is placed into a bf16 as bits (sign to bit 15, exponent and mantissa to bits 10..4: the value times 2**-120,
    exact for subnormals and zeros too), then multiplied by 2**(s - 7) as bf16 pairs. Per four weights: two byte
    permutes (sign-extending), two shifts, two masks, two bf16x2 multiplies, against fp8 -> f16x2 -> four fp32,
    four multiplies and two packs (sm_90 SASS of the gated grouped GEMM's loop: 611 instructions against 772).
    Exact while s <= MAX_BF16_TILE_SCALE."""
    if _INTERPRETED or dtype != tl.bfloat16:
        return dequantize_tile(w, s, ROWS, BLOCK_K, dtype)
    else:
        multiplier = ((s.to(tl.int32) + 120) << 7).to(tl.int16).to(tl.bfloat16, bitcast=True)  # 2**(s - 7)
        return _convert_quads(
            """{
            .reg .b32 pair0, pair1;
            prmt.b32 pair0, $2, 0, 0x9180;
            prmt.b32 pair1, $2, 0, 0xB3A2;
            mul.lo.u32 pair0, pair0, 16;
            mul.lo.u32 pair1, pair1, 16;
            and.b32 pair0, pair0, 0x87F087F0;
            and.b32 pair1, pair1, 0x87F087F0;
            mul.rn.bf16x2 $0, pair0, $3;
            mul.rn.bf16x2 $1, pair1, $4;
            }""",
            w,
            _per_weight(multiplier, ROWS, BLOCK_K),
        )


@triton.jit
def scaled_group_sums(products, s, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """products [ROWS, BLOCK_K] fp32 (w[r, k] * x[k]) and s [ROWS, BLOCK_K // 32] -> [ROWS] fp32 =
    sum_g 2**(s[r, g] - 127) * sum_{k in group g} products[r, k]."""
    sums = tl.sum(tl.reshape(products, [ROWS, BLOCK_K // 32, 32]), axis=2)
    return tl.sum(sums * scale_values(s), axis=1)


# f16_operand_tile: weights times 2**(FP16_HEADROOM - r), r the row's largest scale exponent, stay below
# 448 * 2**7 = 57,344 (fp16's largest is 65,504).
FP16_HEADROOM = tl.constexpr(7)
_FP16_UNSCALE = tl.constexpr(2.0**-7)  # 2**-FP16_HEADROOM


@triton.jit
def row_scale_exponents(s_ptrs, mask):
    """The largest E8M0 scale of each row of the [ROWS, GROUPS] scale tile at s_ptrs (masked-off: 0) -> int32 [ROWS]."""
    return tl.max(tl.load(s_ptrs, mask=mask, other=0).to(tl.int32), axis=1)


@triton.jit
def f16_tile_row_scales(row_exponents):
    """fp32 2**(r - 127 - FP16_HEADROOM) per row: what a row's sum of products with f16_operand_tile's weights is
    multiplied by (exact down to fp32's subnormals)."""
    return scale_values(row_exponents) * _FP16_UNSCALE


@triton.jit
def _pow2_f16(d):
    """int32 d <= 15 -> fp16 2**d as bits (d + 15) << 10; 0 below 2**-14."""
    return (tl.maximum(d + 15, 0) << 10).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def f16_operand_tile(w, s, row_exponents, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """w [ROWS, BLOCK_K] fp8 and s [ROWS, BLOCK_K // 32] with the rows' largest scales row_exponents [ROWS] ->
    fp16 [ROWS, BLOCK_K] = w * 2**(s - r + FP16_HEADROOM): the weight times 2**(FP16_HEADROOM + 127 - r), so the
    product with an fp16 operand times 2**(r - 127 - FP16_HEADROOM) is the weight's. On the GPU two e4m3 -> f16x2
    conversions and two f16x2 multiplies per four weights. Exact for groups whose scale is at least r - 21 (the
    multiplier an fp16 normal); groups below that are dropped (each weight of them is under 2**-21 of the row's
    largest)."""
    multiplier = _per_weight(_pow2_f16(s.to(tl.int32) - row_exponents[:, None] + FP16_HEADROOM), ROWS, BLOCK_K)
    if _INTERPRETED:
        return (w.to(tl.float32) * multiplier.to(tl.float32)).to(tl.float16)
    else:
        return _convert_quads(
            """{
            .reg .b16 low, high;
            mov.b32 {low, high}, $2;
            cvt.rn.f16x2.e4m3x2 $0, low;
            cvt.rn.f16x2.e4m3x2 $1, high;
            mul.rn.f16x2 $0, $0, $3;
            mul.rn.f16x2 $1, $1, $4;
            }""",
            w,
            multiplier,
        )
