"""Prefill over the paged KV cache: the new tokens of several sequences in one forward pass.

Each chunk is a run of one sequence's tokens starting at position `start`, whose earlier `start` tokens are already
in the cache (a prefix-cache hit, or the chunks before it). The chunks' tokens are packed into one [N, H] batch for
the projections and the experts (the expensive part). Per layer and chunk, the decode step's fused kernel
normalises q and k, rotates them and writes the keys and values into the chunk's blocks (its tokens are its rows,
every row reading the sequence's one block table); attention then reads the sequence's keys back from the pool and
attends causally (lower-right when the chunk continues a cached prefix) with PyTorch's fused
scaled_dot_product_attention. The residual adds and norms are the decode step's add + RMSNorm kernel.
Its logits are tested against the reference forward (model.py) in tests/model_runtime/test_prefill.py.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from warpcode.kernels.norm import add_rmsnorm
from warpcode.kernels.rope_cache import qk_norm_rope_cache
from warpcode.model_runtime.attention import Attention
from warpcode.model_runtime.decode_step import DecodeState, add_pending_rmsnorm
from warpcode.model_runtime.layers import RotaryEmbedding
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.model_runtime.mx_weights import linear


@dataclass
class PrefillChunk:
    token_ids: list[int]  # the chunk's tokens, at positions [start, start + len)
    start: int
    block_table: list[int]  # the sequence's blocks, covering at least start + len slots
    logits: int = 1  # the chunk's last positions whose logits the pass returns (a verify step wants them all)


@dataclass
class _Packed:  # the chunks on the device
    positions: torch.Tensor  # int64 [N]
    tables: list[torch.Tensor]  # per chunk: int32 [blocks] of its sequence
    bounds: list[tuple[int, int, int]]  # per chunk: (first row in N, rows, start position)


@torch.inference_mode()
def prefill_forward(model: MoeForCausalLM, state: DecodeState, chunks: list[PrefillChunk]) -> torch.Tensor:
    """Writes every chunk's keys and values into `state`'s pool; returns fp32 logits at each chunk's last
    `chunk.logits` tokens, chunk after chunk ([len(chunks), V] when each asks for its last token only)."""
    steps = prefill_in_steps(model, state, chunks, len(model.model.layers))
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def prefill_in_steps(
    model: MoeForCausalLM, state: DecodeState, chunks: list[PrefillChunk], layers_per_step: int
) -> Generator[None, None, torch.Tensor]:
    """`prefill_forward` in pieces: each `next` runs `layers_per_step` more layers, so that the serving engine can
    run decode steps between them (a long prompt's chunk then delays running streams by a few layers, not by a
    whole pass); the generator returns the logits. Run it under inference mode."""
    device, eps = state.keys[0].device, model.config.rms_norm_eps
    bounds, first = [], 0
    for chunk in chunks:
        bounds.append((first, len(chunk.token_ids), chunk.start))
        first += len(chunk.token_ids)
    packed = _Packed(
        positions=torch.cat([torch.arange(c.start, c.start + len(c.token_ids)) for c in chunks]).to(device),
        tables=[torch.tensor(c.block_table, dtype=torch.int32).to(device) for c in chunks],
        bounds=bounds,
    )
    input_ids = torch.tensor([t for c in chunks for t in c.token_ids], dtype=torch.long).to(device)
    h = model.model.embed_tokens(input_ids)  # [N, H]: the residual stream
    pending = None  # a layer output [N, H] not yet added to h
    for index, layer in enumerate(model.model.layers):
        normed, h = add_pending_rmsnorm(h, pending, layer.input_layernorm.weight, eps)
        out = _attention(layer.self_attn, model.model.rotary, eps, normed, state, index, packed)
        normed, h = add_pending_rmsnorm(h, linear(out, layer.self_attn.o_proj.weight, layer.self_attn.o_proj.bias),
                                 layer.post_attention_layernorm.weight, eps)  # fmt: skip
        pending = layer.mlp(normed)
        if (index + 1) % layers_per_step == 0 and index + 1 < len(model.model.layers):
            yield
    ends = [(first + rows, chunk.logits) for chunk, (first, rows, _) in zip(chunks, bounds, strict=True)]
    last = torch.tensor([row for end, count in ends for row in range(end - count, end)], device=device)
    normed, _ = add_rmsnorm(pending[last], model.model.norm.weight, eps, h[last])
    return F.linear(normed, model.output_weight).float()


def _attention(
    attn: Attention,
    rotary: RotaryEmbedding,
    eps: float,
    x: torch.Tensor,  # [N, H], normed
    state: DecodeState,
    layer: int,
    packed: _Packed,
) -> torch.Tensor:  # [N, Hq * D], before o_proj
    q_size = attn.num_heads * attn.head_dim
    qkv = attn.norm_and_clip_fused(linear(x, attn.qkv_weight, attn.qkv_bias))  # [N, (Hq + 2 Hkv) D]
    per_head = attn.qk_norm == "per_head"
    inv_freq, rope_scaling = rotary.frequencies(qkv.device)
    key_pool, value_pool = state.keys[layer], state.values[layer]  # [blocks, Hkv, block_size, D]
    outputs = []
    for table, (first, rows, start) in zip(packed.tables, packed.bounds, strict=True):
        positions = packed.positions[first : first + rows]
        q = qk_norm_rope_cache(
            qkv[first : first + rows], attn.num_heads, attn.num_kv_heads, attn.head_dim,
            attn.q_norm.weight if per_head else None, attn.k_norm.weight if per_head else None, eps,
            inv_freq, rope_scaling, positions, key_pool, value_pool, positions,
            block_tables=table[None].expand(rows, -1),
        )  # fmt: skip  # q [rows, Hq, D]
        end = start + rows
        used = table[: -(-end // state.block_size)]
        keys, values = _gather(key_pool, used, end), _gather(value_pool, used, end)  # [1, Hkv, end, D]
        mask = None if start == 0 else causal_lower_right(rows, end)
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1)[None], keys, values, attn_mask=mask, is_causal=start == 0,
            scale=attn.head_dim**-0.5, enable_gqa=attn.num_heads != attn.num_kv_heads,
        )  # fmt: skip  # [1, Hq, rows, D]
        outputs.append(out[0].transpose(0, 1).reshape(rows, q_size))
    return torch.cat(outputs) if len(outputs) > 1 else outputs[0]


def _gather(pool: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """A sequence's first `length` cached keys (or values) [1, Hkv, length, D] from its blocks."""
    gathered = pool[blocks.long()]  # [n, Hkv, block_size, D]
    n, heads, size, dim = gathered.shape
    return gathered.transpose(0, 1).reshape(1, heads, n * size, dim)[:, :, :length]
