"""Prefill attention over the paged KV cache: a chunk of one sequence's new tokens attends causally to the
sequence's cached prefix and to itself (GQA, fp32 online softmax), reading the keys through its block table.

Query token t of the chunk (t in [0, T)) sits at position p_t = start + t. For query head j = h*G + g of KV head h,
with c = scale * log2(e) and S = columns * block_size:
    s_tn = c * <q[t, j], K[h, n]>                                  n in [0, min(p_t + 1, S))
    out[t, j] = sum_n 2^(s_tn - m_t) V[h, n] / sum_n 2^(s_tn - m_t)      m_t = max_n s_tn
    K[h, n] = k_pool[block_table[n // block_size], h, n % block_size]                (V likewise)
`start` is read from a device tensor inside the kernel, so one launch (and one captured CUDA graph) serves every
prefix length. A program takes TOKENS consecutive tokens and all G query heads of one KV head, stacked as the
TOKENS*G rows of one tl.dot (each K/V tile is loaded once for the group), and walks the key tiles up to its last
token's position; a tile of BLOCK_N keys lies in one cache block (block_size is a multiple of BLOCK_N): one table
entry per tile, clamped into the pool. T may be read on the device too (`rows`): a captured graph for a padded
chunk of N >= T rows then serves every T; rows past T are neither read nor written.
A short chunk makes few programs, so the keys are cut into NUM_SPLITS ranges read in parallel (grid: token tiles,
KV heads, splits), each writing fp32 partials (m_i, l_i, acc_i) that a second kernel merges per (token, KV head):
    M = max_i m_i,   out = sum_i 2^(m_i - M) acc_i / sum_i 2^(m_i - M) l_i          (empty splits: m_i = -inf)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER, register_cap, sm_count
from warpcode.kernels.tuning import TunedTables, kernel_settings

_TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


@dataclass(frozen=True)
class PrefillAttentionSettings:
    """The default launch of a chunk; the defaults (as measured on the H200) serve devices without measurements:
    128 rows, 64 keys, 8 warps, 3 stages capped at 128 registers a thread (two programs share an SM, so one's
    softmax runs beside the other's tensor-core work); splits of the keys until about programs_per_sm programs
    wait per SM."""

    rows: int = 128
    block_n: int = 64  # at most the cache block
    warps: int = 8
    stages: int = 3
    max_registers: int | None = 128
    max_splits: int = 8
    programs_per_sm: int = 4
    merge_warps: int = 4


def prefill_attention_settings(tables: TunedTables | None = None) -> PrefillAttentionSettings:
    return kernel_settings(PrefillAttentionSettings, "prefill_attention", tables)


class PrefillAttentionConfig(NamedTuple):
    rows: int  # query rows per program (tokens x the GQA group)
    block_n: int  # keys per tile; divides the cache block
    warps: int
    stages: int
    splits: int  # key ranges read in parallel, merged by _merge_splits_kernel
    max_registers: int | None = None  # per thread (Triton's maxnreg): a cap lets two programs share an SM


@triton.jit
def _attend_tile(
    q, k_tile, v_tile, table_ptr, n_start, end, position, offs_n, d_mask, m_i, l_i, acc, qk_scale, num_blocks,
    stride_kb, stride_kn, stride_vb, stride_vn, CACHE_BLOCK: tl.constexpr, DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr, MASKED: tl.constexpr, EVEN_D: tl.constexpr,
):  # fmt: skip
    """The BLOCK_N keys from n_start into the rows' running (max, sum, accumulator); MASKED: keys past `end` or
    past a row's position are dropped (else every key of the tile is every row's)."""
    block = tl.load(table_ptr + n_start // CACHE_BLOCK)
    block = tl.minimum(tl.maximum(block, 0), num_blocks - 1).to(tl.int64)
    offset = n_start % CACHE_BLOCK
    keys = n_start + offs_n
    k_ptrs = k_tile + block * stride_kb + offset * stride_kn
    v_ptrs = v_tile + block * stride_vb + offset * stride_vn
    if MASKED:
        tile_mask = (keys < end)[:, None] & d_mask[None, :]
        k = tl.load(k_ptrs, mask=tile_mask, other=0.0)
        v = tl.load(v_ptrs, mask=tile_mask, other=0.0)
    elif EVEN_D:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    else:
        k = tl.load(k_ptrs, mask=d_mask[None, :], other=0.0)
        v = tl.load(v_ptrs, mask=d_mask[None, :], other=0.0)
    s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=DOT_PRECISION)
    if MASKED:
        s = tl.where((keys[None, :] <= position[:, None]) & (keys < end)[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet (in its split): all weights 0
        p = tl.exp2(s - m_safe[:, None])
    else:  # every row sees every key, so m_new is finite and the scale folds into one FFMA per score
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        m_safe = m_new
        p = tl.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), acc * alpha[:, None], input_precision=DOT_PRECISION)
    return m_new, l_i, acc


@triton.jit
def _paged_prefill_attention_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, start_ptr, rows_ptr, out_ptr, m_ptr, l_ptr, acc_ptr,
    T, S, num_blocks, qk_scale,
    stride_qt, stride_qh,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ot, stride_oh,
    D: tl.constexpr, G: tl.constexpr, TOKENS: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, CACHE_BLOCK: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    ROWS_ON_DEVICE: tl.constexpr, NUM_SPLITS: tl.constexpr, HQ: tl.constexpr,
):  # fmt: skip
    tile, kv, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if ROWS_ON_DEVICE:
        T = tl.load(rows_ptr)
    rows = tl.arange(0, ROWS)
    token = tile * TOKENS + rows // G  # [ROWS]
    head = kv * G + rows % G
    row_mask = (rows < TOKENS * G) & (token < T)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < D
    q = tl.load(
        q_ptr + token[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
        mask=row_mask[:, None] & d_mask[None, :], other=0.0,
    ).to(DOT_DTYPE)  # fmt: skip
    start = tl.load(start_ptr)
    position = start + token  # [ROWS]
    end = tl.minimum(start + tl.minimum(tile * TOKENS + TOKENS, T), S)  # keys the tile's last token sees
    end = tl.where(tile * TOKENS < T, end, 0)  # a tile wholly past T reads nothing
    offs_n = tl.arange(0, BLOCK_N)
    k_tile = k_ptr + kv * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :]
    v_tile = v_ptr + kv * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :]
    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], tl.float32)
    # This split's keys [low, high); keys before the tile's first token are every row's: those whole tiles need no
    # mask, the rest do.
    chunk = tl.cdiv(tl.cdiv(end, NUM_SPLITS), BLOCK_N) * BLOCK_N
    low = split * chunk
    high = tl.minimum(low + chunk, end)
    unmasked_end = tl.maximum(tl.minimum(tl.minimum(start + tile * TOKENS + 1, end) // BLOCK_N * BLOCK_N, high), low)
    for n_start in range(low, unmasked_end, BLOCK_N):
        m_i, l_i, acc = _attend_tile(
            q, k_tile, v_tile, table_ptr, n_start, end, position, offs_n, d_mask, m_i, l_i, acc, qk_scale, num_blocks,
            stride_kb, stride_kn, stride_vb, stride_vn, CACHE_BLOCK, DOT_DTYPE, DOT_PRECISION, False, D == BLOCK_D,
        )  # fmt: skip
    for n_start in range(unmasked_end, high, BLOCK_N):
        m_i, l_i, acc = _attend_tile(
            q, k_tile, v_tile, table_ptr, n_start, end, position, offs_n, d_mask, m_i, l_i, acc, qk_scale, num_blocks,
            stride_kb, stride_kn, stride_vb, stride_vn, CACHE_BLOCK, DOT_DTYPE, DOT_PRECISION, True, D == BLOCK_D,
        )  # fmt: skip
    if NUM_SPLITS == 1:
        out = acc / l_i[:, None]
        tl.store(
            out_ptr + token[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & d_mask[None, :],
        )  # fmt: skip
    else:  # partials [T, Hq, NUM_SPLITS] (+ D), contiguous; an empty split writes (-inf, 0, 0)
        partial = (token * HQ + head) * NUM_SPLITS + split
        tl.store(m_ptr + partial, m_i, mask=row_mask)
        tl.store(l_ptr + partial, l_i, mask=row_mask)
        tl.store(acc_ptr + partial[:, None] * D + offs_d[None, :], acc, mask=row_mask[:, None] & d_mask[None, :])


@triton.jit
def _merge_splits_kernel(
    m_ptr, l_ptr, acc_ptr, rows_ptr, out_ptr, T, stride_ot, stride_oh,
    D: tl.constexpr, G: tl.constexpr, HQ: tl.constexpr, NUM_SPLITS: tl.constexpr, BLOCK_G: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr, ROWS_ON_DEVICE: tl.constexpr,
):  # fmt: skip
    """out[t, j] = sum_i 2^(m_i - M) acc_i / sum_i 2^(m_i - M) l_i over the splits i, M = max_i m_i, for the G query
    heads j of one (token, KV head): their partials are one contiguous [G, NUM_SPLITS, D] run, read in one step."""
    token, kv = tl.program_id(0), tl.program_id(1)
    if ROWS_ON_DEVICE:
        T = tl.load(rows_ptr)
    if token < T:
        heads = kv * G + tl.arange(0, BLOCK_G)
        splits = tl.arange(0, BLOCK_S)
        offs_d = tl.arange(0, BLOCK_D)
        head_mask = heads < (kv + 1) * G
        ml_mask = head_mask[:, None] & (splits < NUM_SPLITS)[None, :]  # [BLOCK_G, BLOCK_S]
        partial = (token * HQ + heads[:, None]) * NUM_SPLITS + splits[None, :]
        m = tl.load(m_ptr + partial, mask=ml_mask, other=float("-inf"))
        l = tl.load(l_ptr + partial, mask=ml_mask, other=0.0)
        acc = tl.load(acc_ptr + partial[:, :, None] * D + offs_d[None, None, :],
                      mask=ml_mask[:, :, None] & (offs_d < D)[None, None, :], other=0.0)  # fmt: skip
        weight = tl.exp2(m - tl.max(m, axis=1)[:, None])  # the empty splits' m is -inf: weight 0
        out = tl.sum(acc * weight[:, :, None], axis=1) / tl.sum(l * weight, axis=1)[:, None]
        out_ptrs = out_ptr + token * stride_ot + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=head_mask[:, None] & (offs_d < D)[None, :])


def paged_prefill_attention(
    q: torch.Tensor,  # [T, Hq, D]: the chunk's queries, normalised and rotated
    k_pool: torch.Tensor,  # [num_blocks, Hkv, block_size, D]
    v_pool: torch.Tensor,  # [num_blocks, Hkv, block_size, D]
    block_table: torch.Tensor,  # int32 [columns]: the sequence's blocks
    start: torch.Tensor,  # int32 [1] on the device: the chunk's first position (its cached prefix length)
    scale: float | None = None,
    out: torch.Tensor | None = None,  # [T, Hq, D] q.dtype
    rows: torch.Tensor | None = None,  # int32 [1] on the device: only q's first `rows` rows are real
    config: tuple[int, ...] | None = None,  # PrefillAttentionConfig's fields, in order
) -> torch.Tensor:
    """The chunk's attention output [T, Hq, D] (with `rows`, rows past it are left as they are in `out`); its own
    keys must already be in the pool."""
    tokens, q_heads, dim = q.shape
    num_blocks, kv_heads, cache_block, pool_dim = k_pool.shape
    if v_pool.shape != k_pool.shape or pool_dim != dim or q_heads % kv_heads:
        raise ValueError(f"q {tuple(q.shape)} does not match the pools {tuple(k_pool.shape)}/{tuple(v_pool.shape)}")
    if block_table.dtype != torch.int32 or block_table.dim() != 1 or start.dtype != torch.int32 or start.numel() != 1:
        raise ValueError("block_table must be int32 [columns] and start int32 [1]")
    if rows is not None and (rows.dtype != torch.int32 or rows.numel() != 1):
        raise ValueError("rows must be int32 [1]")
    if q.stride(-1) != 1 or k_pool.stride(-1) != 1 or v_pool.stride(-1) != 1:
        raise ValueError("the head dimension must be contiguous in q and in the pools")
    out = torch.empty_like(q) if out is None else out
    if out.shape != q.shape or out.stride(-1) != 1:
        raise ValueError(f"out must be {tuple(q.shape)} with a contiguous head dimension")
    group = q_heads // kv_heads
    settings = prefill_attention_settings()
    rows_per_program, block_n, warps, stages, splits, max_registers = (
        PrefillAttentionConfig(*config)
        if config
        else default_config(tokens, group, kv_heads, cache_block, sm_count(q.device) if q.is_cuda else None, settings)
    )
    token_tile = max(1, rows_per_program // group)
    if cache_block % block_n:
        raise ValueError(f"the cache block ({cache_block} slots) must be a multiple of {block_n}")
    dot_dtype = _TL_DTYPES[q.dtype]
    if dot_dtype == tl.bfloat16 and INTERPRETER:
        dot_dtype = tl.float32  # the CPU interpreter multiplies bf16 dot operands as their raw uint16 bits
    grid = (triton.cdiv(tokens, token_tile), kv_heads, splits)
    if splits == 1:  # the kernel writes out itself: no partials (never dereferenced)
        m = l = acc = out
    else:
        m = torch.empty((tokens, q_heads, splits), device=q.device, dtype=torch.float32)
        l = torch.empty_like(m)
        acc = torch.empty((tokens, q_heads, splits, dim), device=q.device, dtype=torch.float32)
    _paged_prefill_attention_kernel[grid](
        q, k_pool, v_pool, block_table, start, start if rows is None else rows, out, m, l, acc,
        tokens, block_table.numel() * cache_block, num_blocks, (scale or dim**-0.5) * math.log2(math.e),
        q.stride(0), q.stride(1),
        k_pool.stride(0), k_pool.stride(1), k_pool.stride(2),
        v_pool.stride(0), v_pool.stride(1), v_pool.stride(2),
        out.stride(0), out.stride(1),
        D=dim, G=group, TOKENS=token_tile, ROWS=max(16, triton.next_power_of_2(token_tile * group)),
        BLOCK_N=block_n, BLOCK_D=max(16, triton.next_power_of_2(dim)), CACHE_BLOCK=cache_block,
        DOT_DTYPE=dot_dtype, DOT_PRECISION="ieee" if dot_dtype == tl.float32 else "tf32",
        ROWS_ON_DEVICE=rows is not None, NUM_SPLITS=splits, HQ=q_heads, num_warps=warps, num_stages=stages,
        **register_cap(max_registers),
    )  # fmt: skip
    if splits > 1:
        _merge_splits_kernel[(tokens, kv_heads)](
            m, l, acc, start if rows is None else rows, out, tokens, out.stride(0), out.stride(1),
            D=dim, G=group, HQ=q_heads, NUM_SPLITS=splits, BLOCK_G=triton.next_power_of_2(group),
            BLOCK_S=triton.next_power_of_2(splits), BLOCK_D=triton.next_power_of_2(dim),
            ROWS_ON_DEVICE=rows is not None, num_warps=settings.merge_warps,
        )  # fmt: skip
    return out


def default_config(
    tokens: int, group: int, kv_heads: int, cache_block: int, sms: int | None, settings: PrefillAttentionSettings
) -> PrefillAttentionConfig:
    """The settings' tiles, and splits of the keys until about settings.programs_per_sm programs wait on each of
    `sms` SMs (None: off the GPU, one split)."""
    programs = triton.cdiv(tokens, max(1, settings.rows // group)) * kv_heads
    slots = programs if sms is None else settings.programs_per_sm * sms
    splits = max(1, min(settings.max_splits, slots // programs))
    block_n = min(settings.block_n, cache_block)
    return PrefillAttentionConfig(
        settings.rows, block_n, settings.warps, settings.stages, splits, settings.max_registers
    )


def paged_prefill_attention_reference(q, k_pool, v_pool, block_table, start: int, scale: float | None = None):
    """float64: the sequence's first start + T keys gathered through the table, causal attention (lower right)."""
    tokens, q_heads, dim = q.shape
    kv_heads, cache_block = k_pool.shape[1], k_pool.shape[2]
    end = start + tokens
    slots = torch.arange(end)
    blocks = block_table.long()[slots // cache_block]
    keys = k_pool[blocks, :, slots % cache_block].double()  # [end, Hkv, D]
    values = v_pool[blocks, :, slots % cache_block].double()
    group = q_heads // kv_heads
    keys, values = keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)  # [end, Hq, D]
    scores = torch.einsum("thd,nhd->htn", q.double(), keys) * (scale or dim**-0.5)
    visible = slots[None, :] <= (start + torch.arange(tokens))[:, None]  # [T, end]
    weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    return torch.einsum("htn,nhd->thd", weights, values)
