"""The conventional expert-centric MoE path (vLLM / SGLang fused_moe style), for prefill and large batches.

    1. align:    group the T*K routed slots by expert, each group padded to a multiple of BLOCK_M
    2. gate_up:  grouped GEMM on tensor cores, C1[s] = w13[e] @ x[s // K]          (rounded to x.dtype)
    3. act:      A[s] = silu(C1[s, :I]) * C1[s, I:]                               (rounded to x.dtype)
    4. down:     grouped GEMM, C2[s] = topk_weight[s] * (w2[e] @ A[s])            (rounded to x.dtype)
    5. reduce:   out[t] = sum_k C2[t*K + k]

Every step reads and writes device memory, and stages 1, 3 and 5 exist only for data layout: that is the cost
warp decode removes at small batch. The alignment is one single-program kernel (no host sync, graph-capturable).

MXFP8 weights (kernels/mx.py; weight-only, activations and intermediates stay in x.dtype): w13 and w2 as
MXTensors, data fp8 [E, N, K] and scales uint8 [E, N, ceil(K / 32)]. Each weight tile is loaded as rows
[BLOCK_N, BLOCK_K] with its scales [BLOCK_N, BLOCK_K / 32] (BLOCK_K a multiple of 32, so tiles hold whole scale
groups; the last K tile is masked, its scales too), dequantised in registers to x.dtype, data * 2**(s - 127)
(exact in bf16 down to its subnormals), and multiplied on tensor cores with fp32 accumulation as for bf16.
Tiles come from tuning.grouped_gemm_config(..., mx=True): measured entries under their own key, else bf16's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER
from warpcode.kernels.moe_args import check_kernel_layout, check_moe_args, output_buffer
from warpcode.kernels.mx import BLOCK as MX_GROUP
from warpcode.kernels.mx import MXTensor, is_mx
from warpcode.kernels.mx_tile import dequantize_tile
from warpcode.kernels.tuning import GroupedGemmConfig, grouped_gemm_config

# Triton's CPU interpreter multiplies bf16 dot operands as their raw uint16 bits (triton 3.6-3.9); there the
# kernel upcasts them first, which is also exactly what the tensor cores compute (bf16 products, fp32 sums).
_UPCAST_DOT_OPERANDS = INTERPRETER


@triton.jit
def _align_slots_kernel(
    topk_ids_ptr,
    sorted_slots_ptr,
    block_expert_ptr,
    group_starts_ptr,
    group_fill_ptr,
    num_slots,
    num_experts,
    capacity,
    num_blocks,
    BLOCK_M: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    """One program: counts[e] = #slots routed to e; group e starts at the exclusive prefix sum of the counts, each
    rounded up to BLOCK_M. A slot's place in its group comes from an atomic increment of the group's fill counter,
    so the order inside a group is arbitrary: each row of the grouped GEMMs is computed on its own, so no result
    depends on it. block_expert[b] = #groups ending at or before block b's first entry (E past the last group)."""
    experts = tl.arange(0, BLOCK_E)
    expert_mask = experts < num_experts
    counts = tl.zeros([BLOCK_E], dtype=tl.int32)
    for first in range(0, num_slots, BLOCK_S):
        slots = first + tl.arange(0, BLOCK_S)
        ids = tl.load(topk_ids_ptr + slots, mask=slots < num_slots, other=0).to(tl.int32)
        counts += tl.histogram(ids, BLOCK_E)
    padding_lanes = tl.cdiv(num_slots, BLOCK_S) * BLOCK_S - num_slots  # counted in bin 0 above
    counts -= tl.where(experts == 0, padding_lanes, 0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    group_ends = tl.cumsum(padded, axis=0)
    tl.store(group_starts_ptr + experts, group_ends - padded, mask=expert_mask)
    tl.store(group_fill_ptr + experts, tl.zeros([BLOCK_E], dtype=tl.int32), mask=expert_mask)
    for first in range(0, capacity, BLOCK_S):
        entries = first + tl.arange(0, BLOCK_S)
        tl.store(sorted_slots_ptr + entries, num_slots, mask=entries < capacity)
    for first in range(0, num_blocks, BLOCK_B):
        blocks = first + tl.arange(0, BLOCK_B)
        ended = (group_ends[None, :] <= (blocks * BLOCK_M)[:, None]) & expert_mask[None, :]
        tl.store(block_expert_ptr + blocks, tl.sum(ended.to(tl.int32), axis=1), mask=blocks < num_blocks)
    tl.debug_barrier()  # the group starts, zeroed fill counters and sentinels are visible to every thread
    for first in range(0, num_slots, BLOCK_S):
        slots = first + tl.arange(0, BLOCK_S)
        slot_mask = slots < num_slots
        ids = tl.load(topk_ids_ptr + slots, mask=slot_mask, other=0).to(tl.int32)
        place = tl.atomic_add(group_fill_ptr + ids, 1, mask=slot_mask)
        group_start = tl.load(group_starts_ptr + ids, mask=slot_mask, other=0)
        tl.store(sorted_slots_ptr + group_start + place, slots, mask=slot_mask)


def align_slots_by_expert(topk_ids: torch.Tensor, experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (sorted_slots [P], block_expert [P // block_m]) with P = T*K + E*(block_m - 1), a static bound.

    sorted_slots lists slot indices (t*K + k) grouped by expert in expert order, each group padded with the
    sentinel T*K to a multiple of block_m; block_expert[b] is the expert of block b, or E for blocks past the last
    group. One Triton launch (a chain of a dozen torch ops took tens of microseconds at decode batch sizes).
    """
    slots = topk_ids.numel()
    capacity = slots + experts * (block_m - 1)
    device = topk_ids.device
    sorted_slots = torch.empty(capacity, dtype=torch.int64, device=device)
    block_expert = torch.empty(capacity // block_m, dtype=torch.int64, device=device)
    scratch = torch.empty((2, experts), dtype=torch.int32, device=device)  # group starts, fill counters
    _align_slots_kernel[(1,)](
        topk_ids, sorted_slots, block_expert, scratch[0], scratch[1],
        slots, experts, capacity, block_expert.numel(),
        BLOCK_M=block_m, BLOCK_S=1024, BLOCK_E=triton.next_power_of_2(experts),
        BLOCK_B=max(16, 8192 // triton.next_power_of_2(experts)), num_warps=8,
    )  # fmt: skip
    return sorted_slots, block_expert


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
    UPCAST_DOT_OPERANDS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    IS_MX: tl.constexpr,
):
    """C[s, n] = (w[s] *) sum_k A[s // div, k] * B[e, n, k] for the slots s of one expert block; an MX B's tiles are
    loaded as rows [BLOCK_N, BLOCK_K] (16 fp8 weights per 16-byte load) with their scales, dequantised to A's dtype
    and transposed for tl.dot."""
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
    if IS_MX:
        groups = tl.arange(0, BLOCK_K // 32)
        b_ptrs = b_ptr + expert * stride_be + offs_n[:, None].to(tl.int64) * stride_bn + offs_k[None, :]
        s_ptrs = b_scales_ptr + expert * stride_se + offs_n[:, None].to(tl.int64) * stride_sn + groups[None, :]
        num_groups = tl.cdiv(K_DIM, 32)
    else:
        b_ptrs = b_ptr + expert * stride_be + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k_start in range(0, K_DIM, BLOCK_K):
        k_mask = offs_k < K_DIM - k_start
        a = tl.load(a_ptrs + k_start, mask=slot_mask[:, None] & k_mask[None, :], other=0.0)
        if IS_MX:
            b = tl.load(b_ptrs + k_start, mask=n_mask[:, None] & k_mask[None, :], other=0.0)
            s_mask = n_mask[:, None] & (groups < num_groups - k_start // 32)[None, :]
            s = tl.load(s_ptrs + k_start // 32, mask=s_mask, other=0)
            b = tl.trans(dequantize_tile(b, s, BLOCK_N, BLOCK_K, a_ptr.dtype.element_ty))
        else:
            b = tl.load(b_ptrs + k_start, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        if UPCAST_DOT_OPERANDS:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    if MUL_SLOT_WEIGHT:
        acc *= tl.load(slot_weights_ptr + slots, mask=slot_mask, other=0.0).to(tl.float32)[:, None]
    c_ptrs = c_ptr + slots[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=slot_mask[:, None] & n_mask[None, :])


@triton.jit
def _silu_and_mul_kernel(gate_up_ptr, out_ptr, I, stride_in, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    gate = tl.load(gate_up_ptr + row * stride_in + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + row * stride_in + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty), mask=mask)


def _grouped_gemm(a, b, c, slot_weights, sorted_slots, block_expert, a_div, config: GroupedGemmConfig) -> None:
    experts, n, k_dim = b.shape
    mx = is_mx(b)
    data, scales = (b.data, b.scales) if mx else (b, b)
    grid = (block_expert.numel(), triton.cdiv(n, config.block_n))
    _grouped_gemm_kernel[grid](
        a, data, scales, c, slot_weights, sorted_slots, block_expert,
        n, k_dim, c.shape[0], experts, a_div,
        a.stride(0), data.stride(0), data.stride(1), scales.stride(0), scales.stride(1), c.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        MUL_SLOT_WEIGHT=slot_weights is not None, UPCAST_DOT_OPERANDS=_UPCAST_DOT_OPERANDS,
        # fp32 models get fp32 products (Triton's default for fp32 is tf32); bf16 operands are exact either way.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32", IS_MX=mx,
        num_warps=config.num_warps, num_stages=config.num_stages,
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
    if mx and config.block_k < MX_GROUP:
        raise ValueError(f"MX weights need GroupedGemmConfig.block_k >= {MX_GROUP} (whole scale groups), got {config}")
    sorted_slots, block_expert = align_slots_by_expert(topk_ids, experts, config.block_m)
    slots = tokens * top_k
    gate_up = torch.empty((slots, two_i), device=x.device, dtype=x.dtype)
    _grouped_gemm(x, w13, gate_up, None, sorted_slots, block_expert, top_k, config)
    activated = torch.empty((slots, two_i // 2), device=x.device, dtype=x.dtype)
    _silu_and_mul_kernel[(slots, triton.cdiv(two_i // 2, 256))](
        gate_up, activated, two_i // 2, gate_up.stride(0), activated.stride(0), BLOCK=256
    )
    per_slot = torch.empty((slots, hidden_size), device=x.device, dtype=x.dtype)
    _grouped_gemm(activated, w2, per_slot, topk_weights.reshape(-1), sorted_slots, block_expert, 1, config)
    return torch.sum(per_slot.view(tokens, top_k, hidden_size), dim=1, out=out)
