"""Router softmax + top-k (+ renormalisation) fused in one Triton kernel: a program per token (two with normed_out).

p = softmax(logits[t]);  repeat K times: pick the largest remaining p (lowest index on ties);
w = picked / sum(picked) when normalize, else picked.

With rms_of (the decode step's folded router, see o_proj_router.py) the logits are Wr (gamma * h) for the
un-normalised row h = rms_of[t], and RMSNorm's rstd = rsqrt(mean(h ** 2) + eps) scales them first:
p = softmax(rstd * logits[t]). With normed_out a second program per token stores the experts' input RMSNorm(h)
(rounded as kernels/norm.py rounds it), so the experts need no norm kernel of their own.

With prefetch (the [E, 2I, H] gate/up weights warp decode reads next) more programs per token pick the same experts
from the raw logits (a positive scale and the softmax keep their order; on ties or NaN they may pick others, which
costs only the hint) and each asks L2 for rows_per_program rows of one routed expert's gate and up weights
(l2_prefetch.py): the first prefetch_rows (RouteSettings) rows of each, the rows warp decode's first programs read.
Device memory idles from the moment the experts are known until warp decode's own loads arrive (this kernel's end,
the PDL wait, the ids' load, then the weights' latency); the prefetch moves some of the experts' bytes into that gap.
Of MXFP8 weights (an `MXTensor`) the data rows are prefetched (half the bytes of bf16 rows), not the scales (1/32 of
them).

Grid (T, 1 + normed + prefetch programs): program (t, 0) routes, (t, 1) stores the normed row (with normed_out),
the rest prefetch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from warpcode.kernels.l2_prefetch import bulk_prefetch_l2, supports_bulk_prefetch
from warpcode.kernels.launch import pdl_options, wait_for_inputs
from warpcode.kernels.moe_args import check_like_x
from warpcode.kernels.mx import MXTensor, is_mx
from warpcode.kernels.norm import rounded_rmsnorm
from warpcode.kernels.tuning import TunedTables, kernel_settings


@dataclass(frozen=True)
class RouteSettings:
    """The route kernel's launch settings; the defaults (as measured on the H200) for devices without measurements."""

    num_warps: int = 1  # the K rounds of max are warp-shuffle reductions only
    # Rows of gate and of up prefetched per routed expert (0: none): enough for warp decode's first programs; more
    # delay the kernel's end, which seems to wait for its prefetches, and so warp decode's start.
    prefetch_rows: int = 64
    rows_per_program: int = 16  # of gate and of up, one bulk prefetch per row and lane


def route_settings(tables: TunedTables | None = None) -> RouteSettings:
    return kernel_settings(RouteSettings, "route", tables)


@triton.jit
def _largest(values, experts, BLOCK_E: tl.constexpr):
    """The largest of `values` [BLOCK_E] and its expert index, the lowest index on ties: one pick of the routing."""
    best = tl.max(values, axis=0)
    return best, tl.min(tl.where(values == best, experts, BLOCK_E), axis=0)


@triton.jit
def _prefetch_targets(
    logits, experts, slot, chunk, E, I, rows, row_bytes, stride_we, stride_wr,
    K: tl.constexpr, BLOCK_E: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr,
):  # fmt: skip
    """(element offsets into w13, byte sizes) of the gate and up rows [chunk * ROWS_PER_PROGRAM, + ROWS_PER_PROGRAM)
    (those below `rows`) of the expert picked `slot`-th from `logits` [BLOCK_E] (-inf past E)."""
    remaining = logits
    expert = tl.zeros([], dtype=tl.int32)
    for k in tl.static_range(K):
        _, best_id = _largest(remaining, experts, BLOCK_E)
        expert = tl.where(slot == k, best_id, expert)
        remaining = tl.where(experts == best_id, -float("inf"), remaining)
    expert = tl.minimum(expert, E - 1)  # NaN logits pick no index: any address inside the weights will do
    lanes = tl.arange(0, 2 * ROWS_PER_PROGRAM)
    row = chunk * ROWS_PER_PROGRAM + lanes % ROWS_PER_PROGRAM
    offsets = (
        expert.to(tl.int64) * stride_we + (row + tl.where(lanes < ROWS_PER_PROGRAM, 0, I)).to(tl.int64) * stride_wr
    )
    return offsets, tl.where(row < rows, row_bytes, 0)


