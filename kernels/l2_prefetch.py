"""L2 prefetch: ask the GPU to pull weights (or cache rows) into L2 ahead of the kernel that reads them.

Batch-1 decode leaves device memory idle for a large part of each layer: the small kernels (norms, RoPE, routing,
short-context attention) are latency-bound. Launched on a side stream of the decode graph, these kernels fill that
time by prefetching what a later kernel of the chain will stream (the o_proj weight while attention runs, the routed
experts' down weights while the gate/up kernel runs), so that kernel reads L2 instead of HBM.

Each thread issues one Hopper bulk prefetch (`cp.async.bulk.prefetch.L2.global`) of up to CHUNK bytes and exits:
the copy engine fetches in the background and nothing waits for it. A prefetch is only a hint: it changes no value,
so it needs no ordering against the kernels that write or read the same memory. Off Hopper (and in the CPU
interpreter, which has no inline assembly) the launchers do nothing.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER

_THREADS = 128  # one bulk prefetch per thread (4 warps)
_CHUNK = 16384  # bytes per bulk prefetch: spreads a range over many programs, so over many SMs' copy engines


@triton.jit
def _bulk_prefetch(addresses, sizes):
    """One `cp.async.bulk.prefetch.L2` per element: `sizes` bytes (a multiple of 16; <= 0 skips) at `addresses`."""
    tl.inline_asm_elementwise(
        "{\n .reg .pred p;\n setp.gt.s32 p, $2, 0;\n @p cp.async.bulk.prefetch.L2.global [$1], $2;\n mov.u32 $0, 0;\n}",
        "=r,l,r",
        [addresses, sizes],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _range_prefetch_kernel(base_ptr, num_bytes, CHUNK: tl.constexpr, THREADS: tl.constexpr):
    offsets = (tl.program_id(0) * THREADS + tl.arange(0, THREADS)).to(tl.int64) * CHUNK
    sizes = tl.maximum(tl.minimum(num_bytes - offsets, CHUNK), 0).to(tl.int32)
    _bulk_prefetch(base_ptr + offsets, sizes)


@triton.jit
def _expert_prefetch_kernel(
    w_ptr, topk_ids_ptr, num_experts, expert_bytes, stride_expert, CHUNK: tl.constexpr, THREADS: tl.constexpr
):
    """Grid (T * K, parts): program (s, p) prefetches part p of expert topk_ids[s]'s bytes."""
    expert = tl.load(topk_ids_ptr + tl.program_id(0)).to(tl.int64)
    expert = tl.minimum(tl.maximum(expert, 0), num_experts - 1)  # an address inside the weights, whatever ids hold
    offsets = (tl.program_id(1) * THREADS + tl.arange(0, THREADS)).to(tl.int64) * CHUNK
    sizes = tl.maximum(tl.minimum(expert_bytes - offsets, CHUNK), 0).to(tl.int32)
    _bulk_prefetch(w_ptr + expert * stride_expert + offsets, sizes)


@triton.jit
def _kv_prefetch_kernel(
    k_ptr, v_ptr, seq_lens_ptr, KV_HEADS, S, stride_b, stride_h, ROW_BYTES: tl.constexpr,
    CHUNK: tl.constexpr, THREADS: tl.constexpr,
):  # fmt: skip
    """Grid (B * KV_HEADS * 2, parts): keys then values of (row, head), tokens [0, seq_lens[row]) in byte chunks."""
    group = tl.program_id(0)
    cache = group % 2
    row = group // 2 // KV_HEADS
    head = group // 2 % KV_HEADS
    length = tl.minimum(tl.maximum(tl.load(seq_lens_ptr + row), 0), S).to(tl.int64)
    base = tl.where(cache == 0, k_ptr, v_ptr) + row.to(tl.int64) * stride_b + head.to(tl.int64) * stride_h
    offsets = (tl.program_id(1) * THREADS + tl.arange(0, THREADS)).to(tl.int64) * CHUNK
    sizes = tl.maximum(tl.minimum(length * ROW_BYTES - offsets, CHUNK), 0).to(tl.int32)
    _bulk_prefetch(base + offsets, sizes)


