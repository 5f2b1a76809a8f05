"""Flash decoding: one new query token per sequence attends to its preallocated KV cache (GQA, fp32 softmax).

For row b, KV head h and query head j = h*G + g (G = Hq / Hkv), with L = seq_lens[b] and c = scale * log2(e):
    s_n = c * <q[b, j], K[b, h, n]>                      n in [0, L)     (base-2 logits: exp2 replaces exp)
    out[b, j] = sum_n 2^(s_n - m) V[b, h, n] / sum_n 2^(s_n - m)         m = max_n s_n
K[b, h, n] is k_cache[b, h, n] in the static layout [Bc, Hkv, S, D]. In the paged one, k_cache is a pool of blocks
[num_blocks, Hkv, block_size, D] shared by the rows and block_tables [B, max_blocks] maps a row's slots to them:
    K[b, h, n] = k_cache[block_tables[b, n // block_size], h, n % block_size]        S = max_blocks * block_size
(V likewise). Each tile then reads the table entries of its BLOCK_N keys (only of keys < L: the entries past a
row's blocks may hold anything; the block is clamped into the pool all the same) and gathers their rows; block_size
is a compile-time constant, so the division is a shift for powers of two.
The keys are cut into NUM_SPLITS chunks, read in parallel by one kernel (grid (B, Hkv, NUM_SPLITS); the tile, warps
and split count come from attention_splits.py):
    chunk = cdiv(cdiv(L, NUM_SPLITS), BLOCK_N) * BLOCK_N      split i covers [i*chunk, min((i+1)*chunk, L))
    m_i = max s_n,  l_i = sum 2^(s_n - m_i),  acc_i = sum 2^(s_n - m_i) V_n     online softmax over BLOCK_N keys
Non-empty splits are a prefix, i < cdiv(L, chunk), and only they write partials (fp32 workspaces). The merge
    M = max_i m_i,  out = sum_i 2^(m_i - M) acc_i / sum_i 2^(m_i - M) l_i         over the non-empty splits
runs in one of two places, by the number of splits (DecodeAttentionSettings.merge_kernel_min_splits):
- many splits: in a second kernel (attention_merge.py, grid (B, Hq), launched with PDL), one program per query head,
  so the merge spreads over B*Hq programs instead of the B*Hkv serial tails below;
- few splits: in the same launch (a second launch would cost more than the short tail it saves), "last program
  finishes": every program of a (row, KV head) group, empty split or not, increments the group's int32 counter
  (acq_rel, after a barrier), and the one that sees NUM_SPLITS - 1 earlier arrivals merges the group's G heads
  (attention_merge._merge_group), writes out and resets the counter to 0 for the next call. The counters are zeroed
  once and persist across calls (kernels/counters.py).
With NUM_SPLITS = 1 there is no workspace, no counter and no merge: the program normalises and writes out itself.
L is read inside the kernels, so the launches depend only on shapes and one captured CUDA graph serves every
length. A program holds all G query heads of its KV head (padded to 16 rows for tl.dot, the padding masked off),
so each K/V tile is loaded once per group. Logits and the accumulator are fp32; the probabilities enter the P V
product in the cache dtype (the usual flash-attention rounding, far below the bf16 output's own).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from warpcode.kernels.attention_merge import _merge_group, _merge_splits_kernel, _split_chunk
from warpcode.kernels.attention_splits import DecodeAttentionSettings, attention_settings, launch_config
from warpcode.kernels.counters import arrival_counters, arrive
from warpcode.kernels.launch import INTERPRETER, pdl_options, sm_count, wait_for_inputs

_FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


@triton.jit
def _attend_tile(q, k, v, valid, m_i, l_i, acc, qk_scale, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """One BLOCK_N tile of keys (`valid`: those < end) into the running (max, sum, accumulator) of the G heads."""
    s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=DOT_PRECISION) * qk_scale
    s = tl.where(valid[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=DOT_PRECISION)
    return m_new, l_i, acc


@triton.jit
def _pool_slots(slots, mask, table_row, stride_tn, num_blocks, CACHE_BLOCK: tl.constexpr):
    """Each key slot's (block, offset in it) in the paged pool. Only slots under `mask` read the row's table (its
    entries past the row's blocks may hold anything); the block is clamped into the pool all the same."""
    block = tl.load(table_row + (slots // CACHE_BLOCK) * stride_tn, mask=mask, other=0)
    return tl.minimum(tl.maximum(block, 0), num_blocks - 1).to(tl.int64), slots % CACHE_BLOCK


@triton.jit
def _load_tile(
    k_ptrs, v_ptrs, k_head, v_head, n_start, valid, tile_mask, table_row, num_blocks, offs_n, offs_d,
    stride_kb, stride_kn, stride_vb, stride_vn, stride_tn, S, PAGED: tl.constexpr, CACHE_BLOCK: tl.constexpr,
    TILE_IN_BLOCK: tl.constexpr,
):  # fmt: skip
    """The K and V tiles of keys n_start + offs_n (`valid`: those < end; masked rows load as 0): rows of the static
    cache, or each key's place in the pool, through the row's block table. TILE_IN_BLOCK: tiles start at multiples
    of BLOCK_N and blocks hold a multiple of it, so the whole tile lies in one block: one table entry (clamped to
    the row's columns, whatever n_start), then the static layout's pointers within the block."""
    if PAGED and TILE_IN_BLOCK:
        column = tl.minimum(n_start // CACHE_BLOCK, S // CACHE_BLOCK - 1)
        block = tl.load(table_row + column * stride_tn)
        block = tl.minimum(tl.maximum(block, 0), num_blocks - 1).to(tl.int64)
        offset = n_start % CACHE_BLOCK
        k = tl.load(k_ptrs + block * stride_kb + offset * stride_kn, mask=tile_mask, other=0.0)
        v = tl.load(v_ptrs + block * stride_vb + offset * stride_vn, mask=tile_mask, other=0.0)
    elif PAGED:
        block, offset = _pool_slots(n_start + offs_n, valid, table_row, stride_tn, num_blocks, CACHE_BLOCK)
        k = tl.load(k_head + (block * stride_kb + offset * stride_kn)[:, None] + offs_d[None, :], mask=tile_mask,
                    other=0.0)  # fmt: skip
        v = tl.load(v_head + (block * stride_vb + offset * stride_vn)[:, None] + offs_d[None, :], mask=tile_mask,
                    other=0.0)  # fmt: skip
    else:
        k = tl.load(k_ptrs + n_start * stride_kn, mask=tile_mask, other=0.0)
        v = tl.load(v_ptrs + n_start * stride_vn, mask=tile_mask, other=0.0)
    return k, v


@triton.jit
def _decode_attention_kernel(
    q_ptr, k_ptr, v_ptr, seq_lens_ptr, out_ptr, m_ptr, l_ptr, acc_ptr, counter_ptr,
    S, D, qk_scale,
    stride_qb, stride_qh,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_lens,
    stride_ob, stride_oh,
    stride_mb, stride_mh,
    stride_ab, stride_ah, stride_as,
    table_ptr, num_blocks, stride_tb, stride_tn,  # last: the static kernel's parameters keep their offsets
    G: tl.constexpr, NUM_SPLITS: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    MERGE_IN_KERNEL: tl.constexpr, MERGE_G: tl.constexpr, MERGE_S: tl.constexpr,
    PAGED: tl.constexpr, CACHE_BLOCK: tl.constexpr, TILE_IN_BLOCK: tl.constexpr, USE_PDL: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + b * stride_lens)
    seq_len = tl.minimum(tl.maximum(seq_len, 0), S)  # never read outside the row, whatever the lengths hold
    chunk = _split_chunk(seq_len, NUM_SPLITS, BLOCK_N)
    start = split * chunk
    end = tl.minimum(start + chunk, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    g_mask = offs_g < G
    d_mask = offs_d < D
    heads = kv_head * G + offs_g
    b64 = b.to(tl.int64)
    table_row = table_ptr + b64 * stride_tb
    if PAGED:  # the row's keys lie in the pool's blocks: each tile finds its keys' blocks in the row's table
        k_head = k_ptr + kv_head.to(tl.int64) * stride_kh
        v_head = v_ptr + kv_head.to(tl.int64) * stride_vh
    else:
        k_head = k_ptr + b64 * stride_kb + kv_head.to(tl.int64) * stride_kh
        v_head = v_ptr + b64 * stride_vb + kv_head.to(tl.int64) * stride_vh
    k_ptrs = k_head + offs_n[:, None] * stride_kn + offs_d[None, :]
    v_ptrs = v_head + offs_n[:, None] * stride_vn + offs_d[None, :]
    # The first K/V tile is fetched before waiting on the kernel launched just before (under PDL, while it runs): of
    # what this kernel reads, that kernel writes only q and the newest token's cache slot (L - 1; the lengths and
    # the block tables were set before it). Masked rows load as 0: slots past the length may hold anything (NaN * 0
    # would leak).
    tile_mask = ((start + offs_n) < end)[:, None] & d_mask[None, :]
    k, v = _load_tile(
        k_ptrs, v_ptrs, k_head, v_head, start, start + offs_n < end, tile_mask, table_row, num_blocks, offs_n, offs_d,
        stride_kb, stride_kn, stride_vb, stride_vn, stride_tn, S, PAGED, CACHE_BLOCK, TILE_IN_BLOCK,
    )  # fmt: skip
    if PAGED:  # the newest key's place (below) is looked up before the wait too
        newest = seq_len - 1
        in_first_tile = (start <= newest) & (newest < tl.minimum(start + BLOCK_N, end))
        block, offset = _pool_slots(newest, in_first_tile, table_row, stride_tn, num_blocks, CACHE_BLOCK)
        newest_k = k_head + block * stride_kb + offset * stride_kn
        newest_v = v_head + block * stride_vb + offset * stride_vn
    wait_for_inputs(USE_PDL)  # q, the newest slot, and the counters' last reset
    q_ptrs = q_ptr + b64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=g_mask[:, None] & d_mask[None, :], other=0.0).to(DOT_DTYPE)  # in flight during the next
    newest = seq_len - 1
    if (start <= newest) & (newest < tl.minimum(start + BLOCK_N, end)):  # the first tile holds the newest key: its
        # row may have been fetched before the previous kernel wrote it, so that one row is read again (from L2)
        is_newest = (start + offs_n == newest)[:, None]
        k_row = newest_k if PAGED else k_head + newest * stride_kn
        k = tl.where(is_newest, tl.load(k_row + offs_d, mask=d_mask, other=0.0)[None, :], k)
        v_row = newest_v if PAGED else v_head + newest * stride_vn
        v = tl.where(is_newest, tl.load(v_row + offs_d, mask=d_mask, other=0.0)[None, :], v)

    m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    if start < end:
        m_i, l_i, acc = _attend_tile(q, k, v, start + offs_n < end, m_i, l_i, acc, qk_scale, DOT_DTYPE, DOT_PRECISION)
    # The other tiles load at the top of each iteration, where Triton's pipeliner prefetches them (num_stages).
    for n_start in range(start + BLOCK_N, end, BLOCK_N):  # every tile holds at least one key < end
        valid = n_start + offs_n < end
        tile_mask = valid[:, None] & d_mask[None, :]
        k, v = _load_tile(
            k_ptrs, v_ptrs, k_head, v_head, n_start, valid, tile_mask, table_row, num_blocks, offs_n, offs_d,
            stride_kb, stride_kn, stride_vb, stride_vn, stride_tn, S, PAGED, CACHE_BLOCK, TILE_IN_BLOCK,
        )  # fmt: skip
        m_i, l_i, acc = _attend_tile(q, k, v, valid, m_i, l_i, acc, qk_scale, DOT_DTYPE, DOT_PRECISION)

    if NUM_SPLITS == 1:  # the whole row: normalise and write out, no workspace, no counter
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # no key: acc is 0, so is out
        out_ptrs = out_ptr + b64 * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])
    elif start < end:  # the merge reads only the non-empty splits, so empty ones write nothing
        ml_offsets = b64 * stride_mb + heads * stride_mh + split
        tl.store(m_ptr + ml_offsets, m_i, mask=g_mask)
        tl.store(l_ptr + ml_offsets, l_i, mask=g_mask)
        acc_ptrs = acc_ptr + b64 * stride_ab + heads[:, None] * stride_ah + split * stride_as + offs_d[None, :]
        tl.store(acc_ptrs, acc, mask=g_mask[:, None] & d_mask[None, :])
    if NUM_SPLITS > 1 and MERGE_IN_KERNEL:
        last = arrive(counter_ptr + b * tl.num_programs(1) + kv_head, NUM_SPLITS)  # every program, empty or not
        if last:  # it sees every split's partials
            num_active = (seq_len + chunk - 1) // chunk  # non-empty splits are a prefix
            _merge_group(
                m_ptr, l_ptr, acc_ptr, out_ptr, b64, kv_head, num_active, D,
                stride_mb, stride_mh, stride_ab, stride_ah, stride_as, stride_ob, stride_oh,
                G, MERGE_G, MERGE_S, BLOCK_D,
            )  # fmt: skip


def _check_args(q, k_cache, v_cache, seq_lens, dtypes, block_tables) -> None:
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.dim() != 4:
        raise ValueError(
            f"expected q [B, Hq, D] and k_cache, v_cache [Bc, Hkv, S, D], got q {tuple(q.shape)}, "
            f"k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}"
        )
    batch, q_heads, head_dim = q.shape
    cache_batch, kv_heads, slots, cache_dim = k_cache.shape
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache {tuple(v_cache.shape)} must have the shape of k_cache {tuple(k_cache.shape)}")
    paged = block_tables is not None  # then the cache is a pool of blocks shared by the rows
    if cache_dim != head_dim or cache_batch < (1 if paged else batch) or slots < 1 or kv_heads < 1:
        layout = "num_blocks >= 1, Hkv, block_size >= 1" if paged else f"Bc >= {batch}, Hkv, S >= 1"
        raise ValueError(
            f"k_cache {tuple(k_cache.shape)} does not fit q {tuple(q.shape)}: expected [{layout}, {head_dim}]"
        )
    if paged:
        table_rows, max_blocks = block_tables.shape if block_tables.dim() == 2 else (-1, -1)
        if block_tables.dtype != torch.int32 or table_rows < batch or max_blocks < 1:
            raise ValueError(
                f"block_tables must be int32 [>= {batch}, max_blocks >= 1], got {block_tables.dtype} "
                f"{tuple(block_tables.shape)}"
            )
    if q_heads % kv_heads:
        raise ValueError(f"query heads ({q_heads}) must be a multiple of KV heads ({kv_heads})")
    if q.dtype not in dtypes or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(
            f"q, k_cache and v_cache must share one dtype of {dtypes}, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}"
        )
    if seq_lens.dim() != 1 or seq_lens.shape[0] != batch or seq_lens.dtype != torch.int32:
        raise ValueError(f"seq_lens must be int32 [B={batch}], got {seq_lens.dtype} {tuple(seq_lens.shape)}")
    devices = {t.device for t in (q, k_cache, v_cache, seq_lens, block_tables) if t is not None}
    if len(devices) != 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(map(str, devices))}")


def _merge_step(num_splits: int, elements_per_split: int, merge_elements: int) -> int:
    """Splits a merge reads at once: all of them, or as many as keep the step within merge_elements."""
    return min(triton.next_power_of_2(num_splits), max(1, merge_elements // elements_per_split))


def decode_attention_triton(
    q: torch.Tensor,  # [B, Hq, D]
    k_cache: torch.Tensor,  # [Bc, Hkv, S, D], or with block_tables the pool [num_blocks, Hkv, block_size, D]
    v_cache: torch.Tensor,  # the shape of k_cache
    seq_lens: torch.Tensor,  # int32 [B], read only on the device
    scale: float,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,  # [B, Hq, D] q.dtype, e.g. a static buffer for CUDA graphs
    *,
    block_tables: torch.Tensor | None = None,  # int32 [>= B, max_blocks], any strides, read only on the device
    settings: DecodeAttentionSettings | None = None,  # tiles, splits and merge (default: the device's)
    sms: int | None = None,  # the SMs the splits fill (default: the device's)
) -> torch.Tensor:  # [B, Hq, D], q.dtype
    _check_args(q, k_cache, v_cache, seq_lens, _FLOAT_DTYPES, block_tables)
    for name, tensor in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (strides {tensor.stride()})")
    batch, q_heads, head_dim = q.shape
    cache_rows, kv_heads, cache_slots, _ = k_cache.shape  # paged: num_blocks and block_size
    paged = block_tables is not None
    slots = block_tables.shape[1] * cache_slots if paged else cache_slots  # a row's capacity S
    table, stride_t = (block_tables, block_tables.stride()) if paged else (seq_lens, (0, 0))  # never dereferenced
    if out is None:
        out = torch.empty_like(q)
    elif out.shape != q.shape or out.dtype != q.dtype or out.device != q.device or out.stride(-1) != 1:
        raise ValueError(f"out must be a {tuple(q.shape)} {q.dtype} tensor on {q.device} with unit last stride")
    if num_splits is not None and (not isinstance(num_splits, int) or num_splits < 1):
        raise ValueError(f"num_splits must be a positive int, got {num_splits!r}")
    settings = settings or attention_settings()
    block_n, num_warps, num_stages, num_splits = launch_config(
        batch, kv_heads, slots, sm_count(q.device) if sms is None else sms, num_splits, settings
    )
    if batch == 0:
        return out
    group = q_heads // kv_heads
    dot_dtype = _TL_DTYPES[q.dtype]
    if dot_dtype == tl.bfloat16 and INTERPRETER:
        dot_dtype = tl.float32  # the CPU interpreter multiplies bf16 dot operands as their raw uint16 bits
    dot_precision = "ieee" if dot_dtype == tl.float32 else "tf32"  # fp32 logits stay fp32 (no TF32 rounding)
    block_d = max(16, triton.next_power_of_2(head_dim))  # tl.dot needs every dimension >= 16
    merge_g = triton.next_power_of_2(group)
    merge_s = _merge_step(num_splits, merge_g * block_d, settings.merge_elements)
    separate_merge = num_splits > 1 and num_splits >= settings.merge_kernel_min_splits
    if num_splits == 1:  # the kernel writes out directly: no partials, no counters (never dereferenced)
        m = l = acc = counters = out
        stride_m = stride_a = (0, 0, 0)
    else:
        m = torch.empty((batch, q_heads, num_splits), device=q.device, dtype=torch.float32)
        l = torch.empty_like(m)
        acc = torch.empty((batch, q_heads, num_splits, head_dim), device=q.device, dtype=torch.float32)
        # The two-kernel path has no counters: out stands in, never dereferenced.
        counters = out if separate_merge else arrival_counters(q.device, batch * kv_heads)
        stride_m, stride_a = m.stride(), acc.stride()
    _decode_attention_kernel[(batch, kv_heads, num_splits)](
        q, k_cache, v_cache, seq_lens, out, m, l, acc, counters,
        slots, head_dim, float(scale) * math.log2(math.e),
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        seq_lens.stride(0),
        out.stride(0), out.stride(1),
        stride_m[0], stride_m[1],
        stride_a[0], stride_a[1], stride_a[2],
        table, cache_rows, stride_t[0], stride_t[1],
        G=group, NUM_SPLITS=num_splits, DOT_DTYPE=dot_dtype, DOT_PRECISION=dot_precision,
        BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_N=block_n, BLOCK_D=block_d,
        MERGE_IN_KERNEL=not separate_merge, MERGE_G=merge_g, MERGE_S=merge_s,
        PAGED=paged, CACHE_BLOCK=cache_slots if paged else 1, TILE_IN_BLOCK=paged and cache_slots % block_n == 0,
        num_warps=num_warps, num_stages=num_stages, **pdl_options(q.device),
    )  # fmt: skip
    if separate_merge:
        _merge_splits_kernel[(batch, q_heads)](
            m, l, acc, seq_lens, out,
            slots, head_dim,
            seq_lens.stride(0),
            stride_m[0], stride_m[1],
            stride_a[0], stride_a[1], stride_a[2],
            out.stride(0), out.stride(1),
            NUM_SPLITS=num_splits, BLOCK_N=block_n, BLOCK_D=block_d,
            BLOCK_S=_merge_step(num_splits, block_d, settings.merge_elements),
            num_warps=settings.merge_warps, **pdl_options(q.device),
        )  # fmt: skip
    return out


def decode_attention_reference(q, k_cache, v_cache, seq_lens, scale: float, *, block_tables=None) -> torch.Tensor:
    """Plain PyTorch, fp32 math (fp64 for fp64 inputs); slots past seq_lens[b] never reach the result. A paged pool
    is first gathered into each row's static layout [B, Hkv, max_blocks * block_size, D]."""
    _check_args(q, k_cache, v_cache, seq_lens, (*_FLOAT_DTYPES, torch.float64), block_tables)
    batch, q_heads, head_dim = q.shape
    if block_tables is not None:  # table entries outside the pool are clamped in: they only serve slots past L
        blocks = block_tables[:batch].long().clamp(0, k_cache.shape[0] - 1)  # [B, max_blocks]
        k_cache, v_cache = (pool[blocks].transpose(1, 2).flatten(2, 3) for pool in (k_cache, v_cache))
    _, kv_heads, slots, _ = k_cache.shape
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    valid = torch.arange(slots, device=q.device) < seq_lens.to(torch.int64)[:, None]  # [B, S]
    k = k_cache[:batch].to(compute).masked_fill(~valid[:, None, :, None], 0.0)
    v = v_cache[:batch].to(compute).masked_fill(~valid[:, None, :, None], 0.0)
    queries = q.to(compute).reshape(batch, kv_heads, q_heads // kv_heads, head_dim)
    scores = torch.einsum("bhgd,bhsd->bhgs", queries, k) * scale
    probs = torch.softmax(scores.masked_fill(~valid[:, None, None, :], float("-inf")), dim=-1)
    return torch.einsum("bhgs,bhsd->bhgd", probs, v).reshape(batch, q_heads, head_dim).to(q.dtype)


def decode_attention(
    q, k_cache, v_cache, seq_lens, scale: float, *, block_tables=None, settings: DecodeAttentionSettings | None = None
) -> torch.Tensor:
    """The Triton kernel on CUDA (with the device's settings, or these), the PyTorch reference elsewhere."""
    if q.is_cuda:
        return decode_attention_triton(
            q, k_cache, v_cache, seq_lens, scale, block_tables=block_tables, settings=settings
        )
    return decode_attention_reference(q, k_cache, v_cache, seq_lens, scale, block_tables=block_tables)
