"""The split-KV merge of flash decoding: as its own kernel (decode_attention.py's two-kernel path), and the in-launch
merge the split kernel's last program of each (row, KV head) runs.

For row b and query head j, the split kernel left, for each non-empty split i < cdiv(L, chunk) (L = seq_lens[b]),
its base-2 running max m_i, its sum l_i = sum 2^(s_n - m_i) and its unnormalised accumulator acc_i (fp32); then
    M = max_i m_i,  out[b, j] = sum_i 2^(m_i - M) acc_i / sum_i 2^(m_i - M) l_i
One program per (row, query head), grid (B, Hq): every head's merge runs in parallel rather than one serial tail per
(row, KV head) group. It reads L itself and recomputes the split geometry, so the launch depends only on shapes
(one captured CUDA graph serves every length), and reads BLOCK_S splits per step: one step when they all fit.
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpcode.kernels.launch import wait_for_inputs


@triton.jit
def _split_chunk(seq_len, NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Keys per split for this row: a whole number of BLOCK_N tiles (the split and merge kernels must agree on it).
    Plain arithmetic rather than tl.cdiv: nested jit calls are slow in the CPU interpreter."""
    chunk = ((seq_len + NUM_SPLITS - 1) // NUM_SPLITS + BLOCK_N - 1) // BLOCK_N * BLOCK_N
    return tl.maximum(chunk, BLOCK_N)


@triton.jit
def _merge_splits_kernel(
    m_ptr, l_ptr, acc_ptr, seq_lens_ptr, out_ptr,
    S, D,
    stride_lens,
    stride_mb, stride_mh,
    stride_ab, stride_ah, stride_as,
    stride_ob, stride_oh,
    NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
):  # fmt: skip
    wait_for_inputs(USE_PDL)  # every partial comes from the split kernel launched just before
    b = tl.program_id(0)
    head = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + b * stride_lens)
    seq_len = tl.minimum(tl.maximum(seq_len, 0), S)  # the split kernel's clamp, so the same chunks
    chunk = _split_chunk(seq_len, NUM_SPLITS, BLOCK_N)
    num_active = (seq_len + chunk - 1) // chunk  # non-empty splits are a prefix; the others wrote nothing

    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < D
    b64 = b.to(tl.int64)
    ml_ptrs = b64 * stride_mb + head * stride_mh + offs_s
    acc_ptrs = acc_ptr + b64 * stride_ab + head * stride_ah + offs_s[:, None] * stride_as + offs_d[None, :]
    run_max = tl.full([], float("-inf"), dtype=tl.float32)
    run_sum = tl.zeros([], dtype=tl.float32)
    run_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    # No key (L = 0): no step runs and out is 0. Otherwise every step holds a non-empty split, whose m is finite, so
    # new_max is finite and no exponent is -inf - (-inf).
    for s_start in range(0, num_active, BLOCK_S):
        s_mask = s_start + offs_s < num_active
        m = tl.load(m_ptr + ml_ptrs + s_start, mask=s_mask, other=float("-inf"))
        l = tl.load(l_ptr + ml_ptrs + s_start, mask=s_mask, other=0.0)
        part = tl.load(acc_ptrs + s_start * stride_as, mask=s_mask[:, None] & d_mask[None, :], other=0.0)
        new_max = tl.maximum(run_max, tl.max(m, axis=0))
        rescale = tl.exp2(run_max - new_max)
        weight = tl.exp2(m - new_max)  # 0 for masked splits (m = -inf)
        run_sum = run_sum * rescale + tl.sum(weight * l, axis=0)
        run_acc = run_acc * rescale + tl.sum(part * weight[:, None], axis=0)
        run_max = new_max
    out = run_acc / tl.where(run_sum > 0, run_sum, 1.0)
    tl.store(out_ptr + b64 * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty), mask=d_mask)


@triton.jit
def _merge_group(
    m_ptr, l_ptr, acc_ptr, out_ptr, b64, kv_head, num_active, D,
    stride_mb, stride_mh, stride_ab, stride_ah, stride_as, stride_ob, stride_oh,
    G: tl.constexpr, MERGE_G: tl.constexpr, MERGE_S: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The split kernel's in-launch merge: the G query heads of (row, KV head) from their first num_active splits,
    MERGE_S splits per step, written to out (the last program of the group runs it, once all partials are stored)."""
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < D
    offs_mg = tl.arange(0, MERGE_G)
    offs_s = tl.arange(0, MERGE_S)
    mg_mask = offs_mg < G
    merge_heads = kv_head * G + offs_mg
    ml_base = b64 * stride_mb + merge_heads[:, None] * stride_mh  # [MERGE_G, 1]
    acc_base = acc_ptr + b64 * stride_ab + merge_heads[:, None, None] * stride_ah + offs_d[None, None, :]
    run_max = tl.full([MERGE_G], float("-inf"), dtype=tl.float32)
    run_sum = tl.zeros([MERGE_G], dtype=tl.float32)
    run_acc = tl.zeros([MERGE_G, BLOCK_D], dtype=tl.float32)
    for s_start in range(0, num_active, MERGE_S):  # online softmax over blocks of MERGE_S splits
        splits = s_start + offs_s
        ml_mask = mg_mask[:, None] & (splits < num_active)[None, :]
        # .cg: from L2, past this SM's L1, which holds nothing written by the other programs.
        m = tl.load(m_ptr + ml_base + splits[None, :], mask=ml_mask, other=float("-inf"), cache_modifier=".cg")
        l = tl.load(l_ptr + ml_base + splits[None, :], mask=ml_mask, other=0.0, cache_modifier=".cg")
        part = tl.load(
            acc_base + splits[None, :, None] * stride_as,
            mask=ml_mask[:, :, None] & d_mask[None, None, :],
            other=0.0,
            cache_modifier=".cg",
        )  # [MERGE_G, MERGE_S, BLOCK_D]
        new_max = tl.maximum(run_max, tl.max(m, axis=1))
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # no split yet: weights 0, not NaN
        rescale = tl.exp2(run_max - safe_max)
        weight = tl.exp2(m - safe_max[:, None])  # 0 for masked lanes (m = -inf)
        run_sum = run_sum * rescale + tl.sum(weight * l, axis=1)
        run_acc = run_acc * rescale[:, None] + tl.sum(part * weight[:, :, None], axis=1)
        run_max = new_max
    out = run_acc / tl.where(run_sum > 0, run_sum, 1.0)[:, None]  # no key: run_acc is 0, so is out
    out_ptrs = out_ptr + b64 * stride_ob + merge_heads[:, None] * stride_oh + offs_d[None, :]
    tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=mg_mask[:, None] & d_mask[None, :])
