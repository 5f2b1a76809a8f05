"""Router softmax + top-k (+ renormalisation) fused in one Triton kernel: a program per token (two with normed_out).

p = softmax(logits[t]);  repeat K times: pick the largest remaining p (lowest index on ties);
w = picked / sum(picked) when normalize, else picked.

With rms_of (the decode step's folded router, see o_proj_router.py) the logits are Wr (gamma * h) for the
un-normalised row h = rms_of[t], and RMSNorm's rstd = rsqrt(mean(h ** 2) + eps) scales them first:
p = softmax(rstd * logits[t]). With normed_out a second program per token stores the experts' input RMSNorm(h)
(rounded as kernels/norm.py rounds it), so the experts need no norm kernel of their own.

Grid (T, 1), or (T, 2) with normed_out: program (t, 0) routes, program (t, 1) stores the normed row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import pdl_options, wait_for_inputs
from warpcode.kernels.moe_args import check_like_x
from warpcode.kernels.norm import rounded_rmsnorm

_NUM_WARPS = 1  # the K rounds of max are warp-shuffle reductions only: 1.8 us against 3.0 with 4 warps (H200)


@triton.jit
def _route_kernel(
    logits_ptr,
    rms_ptr,
    norm_weight_ptr,
    normed_ptr,
    weights_ptr,
    ids_ptr,
    E,
    H,
    eps,
    stride_t,
    stride_r,
    stride_n,
    K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_H: tl.constexpr,
    NORMALIZE: tl.constexpr,
    HAS_RMS: tl.constexpr,
    STORE_NORMED: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    cols = tl.arange(0, BLOCK_H)
    if STORE_NORMED:  # a weight: loaded before the wait for the previous kernel
        norm_weight = tl.load(norm_weight_ptr + cols, mask=cols < H, other=0.0)
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    if tl.program_id(1) == 0:
        experts = tl.arange(0, BLOCK_E)
        valid = experts < E
        logits = tl.load(logits_ptr + token * stride_t + experts, mask=valid, other=-float("inf")).to(tl.float32)
        if HAS_RMS:
            r = tl.load(rms_ptr + token * stride_r + cols, mask=cols < H, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(r * r, axis=0) / H + eps)
            logits = logits * rstd
        exps = tl.where(valid, tl.exp(logits - tl.max(logits, axis=0)), 0.0)
        remaining = tl.where(valid, exps / tl.sum(exps, axis=0), -1.0)
        slots = tl.arange(0, BLOCK_K)
        picked_weights = tl.zeros([BLOCK_K], dtype=tl.float32)
        picked_ids = tl.zeros([BLOCK_K], dtype=tl.int32)
        for k in tl.static_range(K):
            best = tl.max(remaining, axis=0)
            best_id = tl.min(tl.where(remaining == best, experts, BLOCK_E), axis=0)
            picked_weights = tl.where(slots == k, best, picked_weights)
            picked_ids = tl.where(slots == k, best_id, picked_ids)
            remaining = tl.where(experts == best_id, -1.0, remaining)
        if NORMALIZE:
            picked_weights = picked_weights / tl.sum(picked_weights, axis=0)
        tl.store(weights_ptr + token * K + slots, picked_weights, mask=slots < K)
        tl.store(ids_ptr + token * K + slots, picked_ids.to(tl.int64), mask=slots < K)
    if STORE_NORMED:  # noqa: SIM102 (a compile-time branch: without normed_out its body must not be compiled)
        if tl.program_id(1) == 1:  # beside the routing program: in it, the store took 1.5 us more per layer
            r = tl.load(rms_ptr + token * stride_r + cols, mask=cols < H, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(r * r, axis=0) / H + eps)
            normed = rounded_rmsnorm(r, rstd, norm_weight, normed_ptr.dtype.element_ty)
            tl.store(normed_ptr + token * stride_n + cols, normed, mask=cols < H)


def route_triton(
    router_logits: torch.Tensor,
    k: int,
    normalize: bool = True,
    rms_of: torch.Tensor | None = None,  # [T, H]: scale each row's logits by its RMSNorm rstd first
    eps: float = 0.0,
    norm_weight: torch.Tensor | None = None,  # [H] rms_of.dtype, with normed_out
    normed_out: torch.Tensor | None = None,  # [T, H] rms_of.dtype <- RMSNorm(rms_of) * norm_weight
) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, E] logits (any float dtype) -> (fp32 weights [T, K], int64 ids [T, K])."""
    if router_logits.dim() != 2:
        raise ValueError(f"router_logits must be [T, E], got shape {tuple(router_logits.shape)}")
    tokens, experts = router_logits.shape
    if not 1 <= k <= experts:
        raise ValueError(f"top-k must be in [1, {experts}] for {experts} experts, got {k}")
    if router_logits.stride(1) != 1:
        raise ValueError("router_logits must be contiguous in its expert dimension")
    if rms_of is not None and (rms_of.dim() != 2 or rms_of.shape[0] != tokens or rms_of.stride(1) != 1):
        raise ValueError(f"rms_of must be [T={tokens}, H] with contiguous rows, got {tuple(rms_of.shape)}")
    if normed_out is not None:
        check_normed_out(rms_of, norm_weight, normed_out)
    weights = torch.empty((tokens, k), device=router_logits.device, dtype=torch.float32)
    ids = torch.empty((tokens, k), device=router_logits.device, dtype=torch.int64)
    if tokens:
        hidden = 1 if rms_of is None else rms_of.shape[1]
        _route_kernel[(tokens, 1 if normed_out is None else 2)](
            router_logits, router_logits if rms_of is None else rms_of,
            *((router_logits, router_logits) if normed_out is None else (norm_weight, normed_out)), weights, ids,
            experts, hidden, float(eps), router_logits.stride(0), 0 if rms_of is None else rms_of.stride(0),
            0 if normed_out is None else normed_out.stride(0),
            K=k, BLOCK_E=triton.next_power_of_2(experts), BLOCK_K=triton.next_power_of_2(k),
            BLOCK_H=triton.next_power_of_2(hidden), NORMALIZE=normalize, HAS_RMS=rms_of is not None,
            STORE_NORMED=normed_out is not None,
            num_warps=_NUM_WARPS, **pdl_options(router_logits.device),
        )  # fmt: skip
    return weights, ids


def check_normed_out(rms_of: torch.Tensor | None, norm_weight: torch.Tensor | None, normed_out: torch.Tensor) -> None:
    if rms_of is None or norm_weight is None:
        raise ValueError("normed_out needs rms_of (the row to normalise) and norm_weight")
    check_like_x("normed_out", normed_out, rms_of)
    if norm_weight.shape != rms_of.shape[1:] or norm_weight.dtype != rms_of.dtype or norm_weight.stride(0) != 1:
        raise ValueError(f"norm_weight must be a contiguous [{rms_of.shape[1]}] {rms_of.dtype} tensor")
