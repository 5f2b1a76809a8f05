"""The sparse MoE block: router, routed experts through warpcode.kernels, optional gated shared expert."""

from __future__ import annotations

import torch
from torch import nn

from warpcode.kernels import moe, route, uses_warp_decode
from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.layers import DenseMLP


class StackedExperts(nn.Module):
    """All routed experts of a layer in the layout the kernels take (MXTensors with weights="mxfp8", mx_weights.py)."""

    def __init__(self, num_experts: int, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.w13 = nn.Parameter(torch.empty(num_experts, 2 * intermediate_size, hidden_size))  # [E, 2I, H]: gate; up
        self.w2 = nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size))  # [E, H, I]


class SparseMoeBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.normalize = config.norm_topk_prob
        self.gate = nn.Linear(config.hidden_size, config.num_experts, bias=False)  # router: [E, H]
        self.experts = StackedExperts(config.num_experts, config.hidden_size, config.expert_intermediate_size)
        self.shared_expert = None
        if config.shared_expert_intermediate_size:
            self.shared_expert = DenseMLP(config.hidden_size, config.shared_expert_intermediate_size)
            self.shared_expert_gate = nn.Linear(config.hidden_size, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, H] -> [B, T, H]
        flat = x.reshape(-1, x.shape[-1])  # [N, H]
        topk_weights, topk_ids = route(self.gate(flat), self.top_k, self.normalize)  # fp32 [N, K], int64 [N, K]
        return self.experts_forward(flat, topk_weights, topk_ids).view_as(x)

    def experts_forward(
        self,
        flat: torch.Tensor,  # [N, H]
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
        residual: torch.Tensor | None = None,  # [N, H], only where `adds_residual(flat)`
    ) -> torch.Tensor:
        """[N, H] routed elsewhere (the decode step's router GEMV and route kernel) -> [N, H]; with `residual`,
        residual + that, added in place by the experts' last kernel (the decoder layer's add)."""
        if residual is not None and self.shared_expert is not None:
            raise ValueError("the shared expert is added after the routed experts: it cannot take a residual")
        out = moe(flat, topk_weights, topk_ids, self.experts.w13, self.experts.w2, residual)
        if self.shared_expert is not None:
            out = out + torch.sigmoid(self.shared_expert_gate(flat)) * self.shared_expert(flat)
        return out

    def adds_residual(self, flat: torch.Tensor) -> bool:
        """Whether experts_forward(flat, ...) can add a residual: warp decode runs, and no shared expert follows."""
        return self.shared_expert is None and uses_warp_decode(flat, self.experts.w13, self.top_k)
