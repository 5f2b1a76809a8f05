"""The conventional expert-centric MoE path (vLLM / SGLang fused_moe style), for prefill and large batches.

    1. align:    group the T*K routed slots by expert, each group padded to a multiple of BLOCK_M
    2. gate_up:  grouped GEMM on tensor cores, C1[s] = w13[e] @ x[s // K]          (rounded to x.dtype)
    3. act:      A[s] = silu(C1[s, :I]) * C1[s, I:]                               (rounded to x.dtype)
    4. down:     grouped GEMM, C2[s] = topk_weight[s] * (w2[e] @ A[s])            (rounded to x.dtype)
    5. reduce:   out[t] = sum_k C2[t*K + k]

Every step reads and writes device memory, and stages 1, 3 and 5 exist only for data layout: that is the cost
warp decode removes at small batch. The alignment uses device-side torch ops (no host sync, graph-capturable).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER
from warpcode.kernels.moe_args import check_kernel_layout, check_moe_args, output_buffer
from warpcode.kernels.tuning import GroupedGemmConfig, grouped_gemm_config

# Triton's CPU interpreter multiplies bf16 dot operands as their raw uint16 bits (triton 3.6-3.9); there the
# kernel upcasts them first, which is also exactly what the tensor cores compute (bf16 products, fp32 sums).
_UPCAST_DOT_OPERANDS = INTERPRETER


def align_slots_by_expert(topk_ids: torch.Tensor, experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (sorted_slots [P], block_expert [P // block_m]) with P = T*K + E*(block_m - 1), a static bound.

    sorted_slots lists slot indices (t*K + k) grouped by expert, each group padded with the sentinel T*K to a
    multiple of block_m; block_expert[b] is the expert of block b, or E for blocks past the last group.
    """
    flat = topk_ids.reshape(-1).to(torch.int64)
    slots = flat.numel()
    capacity = slots + experts * (block_m - 1)
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(experts, dtype=torch.int64, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded_counts = (counts + block_m - 1) // block_m * block_m
    starts = torch.cumsum(counts, 0) - counts
    padded_ends = torch.cumsum(padded_counts, 0)
    sorted_experts = flat[order]
    destination = (
        padded_ends[sorted_experts]
        - padded_counts[sorted_experts]
        + (torch.arange(slots, device=flat.device) - starts[sorted_experts])
    )
    sorted_slots = torch.full((capacity,), slots, dtype=torch.int64, device=flat.device)
    sorted_slots.scatter_(0, destination, order)
    block_starts = torch.arange(0, capacity, block_m, device=flat.device)
    block_expert = torch.searchsorted(padded_ends, block_starts, right=True)
    return sorted_slots, block_expert


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    b_ptr,
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
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    MUL_SLOT_WEIGHT: tl.constexpr,
    UPCAST_DOT_OPERANDS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """C[s, n] = (w[s] *) sum_k A[s // div, k] * B[e, n, k] for the slots s of one expert block."""
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
    b_ptrs = b_ptr + expert * stride_be + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k_start in range(0, K_DIM, BLOCK_K):
        k_mask = offs_k < K_DIM - k_start
        a = tl.load(a_ptrs + k_start, mask=slot_mask[:, None] & k_mask[None, :], other=0.0)
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
    grid = (block_expert.numel(), triton.cdiv(n, config.block_n))
    _grouped_gemm_kernel[grid](
        a, b, c, slot_weights, sorted_slots, block_expert,
        n, k_dim, c.shape[0], experts, a_div,
        a.stride(0), b.stride(0), b.stride(1), c.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        MUL_SLOT_WEIGHT=slot_weights is not None, UPCAST_DOT_OPERANDS=_UPCAST_DOT_OPERANDS,
        # fp32 models get fp32 products (Triton's default for fp32 is tf32); bf16 operands are exact either way.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip


def moe_expert_centric(
    x: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, K]
    topk_ids: torch.Tensor,  # [T, K]
    w13: torch.Tensor,  # [E, 2I, H]
    w2: torch.Tensor,  # [E, H, I]
    config: GroupedGemmConfig | None = None,
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
    config = config or grouped_gemm_config(hidden_size, two_i // 2, experts, top_k, tokens)
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
