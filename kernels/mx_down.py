"""Warp decode's kernel 2 (down) on tensor cores, for MXFP8 weights at a few tokens (WarpDecodeConfig.down_on_mma).

One program per (routed slot s = t*K + k, block of BLOCK_N output rows), as kernel 1 is parallel:
    partial[k, t, rows] = topk_weights[t, k] * (W2[e] hidden[s])[rows]         e = topk_ids[t, k], fp32
and the last of token t's K programs of a row block to finish (an arrival counter, kernels/counters.py) sums the
K partials in slot order, rounds once (+ the residual, rounded again: the decoder layer's add) and stores the rows.

The product is a tl.dot of fp16 operands with fp32 accumulation: A is the slot's fp16 intermediate row (kernel 1's
output, exact) in row 0 of a 16-row tile (the others zero), B the weight tile converted by mx_tile.f16_operand_tile
relative to each row's largest scale r (e4m3 pairs -> f16x2 in one conversion, one f16x2 multiply by the groups'
powers of two): the row's sum times 2**(r - 134) is the exact product, except for groups 2**21 and more below their
row's largest, which are dropped. Against kernel 2 on CUDA cores (each weight converted to fp32, an FMA and the
group sums, 7.5 SASS instructions a weight) the loop costs 3.4 (sm_90, 64 x 128 tiles on two warps). The tuned
entries for 4 and 8 tokens cap its registers (WarpDecodeConfig.down_max_registers): 128 a thread fit 8 such
programs on an SM instead of 6, for 8 bytes of spill. The entry for 2 tokens loads its first weight tile before the
PDL wait (WarpDecodeConfig.down_first_tile_early), in flight while kernel 1 drains, as kernel 2 on CUDA cores
always does (at 4 and 8 tokens, capped, it was slower in the model; the layer timed alone cannot tell).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.counters import arrival_counters, arrive
from warpcode.kernels.launch import INTERPRETER, as_int64, pdl_options, register_cap
from warpcode.kernels.mx import MXTensor
from warpcode.kernels.mx_tile import f16_operand_tile, f16_tile_row_scales, row_scale_exponents
from warpcode.kernels.norm import round_to
from warpcode.kernels.tuning import WarpDecodeConfig

DOT_ROWS = tl.constexpr(16)  # tl.dot's least M: the slot's row, then zeros


@triton.jit
def _slot_product(h_ptrs, w, s, row_exponents, k_mask, acc, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  UPCAST_DOT_OPERANDS: tl.constexpr):  # fmt: skip
    """acc + (the slot's intermediate at h_ptrs in row 0 of DOT_ROWS) @ (the weight tile w, s converted).T."""
    b = tl.trans(f16_operand_tile(w, s, row_exponents, BLOCK_N, BLOCK_K))
    dot_rows = tl.arange(0, DOT_ROWS)
    a = tl.load(h_ptrs, mask=(dot_rows[:, None] == 0) & k_mask[None, :], other=0.0)
    if UPCAST_DOT_OPERANDS:  # the interpreter multiplies half-precision dot operands as raw bits
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc)


