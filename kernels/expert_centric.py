"""The conventional expert-centric MoE path (vLLM / SGLang fused_moe style), for prefill and large batches.

    1. align:    group the T*K routed slots by expert, each group padded to a multiple of BLOCK_M
    2. gate_up:  grouped GEMM on tensor cores, C1[s] = w13[e] @ x[s // K]          (rounded to x.dtype)
                 and in its epilogue A[s] = silu(C1[s, :I]) * C1[s, I:]            (rounded to x.dtype)
    3. down:     grouped GEMM, C2[s] = topk_weight[s] * (w2[e] @ A[s])            (rounded to x.dtype)
    4. reduce:   out[t] = sum_k C2[t*K + k]                                       (fp32 sum)

Every step reads and writes device memory, and stages 1 and 4 exist only for data layout: that is the cost warp
decode removes at small batch. No step syncs with the host, so the path is graph-capturable.

MXFP8 weights (kernels/mx.py; weight-only, activations and intermediates stay in x.dtype): w13 and w2 as
MXTensors, data fp8 [E, N, K] and scales uint8 [E, N, ceil(K / 32)]. Each weight tile is loaded as rows
[BLOCK_N, BLOCK_K] with its scales [BLOCK_N, BLOCK_K / 32] (BLOCK_K a multiple of 32, so tiles hold whole scale
groups; the last K tile is masked, its scales too), dequantised in registers to x.dtype, data * 2**(s - 127)
(exact in bf16 down to its subnormals; for bf16 by mx_tile.dot_operand_tile, whose scales stop at
MAX_BF16_TILE_SCALE: larger ones give inf, so bf16 and fp16 calls refuse such weights), and multiplied on tensor
cores with fp32 accumulation as for bf16.
Tiles come from tuning.grouped_gemm_config(..., mx=True): measured entries under their own key, else bf16's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER, register_cap
from warpcode.kernels.moe_args import check_kernel_layout, check_moe_args, output_buffer
from warpcode.kernels.mx import SCALE_GROUP, MXTensor, is_mx
from warpcode.kernels.mx_tile import dot_operand_tile, require_16_bit_tile_range
from warpcode.kernels.tuning import GroupedGemmConfig, grouped_gemm_config

# Triton's CPU interpreter multiplies bf16 dot operands as their raw uint16 bits (triton 3.6-3.9); there the
# kernel upcasts them first, which is also exactly what the tensor cores compute (bf16 products, fp32 sums).
_UPCAST_DOT_OPERANDS = INTERPRETER


@triton.jit
def _rank_in_chunk_kernel(
    topk_ids_ptr, rank_ptr, chunk_counts_ptr, num_slots, chunk,
    BLOCK_E: tl.constexpr, SUB: tl.constexpr,
):  # fmt: skip
    """Program p, slots [p * chunk, (p + 1) * chunk), SUB at a time: rank[s] = #earlier slots of the chunk routed to
    s's expert (a SUB x SUB comparison within a sub-tile, plus the counts of the sub-tiles before it);
    chunk_counts[p, e] = the chunk's slots routed to e. One-hot sums rather than tl.histogram, whose lowering walks
    every bin."""
    program = tl.program_id(0)
    experts = tl.arange(0, BLOCK_E)
    lanes = tl.arange(0, SUB)
    counts = tl.zeros([BLOCK_E], dtype=tl.int32)
    first = program * chunk
    for sub in range(first, tl.minimum(first + chunk, num_slots), SUB):
        slots = sub + lanes
        ids = tl.load(topk_ids_ptr + slots, mask=slots < num_slots, other=-1).to(tl.int32)  # -1: no expert's
        earlier = (ids[:, None] == ids[None, :]) & (lanes[None, :] < lanes[:, None])
        mine = ids[:, None] == experts[None, :]  # [SUB, BLOCK_E]
        rank = tl.sum(earlier.to(tl.int32), axis=1) + tl.sum(tl.where(mine, counts[None, :], 0), axis=1)
        tl.store(rank_ptr + slots, rank, mask=slots < num_slots)
        counts += tl.sum(mine.to(tl.int32), axis=0)
    tl.store(chunk_counts_ptr + program * BLOCK_E + experts, counts)


@triton.jit
def _place_slots_kernel(
    topk_ids_ptr, rank_ptr, chunk_counts_ptr, sorted_slots_ptr, block_expert_ptr,
    num_slots, num_experts, capacity, num_blocks, chunk, num_chunks,
    BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_P: tl.constexpr, SUB: tl.constexpr, BLOCK_Q: tl.constexpr,
):  # fmt: skip
    """Program p: the groups from every chunk's counts (group e starts at the exclusive prefix sum of the counts,
    each rounded up to BLOCK_M), then its chunk's slots at start[e] + (e's slots in earlier chunks) + rank, so a group
    lists its slots in slot order. Program 0 writes the sentinel num_slots into every group's padding and each group's
    expert into block_expert for the group's blocks; every program writes its share of the sentinels and of the
    blocks (expert E) past the last group."""
    program = tl.program_id(0)
    programs = tl.num_programs(0)
    experts = tl.arange(0, BLOCK_E)
    expert_mask = experts < num_experts
    chunks = tl.arange(0, BLOCK_P)
    per_chunk = tl.load(chunk_counts_ptr + chunks[:, None] * BLOCK_E + experts[None, :],
                        mask=(chunks < num_chunks)[:, None], other=0)  # fmt: skip
    counts = tl.sum(per_chunk, axis=0)
    before = tl.sum(tl.where((chunks < program)[:, None], per_chunk, 0), axis=0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    group_ends = tl.cumsum(padded, axis=0)
    group_starts = group_ends - padded
    base = group_starts + before
    first = program * chunk
    for sub in range(first, tl.minimum(first + chunk, num_slots), SUB):
        slots = sub + tl.arange(0, SUB)
        ids = tl.load(topk_ids_ptr + slots, mask=slots < num_slots, other=-1).to(tl.int32)
        rank = tl.load(rank_ptr + slots, mask=slots < num_slots, other=0)
        place = tl.sum(tl.where(ids[:, None] == experts[None, :], base[None, :], 0), axis=1) + rank
        tl.store(sorted_slots_ptr + place, slots, mask=slots < num_slots)
    total = tl.max(group_ends, axis=0)  # the groups fill [0, total); the rest of `capacity` is sentinels
    if program == 0:  # each group's padding [start + count, end), and each group's blocks
        pads = tl.arange(0, BLOCK_M)
        places = (group_starts + counts)[:, None] + pads[None, :]  # [BLOCK_E, BLOCK_M]
        tl.store(sorted_slots_ptr + places, num_slots, mask=places < group_ends[:, None])
        blocks = padded // BLOCK_M
        for block in range(0, tl.max(blocks, axis=0)):
            tl.store(block_expert_ptr + group_starts // BLOCK_M + block, experts, mask=(block < blocks) & expert_mask)
    share = tl.cdiv(capacity - total, programs)
    end = tl.minimum(total + (program + 1) * share, capacity)
    for start in range(total + program * share, end, BLOCK_Q):
        places = start + tl.arange(0, BLOCK_Q)
        tl.store(sorted_slots_ptr + places, num_slots, mask=places < end)
    share = tl.cdiv(num_blocks - total // BLOCK_M, programs)
    end = tl.minimum(total // BLOCK_M + (program + 1) * share, num_blocks)
    for start in range(total // BLOCK_M + program * share, end, BLOCK_Q):
        blocks = start + tl.arange(0, BLOCK_Q)
        tl.store(block_expert_ptr + blocks, num_experts, mask=blocks < end)


ALIGN_SUB = 64  # slots ranked at once (a SUB x SUB comparison)
ALIGN_CHUNKS = 32  # at most: the placing programs each read every chunk's counts


def align_slots_by_expert(topk_ids: torch.Tensor, experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (sorted_slots [P], block_expert [P // block_m]) with P = T*K + E*(block_m - 1), a static bound.

    sorted_slots lists slot indices (t*K + k) grouped by expert in expert order, each group in slot order and padded
    with the sentinel T*K to a multiple of block_m; block_expert[b] is the expert of block b, or E for blocks past
    the last group. Two launches of up to ALIGN_CHUNKS programs each, no atomics and no host sync (graph-capturable):
    ranks within chunks and the chunks' counts, then the places.
    """
    slots = topk_ids.numel()
    capacity = slots + experts * (block_m - 1)
    device = topk_ids.device
    sorted_slots = torch.empty(capacity, dtype=torch.int64, device=device)
    block_expert = torch.empty(capacity // block_m, dtype=torch.int64, device=device)
    chunk = triton.cdiv(triton.cdiv(slots, ALIGN_SUB), ALIGN_CHUNKS) * ALIGN_SUB  # whole sub-tiles a program
    chunks = triton.cdiv(slots, chunk)
    block_e = triton.next_power_of_2(experts)
    rank = torch.empty(slots, dtype=torch.int32, device=device)
    chunk_counts = torch.empty((chunks, block_e), dtype=torch.int32, device=device)
    _rank_in_chunk_kernel[(chunks,)](topk_ids, rank, chunk_counts, slots, chunk, BLOCK_E=block_e, SUB=ALIGN_SUB)
    _place_slots_kernel[(chunks,)](
        topk_ids, rank, chunk_counts, sorted_slots, block_expert, slots, experts, capacity, block_expert.numel(),
        chunk, chunks, BLOCK_M=block_m, BLOCK_E=block_e, BLOCK_P=triton.next_power_of_2(chunks), SUB=ALIGN_SUB,
        BLOCK_Q=64,
    )  # fmt: skip
    return sorted_slots, block_expert


@triton.jit
def _weight_tile(b_ptrs, s_ptrs, k_start, k_mask, n_mask, groups, num_groups, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, IS_MX: tl.constexpr, DTYPE: tl.constexpr):  # fmt: skip
    """B's tile [BLOCK_K, BLOCK_N] at k_start, as the dot operand (an MX tile dequantised to DTYPE)."""
    if IS_MX:
        b = tl.load(b_ptrs + k_start, mask=n_mask[:, None] & k_mask[None, :], other=0.0)
        s_mask = n_mask[:, None] & (groups < num_groups - k_start // 32)[None, :]
        s = tl.load(s_ptrs + k_start // 32, mask=s_mask, other=0)
        tile = tl.trans(dot_operand_tile(b, s, BLOCK_N, BLOCK_K, DTYPE))
    else:  # one return: Triton compiles the code after a returning constexpr branch too
        tile = tl.load(b_ptrs + k_start, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
    return tile


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    b_ptr,
    b_scales_ptr,
    c_ptr,
    slot_weights_ptr,
    sorted_slots_ptr,
    block_expert_ptr,
    N,
    K_DIM,
    num_slots,
    num_experts,
    a_rows_per_slot_div,
    stride_am,
    stride_be,
    stride_bn,
    stride_se,
    stride_sn,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    MUL_SLOT_WEIGHT: tl.constexpr,
    GATED: tl.constexpr,
    UPCAST_DOT_OPERANDS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    IS_MX: tl.constexpr,
):
    """C[s, n] = (w[s] *) sum_k A[s // div, k] * B[e, n, k] for the slots s of one expert block, n < N; GATED (B has
    2N rows, gate then up): C[s, n] = silu(G) * U with G, U the products with rows n and N + n, so the activation
    never leaves registers. An MX B's tiles are loaded as rows [BLOCK_N, BLOCK_K] (16 fp8 weights per 16-byte load)
    with their scales, dequantised to A's dtype and transposed for tl.dot."""
    block_m = tl.program_id(0)
    block_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + block_m).to(tl.int64)
    if expert >= num_experts:
        return
    slots = tl.load(sorted_slots_ptr + block_m * BLOCK_M + tl.arange(0, BLOCK_M))
    slot_mask = slots < num_slots
    a_rows = slots // a_rows_per_slot_div
    offs_n = block_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :]
    groups = tl.arange(0, BLOCK_K // 32)
    num_groups = tl.cdiv(K_DIM, 32)
    if IS_MX:
        b_ptrs = b_ptr + expert * stride_be + offs_n[:, None].to(tl.int64) * stride_bn + offs_k[None, :]
        s_ptrs = b_scales_ptr + expert * stride_se + offs_n[:, None].to(tl.int64) * stride_sn + groups[None, :]
    else:
        b_ptrs = b_ptr + expert * stride_be + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]
        s_ptrs = b_scales_ptr  # no scales
    up_b_ptrs = b_ptrs + N * stride_bn  # GATED: the up rows
    up_s_ptrs = s_ptrs + N * stride_sn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    dtype = a_ptr.dtype.element_ty
    for k_start in range(0, K_DIM, BLOCK_K):
        k_mask = offs_k < K_DIM - k_start
        a = tl.load(a_ptrs + k_start, mask=slot_mask[:, None] & k_mask[None, :], other=0.0)
        b = _weight_tile(b_ptrs, s_ptrs, k_start, k_mask, n_mask, groups, num_groups, BLOCK_N, BLOCK_K, IS_MX, dtype)
        if UPCAST_DOT_OPERANDS:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        if GATED:
            u = _weight_tile(
                up_b_ptrs, up_s_ptrs, k_start, k_mask, n_mask, groups, num_groups, BLOCK_N, BLOCK_K, IS_MX, dtype
            )
            if UPCAST_DOT_OPERANDS:
                u = u.to(tl.float32)
            up = tl.dot(a, u, up, input_precision=DOT_PRECISION)
    if GATED:  # the products rounded to A's dtype first, as the unfused GEMM stores them
        gate = acc.to(dtype).to(tl.float32)
        acc = gate * tl.sigmoid(gate) * up.to(dtype).to(tl.float32)
    if MUL_SLOT_WEIGHT:
        acc *= tl.load(slot_weights_ptr + slots, mask=slot_mask, other=0.0).to(tl.float32)[:, None]
    c_ptrs = c_ptr + slots[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=slot_mask[:, None] & n_mask[None, :])


@triton.jit
def _sum_slots_kernel(per_slot_ptr, out_ptr, H, K: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr):
    """out[t] = sum_k per_slot[t * K + k] in fp32, rounded once to out's dtype."""
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ks = tl.arange(0, BLOCK_K)
    mask = (ks < K)[:, None] & (cols < H)[None, :]
    rows = tl.load(per_slot_ptr + (token * K + ks)[:, None] * H + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + token * H + cols, tl.sum(rows.to(tl.float32), axis=0).to(out_ptr.dtype.element_ty),
             mask=cols < H)  # fmt: skip


def _grouped_gemm(
    a, b, c, slot_weights, sorted_slots, block_expert, a_div, config: GroupedGemmConfig, gated: bool = False
) -> None:
    experts, n, k_dim = b.shape
    mx = is_mx(b)
    data, scales = (b.data, b.scales) if mx else (b, b)
    n = n // 2 if gated else n
    # A gated program reads two weight tiles (gate and up): half as wide each, the tuned tile's bytes.
    block_n = max(16, config.block_n // 2) if gated else config.block_n
    grid = (block_expert.numel(), triton.cdiv(n, block_n))
    _grouped_gemm_kernel[grid](
        a, data, scales, c, slot_weights, sorted_slots, block_expert,
        n, k_dim, c.shape[0], experts, a_div,
        a.stride(0), data.stride(0), data.stride(1), scales.stride(0), scales.stride(1), c.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=block_n, BLOCK_K=config.block_k,
        MUL_SLOT_WEIGHT=slot_weights is not None, GATED=gated, UPCAST_DOT_OPERANDS=_UPCAST_DOT_OPERANDS,
        # fp32 models get fp32 products (Triton's default for fp32 is tf32); bf16 operands are exact either way.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32", IS_MX=mx,
        num_warps=config.num_warps, num_stages=config.num_stages, **register_cap(config.max_registers),
    )  # fmt: skip


def moe_expert_centric(
    x: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, K]
    topk_ids: torch.Tensor,  # [T, K]
    w13: torch.Tensor | MXTensor,  # [E, 2I, H]
    w2: torch.Tensor | MXTensor,  # [E, H, I]
    config: GroupedGemmConfig | None = None,  # MX weights: block_k >= 32
    out: torch.Tensor | None = None,  # [T, H] x.dtype: a preallocated output
) -> torch.Tensor:  # [T, H], x.dtype
    check_moe_args(x, topk_weights, topk_ids, w13, w2)
    check_kernel_layout(x, topk_weights, topk_ids, w13, w2)
    out = output_buffer(x, out)
    tokens, hidden_size = x.shape
    experts, two_i, _ = w13.shape
    top_k = topk_ids.shape[1]
    if tokens == 0:
        return out
    mx = is_mx(w13)
    config = config or grouped_gemm_config(hidden_size, two_i // 2, experts, top_k, tokens, mx)
    if mx and config.block_k < SCALE_GROUP:
        raise ValueError(
            f"MX weights need GroupedGemmConfig.block_k >= {SCALE_GROUP} (whole scale groups), got {config}"
        )
    if mx:
        require_16_bit_tile_range(w13, x.dtype)
        require_16_bit_tile_range(w2, x.dtype)
    sorted_slots, block_expert = align_slots_by_expert(topk_ids, experts, config.block_m)
    slots = tokens * top_k
    activated = torch.empty((slots, two_i // 2), device=x.device, dtype=x.dtype)
    _grouped_gemm(x, w13, activated, None, sorted_slots, block_expert, top_k, config, gated=True)
    per_slot = torch.empty((slots, hidden_size), device=x.device, dtype=x.dtype)
    _grouped_gemm(activated, w2, per_slot, topk_weights.reshape(-1), sorted_slots, block_expert, 1, config)
    block_h = min(1024, triton.next_power_of_2(hidden_size))
    _sum_slots_kernel[(tokens, triton.cdiv(hidden_size, block_h))](
        per_slot, out, hidden_size, K=top_k, BLOCK_K=triton.next_power_of_2(top_k), BLOCK_H=block_h
    )
    return out
