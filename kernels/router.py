"""The MoE router of a decode step in one kernel: logits = x @ w.T, then softmax + top-k (+ renormalisation).

    logits [B, E] = round(x [B, H] @ w [E, H].T)      fp32 accumulation, rounded once to x.dtype (the router linear)
    p = softmax(logits[b]) in fp32;  repeat K times: pick the largest remaining p (lowest index on ties);
    topk_weights = picked / sum(picked) when normalize, else picked;  topk_ids the picked experts (int64)

Bit for bit what `gemv(x, w, config=router_config(E, H, B))` then `route_triton(logits, k, normalize)` compute, in
one launch instead of two (the routing kernel is almost all launch latency). One program per block of
ROWS_PER_PROGRAM expert rows, as in gemv: it reads its weight rows once (the first tile before `gdc_wait`, since
weights never change), computes their logits for all B rows with gemv's exact operations and tile sizes, and stores
them rounded to x.dtype in a [B, E] workspace. Then "the last program to arrive finishes the job": every program
increments one persistent int32 arrival counter (kernels/counters.py) after a barrier, with acq_rel semantics at GPU
scope; the program that sees NUM_PROGRAMS - 1 earlier arrivals reads every logit back from L2 (.cg: its L1 holds
nothing the others wrote), runs route_triton's per-token code for each row, writes the results and resets the
counter to 0, so the next call or CUDA-graph replay starts from zero. The launcher reads shapes and strides only
(CUDA-graph safe).

Bit equality on the GPU needs the same reduction trees as the two kernels it replaces, i.e. the same tile shapes
and warp count: the tiles come from gemv's config for (E, H, B) (its `_accumulate` is called as is), and the kernel
runs with route_triton's 4 warps (gemv's default for B = 3, 4; for B = 1, 2 gemv picks 1 and 2 warps, whose fp32
sums round a logit one bf16 ulp apart about once in 7000 logits: `router_config` is the config that makes
`gemv(x, w, config=...)` agree exactly). Compiled for sm_90 (Triton 3.9), the fused kernel's reductions have the
layouts of gemv's and route_triton's, and its FMA / add / shuffle / ex2 / div counts are the sums of theirs.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from warpcode.kernels.counters import COUNTERS as _COUNTERS
from warpcode.kernels.counters import MIN_COUNTERS as _MIN_COUNTERS
from warpcode.kernels.counters import arrival_counters
from warpcode.kernels.gemv import MAX_BATCH, GemvConfig, _accumulate, default_gemv_config, gemv, gemv_reference
from warpcode.kernels.launch import pdl_options
from warpcode.kernels.moe_reference import route_reference
from warpcode.kernels.norm import SUPPORTED_DTYPES, round_to
from warpcode.kernels.route import route_triton

MAX_ROUTER_BATCH = 4  # rows handled by the fused kernel; more go through gemv / F.linear + route_triton
ROUTE_NUM_WARPS = 4  # route_triton's launch (Triton's default): the softmax reductions must match its layout


def router_config(experts: int, hidden: int, batch: int) -> GemvConfig:
    """gemv's config for the router linear (tuned entry or heuristic), run with route_triton's warp count. The
    fused kernel's logits are bit-identical to `gemv(x, w, config=router_config(E, H, B))`."""
    config = default_gemv_config(experts, hidden, batch)
    return dataclasses.replace(config, num_warps=ROUTE_NUM_WARPS, use_dot=False)


