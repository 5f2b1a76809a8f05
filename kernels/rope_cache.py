"""Per-head q/k RMSNorm + rotary embedding + KV-cache write for one decode token per row, in one Triton kernel.

qkv [B, (Hq + 2 Hkv) D] holds, per row b, Hq query heads, then Hkv key heads, then Hkv value heads, each D wide.
For a query or key head x [D] of row b, with half = D / 2, x1 = x[:half], x2 = x[half:]:

    x      = w * x * rsqrt(mean(x ** 2) + eps)       only when that head kind has a norm weight w [D]
    angle  = fp32(positions[b] * inv_freq)           [half], rounded to fp32 like RotaryEmbedding
    cos    = cos(angle) * attention_scaling,  sin = sin(angle) * attention_scaling
    out1   = x1 * cos - x2 * sin                     the rotate-half layout of layers.apply_rotary:
    out2   = x2 * cos + x1 * sin                     out = x * cat(cos, cos) + cat(-x2, x1) * cat(sin, sin)

Query heads go to q [B, Hq, D]; the rotated key head g and the value head g (copied bit for bit) go to
k_cache[b, g, slots[b]] and v_cache[b, g, slots[b]]; no other cache slot is touched. With block_tables [B, max_blocks]
the caches are pools of blocks [num_blocks, Hkv, block_size, D] shared by the rows (decode_attention.py), and slot s
of row b is k_cache[block_tables[b, s // block_size], g, s % block_size]. The kernel evaluates
everything in fp32 and rounds once at the store; the eager model (and `qk_norm_rope_cache_reference`, which
follows it) rounds after the norm and inside the rotation, so in bf16 the two agree to bf16 precision, not bit
for bit.

Grid (B, (Hq + Hkv) / n): program (b, j) handles heads h in [j n, j n + n), query head h for h < Hq, else key and
value head h - Hq; n = 1 for decode batches, gcd(Hq, Hkv) for prefill rows (so one program's heads are all queries
or all keys). The head's column offset in qkv is h * D in both cases (key heads start right after the query heads).

CUDA graphs: the launcher reads shapes and strides only. positions, slots and the block tables are read inside the
kernel, so a captured graph replays correctly after they are changed in place. Under PDL they (and the weights) are
read before the wait on the previous kernel, which may still run: they must not be written by the kernel launched
just before (the decode step sets them between steps). A slot outside [0, S) (S = max_blocks * block_size when
paged) is not written, nor one whose table entry lies outside the pool (the kernel cannot raise); keeping slots and
tables right is the caller's job.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import pdl_options, wait_for_inputs
from warpcode.kernels.norm import add_rmsnorm_reference, round_to

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
INDEX_DTYPES = (torch.int32, torch.int64)
_ONE_HEAD_ROWS = 64  # up to this many rows (decode batches) a program per head; above, gcd(Hq, Hkv) heads a program


@triton.jit
def _rms_norm_halves(x1, x2, w1, w2, eps, D: tl.constexpr):
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=0) + tl.sum(x2 * x2, axis=0)) / D + eps)
    return x1 * rstd * w1, x2 * rstd * w2


@triton.jit
def _qk_norm_rope_cache_kernel(
    qkv_ptr,
    q_norm_ptr,
    k_norm_ptr,
    inv_freq_ptr,
    positions_ptr,
    slots_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    num_heads,
    num_kv_heads,
    S,
    eps,
    attention_scaling,
    stride_qkv,
    stride_pos,
    stride_slot,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    table_ptr,  # the paged cache's arguments last: the static kernel's parameters keep their offsets
    num_blocks,
    stride_tb,
    stride_tn,
    D: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    HAS_Q_NORM: tl.constexpr,
    HAS_K_NORM: tl.constexpr,
    EARLY_DEPENDENTS: tl.constexpr,
    PAGED: tl.constexpr,
    CACHE_BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,
    HEADS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    first_head = tl.program_id(1).to(tl.int64) * HEADS
    is_query = first_head < num_heads  # HEADS divides Hq: a program's heads are all queries or all keys
    cols = tl.arange(0, BLOCK_HALF)
    mask = cols < HALF
    # Everything but qkv was written before this decode step began (positions, slots, block tables) or never changes
    # (weights, frequencies): read it before the wait, so that after it only qkv's loads stand between the wait and
    # the stores.
    position = tl.load(positions_ptr + row * stride_pos).to(tl.float32)
    inv_freq = tl.load(inv_freq_ptr + cols, mask=mask, other=0.0)
    norm_ptr = q_norm_ptr if HAS_Q_NORM else k_norm_ptr
    if HAS_Q_NORM and HAS_K_NORM:
        norm_ptr = tl.where(is_query, q_norm_ptr, k_norm_ptr)
    if HAS_Q_NORM or HAS_K_NORM:
        w1 = tl.load(norm_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        w2 = tl.load(norm_ptr + HALF + cols, mask=mask, other=0.0).to(tl.float32)
    slot = tl.load(slots_ptr + row * stride_slot).to(tl.int64)
    in_cache = (slot >= 0) & (slot < S)
    cache_row = row
    if PAGED:  # the slot's block: an entry outside the pool writes nothing (clamped, it would hit another row's)
        column = tl.where(in_cache, slot, 0) // CACHE_BLOCK
        cache_row = tl.load(table_ptr + row * stride_tb + column * stride_tn).to(tl.int64)
        in_cache = in_cache & (cache_row >= 0) & (cache_row < num_blocks)
        slot = slot % CACHE_BLOCK
    if USE_PDL and EARLY_DEPENDENTS:  # the next kernel reads nothing of this one's before its own wait
        tl.extra.cuda.gdc_launch_dependents()
    wait_for_inputs(USE_PDL)
    # Used only after the wait: without an early launch (a predecessor that does not trigger it) the loads above
    # and qkv's are then in flight together.
    angle = position * inv_freq
    cos = tl.cos(angle) * attention_scaling
    sin = tl.sin(angle) * attention_scaling
    for offset in tl.static_range(HEADS):
        head = first_head + offset
        src = qkv_ptr + row * stride_qkv + head * D
        x1 = tl.load(src + cols, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(src + HALF + cols, mask=mask, other=0.0).to(tl.float32)
        if is_query:
            if HAS_Q_NORM:
                x1, x2 = _rms_norm_halves(x1, x2, w1, w2, eps, D)
            dst = q_ptr + row * stride_qb + head * stride_qh
            tl.store(dst + cols, round_to(x1 * cos - x2 * sin, q_ptr.dtype.element_ty), mask=mask)
            tl.store(dst + HALF + cols, round_to(x2 * cos + x1 * sin, q_ptr.dtype.element_ty), mask=mask)
        else:
            v_src = src + num_kv_heads * D
            v1 = tl.load(v_src + cols, mask=mask)  # in flight during the norm and the rotation
            v2 = tl.load(v_src + HALF + cols, mask=mask)
            if HAS_K_NORM:
                x1, x2 = _rms_norm_halves(x1, x2, w1, w2, eps, D)
            kv_head = head - num_heads
            write = cols < tl.where(in_cache, HALF, 0)  # (mask & scalar trips the interpreter)
            k_dst = k_cache_ptr + cache_row * stride_kb + kv_head * stride_kh + slot * stride_ks
            tl.store(k_dst + cols, round_to(x1 * cos - x2 * sin, k_cache_ptr.dtype.element_ty), mask=write)
            tl.store(k_dst + HALF + cols, round_to(x2 * cos + x1 * sin, k_cache_ptr.dtype.element_ty), mask=write)
            v_dst = v_cache_ptr + cache_row * stride_vb + kv_head * stride_vh + slot * stride_vs
            tl.store(v_dst + cols, v1, mask=write)
            tl.store(v_dst + HALF + cols, v2, mask=write)


def _num_warps(block_half: int) -> int:
    return max(1, min(8, block_half // 64))  # D = 128: one warp, two elements of each half per thread


def _check_args(qkv, num_heads, num_kv_heads, head_dim, q_norm_weight, k_norm_weight, eps, inv_freq,
                attention_scaling, positions, k_cache, v_cache, slots, out, block_tables) -> None:  # fmt: skip
    for name, value in (("eps", eps), ("attention_scaling", attention_scaling)):
        if not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a Python number (never a tensor: reading it would sync)")
    if qkv.dim() != 2:
        raise ValueError(f"qkv must be [B, (Hq + 2 Hkv) D], got shape {tuple(qkv.shape)}")
    if qkv.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"qkv must be bf16, fp16 or fp32, got {qkv.dtype}")
    if num_heads < 1 or num_kv_heads < 1:
        raise ValueError(f"num_heads and num_kv_heads must be positive, got {num_heads} and {num_kv_heads}")
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even (rotate-half RoPE), got {head_dim}")
    batch, width = qkv.shape
    if width != (num_heads + 2 * num_kv_heads) * head_dim:
        raise ValueError(
            f"qkv has {width} columns, expected (Hq + 2 Hkv) * D = ({num_heads} + 2 * {num_kv_heads}) * {head_dim}"
        )
    if qkv.stride(1) != 1:
        raise ValueError(f"qkv must be contiguous along its last dimension (stride {qkv.stride(1)})")
    device = qkv.device

    def same_device(name: str, t: torch.Tensor) -> None:
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but qkv is on {device}")

    for name, weight in (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)):
        if weight is None:
            continue
        if weight.shape != (head_dim,) or weight.dtype != qkv.dtype or weight.stride(0) != 1:
            raise ValueError(
                f"{name} must be a contiguous [{head_dim}] tensor of dtype {qkv.dtype}, "
                f"got shape {tuple(weight.shape)} dtype {weight.dtype}"
            )
        same_device(name, weight)
    if inv_freq.shape != (head_dim // 2,) or inv_freq.dtype != torch.float32 or inv_freq.stride(0) != 1:
        raise ValueError(
            f"inv_freq must be a contiguous fp32 [{head_dim // 2}] tensor, "
            f"got shape {tuple(inv_freq.shape)} dtype {inv_freq.dtype}"
        )
    same_device("inv_freq", inv_freq)
    for name, index in (("positions", positions), ("slots", slots)):
        if index.shape != (batch,) or index.dtype not in INDEX_DTYPES:
            raise ValueError(
                f"{name} must be an int32 or int64 [B] = [{batch}] tensor, "
                f"got shape {tuple(index.shape)} dtype {index.dtype}"
            )
        same_device(name, index)
    paged = block_tables is not None  # then the caches are pools of blocks shared by the rows
    rows, first, slots_name = (1, "num_blocks >= 1", "block_size") if paged else (batch, f"Bc >= {batch}", "S")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dim() != 4 or cache.shape[0] < rows or cache.shape[1] != num_kv_heads or cache.shape[3] != head_dim:
            raise ValueError(
                f"{name} must be [{first}, Hkv = {num_kv_heads}, {slots_name}, D = {head_dim}], "
                f"got {tuple(cache.shape)}"
            )
        if cache.dtype != qkv.dtype:
            raise ValueError(f"{name} must have the dtype of qkv ({qkv.dtype}), got {cache.dtype}")
        if cache.stride(3) != 1:
            raise ValueError(f"{name} must be contiguous along head_dim (stride {cache.stride(3)})")
        same_device(name, cache)
    if k_cache.shape[2] != v_cache.shape[2]:
        raise ValueError(f"k_cache and v_cache hold {k_cache.shape[2]} and {v_cache.shape[2]} slots")
    if paged:
        if k_cache.shape[0] != v_cache.shape[0] or k_cache.shape[2] < 1:
            raise ValueError(
                f"k_cache and v_cache must be pools of one shape [num_blocks, Hkv, block_size >= 1, D], got "
                f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}"
            )
        table_rows, max_blocks = block_tables.shape if block_tables.dim() == 2 else (-1, -1)
        if block_tables.dtype != torch.int32 or table_rows < batch or max_blocks < 1:
            raise ValueError(
                f"block_tables must be int32 [>= {batch}, max_blocks >= 1], got {block_tables.dtype} "
                f"{tuple(block_tables.shape)}"
            )
        same_device("block_tables", block_tables)
    if out is not None:
        if out.shape != (batch, num_heads, head_dim) or out.dtype != qkv.dtype or out.stride(2) != 1:
            raise ValueError(
                f"out must be [B, Hq, D] = [{batch}, {num_heads}, {head_dim}] of dtype {qkv.dtype}, contiguous "
                f"along D; got shape {tuple(out.shape)} dtype {out.dtype}"
            )
        same_device("out", out)


def qk_norm_rope_cache_triton(
    qkv: torch.Tensor,  # [B, (Hq + 2 Hkv) D]
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    q_norm_weight: torch.Tensor | None,  # [D], qkv.dtype
    k_norm_weight: torch.Tensor | None,  # [D], qkv.dtype
    eps: float,
    inv_freq: torch.Tensor,  # fp32 [D / 2]
    attention_scaling: float,
    positions: torch.Tensor,  # int32/int64 [B]
    k_cache: torch.Tensor,  # [Bc >= B, Hkv, S, D], qkv.dtype
    v_cache: torch.Tensor,  # [Bc >= B, Hkv, S, D], qkv.dtype
    slots: torch.Tensor,  # int32/int64 [B]
    *,
    out: torch.Tensor | None = None,  # [B, Hq, D]; allocated when omitted
    early_dependents: bool = False,
    block_tables: torch.Tensor | None = None,  # int32 [>= B, max_blocks]: the caches are [num_blocks, Hkv, block, D]
) -> torch.Tensor:  # q [B, Hq, D], qkv.dtype
    """Writes the rotated key and the value of row b at slot slots[b] (through its block table when paged); returns
    the normed, rotated queries.

    early_dependents: under PDL, let the next kernel launch when this one starts rather than after its own wait,
    for a next kernel that fetches inputs no earlier kernel writes before its wait (decode attention's one-tile
    splits: the keys and values of earlier tokens, fetched while the q/k/v projection still runs)."""
    _check_args(qkv, num_heads, num_kv_heads, head_dim, q_norm_weight, k_norm_weight, eps, inv_freq,
                attention_scaling, positions, k_cache, v_cache, slots, out, block_tables)  # fmt: skip
    batch = qkv.shape[0]
    paged = block_tables is not None
    cache_slots = k_cache.shape[2]  # paged: block_size
    capacity = block_tables.shape[1] * cache_slots if paged else cache_slots
    table, stride_t = (block_tables, block_tables.stride()) if paged else (slots, (0, 0))  # never dereferenced
    if out is None:
        out = torch.empty((batch, num_heads, head_dim), device=qkv.device, dtype=qkv.dtype)
    if batch:
        half = head_dim // 2
        block_half = triton.next_power_of_2(half)
        # Prefill rows: several heads a program (one-head programs of one warp made 15K tiny programs at 384 rows)
        heads = math.gcd(num_heads, num_kv_heads) if batch > _ONE_HEAD_ROWS else 1
        _qk_norm_rope_cache_kernel[(batch, (num_heads + num_kv_heads) // heads)](
            qkv, qkv if q_norm_weight is None else q_norm_weight, qkv if k_norm_weight is None else k_norm_weight,
            inv_freq, positions, slots, out, k_cache, v_cache,
            num_heads, num_kv_heads, capacity, float(eps), float(attention_scaling),
            qkv.stride(0), positions.stride(0), slots.stride(0), out.stride(0), out.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            table, k_cache.shape[0], stride_t[0], stride_t[1],
            D=head_dim, HALF=half, BLOCK_HALF=block_half,
            HAS_Q_NORM=q_norm_weight is not None, HAS_K_NORM=k_norm_weight is not None,
            EARLY_DEPENDENTS=early_dependents, PAGED=paged, CACHE_BLOCK=cache_slots if paged else 1,
            HEADS=heads, num_warps=_num_warps(block_half), **pdl_options(qkv.device),
        )  # fmt: skip
    return out


def qk_norm_rope_cache_reference(
    qkv, num_heads, num_kv_heads, head_dim, q_norm_weight, k_norm_weight, eps, inv_freq, attention_scaling,
    positions, k_cache, v_cache, slots, *, block_tables=None,
) -> torch.Tensor:  # fmt: skip
    """The eager model's steps (RMSNorm, RotaryEmbedding, apply_rotary, a cache write at slots[b], through the block
    table when paged, and none where the kernel writes none); float64 inputs are evaluated in float64, with the angle
    still rounded to fp32 as RotaryEmbedding does."""
    batch = qkv.shape[0]
    q, k, v = qkv.view(batch, num_heads + 2 * num_kv_heads, head_dim).split(
        [num_heads, num_kv_heads, num_kv_heads], dim=1
    )
    if q_norm_weight is not None:
        q = add_rmsnorm_reference(q, q_norm_weight, eps)[0]
    if k_norm_weight is not None:
        k = add_rmsnorm_reference(k, k_norm_weight, eps)[0]
    compute = torch.promote_types(qkv.dtype, torch.float32)
    freqs = positions[:, None].float() * inv_freq.float()  # fp32 [B, D / 2], as RotaryEmbedding
    angles = torch.cat((freqs, freqs), dim=-1).to(compute)
    cos = (angles.cos() * attention_scaling).to(qkv.dtype)[:, None]  # [B, 1, D]
    sin = (angles.sin() * attention_scaling).to(qkv.dtype)[:, None]

    def rotate(x: torch.Tensor) -> torch.Tensor:  # layers.apply_rotary
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-second, first), dim=-1) * sin

    q, k = rotate(q), rotate(k)
    rows, slots, cache_slots = torch.arange(batch, device=qkv.device), slots.long(), k_cache.shape[2]
    capacity = cache_slots if block_tables is None else block_tables.shape[1] * cache_slots
    write = (slots >= 0) & (slots < capacity)
    if block_tables is not None:  # (row, slot) -> (block, offset in it)
        rows = block_tables[rows, torch.where(write, slots, 0) // cache_slots].long()
        write &= (rows >= 0) & (rows < k_cache.shape[0])
        slots = slots % cache_slots
    k_cache[rows[write], :, slots[write]] = k[write].to(k_cache.dtype)  # [B', Hkv, D] into k_cache[b, :, slots[b]]
    v_cache[rows[write], :, slots[write]] = v[write].to(v_cache.dtype)
    return q


def qk_norm_rope_cache(
    qkv, num_heads, num_kv_heads, head_dim, q_norm_weight, k_norm_weight, eps, inv_freq, attention_scaling,
    positions, k_cache, v_cache, slots, *, out=None, early_dependents=False, block_tables=None,
) -> torch.Tensor:  # fmt: skip
    """The Triton kernel on CUDA, the PyTorch reference elsewhere; same arguments and effects (early_dependents
    is a launch option of the kernel)."""
    args = (qkv, num_heads, num_kv_heads, head_dim, q_norm_weight, k_norm_weight, eps, inv_freq,
            attention_scaling, positions, k_cache, v_cache, slots)  # fmt: skip
    if qkv.is_cuda:
        return qk_norm_rope_cache_triton(*args, out=out, early_dependents=early_dependents, block_tables=block_tables)
    q = qk_norm_rope_cache_reference(*args, block_tables=block_tables)
    return q if out is None else out.copy_(q)
