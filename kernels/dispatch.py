"""Chooses the implementation of routing and of the expert computation by device and token count."""

from __future__ import annotations

import torch

from warpcode.kernels.expert_centric import moe_expert_centric
from warpcode.kernels.moe_reference import moe_reference, route_reference
from warpcode.kernels.route import route_triton
from warpcode.kernels.tuning import warp_decode_max_tokens
from warpcode.kernels.warp_decode import moe_warp_decode


def route(router_logits: torch.Tensor, k: int, normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, E] -> (fp32 weights [T, K], int64 ids [T, K]); the fused Triton kernel on CUDA."""
    if router_logits.is_cuda:
        return route_triton(router_logits, k, normalize)
    return route_reference(router_logits, k, normalize)


def moe(
    x: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, K]
    topk_ids: torch.Tensor,  # [T, K]
    w13: torch.Tensor,  # [E, 2I, H]
    w2: torch.Tensor,  # [E, H, I]
) -> torch.Tensor:  # [T, H], x.dtype
    """Warp decode up to the measured crossover token count, the expert-centric path above it, and the
    PyTorch reference off the GPU."""
    if not x.is_cuda:
        return moe_reference(x, topk_weights, topk_ids, w13, w2)
    experts, two_i, hidden = w13.shape
    if x.shape[0] <= warp_decode_max_tokens(hidden, two_i // 2, experts, topk_ids.shape[1]):
        return moe_warp_decode(x, topk_weights, topk_ids, w13, w2)
    return moe_expert_centric(x, topk_weights, topk_ids, w13, w2)