@triton.jit
def _down_mma_kernel(
    hidden_ptr, w2_ptr, w2_scales_ptr, topk_ids_ptr, topk_weights_ptr, residual_ptr, out_ptr, partial_ptr, counter_ptr,
    T, H, I,
    stride_hs, stride_we, stride_wr, stride_se, stride_sr, stride_rt, stride_ot,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ALL_GROUPS: tl.constexpr, TOP_K: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, UPCAST_DOT_OPERANDS: tl.constexpr, EVICTION: tl.constexpr, USE_PDL: tl.constexpr,
    FIRST_TILE_EARLY: tl.constexpr,
):  # fmt: skip
    slot = tl.program_id(0)
    row_block = tl.program_id(1)
    token = slot // TOP_K
    rows = row_block * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < H
    offs_k = tl.arange(0, BLOCK_K)
    groups = tl.arange(0, BLOCK_K // 32)
    dot_rows = tl.arange(0, DOT_ROWS)
    # The routing is complete (kernel 1 lets this kernel start only after its own wait): read before the wait.
    expert = tl.load(topk_ids_ptr + slot).to(tl.int64)
    route_weight = tl.load(topk_weights_ptr + slot).to(tl.float32)
    w_ptrs = w2_ptr + expert * stride_we + (rows[:, None] * stride_wr + offs_k[None, :])
    s_ptrs = w2_scales_ptr + expert * stride_se + (rows[:, None] * stride_sr + groups[None, :])
    all_groups = tl.arange(0, ALL_GROUPS)
    row_exponents = row_scale_exponents(
        w2_scales_ptr + expert * stride_se + (rows[:, None] * stride_sr + all_groups[None, :]),
        row_mask[:, None] & (all_groups < tl.cdiv(I, 32))[None, :],
    )
    acc = tl.zeros([DOT_ROWS, BLOCK_N], dtype=tl.float32)
    if FIRST_TILE_EARLY:  # the first weight tile does not depend on kernel 1 either: in flight while kernel 1 drains
        k_mask = offs_k < I
        w = tl.load(w_ptrs, mask=row_mask[:, None] & k_mask[None, :], other=0.0, eviction_policy=EVICTION)
        s = tl.load(s_ptrs, mask=row_mask[:, None] & (groups * 32 < I)[None, :], other=0, eviction_policy=EVICTION)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    h_ptrs = hidden_ptr + slot.to(tl.int64) * stride_hs + (dot_rows[:, None] * 0 + offs_k[None, :])
    if FIRST_TILE_EARLY:
        acc = _slot_product(h_ptrs, w, s, row_exponents, k_mask, acc, BLOCK_N, BLOCK_K, UPCAST_DOT_OPERANDS)
    for i_start in range(BLOCK_K if FIRST_TILE_EARLY else 0, I, BLOCK_K):
        k_mask = offs_k < I - i_start
        w = tl.load(w_ptrs + i_start, mask=row_mask[:, None] & k_mask[None, :], other=0.0, eviction_policy=EVICTION)
        s_mask = row_mask[:, None] & (groups * 32 < I - i_start)[None, :]
        s = tl.load(s_ptrs + i_start // 32, mask=s_mask, other=0, eviction_policy=EVICTION)
        acc = _slot_product(h_ptrs + i_start, w, s, row_exponents, k_mask, acc, BLOCK_N, BLOCK_K, UPCAST_DOT_OPERANDS)
    row = tl.sum(tl.where(dot_rows[:, None] == 0, acc, 0.0), axis=0)
    partial = row * (f16_tile_row_scales(row_exponents) * route_weight)
    share = slot - token * TOP_K
    partial_ptrs = partial_ptr + token.to(tl.int64) * H + rows
    share_stride = as_int64(H) * T  # elements of one slot index's partials [T, H]
    tl.store(partial_ptrs + share * share_stride, partial, mask=row_mask)
    if arrive(counter_ptr + token * tl.num_programs(1) + row_block, TOP_K):
        total = tl.zeros([BLOCK_N], dtype=tl.float32)
        for index in tl.static_range(TOP_K):
            total += tl.load(partial_ptrs + index * share_stride, mask=row_mask, other=0.0)
        out = round_to(total, out_ptr.dtype.element_ty)
        if HAS_RESIDUAL:
            r = tl.load(residual_ptr + token.to(tl.int64) * stride_rt + rows, mask=row_mask, other=0.0)
            out = round_to(out.to(tl.float32) + r.to(tl.float32), out_ptr.dtype.element_ty)
        tl.store(out_ptr + token.to(tl.int64) * stride_ot + rows, out, mask=row_mask)


def launch_down_mma(
    hidden: torch.Tensor,  # [T*K, I] fp16: kernel 1's output
    topk_weights: torch.Tensor,  # [T, K]
    topk_ids: torch.Tensor,  # [T, K]
    w2: MXTensor,  # [E, H, I]
    out: torch.Tensor,  # [T, H]
    config: WarpDecodeConfig,  # down_rows x down_cols tiles (BLOCK_N x BLOCK_K) on down_warps, down_stages
    residual: torch.Tensor | None = None,  # [T, H]: out = round(residual + round(moe)); out may be it
) -> None:
    tokens, hidden_size = out.shape
    top_k = topk_ids.shape[1]
    intermediate = hidden.shape[1]
    if hidden.dtype != torch.float16:
        raise ValueError(f"kernel 2 on tensor cores takes fp16 intermediates (bf16/fp16 inputs), got {hidden.dtype}")
    row_blocks = triton.cdiv(hidden_size, config.down_rows)
    partials = torch.empty((top_k, tokens, hidden_size), device=out.device, dtype=torch.float32)
    counters = arrival_counters(out.device, tokens * row_blocks)
    _down_mma_kernel[(tokens * top_k, row_blocks)](
        hidden, w2.data, w2.scales, topk_ids, topk_weights, out if residual is None else residual, out, partials,
        counters,
        tokens, hidden_size, intermediate,
        hidden.stride(0), w2.data.stride(0), w2.data.stride(1), w2.scales.stride(0), w2.scales.stride(1),
        0 if residual is None else residual.stride(0), out.stride(0),
        BLOCK_N=config.down_rows, BLOCK_K=config.down_cols,
        ALL_GROUPS=triton.next_power_of_2(triton.cdiv(intermediate, 32)), TOP_K=top_k,
        HAS_RESIDUAL=residual is not None, UPCAST_DOT_OPERANDS=INTERPRETER,
        FIRST_TILE_EARLY=config.down_first_tile_early, EVICTION="evict_first" if tokens == 1 else "",
        num_warps=config.down_warps, num_stages=config.down_stages, **pdl_options(out.device),
        **register_cap(config.down_max_registers),
    )  # fmt: skip
