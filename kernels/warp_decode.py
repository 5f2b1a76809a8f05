"""Warp decode: the MoE expert computation for small batches, parallel over outputs instead of over experts.

    kernel 1 (gate_up), one program per (routed slot s = t*K + k, block of intermediate rows):
        hidden[s, i] = silu(G[e] x[t])_i * (U[e] x[t])_i          e = topk_ids[t, k], fp32 accumulation
    kernel 2 (down), one program per (token t, block of output rows):
        out[t, r] = sum_k topk_weights[t, k] * (W2[e_k] hidden[t*K + k])_r   fp32 accumulator, written once
        (with a residual: out[t, r] = round(residual[t, r] + round(that sum)), the decoder layer's add, fused)

No sorting, no padding, no scatter, no combine buffer, no atomics: every output element has exactly one owner, the
only reader of its residual element, so `out` may be `residual` itself.
The slot (or token) is the fastest-varying grid axis, so programs that run together read the same weight rows of
experts shared between tokens, and the second reader is served from L2.

The intermediate `hidden` is stored in fp16 for bf16/fp16 inputs (fp32 for fp32 inputs): kernel 2 re-reads it once
per block of output rows, as many bytes as its weights in fp32, so half the bytes make kernel 2 faster, and fp16's
11-bit mantissa keeps it 8x finer than the bf16 intermediates of the expert-centric path (whose accuracy warp decode
must beat). Values are clamped to fp16's finite range (+-65504) so that an outlier saturates instead of turning
into inf.

MXFP8 weights (`MXTensor`, kernels/mx.py; w13 and w2 both or neither, switched by the MX constexpr; the plain path
compiles to the same code as without it) are read in their exchange layout:
    w13.data [E, 2I, H] fp8 e4m3, H contiguous     w13.scales [E, 2I, ceil(H / 32)] uint8 (E8M0)
    w2.data  [E, H, I]  fp8 e4m3, I contiguous     w2.scales  [E, H, ceil(I / 32)]  uint8
with W[e, n, k] = data[e, n, k] * 2**(scales[e, n, k // 32] - 127), exact in fp32. A tile is
[rows, cols / 32, 32] (kernel 2: [K, rows, cols / 32, 32]), cols a multiple of 32 starting on a group boundary, so each
(row, group) has one scale and a 16-byte load is 16 weights of one group; the same tile shape reads half the bytes
of bf16, so MX configs are about twice as wide. Each group's products are summed before its scale multiplies them,
    acc[r, g] += scale[r, g] * sum_j w[r, g, j] * x[g, j]      (one multiply per 32 products)
(scaling every weight first measured 1.3-1.9x slower in both kernels, BENCHMARKS.md). A partial last group (K not
a multiple of 32) loads its missing weights as 0 (masks), so its scale multiplies only real products. Activations,
the fp16 intermediate and the fp32 accumulation are as above.
With WarpDecodeConfig.down_on_mma (the tuned MX entries for 2-8 tokens) kernel 2 runs on tensor cores instead
(kernels/mx_down.py: a program per routed slot and block of output rows, tl.dot on fp16 operands, the last of a
token's K programs summing their partial rows): 3.4 SASS instructions a weight against 7.5 on CUDA cores.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import pdl_options, register_cap
from warpcode.kernels.moe_args import check_kernel_layout, check_like_x, check_moe_args, output_buffer
from warpcode.kernels.mx import SCALE_GROUP, MXTensor, is_mx
from warpcode.kernels.mx_down import launch_down_mma
from warpcode.kernels.mx_tile import scale_values
from warpcode.kernels.norm import round_to
from warpcode.kernels.tuning import WarpDecodeConfig, warp_decode_config

FP16_MAX = tl.constexpr(65504.0)
# At one token every weight is read once: marked first to evict in L2, so that the layer's 75 MB stream does not push
# out what is read again (activations, the KV cache). With more tokens, experts shared between them are read by
# several programs, the later ones from L2: those keep the normal policy.
ONE_TOKEN_EVICTION = "evict_first"


def intermediate_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of kernel 1's output for inputs of `dtype` (see the module docstring)."""
    return torch.float32 if dtype == torch.float32 else torch.float16