@triton.jit
def _route_kernel(
    logits_ptr,
    rms_ptr,
    norm_weight_ptr,
    normed_ptr,
    weights_ptr,
    ids_ptr,
    w13_ptr,
    E,
    H,
    I,
    prefetch_rows,
    row_bytes,
    eps,
    stride_t,
    stride_r,
    stride_n,
    stride_we,
    stride_wr,
    K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_H: tl.constexpr,
    NORMALIZE: tl.constexpr,
    HAS_RMS: tl.constexpr,
    STORE_NORMED: tl.constexpr,
    PREFETCH: tl.constexpr,
    FIRST_PREFETCH: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    cols = tl.arange(0, BLOCK_H)
    if STORE_NORMED:  # a weight: loaded before the wait for the previous kernel, by the program that uses it
        norm_weight = tl.load(norm_weight_ptr + cols, mask=cols < tl.where(tl.program_id(1) == 1, H, 0), other=0.0)
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    if tl.program_id(1) == 0:
        experts = tl.arange(0, BLOCK_E)
        valid = experts < E
        logits = tl.load(logits_ptr + token * stride_t + experts, mask=valid, other=-float("inf")).to(tl.float32)
        if HAS_RMS:
            r = tl.load(rms_ptr + token * stride_r + cols, mask=cols < H, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(r * r, axis=0) / H + eps)
            logits = logits * rstd
        exps = tl.where(valid, tl.exp(logits - tl.max(logits, axis=0)), 0.0)
        remaining = tl.where(valid, exps / tl.sum(exps, axis=0), -1.0)
        slots = tl.arange(0, BLOCK_K)
        picked_weights = tl.zeros([BLOCK_K], dtype=tl.float32)
        picked_ids = tl.zeros([BLOCK_K], dtype=tl.int32)
        for k in tl.static_range(K):
            best, best_id = _largest(remaining, experts, BLOCK_E)
            picked_weights = tl.where(slots == k, best, picked_weights)
            picked_ids = tl.where(slots == k, best_id, picked_ids)
            remaining = tl.where(experts == best_id, -1.0, remaining)
        if NORMALIZE:
            picked_weights = picked_weights / tl.sum(picked_weights, axis=0)
        tl.store(weights_ptr + token * K + slots, picked_weights, mask=slots < K)
        tl.store(ids_ptr + token * K + slots, picked_ids.to(tl.int64), mask=slots < K)
    if STORE_NORMED:  # noqa: SIM102 (a compile-time branch: without normed_out its body must not be compiled)
        if tl.program_id(1) == 1:  # beside the routing program: in it, the store lengthened the routing
            r = tl.load(rms_ptr + token * stride_r + cols, mask=cols < H, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(r * r, axis=0) / H + eps)
            normed = rounded_rmsnorm(r, rstd, norm_weight, normed_ptr.dtype.element_ty)
            tl.store(normed_ptr + token * stride_n + cols, normed, mask=cols < H)
    if PREFETCH:  # noqa: SIM102 (a compile-time branch, as above)
        if tl.program_id(1) >= FIRST_PREFETCH:
            p = tl.program_id(1) - FIRST_PREFETCH
            experts = tl.arange(0, BLOCK_E)
            logits = tl.load(logits_ptr + token * stride_t + experts, mask=experts < E, other=-float("inf"))
            offsets, sizes = _prefetch_targets(
                logits.to(tl.float32), experts, p % K, p // K, E, I, prefetch_rows, row_bytes, stride_we, stride_wr,
                K, BLOCK_E, ROWS_PER_PROGRAM,
            )  # fmt: skip
            bulk_prefetch_l2(w13_ptr + offsets, sizes)


def route_triton(
    router_logits: torch.Tensor,
    k: int,
    normalize: bool = True,
    rms_of: torch.Tensor | None = None,  # [T, H]: scale each row's logits by its RMSNorm rstd first
    eps: float = 0.0,
    norm_weight: torch.Tensor | None = None,  # [H] rms_of.dtype, with normed_out
    normed_out: torch.Tensor | None = None,  # [T, H] rms_of.dtype <- RMSNorm(rms_of) * norm_weight
    prefetch: torch.Tensor | MXTensor | None = None,  # [E, 2I, H] gate/up weights: L2-prefetch the routed experts'
    # first rows
    settings: RouteSettings | None = None,  # launch settings (default: the device's)
) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, E] logits (any float dtype) -> (fp32 weights [T, K], int64 ids [T, K])."""
    if router_logits.dim() != 2:
        raise ValueError(f"router_logits must be [T, E], got shape {tuple(router_logits.shape)}")
    tokens, experts = router_logits.shape
    if not 1 <= k <= experts:
        raise ValueError(f"top-k must be in [1, {experts}] for {experts} experts, got {k}")
    if router_logits.stride(1) != 1:
        raise ValueError("router_logits must be contiguous in its expert dimension")
    if rms_of is not None and (rms_of.dim() != 2 or rms_of.shape[0] != tokens or rms_of.stride(1) != 1):
        raise ValueError(f"rms_of must be [T={tokens}, H] with contiguous rows, got {tuple(rms_of.shape)}")
    if normed_out is not None:
        check_normed_out(rms_of, norm_weight, normed_out)
    weights = torch.empty((tokens, k), device=router_logits.device, dtype=torch.float32)
    ids = torch.empty((tokens, k), device=router_logits.device, dtype=torch.int64)
    if prefetch is not None:
        check_prefetch(prefetch, router_logits)
    if is_mx(prefetch):
        prefetch = prefetch.data
    settings = settings or route_settings()
    rows = prefetched_rows(prefetch, settings)
    if rows == 0:  # never dereferenced
        w13, intermediate, row_bytes, stride_we, stride_wr = router_logits, 0, 0, 0, 0
    else:
        w13, intermediate, row_bytes = prefetch, prefetch.shape[1] // 2, prefetch.shape[2] * prefetch.element_size()
        stride_we, stride_wr = prefetch.stride(0), prefetch.stride(1)
    if tokens:
        hidden = 1 if rms_of is None else rms_of.shape[1]
        first_prefetch = 1 + (normed_out is not None)
        _route_kernel[(tokens, first_prefetch + k * triton.cdiv(rows, settings.rows_per_program))](
            router_logits, router_logits if rms_of is None else rms_of,
            *((router_logits, router_logits) if normed_out is None else (norm_weight, normed_out)), weights, ids, w13,
            experts, hidden, intermediate, rows, row_bytes, float(eps),
            router_logits.stride(0), 0 if rms_of is None else rms_of.stride(0),
            0 if normed_out is None else normed_out.stride(0), stride_we, stride_wr,
            K=k, BLOCK_E=triton.next_power_of_2(experts), BLOCK_K=triton.next_power_of_2(k),
            BLOCK_H=triton.next_power_of_2(hidden), NORMALIZE=normalize, HAS_RMS=rms_of is not None,
            STORE_NORMED=normed_out is not None, PREFETCH=rows > 0, FIRST_PREFETCH=first_prefetch,
            ROWS_PER_PROGRAM=settings.rows_per_program, num_warps=settings.num_warps,
            **pdl_options(router_logits.device),
        )  # fmt: skip
    return weights, ids


def prefetched_rows(prefetch: torch.Tensor | None, settings: RouteSettings | None = None) -> int:
    """Rows of gate and of up the route kernel prefetches per routed expert: prefetch_rows (at most I) where the
    device can prefetch and every row starts and ends on 16 bytes (bulk copies need it), else 0."""
    if prefetch is None or not supports_bulk_prefetch(prefetch.device):
        return 0
    size = prefetch.element_size()
    if any(v % 16 for v in (prefetch.data_ptr(), prefetch.stride(0) * size, prefetch.stride(1) * size,
                            prefetch.shape[2] * size)):  # fmt: skip
        return 0
    return min((settings or route_settings()).prefetch_rows, prefetch.shape[1] // 2)


def check_prefetch(prefetch: torch.Tensor | MXTensor, router_logits: torch.Tensor) -> None:
    experts = router_logits.shape[1]
    if prefetch.dim() != 3 or prefetch.shape[0] != experts or prefetch.shape[1] % 2 or prefetch.stride(2) != 1:
        raise ValueError(
            f"prefetch must be the [E={experts}, 2I, H] gate/up weights, contiguous in H, got {tuple(prefetch.shape)}"
        )
    if prefetch.device != router_logits.device:
        raise ValueError(f"prefetch must be on {router_logits.device}, got {prefetch.device}")


def check_normed_out(rms_of: torch.Tensor | None, norm_weight: torch.Tensor | None, normed_out: torch.Tensor) -> None:
    if rms_of is None or norm_weight is None:
        raise ValueError("normed_out needs rms_of (the row to normalise) and norm_weight")
    check_like_x("normed_out", normed_out, rms_of)
    if norm_weight.shape != rms_of.shape[1:] or norm_weight.dtype != rms_of.dtype or norm_weight.stride(0) != 1:
        raise ValueError(f"norm_weight must be a contiguous [{rms_of.shape[1]}] {rms_of.dtype} tensor")
