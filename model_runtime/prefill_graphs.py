"""One sequence's prefill chunk in CUDA graphs: an agent's next turn (a few hundred new tokens after a cached
prefix) costs a few thousand kernel launches eagerly, most of its time on the host; replayed, the launches cost
almost nothing.

The chunk is padded to a token bucket, and everything that varies lives in static device buffers: the token ids,
the first position `start`, the real row count `rows`, the sequence's block table. Per layer: add + RMSNorm, the
fused projection, the q/k-norm + RoPE + cache-write kernel (padding rows write the scratch block, at the last real
position), paged prefill attention (kernels/prefill_attention.py: `start` and `rows` read on the device; padding rows
stay zero), o_proj, add + RMSNorm, the MoE block (the expert-centric path, whose shapes are static). A graph covers
`layers_per_graph` layers, so the engine can run decode steps between the graphs of a chunk, as it does between
the eager pass's layer groups; the residual stream h and the pending layer output live in static buffers between
them, and the last graph ends with the final norm and the LM head at the last real row. Its logits are tested
against the reference forward (model.py) in tests/model_runtime/test_prefill_graphs.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from warpcode.kernels.norm import add_rmsnorm
from warpcode.kernels.prefill_attention import paged_prefill_attention
from warpcode.kernels.rope_cache import qk_norm_rope_cache
from warpcode.kernels.tuning import PREFILL_BUCKETS
from warpcode.model_runtime.decode_step import SCRATCH_BLOCK, DecodeState, add_pending_rmsnorm
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.model_runtime.mx_weights import linear

TOKEN_BUCKETS = PREFILL_BUCKETS  # the row counts a chunk is padded to


def token_bucket(tokens: int) -> int | None:
    """The smallest bucket holding `tokens`, None past the largest."""
    return next((bucket for bucket in TOKEN_BUCKETS if bucket >= tokens), None)


@dataclass
class ChunkBuffers:
    """The static inputs and the state carried between a chunk's graphs, for the largest bucket (a bucket uses
    the first rows)."""

    input_ids: torch.Tensor  # int64 [N]
    start: torch.Tensor  # int32 [1]: the chunk's first position
    rows: torch.Tensor  # int32 [1]: its real tokens
    table: torch.Tensor  # int32 [columns]: its sequence's blocks, SCRATCH_BLOCK past them
    h: torch.Tensor  # [N, H]: the residual stream
    pending: torch.Tensor  # [N, H]: the last layer's output, not yet added to h
    logits: torch.Tensor  # fp32 [1, V] at the last real row

    @classmethod
    def allocate(cls, model: MoeForCausalLM, columns: int, device: torch.device, dtype: torch.dtype) -> ChunkBuffers:
        largest, hidden = TOKEN_BUCKETS[-1], model.config.hidden_size
        return cls(
            input_ids=torch.zeros(largest, dtype=torch.long, device=device),
            start=torch.zeros(1, dtype=torch.int32, device=device),
            rows=torch.ones(1, dtype=torch.int32, device=device),
            table=torch.zeros(columns, dtype=torch.int32, device=device),
            h=torch.zeros(largest, hidden, dtype=dtype, device=device),
            pending=torch.zeros(largest, hidden, dtype=dtype, device=device),
            logits=torch.zeros(1, model.output_weight.shape[0], dtype=torch.float32, device=device),
        )

    def load(self, token_ids: list[int], start: int, block_table: list[int]) -> None:
        """Writes a chunk's inputs (host to device copies, in stream order after the graphs already launched)."""
        count = len(token_ids)
        self.input_ids[:count].copy_(torch.tensor(token_ids, dtype=torch.long), non_blocking=True)
        self.start.fill_(start)
        self.rows.fill_(count)
        table = torch.full((self.table.numel(),), SCRATCH_BLOCK, dtype=torch.int32)
        table[: len(block_table)] = torch.tensor(block_table, dtype=torch.int32)
        self.table.copy_(table, non_blocking=True)


