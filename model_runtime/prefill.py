"""Prefill over the paged KV cache: the new tokens of several sequences in one forward pass.

Each chunk is a run of one sequence's tokens starting at position `start`, whose earlier `start` tokens are already
in the cache (a prefix-cache hit, or the chunks before it). The chunks' tokens are packed into one [1, N] batch for
the projections and the experts (the expensive part); each chunk writes its keys and values into its blocks and
attends, causally, to its sequence's cached keys and its own: one fused attention call per chunk (PyTorch's
scaled_dot_product_attention, lower-right causal when the chunk continues a cached prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from warpcode.model_runtime.attention import Attention
from warpcode.model_runtime.decode_step import DecodeState
from warpcode.model_runtime.layers import apply_rotary
from warpcode.model_runtime.model import MoeForCausalLM


@dataclass
class PrefillChunk:
    token_ids: list[int]  # the chunk's tokens, at positions [start, start + len)
    start: int
    block_table: list[int]  # the sequence's blocks, covering at least start + len slots


@torch.inference_mode()
def prefill_forward(model: MoeForCausalLM, state: DecodeState, chunks: list[PrefillChunk]) -> torch.Tensor:
    """Writes every chunk's keys and values into `state`'s pool; returns fp32 logits [len(chunks), V] at each
    chunk's last token."""
    device, block_size = state.keys[0].device, state.block_size
    positions = torch.cat([torch.arange(c.start, c.start + len(c.token_ids)) for c in chunks])
    tables = [torch.as_tensor(c.block_table, dtype=torch.long) for c in chunks]
    blocks = torch.cat(
        [
            t[torch.arange(c.start, c.start + len(c.token_ids)) // block_size]
            for c, t in zip(chunks, tables, strict=True)
        ]
    )
    input_ids = torch.as_tensor([t for c in chunks for t in c.token_ids], dtype=torch.long, device=device)
    positions, blocks = positions.to(device), blocks.to(device)
    offsets = positions % block_size
    tables = [t.to(device) for t in tables]
    x = model.model.embed_tokens(input_ids)[None]  # [1, N, H]
    cos, sin = model.model.rotary(positions[None], x.dtype)
    for index, layer in enumerate(model.model.layers):
        normed = layer.input_layernorm(x)
        out = _attention(layer.self_attn, normed, cos, sin, state, index, chunks, tables, blocks, offsets)
        x = x + out
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    ends = torch.tensor([len(c.token_ids) for c in chunks]).cumsum(0) - 1
    last = x[0, ends.to(device)]  # [chunks, H]
    return F.linear(model.model.norm(last), model.output_weight).float()


def _attention(
    attn: Attention,
    x: torch.Tensor,  # [1, N, H]
    cos: torch.Tensor,  # [1, N, D]
    sin: torch.Tensor,
    state: DecodeState,
    layer: int,
    chunks: list[PrefillChunk],
    tables: list[torch.Tensor],  # per chunk: int64 block indices on the device
    blocks: torch.Tensor,  # int64 [N]: each token's block
    offsets: torch.Tensor,  # int64 [N]: its slot within the block
) -> torch.Tensor:  # [1, N, H]
    tokens = x.shape[1]
    q_size, kv_size = attn.num_heads * attn.head_dim, attn.num_kv_heads * attn.head_dim
    q, k, v = F.linear(x, attn.qkv_weight, attn.qkv_bias).split((q_size, kv_size, kv_size), dim=-1)  # one GEMM
    if attn.qk_norm == "full":
        q, k = attn.q_norm(q), attn.k_norm(k)
    if attn.clip_qkv is not None:
        q, k, v = (t.clamp(-attn.clip_qkv, attn.clip_qkv) for t in (q, k, v))
    q = q.view(1, tokens, attn.num_heads, attn.head_dim)
    k = k.view(1, tokens, attn.num_kv_heads, attn.head_dim)
    v = v.view(1, tokens, attn.num_kv_heads, attn.head_dim)
    if attn.qk_norm == "per_head":
        q, k = attn.q_norm(q), attn.k_norm(k)
    q = apply_rotary(q.transpose(1, 2), cos, sin)  # [1, Hq, N, D]
    k = apply_rotary(k.transpose(1, 2), cos, sin)  # [1, Hkv, N, D]
    v = v.transpose(1, 2)
    key_pool, value_pool = state.keys[layer], state.values[layer]  # [blocks, Hkv, block_size, D]
    key_pool[blocks, :, offsets] = k[0].transpose(0, 1)  # [N, Hkv, D]
    value_pool[blocks, :, offsets] = v[0].transpose(0, 1)
    outputs, first = [], 0
    gqa = attn.num_heads != attn.num_kv_heads
    for chunk, table in zip(chunks, tables, strict=True):
        count, end = len(chunk.token_ids), chunk.start + len(chunk.token_ids)
        queries = q[:, :, first : first + count]
        if chunk.start == 0:  # nothing cached before it: its own keys, plain causal
            keys, values = k[:, :, first : first + count], v[:, :, first : first + count]
            mask, causal = None, True
        else:
            used = table[: -(-end // state.block_size)]
            keys = _gather(key_pool, used, end)
            values = _gather(value_pool, used, end)
            mask, causal = causal_lower_right(count, end), False
        outputs.append(
            F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=mask, is_causal=causal, scale=attn.head_dim**-0.5, enable_gqa=gqa
            )
        )
        first += count
    out = torch.cat(outputs, dim=2) if len(outputs) > 1 else outputs[0]  # [1, Hq, N, D]
    return attn.o_proj(out.transpose(1, 2).reshape(1, tokens, attn.num_heads * attn.head_dim))


def _gather(pool: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """A sequence's first `length` cached keys (or values) [1, Hkv, length, D] from its blocks."""
    gathered = pool[blocks]  # [n, Hkv, block_size, D]
    n, heads, size, dim = gathered.shape
    return gathered.transpose(0, 1).reshape(1, heads, n * size, dim)[:, :, :length]