@triton.jit
def _router_topk_kernel(
    x_ptr, w_ptr, logits_ptr, weights_ptr, ids_ptr, counter_ptr,
    B, E, H,
    stride_x, stride_w, stride_l,
    K: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_TOPK: tl.constexpr, EVEN_H: tl.constexpr, NORMALIZE: tl.constexpr,
    USE_PDL: tl.constexpr,
):  # fmt: skip
    # Phase 1, every program: gemv's code (no bias, broadcast product) for ROWS_PER_PROGRAM expert rows.
    pid = tl.program_id(0)
    rows = pid * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    row_mask = rows < E
    batch = tl.arange(0, BLOCK_B)
    batch_mask = batch < B
    cols = tl.arange(0, BLOCK_H)
    w_ptrs = w_ptr + rows[:, None].to(tl.int64) * stride_w + cols[None, :]
    x_ptrs = x_ptr + batch[:, None].to(tl.int64) * stride_x + cols[None, :]
    last_h = (H - 1) // BLOCK_H * BLOCK_H  # the last tile, the only one that can be ragged (EVEN_H: none is)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    # Weights never change: the first tile is fetched before waiting for the kernel that writes x.
    if EVEN_H:
        w = tl.load(w_ptrs, mask=row_mask[:, None], other=0.0)
    else:
        w = tl.load(w_ptrs, mask=row_mask[:, None] & (cols < H)[None, :], other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x, and the counter's reset by its previous user, come from earlier kernels
    acc = tl.zeros([BLOCK_B, ROWS_PER_PROGRAM], dtype=tl.float32)
    # Every tile but the last (none when BLOCK_H >= H: the whole row is the first tile), each loading the next.
    for k in range(0, last_h, BLOCK_H):
        a = tl.load(x_ptrs + k, mask=batch_mask[:, None], other=0.0)  # k + BLOCK_H < H: no column mask
        acc = _accumulate(acc, a, w, False, False)
        if EVEN_H:
            w = tl.load(w_ptrs + k + BLOCK_H, mask=row_mask[:, None], other=0.0)
        else:
            w = tl.load(w_ptrs + k + BLOCK_H, mask=row_mask[:, None] & (cols + k + BLOCK_H < H)[None, :], other=0.0)
    if EVEN_H:
        a = tl.load(x_ptrs + last_h, mask=batch_mask[:, None], other=0.0)
    else:
        a = tl.load(x_ptrs + last_h, mask=batch_mask[:, None] & (cols + last_h < H)[None, :], other=0.0)
    acc = _accumulate(acc, a, w, False, False)
    l_ptrs = logits_ptr + batch[:, None].to(tl.int64) * stride_l + rows[None, :]
    tl.store(l_ptrs, round_to(acc, x_ptr.dtype.element_ty), mask=batch_mask[:, None] & row_mask[None, :])

    # Arrival: all threads' stores are done (barrier), then one release-acquire increment publishes them; the
    # program that sees every other arrival acquires all of them.
    tl.debug_barrier()
    arrived = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == tl.num_programs(0) - 1:
        tl.store(counter_ptr, 0)  # every program has arrived: the next call (or replay) starts at 0
        # Phase 2, the last program: route_triton's _route_kernel for each row, on the logits read back from L2.
        experts = tl.arange(0, BLOCK_E)
        valid = experts < E
        slots = tl.arange(0, BLOCK_TOPK)
        for b in range(B):  # B <= 4 rows: int32 offsets
            logits = tl.load(
                logits_ptr + b * stride_l + experts, mask=valid, other=-float("inf"), cache_modifier=".cg"
            ).to(tl.float32)
            exps = tl.where(valid, tl.exp(logits - tl.max(logits, axis=0)), 0.0)
            remaining = tl.where(valid, exps / tl.sum(exps, axis=0), -1.0)
            picked_weights = tl.zeros([BLOCK_TOPK], dtype=tl.float32)
            picked_ids = tl.zeros([BLOCK_TOPK], dtype=tl.int32)
            for j in tl.static_range(K):
                best = tl.max(remaining, axis=0)
                best_id = tl.min(tl.where(remaining == best, experts, BLOCK_E), axis=0)
                picked_weights = tl.where(slots == j, best, picked_weights)
                picked_ids = tl.where(slots == j, best_id, picked_ids)
                remaining = tl.where(experts == best_id, -1.0, remaining)
            if NORMALIZE:
                picked_weights = picked_weights / tl.sum(picked_weights, axis=0)
            tl.store(weights_ptr + b * K + slots, picked_weights, mask=slots < K)
            tl.store(ids_ptr + b * K + slots, picked_ids.to(tl.int64), mask=slots < K)


def _check_args(x: torch.Tensor, router_weight: torch.Tensor, k: int, normalize: bool) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"x must be [B, H], got shape {tuple(getattr(x, 'shape', ()))}")
    if not isinstance(router_weight, torch.Tensor) or router_weight.dim() != 2:
        raise ValueError(f"router_weight must be [E, H], got shape {tuple(getattr(router_weight, 'shape', ()))}")
    experts, hidden = router_weight.shape
    if x.shape[1] != hidden or hidden < 1 or experts < 1:
        raise ValueError(
            f"router_weight {tuple(router_weight.shape)} does not fit x {tuple(x.shape)}: expected [E >= 1, H >= 1]"
        )
    if x.dtype != router_weight.dtype or x.device != router_weight.device:
        raise ValueError(
            f"x and router_weight must share dtype and device, got {x.dtype} on {x.device} and "
            f"{router_weight.dtype} on {router_weight.device}"
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= experts:
        raise ValueError(f"top-k must be an int in [1, {experts}] for {experts} experts, got {k!r}")
    if not isinstance(normalize, bool):
        raise ValueError(f"normalize must be a bool, got {normalize!r}")


def router_topk_triton(
    x: torch.Tensor,  # [B, H], 1 <= B <= 4, bf16 / fp16 / fp32, rows contiguous
    router_weight: torch.Tensor,  # [E, H], x.dtype, rows contiguous
    k: int,
    normalize: bool = True,
    config: GemvConfig | None = None,  # tile sizes; default router_config(E, H, B)
    *,
    logits: torch.Tensor | None = None,  # [B, E] x.dtype, rows contiguous: receives the router logits
) -> tuple[torch.Tensor, torch.Tensor]:  # fp32 [B, K], int64 [B, K]
    """The fused kernel: (topk_weights, topk_ids) = route_triton(gemv(x, router_weight), k, normalize)."""
    _check_args(x, router_weight, k, normalize)
    if x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"x must be bf16, fp16 or fp32, got {x.dtype}")
    batch, hidden = x.shape
    experts = router_weight.shape[0]
    if not 1 <= batch <= MAX_ROUTER_BATCH:
        raise ValueError(f"router_topk_triton handles 1..{MAX_ROUTER_BATCH} rows, got B = {batch} (use router_topk)")
    if hidden > 1 and (x.stride(1) != 1 or router_weight.stride(1) != 1):
        raise ValueError(
            f"x and router_weight rows must be contiguous (strides {x.stride()}, {router_weight.stride()})"
        )
    config = config or router_config(experts, hidden, batch)
    if config.use_dot:
        raise ValueError("router_topk_triton computes the logits without tl.dot: use a config with use_dot=False")
    if logits is None:
        logits = torch.empty((batch, experts), device=x.device, dtype=x.dtype)
    elif (
        logits.shape != (batch, experts)
        or logits.dtype != x.dtype
        or logits.device != x.device
        or (experts > 1 and logits.stride(1) != 1)
    ):
        raise ValueError(f"logits must be a [{batch}, {experts}] {x.dtype} tensor on {x.device}, rows contiguous")
    weights = torch.empty((batch, k), device=x.device, dtype=torch.float32)
    ids = torch.empty((batch, k), device=x.device, dtype=torch.int64)
    counter = arrival_counters(x.device, 1, user="router_topk_triton", cache=_COUNTERS, min_count=_MIN_COUNTERS)
    _router_topk_kernel[(triton.cdiv(experts, config.block_n),)](
        x, router_weight, logits, weights, ids, counter,
        batch, experts, hidden,
        x.stride(0), router_weight.stride(0), logits.stride(0),
        K=k, ROWS_PER_PROGRAM=config.block_n, BLOCK_B=triton.next_power_of_2(batch), BLOCK_H=config.block_k,
        BLOCK_E=triton.next_power_of_2(experts), BLOCK_TOPK=triton.next_power_of_2(k),
        EVEN_H=hidden % config.block_k == 0, NORMALIZE=normalize,
        num_warps=config.num_warps, num_stages=config.num_stages, **pdl_options(x.device),
    )  # fmt: skip
    return weights, ids


