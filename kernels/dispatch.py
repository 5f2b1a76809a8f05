"""Chooses the implementation of routing and of the expert computation by device and token count."""

from __future__ import annotations

import torch

from warpcode.kernels.expert_centric import moe_expert_centric
from warpcode.kernels.moe_reference import moe_reference, route_reference
from warpcode.kernels.mx import MXTensor, is_mx
from warpcode.kernels.norm import add_rmsnorm_reference
from warpcode.kernels.route import check_normed_out, check_prefetch, route_triton
from warpcode.kernels.tuning import warp_decode_max_tokens
from warpcode.kernels.warp_decode import moe_warp_decode


def route(
    router_logits: torch.Tensor,
    k: int,
    normalize: bool = True,
    rms_of: torch.Tensor | None = None,  # [T, H]: logits scaled by RMSNorm's rstd of these rows first
    eps: float = 0.0,
    norm_weight: torch.Tensor | None = None,  # [H], with normed_out
    normed_out: torch.Tensor | None = None,  # [T, H] <- RMSNorm(rms_of) * norm_weight (route.py)
    prefetch: torch.Tensor | MXTensor | None = None,  # [E, 2I, H]: L2-prefetch the routed experts' first gate/up
    # rows (a hint; MXFP8 weights: their data rows)
) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, E] -> (fp32 weights [T, K], int64 ids [T, K]); the fused Triton kernel on CUDA."""
    if router_logits.is_cuda:
        return route_triton(router_logits, k, normalize, rms_of, eps, norm_weight, normed_out, prefetch)
    if prefetch is not None:  # a hint the reference has no use for, checked all the same
        check_prefetch(prefetch, router_logits)
    if normed_out is not None:
        check_normed_out(rms_of, norm_weight, normed_out)
        normed_out.copy_(add_rmsnorm_reference(rms_of, norm_weight, eps)[0])
    return route_reference(router_logits, k, normalize, rms_of, eps)


def uses_warp_decode(x: torch.Tensor, w13: torch.Tensor | MXTensor, top_k: int) -> bool:
    """Whether `moe` runs warp decode for x [T, H]: on CUDA, up to the measured crossover token count (of the
    weights' format: MXFP8 weights have their own where measured)."""
    experts, two_i, hidden = w13.shape
    return x.is_cuda and x.shape[0] <= warp_decode_max_tokens(hidden, two_i // 2, experts, top_k, is_mx(w13))


def moe(
    x: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, K]
    topk_ids: torch.Tensor,  # [T, K]
    w13: torch.Tensor | MXTensor,  # [E, 2I, H]
    w2: torch.Tensor | MXTensor,  # [E, H, I]: MXFP8 exactly when w13 is
    residual: torch.Tensor | None = None,  # [T, H] x.dtype, only where `uses_warp_decode`
) -> torch.Tensor:  # [T, H], x.dtype
    """Warp decode up to the measured crossover token count, the expert-centric path above it, and the
    PyTorch reference off the GPU; each takes plain or MXFP8 weights (kernels/mx.py). With `residual`, warp
    decode's last kernel adds the output to it in place (round(residual + round(out)), the decoder layer's add)
    and returns it; the other paths take none."""
    if uses_warp_decode(x, w13, topk_ids.shape[1]):
        return moe_warp_decode(x, topk_weights, topk_ids, w13, w2, out=residual, residual=residual)
    if residual is not None:
        raise ValueError("only warp decode adds a residual: check uses_warp_decode(x, w13, top_k) first")
    if not x.is_cuda:
        return moe_reference(x, topk_weights, topk_ids, w13, w2)
    return moe_expert_centric(x, topk_weights, topk_ids, w13, w2)
