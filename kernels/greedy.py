"""The end of a greedy decode step in two Triton launches: each row's argmax over the vocabulary, stored as the row's
next input token, and the row's counters advanced.

    tokens[b] = argmax_v logits[b, v]     (the lowest index among equal maxima; NaN counts as the largest value,
                                           as in torch.argmax)
    c[b]     += 1                          for each counter c (the step count, the cache length)

Kernel 1, grid (B, cdiv(V, BLOCK_V)): each program reduces one BLOCK_V slice of a row to (max, first index).
Kernel 2, grid (B,): reduces a row's slices, stores the token and adds one to the counters. Two launches with PDL
replace torch's argmax (one long reduction and a memset), the copy into `tokens` and an add per counter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import pdl_options, wait_for_inputs

BLOCK_V = 2048  # vocabulary entries per kernel-1 program: 75 programs a row for a 152K vocabulary
NUM_WARPS = 4
MAX_COUNTERS = 2


@triton.jit
def _slice_argmax_kernel(
    logits_ptr, max_ptr, index_ptr,
    V, stride_l, stride_p,
    BLOCK_V: tl.constexpr, USE_PDL: tl.constexpr,
):  # fmt: skip
    wait_for_inputs(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    cols = part * BLOCK_V + tl.arange(0, BLOCK_V)
    x = tl.load(logits_ptr + row * stride_l + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
    x = tl.where(x != x, float("inf"), x)  # NaN wins, as in torch.argmax (ties with +inf go to the lower index)
    best = tl.max(x, axis=0)
    tl.store(max_ptr + row * stride_p + part, best)
    tl.store(index_ptr + row * stride_p + part, tl.min(tl.where(x == best, cols, V), axis=0))


@triton.jit
def _finish_kernel(
    max_ptr, index_ptr, tokens_ptr, counter0_ptr, counter1_ptr,
    P, stride_p,
    BLOCK_P: tl.constexpr, COUNTERS: tl.constexpr, USE_PDL: tl.constexpr,
):  # fmt: skip
    wait_for_inputs(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    parts = tl.arange(0, BLOCK_P)
    valid = parts < P
    maxima = tl.load(max_ptr + row * stride_p + parts, mask=valid, other=-float("inf"))
    indices = tl.load(index_ptr + row * stride_p + parts, mask=valid, other=2**31 - 1)
    best = tl.max(maxima, axis=0)
    token = tl.min(tl.where(maxima == best, indices, 2**31 - 1), axis=0)
    tl.store(tokens_ptr + row, token.to(tokens_ptr.dtype.element_ty))
    if COUNTERS >= 1:
        tl.store(counter0_ptr + row, tl.load(counter0_ptr + row) + 1)
    if COUNTERS >= 2:
        tl.store(counter1_ptr + row, tl.load(counter1_ptr + row) + 1)


def greedy_finish_reference(logits: torch.Tensor, tokens: torch.Tensor, counters: tuple[torch.Tensor, ...] = ()):
    """The PyTorch ops the kernels replace; returns tokens."""
    tokens.copy_(logits.argmax(dim=-1))
    for counter in counters:
        counter += 1
    return tokens


def greedy_finish_triton(logits: torch.Tensor, tokens: torch.Tensor, counters: tuple[torch.Tensor, ...] = ()):
    """logits [B, V] (any float dtype) -> tokens [B] (an integer tensor, written in place), counters ([B] integer
    tensors) += 1; returns tokens. Reads shapes only, never a device value: CUDA graphs capture it."""
    if logits.dim() != 2 or logits.stride(1) != 1 or logits.shape[1] == 0:
        raise ValueError(f"logits must be a non-empty [B, V] tensor contiguous in V, got {tuple(logits.shape)}")
    rows, vocab = logits.shape
    if vocab >= 2**31 - 1:
        raise ValueError(f"a vocabulary of {vocab} entries does not fit the kernel's int32 indices")
    if len(counters) > MAX_COUNTERS:
        raise ValueError(f"at most {MAX_COUNTERS} counters, got {len(counters)}")
    for name, t in (("tokens", tokens), *(("a counter", c) for c in counters)):
        if t.shape != (rows,) or t.dtype.is_floating_point or t.device != logits.device or t.stride(0) != 1:
            raise ValueError(f"{name} must be a contiguous [{rows}] integer tensor on {logits.device}")
    if rows == 0:
        return tokens
    parts = triton.cdiv(vocab, BLOCK_V)
    maxima = torch.empty((rows, parts), device=logits.device, dtype=torch.float32)
    indices = torch.empty((rows, parts), device=logits.device, dtype=torch.int32)
    options = pdl_options(logits.device)
    _slice_argmax_kernel[(rows, parts)](
        logits, maxima, indices, vocab, logits.stride(0), parts, BLOCK_V=BLOCK_V, num_warps=NUM_WARPS, **options
    )
    counter0, counter1 = (*counters, tokens, tokens)[:2]
    _finish_kernel[(rows,)](
        maxima, indices, tokens, counter0, counter1, parts, parts,
        BLOCK_P=triton.next_power_of_2(parts), COUNTERS=len(counters), num_warps=1, **options,
    )  # fmt: skip
    return tokens


def greedy_finish(logits: torch.Tensor, tokens: torch.Tensor, counters: tuple[torch.Tensor, ...] = ()):
    """The Triton kernels on CUDA, the PyTorch ops elsewhere."""
    if logits.is_cuda:
        return greedy_finish_triton(logits, tokens, counters)
    return greedy_finish_reference(logits, tokens, counters)
