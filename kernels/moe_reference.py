"""Plain-PyTorch definitions of MoE routing and the expert computation: the readable math every kernel matches.

route:  p = softmax(logits) over E experts;  (w, ids) = top-k(p);  w /= sum(w) when normalize
moe:    out[t] = sum_k w[t, k] * W2[e] (silu(G[e] x[t]) * (U[e] x[t])),  e = ids[t, k]
        with w13[e] = [G[e]; U[e]] stacked as [2I, H] (gate rows first) and W2[e] of shape [H, I].
"""

from __future__ import annotations

import torch

from warpcode.kernels.moe_args import check_moe_args
from warpcode.kernels.mx import MXTensor, dequantize_any


def route_reference(
    router_logits: torch.Tensor,
    k: int,
    normalize: bool = True,
    rms_of: torch.Tensor | None = None,  # [T, H]: scale each row's logits by its RMSNorm rstd first
    eps: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, E] logits -> (fp32 weights [T, K], int64 expert ids [T, K]), experts sorted by weight descending.

    Float64 logits stay float64 (the tests' reference); every other dtype is computed in float32."""
    logits = router_logits if router_logits.dtype == torch.float64 else router_logits.float()
    if rms_of is not None:
        r = rms_of.to(logits.dtype)
        logits = logits * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps)
    probs = torch.softmax(logits, dim=-1)
    topk_weights, topk_ids = torch.topk(probs, k, dim=-1)
    if normalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids


def moe_reference(
    x: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, K]
    topk_ids: torch.Tensor,  # [T, K]
    w13: torch.Tensor | MXTensor,  # [E, 2I, H]
    w2: torch.Tensor | MXTensor,  # [E, H, I]
    compute_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:  # [T, H], x.dtype
    """Loops over the experts that received tokens; upcasts every operand to `compute_dtype` (fp32 or fp64), MXFP8
    weights dequantised exactly."""
    check_moe_args(x, topk_weights, topk_ids, w13, w2)
    intermediate = w2.shape[2]
    xc = x.to(compute_dtype)
    out = torch.zeros_like(xc)
    flat_ids = topk_ids.reshape(-1)
    flat_weights = topk_weights.reshape(-1).to(compute_dtype)
    token_of_slot = torch.arange(x.shape[0], device=x.device).repeat_interleave(topk_ids.shape[1])
    for expert in torch.unique(flat_ids).tolist():
        slots = (flat_ids == expert).nonzero(as_tuple=True)[0]
        tokens = token_of_slot[slots]
        gate_up = xc[tokens] @ dequantize_any(w13[expert], compute_dtype).T  # [n, 2I]
        hidden = torch.nn.functional.silu(gate_up[:, :intermediate]) * gate_up[:, intermediate:]  # [n, I]
        expert_out = hidden @ dequantize_any(w2[expert], compute_dtype).T  # [n, H]
        out.index_add_(0, tokens, expert_out * flat_weights[slots, None])
    return out.to(x.dtype)