def router_topk_reference(
    x: torch.Tensor, router_weight: torch.Tensor, k: int, normalize: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """route_reference(round(x @ w.T)): the logits accumulated in fp32 (float64 for float64 inputs) and rounded to
    x.dtype like the model's router linear, then softmax + top-k (+ renormalisation) in fp32 (float64)."""
    _check_args(x, router_weight, k, normalize)
    return route_reference(gemv_reference(x, router_weight), k, normalize)


def router_topk(
    x: torch.Tensor,  # [B, H]
    router_weight: torch.Tensor,  # [E, H]
    k: int,
    normalize: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:  # fp32 [B, K], int64 [B, K]
    """The fused kernel on CUDA for 1..4 rows; gemv (up to 16 rows) or F.linear, then route_triton, for more; the
    PyTorch reference off the GPU."""
    _check_args(x, router_weight, k, normalize)
    if not x.is_cuda:
        return router_topk_reference(x, router_weight, k, normalize)
    batch, hidden = x.shape
    supported = x.dtype in SUPPORTED_DTYPES and (hidden == 1 or (x.stride(1) == 1 and router_weight.stride(1) == 1))
    if supported and 1 <= batch <= MAX_ROUTER_BATCH:
        return router_topk_triton(x, router_weight, k, normalize)
    small = supported and 1 <= batch <= MAX_BATCH
    router_logits = gemv(x, router_weight) if small else F.linear(x, router_weight)
    return route_triton(router_logits, k, normalize)