@triton.jit
def _gate_up_sums(
    x_ptr, w13_ptr, token, expert, rows, row_mask, H, I, stride_xt, stride_we, stride_wr,
    BLOCK_I, BLOCK_H, EVEN_H, EVICTION,
):  # fmt: skip
    """(G x, U x) [BLOCK_I] for the rows `rows` of expert `expert`'s plain weights and the token `token`."""
    cols = tl.arange(0, BLOCK_H)
    gate_ptrs = w13_ptr + expert * stride_we + rows[:, None].to(tl.int64) * stride_wr + cols[None, :]
    up_ptrs = gate_ptrs + I * stride_wr
    x_ptrs = x_ptr + token.to(tl.int64) * stride_xt + cols
    gate_acc = tl.zeros([BLOCK_I, BLOCK_H], dtype=tl.float32)
    up_acc = tl.zeros([BLOCK_I, BLOCK_H], dtype=tl.float32)
    for h_start in range(0, H, BLOCK_H):
        if EVEN_H:
            x = tl.load(x_ptrs + h_start).to(tl.float32)
            gate = tl.load(gate_ptrs + h_start, mask=row_mask[:, None], other=0.0, eviction_policy=EVICTION)
            up = tl.load(up_ptrs + h_start, mask=row_mask[:, None], other=0.0, eviction_policy=EVICTION)
        else:
            col_mask = cols + h_start < H
            tile_mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_ptrs + h_start, mask=col_mask, other=0.0).to(tl.float32)
            gate = tl.load(gate_ptrs + h_start, mask=tile_mask, other=0.0, eviction_policy=EVICTION)
            up = tl.load(up_ptrs + h_start, mask=tile_mask, other=0.0, eviction_policy=EVICTION)
        gate_acc += gate.to(tl.float32) * x[None, :]
        up_acc += up.to(tl.float32) * x[None, :]
    return tl.sum(gate_acc, axis=1), tl.sum(up_acc, axis=1)


