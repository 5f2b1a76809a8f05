"""Grouped-query self-attention with the q/k normalisation variants of qwen3_moe and olmoe, and its mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.layers import RMSNorm, apply_rotary
from warpcode.model_runtime.mx_weights import Linear, Weight, concat_rows, set_weight


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.num_heads, self.num_kv_heads, self.head_dim = (
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim,
        )
        self.qk_norm, self.clip_qkv = config.qk_norm, config.clip_qkv
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self.q_proj = Linear(config.hidden_size, q_size, bias=config.qkv_bias)
        self.k_proj = Linear(config.hidden_size, kv_size, bias=config.qkv_bias)
        self.v_proj = Linear(config.hidden_size, kv_size, bias=config.qkv_bias)
        self.o_proj = Linear(q_size, config.hidden_size, bias=config.o_proj_bias)
        if config.qk_norm == "per_head":  # qwen3_moe: one norm shared by every head, over head_dim
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        elif config.qk_norm == "full":  # olmoe: over the whole q and k projections, before the head split
            self.q_norm = RMSNorm(q_size, config.rms_norm_eps)
            self.k_norm = RMSNorm(kv_size, config.rms_norm_eps)
        self.qkv_weight: Weight | None = None  # [(Hq + 2 Hkv) * D, H] once fuse_qkv() ran
        self.qkv_bias: torch.Tensor | None = None

    @torch.no_grad()
    def fuse_qkv(self) -> None:
        """Stores q, k and v projections in one tensor so decode computes them in one matmul; the three
        projections become views into it (no second copy of the weights; MX rows keep their scales)."""
        if self.qkv_weight is not None:
            return
        projections = (self.q_proj, self.k_proj, self.v_proj)
        self.qkv_weight = concat_rows([p.weight for p in projections])
        if self.q_proj.bias is not None:
            self.qkv_bias = torch.cat([p.bias for p in projections])
        start = 0
        for projection in projections:
            end = start + projection.weight.shape[0]
            set_weight(projection, "weight", self.qkv_weight[start:end])
            if self.qkv_bias is not None:
                set_weight(projection, "bias", self.qkv_bias[start:end])
            start = end

    def norm_and_clip_fused(self, qkv: torch.Tensor) -> torch.Tensor:
        """The fused projections [T, (Hq + 2 Hkv) D] with what the fused RoPE kernel does not do: olmoe's norm over
        the whole q and k projections (not per head) and clipping."""
        if self.qk_norm == "full":
            q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            q, k, v = qkv.split((q_size, kv_size, kv_size), dim=-1)
            qkv = torch.cat((self.q_norm(q), self.k_norm(k), v), dim=-1)
        return qkv if self.clip_qkv is None else qkv.clamp(-self.clip_qkv, self.clip_qkv)

    def forward(
        self,
        x: torch.Tensor,  # [B, T, H]
        cos: torch.Tensor,  # [B, T, head_dim]
        sin: torch.Tensor,  # [B, T, head_dim]
        mask: torch.Tensor,  # [B, 1, T, T]: 0 where a query may attend to a key, -inf elsewhere
    ) -> torch.Tensor:  # [B, T, H]
        batch, tokens, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.clip_qkv is not None:
            q, k, v = (t.clamp(-self.clip_qkv, self.clip_qkv) for t in (q, k, v))
        q = q.view(batch, tokens, self.num_heads, self.head_dim)
        k = k.view(batch, tokens, self.num_kv_heads, self.head_dim)
        v = v.view(batch, tokens, self.num_kv_heads, self.head_dim)
        if self.qk_norm == "per_head":
            q, k = self.q_norm(q), self.k_norm(k)
        q = apply_rotary(q.transpose(1, 2), cos, sin)  # [B, heads, T, head_dim]
        k = apply_rotary(k.transpose(1, 2), cos, sin)  # [B, kv_heads, T, head_dim]
        v = v.transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=self.head_dim**-0.5, enable_gqa=self.num_heads != self.num_kv_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(batch, tokens, self.num_heads * self.head_dim))


def attention_bias(token_valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask [B, 1, T, T] (0 where a query may attend, -inf elsewhere) from token validity [B, T]: causal,
    padding keys hidden. SDPA takes a float mask about twice as fast as a boolean one.

    Each query also sees itself, so a padding query (whose every key is hidden) still gets a finite softmax: a NaN
    there would reach real tokens through 0 * NaN in later layers' attention.
    """
    slots = torch.arange(token_valid.shape[1], device=token_valid.device)  # [T]
    causal = slots[None, :] <= slots[:, None]  # [T, T]
    allowed = (causal[None] & token_valid[:, None, :]) | torch.eye(len(slots), dtype=torch.bool, device=slots.device)
    bias = torch.zeros(allowed.shape, dtype=dtype, device=token_valid.device).masked_fill_(~allowed, float("-inf"))
    return bias[:, None]