@functools.cache
def _supported(device_index: int) -> bool:
    return not INTERPRETER and torch.cuda.get_device_capability(device_index)[0] >= 9


def prefetch_supported(device: torch.device) -> bool:
    """True where the launchers below issue prefetches (CUDA, compute capability 9.0 or newer)."""
    return device.type == "cuda" and _supported(device.index if device.index is not None else 0)


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_contiguous():
        raise ValueError(f"prefetch needs a contiguous tensor, got strides {tensor.stride()}")
    if tensor.data_ptr() % 16:
        raise ValueError("prefetch needs a 16-byte aligned tensor")
    return tensor.view(-1).view(torch.uint8)


def prefetch_l2(tensor: torch.Tensor) -> None:
    """Prefetch all of a contiguous tensor into L2 (the tail past the last whole 16 bytes is left out)."""
    if not prefetch_supported(tensor.device) or tensor.numel() == 0:
        return
    data = _as_bytes(tensor)
    num_bytes = data.numel() // 16 * 16
    programs = triton.cdiv(num_bytes, _CHUNK * _THREADS)
    _range_prefetch_kernel[(programs,)](data, num_bytes, CHUNK=_CHUNK, THREADS=_THREADS, num_warps=_THREADS // 32)


def prefetch_experts_l2(weights: torch.Tensor, topk_ids: torch.Tensor) -> None:
    """Prefetch the experts named in topk_ids [T, K] of a stacked weight [E, ...] (contiguous) into L2. An expert
    routed twice is prefetched twice; the second costs no memory traffic."""
    if not prefetch_supported(weights.device) or topk_ids.numel() == 0:
        return
    if topk_ids.dtype not in (torch.int32, torch.int64) or not topk_ids.is_contiguous():
        raise ValueError(f"topk_ids must be contiguous int32 or int64, got {topk_ids.dtype} {topk_ids.stride()}")
    data = _as_bytes(weights)
    expert_bytes = data.numel() // weights.shape[0]
    if expert_bytes % 16:
        raise ValueError(f"each expert must span a multiple of 16 bytes, got {expert_bytes}")
    parts = triton.cdiv(expert_bytes, _CHUNK * _THREADS)
    _expert_prefetch_kernel[(topk_ids.numel(), parts)](
        data,
        topk_ids,
        weights.shape[0],
        expert_bytes,
        expert_bytes,
        CHUNK=_CHUNK,
        THREADS=_THREADS,
        num_warps=_THREADS // 32,
    )


def prefetch_kv_l2(k_cache: torch.Tensor, v_cache: torch.Tensor, seq_lens: torch.Tensor) -> None:
    """Prefetch the cached keys and values rows [0, B) attend to: k_cache, v_cache [Bc, Hkv, S, D] (contiguous per
    head), tokens [0, seq_lens[b]) of row b (int32 [B], read on the device, so a CUDA graph replays it)."""
    if not prefetch_supported(k_cache.device) or seq_lens.numel() == 0:
        return
    batch, (_, kv_heads, slots, head_dim) = seq_lens.shape[0], k_cache.shape
    row_bytes = head_dim * k_cache.element_size()
    if k_cache.stride() != v_cache.stride() or k_cache.stride(2) != head_dim or row_bytes % 16:
        raise ValueError("prefetch_kv_l2 needs k_cache and v_cache with contiguous, 16-byte multiple token rows")
    chunk = min(_CHUNK, triton.next_power_of_2(slots * row_bytes))
    parts = triton.cdiv(slots * row_bytes, chunk * _THREADS)
    element = k_cache.element_size()
    _kv_prefetch_kernel[(batch * kv_heads * 2, parts)](
        _flat_bytes(k_cache), _flat_bytes(v_cache), seq_lens,
        kv_heads, slots, k_cache.stride(0) * element, k_cache.stride(1) * element, ROW_BYTES=row_bytes,
        CHUNK=chunk, THREADS=_THREADS, num_warps=_THREADS // 32,
    )  # fmt: skip


def _flat_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The storage of a (possibly strided) tensor from its first element on, as bytes (only addresses are used)."""
    return torch.as_strided(tensor, (1,), (1,)).view(torch.uint8)