@triton.jit
def _gate_up_sums_mx(
    x_ptr, w13_ptr, s13_ptr, token, expert, rows, row_mask, H, I, stride_xt, stride_we, stride_wr, stride_se,
    stride_sr, BLOCK_I, BLOCK_H, EVEN_H, EVICTION,
):  # fmt: skip
    """As _gate_up_sums for MXFP8 weights: data w13_ptr [E, 2I, H] fp8 and scales s13_ptr [E, 2I, ceil(H / 32)].

    The tile is [BLOCK_I, BLOCK_H / 32, 32]: one scale per (row, group), 16-byte loads of 16 weights of a group."""
    groups = tl.arange(0, BLOCK_H // 32)
    cols = groups[:, None] * 32 + tl.arange(0, 32)[None, :]  # [G, 32]: columns of the tile, group by group
    gate_ptrs = w13_ptr + expert * stride_we + rows[:, None, None].to(tl.int64) * stride_wr + cols[None, :, :]
    up_ptrs = gate_ptrs + I * stride_wr
    gate_scale_ptrs = s13_ptr + expert * stride_se + rows[:, None].to(tl.int64) * stride_sr + groups[None, :]
    up_scale_ptrs = gate_scale_ptrs + I * stride_sr
    x_ptrs = x_ptr + token.to(tl.int64) * stride_xt + cols
    gate_acc = tl.zeros([BLOCK_I, BLOCK_H // 32], dtype=tl.float32)  # per group: sum(w * x) * scale
    up_acc = tl.zeros([BLOCK_I, BLOCK_H // 32], dtype=tl.float32)
    for h_start in range(0, H, BLOCK_H):
        g_start = h_start // 32
        if EVEN_H:
            x = tl.load(x_ptrs + h_start).to(tl.float32)
            gate = tl.load(gate_ptrs + h_start, mask=row_mask[:, None, None], other=0.0, eviction_policy=EVICTION)
            up = tl.load(up_ptrs + h_start, mask=row_mask[:, None, None], other=0.0, eviction_policy=EVICTION)
            gate_bits = tl.load(gate_scale_ptrs + g_start, mask=row_mask[:, None], other=0, eviction_policy=EVICTION)
            up_bits = tl.load(up_scale_ptrs + g_start, mask=row_mask[:, None], other=0, eviction_policy=EVICTION)
        else:  # the last group may be partial: its masked-off weights load as 0, whatever their scale
            col_mask = cols + h_start < H
            tile_mask = row_mask[:, None, None] & col_mask[None, :, :]
            scale_mask = row_mask[:, None] & (groups * 32 + h_start < H)[None, :]
            x = tl.load(x_ptrs + h_start, mask=col_mask, other=0.0).to(tl.float32)
            gate = tl.load(gate_ptrs + h_start, mask=tile_mask, other=0.0, eviction_policy=EVICTION)
            up = tl.load(up_ptrs + h_start, mask=tile_mask, other=0.0, eviction_policy=EVICTION)
            gate_bits = tl.load(gate_scale_ptrs + g_start, mask=scale_mask, other=0, eviction_policy=EVICTION)
            up_bits = tl.load(up_scale_ptrs + g_start, mask=scale_mask, other=0, eviction_policy=EVICTION)
        gate_acc += tl.sum(gate.to(tl.float32) * x[None, :, :], axis=2) * scale_values(gate_bits)
        up_acc += tl.sum(up.to(tl.float32) * x[None, :, :], axis=2) * scale_values(up_bits)
    return tl.sum(gate_acc, axis=1), tl.sum(up_acc, axis=1)


@triton.jit
def _gate_up_kernel(
    x_ptr,
    w13_ptr,
    w13_scales_ptr,
    topk_ids_ptr,
    hidden_ptr,
    H,
    I,
    K,
    stride_xt,
    stride_we,
    stride_wr,
    stride_se,
    stride_sr,
    stride_hs,
    BLOCK_I: tl.constexpr,
    BLOCK_H: tl.constexpr,
    EVEN_H: tl.constexpr,
    MX: tl.constexpr,
    EVICTION: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # x and topk_ids may come from the kernel launched just before
        tl.extra.cuda.gdc_wait()
        # Only now may kernel 2 start: it reads the routing before its own wait, so the route kernel must be done.
        tl.extra.cuda.gdc_launch_dependents()
    slot = tl.program_id(0)
    row_block = tl.program_id(1)
    token = slot // K
    expert = tl.load(topk_ids_ptr + slot).to(tl.int64)
    rows = row_block * BLOCK_I + tl.arange(0, BLOCK_I)
    row_mask = rows < I
    if MX:
        gate_sum, up_sum = _gate_up_sums_mx(
            x_ptr, w13_ptr, w13_scales_ptr, token, expert, rows, row_mask, H, I, stride_xt, stride_we, stride_wr,
            stride_se, stride_sr, BLOCK_I, BLOCK_H, EVEN_H, EVICTION,
        )  # fmt: skip
    else:
        gate_sum, up_sum = _gate_up_sums(
            x_ptr, w13_ptr, token, expert, rows, row_mask, H, I, stride_xt, stride_we, stride_wr,
            BLOCK_I, BLOCK_H, EVEN_H, EVICTION,
        )  # fmt: skip
    hidden = gate_sum * tl.sigmoid(gate_sum) * up_sum
    if hidden_ptr.dtype.element_ty == tl.float16:
        hidden = tl.minimum(tl.maximum(hidden, -FP16_MAX), FP16_MAX)
    hidden = hidden.to(hidden_ptr.dtype.element_ty)
    tl.store(hidden_ptr + slot.to(tl.int64) * stride_hs + rows, hidden, mask=row_mask)


@triton.jit
def _down_kernel(
    hidden_ptr,
    w2_ptr,
    w2_scales_ptr,
    topk_ids_ptr,
    topk_weights_ptr,
    residual_ptr,
    out_ptr,
    H,
    I,
    K,
    stride_hs,
    stride_we,
    stride_wr,
    stride_se,
    stride_sr,
    stride_rt,
    stride_ot,
    BLOCK_R: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_K: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    MX: tl.constexpr,
    EVICTION: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    token = tl.program_id(0)
    row_block = tl.program_id(1)
    ks = tl.arange(0, BLOCK_K)
    k_mask = ks < K
    slots = token.to(tl.int64) * K + ks
    experts = tl.load(topk_ids_ptr + slots, mask=k_mask, other=0).to(tl.int64)
    route_weights = tl.load(topk_weights_ptr + slots, mask=k_mask, other=0.0).to(tl.float32)
    rows = row_block * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < H
    if MX:
        # [BLOCK_K, BLOCK_R, BLOCK_I / 32, 32] data and [BLOCK_K, BLOCK_R, BLOCK_I / 32] scale tiles.
        groups = tl.arange(0, BLOCK_I // 32)
        cols = groups[:, None] * 32 + tl.arange(0, 32)[None, :]  # [G, 32]
        w_ptrs = (
            w2_ptr
            + experts[:, None, None, None] * stride_we
            + rows[None, :, None, None].to(tl.int64) * stride_wr
            + cols[None, None, :, :]
        )
        s_ptrs = (
            w2_scales_ptr
            + experts[:, None, None] * stride_se
            + rows[None, :, None].to(tl.int64) * stride_sr
            + groups[None, None, :]
        )
        h_ptrs = hidden_ptr + slots[:, None, None] * stride_hs + cols[None, :, :]
        w_mask = k_mask[:, None, None, None] & row_mask[None, :, None, None]
        s_mask = k_mask[:, None, None] & row_mask[None, :, None]
    else:
        cols = tl.arange(0, BLOCK_I)
        # [BLOCK_K, BLOCK_R, BLOCK_I] tiles: all routed experts' rows are in flight at once.
        w_ptrs = (
            w2_ptr
            + experts[:, None, None] * stride_we
            + rows[None, :, None].to(tl.int64) * stride_wr
            + cols[None, None, :]
        )
        h_ptrs = hidden_ptr + slots[:, None] * stride_hs + cols[None, :]
        w_mask = k_mask[:, None, None] & row_mask[None, :, None]
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    # The weights do not depend on kernel 1: under programmatic dependent launch the first tile is fetched while
    # kernel 1 drains, and only the reads of its output wait. Each iteration prefetches the next tile (masked off
    # past the end, which costs no memory traffic).
    if MX:
        w = tl.load(w_ptrs, mask=w_mask & (cols < I)[None, None, :, :], other=0.0, eviction_policy=EVICTION)
        bits = tl.load(s_ptrs, mask=s_mask & (groups * 32 < I)[None, None, :], other=0, eviction_policy=EVICTION)
    else:
        w = tl.load(w_ptrs, mask=w_mask & (cols < I)[None, None, :], other=0.0, eviction_policy=EVICTION)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    if HAS_RESIDUAL:  # written by an earlier kernel: read after the wait, in flight during the product
        r = tl.load(residual_ptr + token.to(tl.int64) * stride_rt + rows, mask=row_mask, other=0.0)
    if MX:
        # per (expert, row, group): sum(w * h) * scale, reduced over experts and groups at the end
        acc = tl.zeros([BLOCK_K, BLOCK_R, BLOCK_I // 32], dtype=tl.float32)
        for i_start in range(0, I, BLOCK_I):
            h_mask = k_mask[:, None, None] & (cols + i_start < I)[None, :, :]
            h = tl.load(h_ptrs + i_start, mask=h_mask, other=0.0)
            weighted_h = h.to(tl.float32) * route_weights[:, None, None]
            acc += tl.sum(w.to(tl.float32) * weighted_h[:, None, :, :], axis=3) * scale_values(bits)
            next_start = i_start + BLOCK_I
            next_mask = w_mask & (cols + next_start < I)[None, None, :, :]
            w = tl.load(w_ptrs + next_start, mask=next_mask, other=0.0, eviction_policy=EVICTION)
            next_scale_mask = s_mask & (groups * 32 + next_start < I)[None, None, :]
            bits = tl.load(s_ptrs + next_start // 32, mask=next_scale_mask, other=0, eviction_policy=EVICTION)
        sums = tl.sum(tl.sum(acc, axis=2), axis=0)
    else:
        acc = tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.float32)
        for i_start in range(0, I, BLOCK_I):
            h = tl.load(h_ptrs + i_start, mask=k_mask[:, None] & (cols + i_start < I)[None, :], other=0.0)
            weighted_h = h.to(tl.float32) * route_weights[:, None]
            acc += tl.sum(w.to(tl.float32) * weighted_h[:, None, :], axis=0)
            next_cols = cols + i_start + BLOCK_I
            next_mask = w_mask & (next_cols < I)[None, None, :]
            w = tl.load(w_ptrs + i_start + BLOCK_I, mask=next_mask, other=0.0, eviction_policy=EVICTION)
        sums = tl.sum(acc, axis=1)
    out = round_to(sums, out_ptr.dtype.element_ty)
    if HAS_RESIDUAL:
        out = round_to(out.to(tl.float32) + r.to(tl.float32), out_ptr.dtype.element_ty)
    tl.store(out_ptr + token.to(tl.int64) * stride_ot + rows, out, mask=row_mask)


def moe_warp_decode(
    x: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, K] fp32 (any float dtype is read as fp32)
    topk_ids: torch.Tensor,  # [T, K] int32 or int64
    w13: torch.Tensor | MXTensor,  # [E, 2I, H]
    w2: torch.Tensor | MXTensor,  # [E, H, I]: MXFP8 exactly when w13 is
    config: WarpDecodeConfig | None = None,
    out: torch.Tensor | None = None,  # [T, H] x.dtype: a preallocated output (CUDA graphs keep it static)
    residual: torch.Tensor | None = None,  # [T, H] x.dtype: out = round(residual + round(moe)); out may be it
) -> torch.Tensor:  # [T, H], x.dtype
    check_moe_args(x, topk_weights, topk_ids, w13, w2)
    check_kernel_layout(x, topk_weights, topk_ids, w13, w2)
    if residual is not None:
        check_like_x("residual", residual, x)
    out = output_buffer(x, out)
    tokens, hidden_size = x.shape
    experts, two_i, _ = w13.shape
    intermediate = two_i // 2
    top_k = topk_ids.shape[1]
    config = config or warp_decode_config(hidden_size, intermediate, experts, top_k, tokens, is_mx(w13))
    if tokens == 0:
        return out
    hidden = torch.empty((tokens * top_k, intermediate), device=x.device, dtype=intermediate_dtype(x.dtype))
    launch_gate_up(x, topk_ids, w13, hidden, config)
    launch_down(hidden, topk_weights, topk_ids, w2, out, config, residual)
    return out


def weight_arguments(w: torch.Tensor | MXTensor, cols: int, name: str) -> tuple:
    """(data, scales, scale strides of experts and rows) for a kernel launch; plain weights pass themselves as the
    never-read scales. MX tiles hold whole scale groups: `cols` (the config's tile width) must be a multiple of 32."""
    if not is_mx(w):
        return w, w, 0, 0
    if cols < SCALE_GROUP:
        raise ValueError(f"MXFP8 weights need WarpDecodeConfig.{name} >= {SCALE_GROUP} (one scale group), got {cols}")
    return w.data, w.scales, w.scales.stride(0), w.scales.stride(1)


def launch_gate_up(x, topk_ids, w13, hidden, config: WarpDecodeConfig) -> None:
    """Kernel 1 alone (the tuner times it separately): hidden [T*K, I] (intermediate_dtype) <- silu(gate) * up."""
    tokens, hidden_size = x.shape
    top_k = topk_ids.shape[1]
    intermediate = w13.shape[1] // 2
    data, scales, stride_se, stride_sr = weight_arguments(w13, config.gate_up_cols, "gate_up_cols")
    _gate_up_kernel[(tokens * top_k, triton.cdiv(intermediate, config.gate_up_rows))](
        x, data, scales, topk_ids, hidden,
        hidden_size, intermediate, top_k,
        x.stride(0), data.stride(0), data.stride(1), stride_se, stride_sr, hidden.stride(0),
        BLOCK_I=config.gate_up_rows, BLOCK_H=config.gate_up_cols, EVEN_H=hidden_size % config.gate_up_cols == 0,
        MX=is_mx(w13),
        EVICTION=ONE_TOKEN_EVICTION if tokens == 1 else "",
        num_warps=config.gate_up_warps, num_stages=config.gate_up_stages, **pdl_options(x.device),
    )  # fmt: skip


def launch_down(hidden, topk_weights, topk_ids, w2, out, config: WarpDecodeConfig, residual=None) -> None:
    """Kernel 2 alone: out [T, H] <- sum_k w_k * W2[e_k] hidden[t*K + k] (+ residual [T, H], see above); on tensor
    cores with config.down_on_mma (MXFP8 weights; fp32 intermediates keep CUDA cores, with the default tile)."""
    if config.down_on_mma:
        if not is_mx(w2):
            raise ValueError("WarpDecodeConfig.down_on_mma takes MXFP8 weights (kernels/mx_down.py)")
        if hidden.dtype == torch.float16:
            launch_down_mma(hidden, topk_weights, topk_ids, w2, out, config, residual)
            return
        config = WarpDecodeConfig()  # kernel 2's default tile: none of the tensor-core tile's options apply
    tokens, hidden_size = out.shape
    top_k = topk_ids.shape[1]
    intermediate = hidden.shape[1]
    data, scales, stride_se, stride_sr = weight_arguments(w2, config.down_cols, "down_cols")
    _down_kernel[(tokens, triton.cdiv(hidden_size, config.down_rows))](
        hidden, data, scales, topk_ids, topk_weights, out if residual is None else residual, out,
        hidden_size, intermediate, top_k,
        hidden.stride(0), data.stride(0), data.stride(1), stride_se, stride_sr,
        0 if residual is None else residual.stride(0), out.stride(0),
        BLOCK_R=config.down_rows, BLOCK_I=config.down_cols, BLOCK_K=triton.next_power_of_2(top_k),
        HAS_RESIDUAL=residual is not None, MX=is_mx(w2),
        EVICTION=ONE_TOKEN_EVICTION if tokens == 1 else "",
        num_warps=config.down_warps, num_stages=config.down_stages, **pdl_options(out.device),
        **register_cap(config.down_max_registers),
    )  # fmt: skip