def run_layers(model: MoeForCausalLM, state: DecodeState, buffers: ChunkBuffers, bucket: int, first: int, last: int):
    """Layers [first, last) of the chunk in `buffers`, `bucket` rows; the LM head after the model's last layer.
    Static shapes, no host synchronisation: what a CUDA graph captures (and what runs eagerly off the GPU)."""
    config, layers = model.config, model.model.layers
    eps, device = config.rms_norm_eps, buffers.h.device
    inv_freq, rope_scaling = model.model.rotary.frequencies(device)
    index = torch.arange(bucket, device=device, dtype=torch.int32)
    real = index < buffers.rows
    positions = torch.minimum(buffers.start + index, buffers.start + buffers.rows - 1)  # padding: the last one
    row_tables = torch.where(real[:, None], buffers.table[None, :], SCRATCH_BLOCK)  # padding: the scratch block
    if first == 0:
        h = model.model.embed_tokens(buffers.input_ids[:bucket])
        pending = None
    else:
        h, pending = buffers.h[:bucket], buffers.pending[:bucket]
    for number in range(first, last):
        layer = layers[number]
        attn = layer.self_attn
        normed, h = add_pending_rmsnorm(h, pending, layer.input_layernorm.weight, eps)
        qkv = attn.norm_and_clip_fused(linear(normed, attn.qkv_weight, attn.qkv_bias))
        per_head = attn.qk_norm == "per_head"
        keys, values = state.keys[number], state.values[number]
        q = qk_norm_rope_cache(
            qkv, attn.num_heads, attn.num_kv_heads, attn.head_dim,
            attn.q_norm.weight if per_head else None, attn.k_norm.weight if per_head else None, eps,
            inv_freq, rope_scaling, positions, keys, values, positions, block_tables=row_tables,
        )  # fmt: skip
        out = torch.zeros_like(q)
        paged_prefill_attention(q, keys, values, buffers.table, buffers.start, attn.head_dim**-0.5, out, buffers.rows)
        o = linear(out.view(bucket, -1), attn.o_proj.weight, attn.o_proj.bias)
        normed, h = add_rmsnorm(o, layer.post_attention_layernorm.weight, eps, h)
        pending = layer.mlp(normed)
    if last < len(layers):
        buffers.h[:bucket].copy_(h)
        buffers.pending[:bucket].copy_(pending)
        return
    final = (buffers.rows - 1).long()
    normed, _ = add_rmsnorm(pending.index_select(0, final), model.model.norm.weight, eps, h.index_select(0, final))
    buffers.logits.copy_(F.linear(normed, model.output_weight).float())


class PrefillGraphs:
    """The captured graphs of single-chunk prefill, per (token bucket, layer group), sharing one memory pool (they
    run one after another); captured at first use or by `capture`."""

    def __init__(self, model: MoeForCausalLM, state: DecodeState, layers_per_graph: int) -> None:
        self.model, self.state = model, state
        self.groups = [
            (first, min(first + layers_per_graph, len(model.model.layers)))
            for first in range(0, len(model.model.layers), layers_per_graph)
        ]
        device, dtype = state.keys[0].device, state.keys[0].dtype
        self.buffers = ChunkBuffers.allocate(model, state.block_tables.shape[1], device, dtype)
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self._pool = None

    def steps(self, token_ids: list[int], start: int, block_table: list[int]):
        """A generator like prefill_in_steps for one chunk: each `next` replays one layer group's graph; it returns
        the logits [1, V] (a view of the static buffer: read it before the next chunk loads)."""
        bucket = token_bucket(len(token_ids))
        self.buffers.load(token_ids, start, block_table)
        for group in range(len(self.groups)):
            self._graph(bucket, group).replay()
            if group + 1 < len(self.groups):
                yield
        return self.buffers.logits

    def capture(self, max_tokens: int) -> int:
        """Captures every bucket up to `max_tokens` (the chunk loaded meanwhile writes only the scratch block);
        returns how many graphs were made."""
        made = 0
        self.buffers.load([0], 0, [])
        for bucket in TOKEN_BUCKETS:
            if bucket > max(max_tokens, TOKEN_BUCKETS[0]):
                break
            for group in range(len(self.groups)):
                made += (bucket, group) not in self._graphs
                self._graph(bucket, group)
        return made

    def _graph(self, bucket: int, group: int) -> torch.cuda.CUDAGraph:
        key = (bucket, group)
        if key not in self._graphs:
            first, last = self.groups[group]
            device = self.buffers.h.device
            saved = (self.buffers.h.clone(), self.buffers.pending.clone())
            stream = torch.cuda.Stream(device)  # a warm-up run compiles the kernels and makes cuBLAS workspaces
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream), torch.inference_mode():
                run_layers(self.model, self.state, self.buffers, bucket, first, last)
            torch.cuda.current_stream(device).wait_stream(stream)
            self.buffers.h.copy_(saved[0])
            self.buffers.pending.copy_(saved[1])
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool), torch.inference_mode():
                run_layers(self.model, self.state, self.buffers, bucket, first, last)
            self._pool = graph.pool()
            self._graphs[key] = graph
        return self._graphs[key]
