"""The model that trains is the runtime's own `MoeForCausalLM` (its parameters, names and layout: what is trained is
what the runtime loads), run by a training forward of its own here: the runtime's forward is built for inference
(cache-free reference, fused kernels, an explicit [T, T] mask) and its MoE goes through kernels with no backward.

The training forward is the same math as model.py's reference forward (tests/training check the logits agree), with
two choices made for training speed:
- attention is causal SDPA without a mask tensor (flash attention on the GPU), every row a full window;
- the experts run densely: every token through all E experts' projections as two plain matmuls, the output weighted
  by the routing weights, which are exactly 0 for the experts a token was not routed to. That is E / top_k (here 4)
  times the expert FLOPs of a sparse dispatch, but at this width (hidden 256, expert 96) a step is bound by memory
  traffic and kernel launches, not FLOPs: two [N, 256] x [256, 16 * 2 * 96] GEMMs beat sorting tokens into 16
  small groups, and need no host sync, no padding and no private grouped-GEMM API. The gradients are the sparse
  ones: an expert a token did not pick gets none from it (its weight is a constant 0).

The routers learn through the routing weights of the picked experts (as in Qwen3-MoE / Switch) and an auxiliary
load-balancing loss that keeps every expert in use: E * sum_e f_e * P_e, f_e the share of routed slots that went to
expert e and P_e its mean router probability (1.0 when perfectly balanced).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.layers import apply_rotary
from warpcode.model_runtime.model import MoeForCausalLM

INIT_STD = 0.02


def new_model(config: ModelConfig, seed: int, device: torch.device | str = "cpu") -> MoeForCausalLM:
    """A freshly initialised model in fp32 (the optimiser's master weights), trainable.

    Weights N(0, 0.02), norms 1; the projections that write into the residual stream (o_proj, the experts' down
    projections) scaled by 1 / sqrt(2 * layers) so the stream's variance does not grow with depth (GPT-2)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    model = MoeForCausalLM(config)
    residual_std = INIT_STD / math.sqrt(2 * config.num_hidden_layers)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.fill_(1.0)
            else:
                std = residual_std if name.endswith(("o_proj.weight", "experts.w2")) else INIT_STD
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
    return model.to(device).train()


def forward(model: MoeForCausalLM, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 [B, T] -> (logits [B, T, V], the load-balancing loss averaged over layers). Every row is one window
    read from position 0, causally; padding at a row's end changes nothing before it."""
    config = model.config
    batch, length = input_ids.shape
    positions = torch.arange(length, device=input_ids.device).expand(batch, length)
    x = model.model.embed_tokens(input_ids)
    cos, sin = model.model.rotary(positions, torch.get_autocast_dtype(x.device.type) if _autocast(x) else x.dtype)
    balance = x.new_zeros((), dtype=torch.float32)
    for layer in model.model.layers:
        x = x + _attention(layer.self_attn, layer.input_layernorm(x), cos, sin, config)
        moe_out, layer_balance = _experts(layer.mlp, layer.post_attention_layernorm(x), config)
        x = x + moe_out
        balance = balance + layer_balance
    logits = F.linear(model.model.norm(x), model.output_weight)
    return logits, balance / config.num_hidden_layers


def _autocast(x: torch.Tensor) -> bool:
    return torch.is_autocast_enabled(x.device.type)


def _attention(attn, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    batch, length, _ = x.shape
    heads, kv_heads, head_dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    q = F.linear(x, attn.q_proj.weight).view(batch, length, heads, head_dim)
    k = F.linear(x, attn.k_proj.weight).view(batch, length, kv_heads, head_dim)
    v = F.linear(x, attn.v_proj.weight).view(batch, length, kv_heads, head_dim)
    q, k = attn.q_norm(q), attn.k_norm(k)  # qwen3_moe: per head, before RoPE
    q = apply_rotary(q.transpose(1, 2), cos, sin)
    k = apply_rotary(k.transpose(1, 2), cos, sin)
    v = v.transpose(1, 2)
    # q, k, v in one dtype, as flash attention needs (the norms' fp32 weights promote their output)
    q, k, v = (t.to(v.dtype) for t in (q, k, v))
    groups = heads // kv_heads
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=head_dim**-0.5)
    return F.linear(out.transpose(1, 2).reshape(batch, length, heads * head_dim), attn.o_proj.weight)


def _experts(block, x: torch.Tensor, config: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The MoE block, densely (module docstring): [B, T, H] -> ([B, T, H], its load-balancing loss)."""
    experts, top_k, width = config.num_experts, config.num_experts_per_tok, config.expert_intermediate_size
    flat = x.reshape(-1, x.shape[-1])  # [N, H]
    probabilities = torch.softmax(F.linear(flat, block.gate.weight).float(), dim=-1)  # [N, E], fp32 as at inference
    top_weights, top_ids = probabilities.topk(top_k, dim=-1)
    if config.norm_topk_prob:
        top_weights = top_weights / top_weights.sum(dim=-1, keepdim=True)
    routing = torch.zeros_like(probabilities).scatter(1, top_ids, top_weights)  # [N, E], 0 where not routed
    w13, w2 = block.experts.w13, block.experts.w2  # [E, 2I, H], [E, H, I]
    gate_up = F.linear(flat, w13.reshape(experts * 2 * width, -1)).view(-1, experts, 2 * width)
    gate, up = gate_up.split(width, dim=-1)
    hidden = F.silu(gate) * up * routing[..., None].to(gate.dtype)  # [N, E, I]
    down = w2.permute(1, 0, 2).reshape(w2.shape[1], experts * width)  # [H, E * I], column e * I + i = w2[e, :, i]
    out = F.linear(hidden.reshape(flat.shape[0], -1), down)
    routed_share = torch.zeros_like(probabilities).scatter(1, top_ids, 1.0).mean(dim=0) / top_k  # f_e, sums to 1
    balance = experts * (routed_share * probabilities.mean(dim=0)).sum()
    return out.view_as(x), balance
