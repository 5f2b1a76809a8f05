"""One decode step for a batch of rows: one new token per row through every layer, sampled on the device.

Everything the step reads or changes lives in `DecodeState` device tensors and the step has static shapes and no
host synchronisation, so CUDA graphs capture it once per batch size and replay it (see decode_runner.py).
Row b holds `seq_lens[b]` tokens in its cache: the step embeds `tokens[b]` at position seq_lens[b], writes its key
and value to that slot (through the row's block table), attends to slots [0, seq_lens[b]], samples the next token
into `tokens[b]` and adds 1. It comes in two halves, `decode_forward` (every layer, the logits into
`state.logits`) and `choose_next_tokens` (the sample), captured as two graphs: between them the serving engine can
still write what the choice reads (a grammar's token masks) while the forward runs.

Per layer (fused kernels from warpcode.kernels; their PyTorch references off the GPU). The residual stream is one
buffer h [B, H], and each add + RMSNorm is folded into the kernels around it (kernels/gemv.py, warp_decode.py):
    qkv = gemv(h, Wqkv, norm_weight=input_norm)                            # RMSNorm(h) in the GEMV's prologue
    q = qk_norm_rope_cache(qkv, ...)                                       # q/k norm, RoPE, K/V cache write
    attn = decode_attention(q, cache, seq_lens + 1)                        # split-KV flash decoding, one launch
    h = gemv(attn, Wo, residual=h, out=h)                                  # h + attn @ Wo in the epilogue
    logits = gemv(h, Wrouter, norm_weight=post_norm, normed_out=normed)    # one more program stores RMSNorm(h)
    h = moe(normed, route(logits), residual=h)                             # softmax + top-k kernel; warp decode
                                                                           # adds h in its last kernel
At one row on the GPU an MoE layer instead routes beside its o_proj, from weights folded at load time
(prepare_for_decode, kernels/o_proj_router.py): the router GEMV leaves the chain:
    h_new, z = o_proj_router(attn, Wo, h, fold)                            # h + attn @ Wo; Wr (post_norm * that)
    ids = route(z, rms_of=h_new, normed_out=normed, prefetch=W13)          # z * rstd(h_new); stores RMSNorm(h_new);
                                                                           # the experts' first rows to L2
    h = moe(normed, ids, residual=h_new)                                   # warp decode (`adds_residual`)
A fusion applies where its kernel runs: the GEMV where it measured faster than cuBLAS (`uses_gemv`: every projection
at one row, narrow outputs such as the router up to 8 rows, MX q/k/v at two rows), warp decode up to its crossover
token count without a shared expert. Elsewhere (cuBLAS, the expert-centric path, dense MLP layers, off the GPU) the
output waits as `pending` and the next norm is the add + RMSNorm kernel:
    normed, h = add_rmsnorm(pending, norm_weight, h)                       # h + pending, then RMSNorm: one kernel
The final norm is always that kernel; greedy steps end in kernels/greedy.py's two launches (argmax into tokens,
steps and seq_lens + 1). The adds round as the eager model does (the projection, then the sum with h);
the norm kernel and the stored `normed` round RMSNorm's steps as it does too, while a GEMV with the norm prologue
multiplies the normalised input before rounding it (one rounding fewer, see kernels/gemv.py), which keeps the
prologue in the same pass over h as the product: measured faster than the norm kernel only that way.

With weights="mxfp8" the projections and experts are MXTensors (mx_weights.py): the GEMV, o_proj_router (with the
router folded over the MX o_proj) and warp decode read them as they are; every other product goes through
mx_weights.linear.

Its logits are tested against the reference forward (model.py) in tests/model_runtime/test_decode.py (eager, every
architecture) and test_decode_gpu.py (graphs equal eager; bf16 as close to fp32 as the bf16 reference is), and the
fused kernels against their unfused fallbacks in test_decode_fused.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from warpcode.kernels.attention_splits import fetches_before_wait
from warpcode.kernels.decode_attention import decode_attention
from warpcode.kernels.dispatch import route
from warpcode.kernels.gemv import gemv
from warpcode.kernels.greedy import greedy_finish
from warpcode.kernels.norm import add_rmsnorm
from warpcode.kernels.o_proj_router import fits, o_proj_router, router_fold
from warpcode.kernels.rope_cache import qk_norm_rope_cache
from warpcode.model_runtime.attention import Attention
from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.layers import RotaryEmbedding
from warpcode.model_runtime.model import DecoderLayer, MoeForCausalLM
from warpcode.model_runtime.moe_block import SparseMoeBlock
from warpcode.model_runtime.mx_weights import linear, uses_gemv
from warpcode.model_runtime.sampling import SamplingParams, SamplingTensors, sample_on_device
from warpcode.model_runtime.token_mask import apply_token_mask

SCRATCH_BLOCK = 0  # the pool's reserved block: padding rows (of a batch or a padded chunk) write their keys there


@dataclass
class DecodeState:
    """Device buffers of up to `slots` decoding rows over a paged KV cache: one pool of blocks per layer, and a
    block table per row (slot s of row b lives at block block_tables[b, s // block_size], offset s % block_size)."""

    keys: list[torch.Tensor]  # per layer [num_blocks, kv_heads, block_size, head_dim]
    values: list[torch.Tensor]  # per layer [num_blocks, kv_heads, block_size, head_dim]
    block_tables: torch.Tensor  # int32 [slots, max_blocks]
    tokens: torch.Tensor  # int64 [slots]: each row's next input token; the step overwrites it with the sampled one
    seq_lens: torch.Tensor  # int32 [slots]: tokens already cached per row (= the new token's position and slot)
    sampling: SamplingTensors  # per-row sampling parameters [slots]
    seeds: torch.Tensor  # int64 [slots]: per-row random seeds; with `steps` they make sampling reproducible
    steps: torch.Tensor  # int64 [slots]: tokens sampled so far per row
    token_mask: torch.Tensor  # int32 [slots, ceil(V / 32)]: each row's allowed tokens, read by masked steps only
    logits: torch.Tensor  # [slots, V] in the model dtype: the last forward's logits, which the choice reads

    @classmethod
    def allocate(
        cls,
        config: ModelConfig,
        slots: int,
        num_blocks: int,
        block_size: int,
        max_blocks: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> DecodeState:
        shape = (num_blocks, config.num_key_value_heads, block_size, config.head_dim)
        # Zeroed so that slots never written (batch padding) hold finite values.
        layers = range(config.num_hidden_layers)
        return cls(
            keys=[torch.zeros(shape, device=device, dtype=dtype) for _ in layers],
            values=[torch.zeros(shape, device=device, dtype=dtype) for _ in layers],
            block_tables=torch.zeros((slots, max_blocks), device=device, dtype=torch.int32),
            tokens=torch.zeros(slots, device=device, dtype=torch.long),
            seq_lens=torch.zeros(slots, device=device, dtype=torch.int32),
            sampling=SamplingTensors.allocate(slots, device),
            seeds=torch.zeros(slots, device=device, dtype=torch.long),
            steps=torch.zeros(slots, device=device, dtype=torch.long),
            token_mask=torch.full((slots, (config.vocab_size + 31) // 32), -1, device=device, dtype=torch.int32),
            logits=torch.zeros((slots, config.vocab_size), device=device, dtype=dtype),
        )

    @classmethod
    def allocate_static(
        cls, config: ModelConfig, slots: int, capacity: int, block_size: int, device: torch.device, dtype: torch.dtype
    ) -> DecodeState:
        """`slots` rows of `capacity` tokens each (a multiple of block_size), row b owning consecutive blocks."""
        per_row = -(-capacity // block_size)
        state = cls.allocate(config, slots, slots * per_row, block_size, per_row, device, dtype)
        state.block_tables.copy_(torch.arange(slots * per_row, dtype=torch.int32).view(slots, per_row))
        return state

    @property
    def slots(self) -> int:
        return self.tokens.shape[0]

    @property
    def block_size(self) -> int:
        return self.keys[0].shape[2]

    @property
    def capacity(self) -> int:
        """Tokens one row can hold: its table's width in slots."""
        return self.block_tables.shape[1] * self.block_size


def prepare_for_decode(model: MoeForCausalLM, fold_routers: bool | None = None) -> None:
    """One-time weight preparation the decode step relies on: fused q/k/v projections, and (by default on the GPU,
    where the fused kernel runs) the folded router weights of each MoE layer that can route beside its o_proj
    (kernels/o_proj_router.py). The fold is a copy: weights changed afterwards need this called again."""
    for layer in model.model.layers:
        layer.self_attn.fuse_qkv()
        attn, mlp = layer.self_attn, layer.mlp
        wanted = attn.o_proj.weight.is_cuda if fold_routers is None else fold_routers
        foldable = isinstance(mlp, SparseMoeBlock) and mlp.shared_expert is None and attn.o_proj.bias is None
        layer.router_fold = None
        if wanted and foldable and fits(*attn.o_proj.weight.shape):
            with torch.no_grad():
                layer.router_fold = router_fold(mlp.gate.weight, layer.post_attention_layernorm.weight,
                                                attn.o_proj.weight)  # fmt: skip


def decode_step(
    model: MoeForCausalLM,
    state: DecodeState,
    batch: int,
    sampling: str,
    table_columns: int | None = None,
    *,  # by name: two optional steps of the logits that a positional argument could swap
    process: Callable[[torch.Tensor], torch.Tensor] | None = None,
    masked: bool = False,
) -> torch.Tensor:
    """Advances rows [0, batch) of `state` by one token (see the module docstring): `decode_forward`, then
    `choose_next_tokens`. Returns the model's logits [batch, V], before `process` and the masks."""
    logits = decode_forward(model, state, batch, table_columns)
    choose_next_tokens(state, logits, batch, sampling, process=process, masked=masked)
    return logits


def decode_forward(
    model: MoeForCausalLM, state: DecodeState, batch: int, table_columns: int | None = None
) -> torch.Tensor:
    """The forward half of a step: rows [0, batch) of `state` through every layer (each row's key and value written
    to its slot), their logits [batch, V] into `state.logits`. Tokens, lengths and steps stay as they were, so the
    host may still prepare what the choice needs (a grammar's masks) while this runs. `table_columns`: the
    block-table columns attention reads (default all): a step for shorter rows launches attention over that many
    blocks only."""
    config = model.config
    seq_lens = state.seq_lens[:batch]
    tables = state.block_tables[:batch, :table_columns]
    attend_lens = seq_lens + 1
    h = model.model.embed_tokens(state.tokens[:batch])  # [B, H]: the residual stream
    pending, eps = None, config.rms_norm_eps  # pending: a layer output [B, H] not yet added to h
    # Attention's one-tile splits fetch the cache before their wait: the RoPE kernel then lets them launch early.
    capacity = tables.shape[1] * state.block_size
    attention_fetches_early = fetches_before_wait(batch, config.num_key_value_heads, capacity, h.device)
    for index, layer in enumerate(model.model.layers):
        attn, norm_weight = layer.self_attn, layer.input_layernorm.weight
        if pending is None and uses_gemv(h, attn.qkv_weight):
            qkv = gemv(h, attn.qkv_weight, attn.qkv_bias, norm_weight=norm_weight, eps=eps)
        else:
            normed, h = add_pending_rmsnorm(h, pending, norm_weight, eps)
            qkv, pending = linear(normed, attn.qkv_weight, attn.qkv_bias), None
        out = _attention(
            attn, model.model.rotary, eps, qkv, seq_lens, attend_lens, state, tables, index, attention_fetches_early
        )
        fold = layer.router_fold
        if fold is not None and out.shape[0] == 1 and layer.mlp.adds_residual(out):
            h = _o_proj_and_routed_experts(layer, out, h, fold, eps)
            continue
        if uses_gemv(out, attn.o_proj.weight):  # nothing is pending after q/k/v: h is complete
            gemv(out, attn.o_proj.weight, attn.o_proj.bias, residual=h, out=h)
        else:
            pending = linear(out, attn.o_proj.weight, attn.o_proj.bias)
        h, pending = _mlp(layer, h, pending, eps)
    normed, _ = add_pending_rmsnorm(h, pending, model.model.norm.weight, eps)
    logits = state.logits[:batch]
    torch.mm(normed, model.output_weight.t(), out=logits)  # [B, V]: F.linear, into the state's buffer
    return logits


def choose_next_tokens(
    state: DecodeState,
    logits: torch.Tensor,
    batch: int,
    sampling: str,
    *,
    process: Callable[[torch.Tensor], torch.Tensor] | None = None,
    masked: bool = False,
) -> None:
    """The choice half of a step: each row's next token from its logits [batch, V] into `tokens`, and the step
    counted (`steps` and `seq_lens` + 1). `sampling` is the static variant ("greedy", "sample", or "filtered" when
    some row uses top-k or top-p), so each captured graph does only the work its rows need. `process` (eager steps
    only): logits -> the logits to choose from (logit_bias, penalties). `masked`: the rows' grammar masks
    (state.token_mask) apply after `process`, just before sampling (vLLM's order: a bias cannot bring back a token
    the grammar forbids)."""
    seq_lens = state.seq_lens[:batch]
    choose_from = logits if process is None else process(logits)
    if masked:
        choose_from = apply_token_mask(choose_from, state.token_mask[:batch])
    if sampling == "greedy":  # argmax into tokens, steps and seq_lens + 1: two launches
        greedy_finish(choose_from, state.tokens[:batch], (state.steps[:batch], seq_lens))
    else:
        sample_next_tokens(state, choose_from, batch, sampling)
        seq_lens += 1


def sample_next_tokens(state: DecodeState, logits: torch.Tensor, batch: int, sampling: str) -> torch.Tensor:
    """Samples rows [0, batch) from logits [batch, V] by their parameters in `state` (the static `sampling` variant,
    see `sampling_variant`), stores the tokens as the rows' next inputs and counts the step; returns the tokens."""
    if sampling == "greedy":
        tokens = logits.argmax(dim=-1)
    else:
        rows = state.sampling.rows(batch)
        tokens = sample_on_device(logits, rows, state.seeds[:batch], state.steps[:batch], sampling == "filtered")
    state.tokens[:batch].copy_(tokens)
    state.steps[:batch] += 1
    return tokens


def sampling_variant(sampling: SamplingParams) -> str:
    """The decode step's static sampling variant: "greedy", "sample", or "filtered" (sorted top-k / top-p)."""
    if sampling.greedy:
        return "greedy"
    return "filtered" if sampling.top_k > 0 or sampling.top_p < 1 else "sample"


def _attention(
    attn: Attention,
    rotary: RotaryEmbedding,
    eps: float,
    qkv: torch.Tensor,  # [B, (Hq + 2 Hkv) * D]
    seq_lens: torch.Tensor,  # int32 [B]
    attend_lens: torch.Tensor,  # int32 [B]: seq_lens + 1
    state: DecodeState,
    tables: torch.Tensor,  # int32 [B, columns]: the rows' block tables
    layer: int,
    fetches_early: bool,  # attention fetches the cache before its wait (attention_splits.fetches_before_wait)
) -> torch.Tensor:  # [B, Hq * D], before o_proj
    q_size = attn.num_heads * attn.head_dim
    qkv = attn.norm_and_clip_fused(qkv)
    per_head = attn.qk_norm == "per_head"
    inv_freq, rope_scaling = rotary.frequencies(qkv.device)
    q = qk_norm_rope_cache(
        qkv, attn.num_heads, attn.num_kv_heads, attn.head_dim,
        attn.q_norm.weight if per_head else None, attn.k_norm.weight if per_head else None, eps,
        inv_freq, rope_scaling, seq_lens, state.keys[layer], state.values[layer], seq_lens,
        early_dependents=fetches_early, block_tables=tables,
    )  # fmt: skip
    out = decode_attention(
        q, state.keys[layer], state.values[layer], attend_lens, attn.head_dim**-0.5, block_tables=tables
    )
    return out.reshape(qkv.shape[0], q_size)


def _mlp(
    layer: DecoderLayer, h: torch.Tensor, pending: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Post-attention norm + MLP of h + pending -> (h, the MLP output still to add, or None where the experts'
    last kernel added it to h). The routed experts read the normed input the router's GEMV stored."""
    mlp, norm_weight = layer.mlp, layer.post_attention_layernorm.weight
    if not isinstance(mlp, SparseMoeBlock):
        normed, h = add_pending_rmsnorm(h, pending, norm_weight, eps)
        return h, mlp(normed)
    if pending is None and uses_gemv(h, mlp.gate.weight):
        normed = torch.empty_like(h)
        router_logits = gemv(h, mlp.gate.weight, norm_weight=norm_weight, eps=eps, normed_out=normed)
    else:
        normed, h = add_pending_rmsnorm(h, pending, norm_weight, eps)
        router_logits = linear(normed, mlp.gate.weight, None)
    topk_weights, topk_ids = route(router_logits, mlp.top_k, mlp.normalize)
    if mlp.adds_residual(normed):
        return mlp.experts_forward(normed, topk_weights, topk_ids, residual=h), None
    return h, mlp.experts_forward(normed, topk_weights, topk_ids)


def _o_proj_and_routed_experts(
    layer: DecoderLayer, out: torch.Tensor, h: torch.Tensor, fold: tuple[torch.Tensor, torch.Tensor], eps: float
) -> torch.Tensor:
    """One row: o_proj and the router's logits in one launch, then route (the logits scaled by RMSNorm's rstd of
    the new h; the kernel stores the normed h too and prefetches the routed experts' first gate/up rows to L2), the
    experts adding their output to the new h -> [1, H]."""
    mlp, norm_weight = layer.mlp, layer.post_attention_layernorm.weight
    h_new, z = o_proj_router(out, layer.self_attn.o_proj.weight, h, fold)
    normed = torch.empty_like(h_new)
    topk_weights, topk_ids = route(
        z, mlp.top_k, mlp.normalize, rms_of=h_new, eps=eps, norm_weight=norm_weight, normed_out=normed,
        prefetch=mlp.experts.w13,
    )  # fmt: skip
    return mlp.experts_forward(normed, topk_weights, topk_ids, residual=h_new)


def add_pending_rmsnorm(
    h: torch.Tensor, pending: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(h + pending), h + pending) in one kernel; the norm alone when nothing is pending."""
    if pending is None:
        return add_rmsnorm(h, weight, eps, None)
    return add_rmsnorm(pending, weight, eps, h)
