"""Small-batch dense projections (B <= 16 rows): y [B, N] = x [B, H] @ w [N, H].T (+ bias), fp32 accumulation,
rounded once to x.dtype.

One program per block of BLOCK_N weight rows, holding all B input rows: every weight element is read once per call,
in 16-byte loads along H, marked first to evict in L2 (so the stream does not push out what is read again: the
inputs, the KV cache). Inputs are tiny and L2-resident, so every program
re-reads them (no split-K, no atomics). A program walks H in BLOCK_K tiles, loading the next weight tile after using
the current one; Triton does not pipeline these (non-dot) loads, so with several tiles per row a program keeps only
about one tile in flight, while BLOCK_K >= H makes the whole row one tile, fetched at once. The product is a
broadcast multiply + sum on CUDA cores for small B and `tl.dot` (tensor cores, B padded to 16) when B is large
enough for the FMAs to compete with the loads. Under PDL the first weight tile is fetched before `gdc_wait`, while
the previous kernel drains; only the reads of x wait. The launcher reads shapes and strides only (CUDA-graph safe).

Two optional fusions take a decoder layer's add + RMSNorm kernels out of the decode step (model_runtime/decode_step):

    prologue (norm_weight = gamma [H], eps): the input is RMSNorm(x) instead of x,
        y = rstd * (x32 * gamma32) @ w.T (+ bias),   rstd = rsqrt(mean(x32 ** 2) + eps) per row, x32 = x.float()
    epilogue (residual [B, N]): y = round(residual + round(x @ w.T + bias))   (HF order: project, round, then add)

The sums of squares accumulate in the same pass over x as the product, and rstd scales the fp32 accumulator at the
end: no serial pass over x before the first multiply. The normalised input is therefore not rounded to x.dtype
before the product, as the eager model rounds it (one rounding fewer, closer to float64; the tensor-core path rounds
x * gamma once). One more program, whose weight rows are all masked off (no weight traffic), may also store
RMSNorm(x) rounded as kernels/norm.py rounds (normed_out, for the other readers of the normed input), in a second
pass over x after its sums: done by a program of the product, it made that program the last to finish. gamma is a
weight: its first tile is fetched before `gdc_wait` with the first weight tile. Each output element has one owner
program, the only one that reads its residual element (right after the wait, so the load overlaps the product), so
`out` may be `residual` itself.

MXFP8 weights (kernels/mx.py, weight-only: x, bias, gamma, residual and y keep x.dtype), under the IS_MX switch: w
is data fp8 [N, H] plus scales uint8 [N, ceil(H / 32)], and each weight tile comes with its scale tile [BLOCK_N,
BLOCK_K / 32], loaded alike (first tiles before the wait, the next after using the current). The broadcast product
reads the data as int32 words, a tile [BLOCK_N, BLOCK_K / 32, 8] (a 16-byte load is 16 weights of one group),
converts each word in its register (mx_tile.word_products: a chain of FMAs with the four partners of x) and scales
each 32-group's sum (faster than fp8 tiles whose every byte Triton unpacks into a register of its own). H must then
be a multiple of 4 (every real model's is); otherwise, and from B = 8 on, the tensor-core product dequantises each
tile, w[n, k] = data[n, k] * 2**(scales[n, k // 32] - 127) (mx_tile.py), in x.dtype (exact in bf16 but for values
below bf16's subnormals). A 16-byte load is 16 fp8 weights, so MX configs carry twice the block_k for the same bytes
in flight (default_mx_gemv_config, the device's "gemv_mx" tiles).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER, pdl_options
from warpcode.kernels.mx import SCALE_GROUP, MXTensor, dequantize_any, is_mx
from warpcode.kernels.mx_tile import dequantize_tile, scale_values, split_by_word_byte, word_products
from warpcode.kernels.norm import SUPPORTED_DTYPES, round_to, rounded_rmsnorm
from warpcode.kernels.tuning import TunedTables, bucket_entry, device_tables, require_powers_of_two, token_bucket

MAX_BATCH = 16  # beyond this, callers use cuBLAS


@dataclass(frozen=True)
class GemvConfig:
    block_n: int = 8  # weight rows per program
    block_k: int = 512  # H elements per loaded tile
    num_warps: int = 4
    num_stages: int = 1
    use_dot: bool = False  # tl.dot with B padded to 16 instead of broadcast multiply + sum

    def __post_init__(self) -> None:
        require_powers_of_two(self, ("block_n", "block_k", "num_warps"))
        if self.block_k < 16:
            raise ValueError(f"GemvConfig.block_k must be >= 16, got {self.block_k}")
        if self.num_stages < 1:
            raise ValueError(f"GemvConfig.num_stages must be >= 1, got {self.num_stages}")
        if self.use_dot and self.block_n < 8:
            raise ValueError(f"GemvConfig.use_dot needs block_n >= 8, got {self.block_n}")


def default_gemv_config(n: int, h: int, batch: int, mx: bool = False, tables: TunedTables | None = None) -> GemvConfig:
    """The measured tile of the device's tables (section "gemv", or "gemv_mx" for MX weights; keys "N,H" and the
    token bucket of the batch, measured by `python -m warpcode.bench.gemv`) when there is one, else a heuristic."""
    tuned = measured_gemv_config(n, h, batch, mx, tables)
    if tuned is not None:
        return tuned
    return default_mx_gemv_config(n, h, batch) if mx else _heuristic_config(n, h, batch)


def measured_gemv_config(
    n: int, h: int, batch: int, mx: bool = False, tables: TunedTables | None = None
) -> GemvConfig | None:
    section = "gemv_mx" if mx else "gemv"
    return bucket_entry(GemvConfig, section, f"{n},{h}", token_bucket(batch), tables or device_tables())


def has_tuned_mx_config(n: int, h: int, batch: int, tables: TunedTables | None = None) -> bool:
    """Whether the device's tables hold a measured MX tile for this shape and batch (its token bucket)."""
    return measured_gemv_config(n, h, batch, True, tables) is not None


def _heuristic_config(n: int, h: int, batch: int) -> GemvConfig:
    """Each program keeps about one tile in flight (the next tile is loaded after the current one is used), so by
    Little's law the grid needs ~3-4 MB of tiles in flight to reach the 4.8 TB/s roofline: >= ~256 programs where
    N allows, tiles of up to 8192 elements (<= 64 per thread, 16-byte loads), input tiles [B, block_k] kept as
    small. From B = 8 on, tensor cores (the CUDA-core FMAs and shuffles of the broadcast product would rival the
    loads there), pipelined over 3 stages."""
    if batch >= 8 and n >= 2048:
        return GemvConfig(block_n=16, block_k=256, num_warps=4, num_stages=3, use_dot=True)
    rows_b = triton.next_power_of_2(batch)
    block_n = next((bn for bn in (16, 8, 4, 2) if triton.cdiv(n, bn) >= 256), 1)
    block_n = max(block_n, rows_b // 8)
    tile = min(8192, max(4096, (3 << 20) // triton.cdiv(n, block_n)))
    block_k = min(triton.next_power_of_2(h), 1 << (tile // block_n).bit_length() - 1, max(128, 8192 // rows_b))
    num_warps = max(1, min(4, max(block_n, rows_b) * block_k // 2048))
    return GemvConfig(block_n=block_n, block_k=max(16, block_k), num_warps=num_warps, num_stages=1)


def default_mx_gemv_config(n: int, h: int, batch: int) -> GemvConfig:
    """The bf16 heuristic's tiles with twice the K extent (a 16-byte load is 16 fp8 weights, so the same bytes in
    flight), at least one scale group (32) and at most the row; warps so that a thread holds <= 64 weights, as in
    the bf16 heuristic (they are widened to fp32 in registers either way)."""
    base = _heuristic_config(n, h, batch)
    block_k = max(SCALE_GROUP, min(2 * base.block_k, triton.next_power_of_2(h)))
    num_warps = max(base.num_warps, min(8, base.block_n * block_k // (32 * 64)))
    return dataclasses.replace(base, block_k=block_k, num_warps=num_warps)


@triton.jit
def _accumulate_mx_sums(acc, a, words, s, BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr):
    """acc [BLOCK_B, BLOCK_N] += a [BLOCK_B, BLOCK_K] @ dequantised(w).T on CUDA cores, for w loaded as int32 words
    [BLOCK_N, BLOCK_K / 32, 8] (four weights each): each 32-group's products are summed (a chain of FMAs per word)
    before its scale multiplies them, one input row at a time."""
    scales = scale_values(s)
    a = a.to(tl.float32)
    batch = tl.arange(0, BLOCK_B)
    for b in tl.static_range(BLOCK_B):
        x0, x1, x2, x3 = split_by_word_byte(tl.sum(tl.where(batch[:, None] == b, a, 0.0), axis=0), BLOCK_K // 32, 8)
        products = word_products(words, x0[None, :, :], x1[None, :, :], x2[None, :, :], x3[None, :, :])
        y = tl.sum(tl.sum(products, axis=2) * scales, axis=1)
        acc += tl.where(batch[:, None] == b, y[None, :], 0.0)
    return acc


@triton.jit
def _accumulate(acc, a, w, USE_DOT: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """acc [BLOCK_B, BLOCK_N] += a [BLOCK_B, BLOCK_K] @ w [BLOCK_N, BLOCK_K].T in fp32."""
    if USE_DOT:
        if DOT_IN_FP32:  # fp32 inputs, or the interpreter (whose bf16 dot multiplies the raw bits)
            acc = tl.dot(a.to(tl.float32), tl.trans(w.to(tl.float32)), acc, input_precision="ieee")
        else:  # the normed input arrives in fp32: tensor cores take it rounded to w's dtype
            acc = tl.dot(a.to(w.dtype), tl.trans(w), acc)
    else:
        acc += tl.sum(w.to(tl.float32)[None, :, :] * a.to(tl.float32)[:, None, :], axis=2)
    return acc


@triton.jit
def _mx_tile(w, s, x_ptr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TO_X_DTYPE: tl.constexpr):
    """An MX weight tile dequantised for tl.dot where it is used (its loads stay in flight until then): exactly to
    fp32, then to x.dtype unless the product runs in fp32."""
    w = dequantize_tile(w, s, BLOCK_N, BLOCK_K, tl.float32)
    if TO_X_DTYPE:
        w = w.to(x_ptr.dtype.element_ty)
    return w


@triton.jit
def _norm_prologue_tile(a, gamma, sum_sq):
    """One x tile's share of the RMSNorm prologue: (x32 * gamma32, sum_sq + each row's sum of x32 ** 2)."""
    a = a.to(tl.float32)
    return a * gamma.to(tl.float32)[None, :], sum_sq + tl.sum(a * a, axis=1)


@triton.jit
def _store_rmsnorm(x_ptrs, gamma_ptr, normed_ptrs, rstd, batch_mask, H, BLOCK_K: tl.constexpr):
    """normed_out = round(gamma * round(x32 * rstd)) over whole rows, in BLOCK_K tiles (norm.py's rounding)."""
    cols = tl.arange(0, BLOCK_K)
    for k in range(0, H, BLOCK_K):
        mask = batch_mask[:, None] & (cols + k < H)[None, :]
        a = tl.load(x_ptrs + k, mask=mask, other=0.0)
        gamma = tl.load(gamma_ptr + cols + k, mask=cols + k < H, other=0.0)
        tl.store(normed_ptrs + k, rounded_rmsnorm(a.to(tl.float32), rstd[:, None], gamma[None, :], a.dtype), mask=mask)


@triton.jit
def _accumulate_tile(
    acc, a, w, s, x_ptr, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IS_MX: tl.constexpr,
    USE_DOT: tl.constexpr, DOT_IN_FP32: tl.constexpr, MX_TO_X_DTYPE: tl.constexpr,
):  # fmt: skip
    """One weight tile's share of acc: MX words summed group by group, an MX tile dequantised for the tensor cores,
    or a plain tile."""
    if IS_MX:
        if USE_DOT:
            return _accumulate(acc, a, _mx_tile(w, s, x_ptr, BLOCK_N, BLOCK_K, MX_TO_X_DTYPE), True, DOT_IN_FP32)
        else:
            return _accumulate_mx_sums(acc, a, w, s, BLOCK_B, BLOCK_K)
    else:
        return _accumulate(acc, a, w, USE_DOT, DOT_IN_FP32)


@triton.jit
def _load_weight_tile(w_ptrs, k, w_row_mask, w_cols, H, EVEN_K: tl.constexpr, PER_WORD: tl.constexpr, W_ZERO):
    """The weight tile from column k (elements; w_ptrs advance by words of PER_WORD of them), first to evict."""
    if EVEN_K:
        return tl.load(w_ptrs + k // PER_WORD, mask=w_row_mask, other=W_ZERO, eviction_policy="evict_first")
    else:
        mask = w_row_mask & (w_cols * PER_WORD + k < H)[None]
        return tl.load(w_ptrs + k // PER_WORD, mask=mask, other=W_ZERO, eviction_policy="evict_first")


@triton.jit
def _load_scale_tile(s_ptrs, k, row_mask, groups, s_groups):
    """The scales of the weight tile from column k (a multiple of 32)."""
    mask = row_mask[:, None] & (groups + k // 32 < s_groups)[None, :]
    return tl.load(s_ptrs + k // 32, mask=mask, other=0, eviction_policy="evict_first")


@triton.jit
def _gemv_kernel(
    x_ptr, w_ptr, scales_ptr, bias_ptr, gamma_ptr, residual_ptr, y_ptr, normed_ptr,
    B, N, H, eps,
    stride_x, stride_w, stride_s, stride_r, stride_y, stride_n,
    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, HAS_NORM: tl.constexpr, STORE_NORMED: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
    EVEN_K: tl.constexpr, USE_DOT: tl.constexpr, DOT_IN_FP32: tl.constexpr, USE_PDL: tl.constexpr,
    IS_MX: tl.constexpr, MX_TO_X_DTYPE: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    batch = tl.arange(0, BLOCK_B)
    batch_mask = batch < B
    cols = tl.arange(0, BLOCK_K)
    if IS_MX and not USE_DOT:  # int32 words [BLOCK_N, BLOCK_K / 32, 8]: a 16-byte load is 16 weights of one group
        PER_WORD: tl.constexpr = 4
        W_ZERO: tl.constexpr = 0
        w_cols = tl.arange(0, BLOCK_K // 32)[:, None] * 8 + tl.arange(0, 8)[None, :]  # word index
        w_ptrs = w_ptr + rows[:, None, None].to(tl.int64) * stride_w + w_cols[None, :, :]
        w_row_mask = row_mask[:, None, None]
    else:
        PER_WORD: tl.constexpr = 1
        W_ZERO: tl.constexpr = 0.0
        w_cols = cols
        w_ptrs = w_ptr + rows[:, None].to(tl.int64) * stride_w + cols[None, :]
        w_row_mask = row_mask[:, None]
    x_ptrs = x_ptr + batch[:, None].to(tl.int64) * stride_x + cols[None, :]
    normed_ptrs = normed_ptr + batch[:, None].to(tl.int64) * stride_n + cols[None, :]
    last_k = (H - 1) // BLOCK_K * BLOCK_K  # the last tile, the only one that can be ragged (EVEN_K: none is)
    if IS_MX:  # one scale per 32 weights: a [BLOCK_N, BLOCK_K / 32] tile beside each weight tile
        groups = tl.arange(0, BLOCK_K // 32)
        s_ptrs = scales_ptr + rows[:, None].to(tl.int64) * stride_s + groups[None, :]
        s_groups = tl.cdiv(H, 32)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    # Weights never change: their first tiles are fetched before waiting for the kernel that writes x (gamma's
    # tiles are always masked: BLOCK_K elements, one small load each).
    w = _load_weight_tile(w_ptrs, 0, w_row_mask, w_cols, H, EVEN_K, PER_WORD, W_ZERO)
    s = 0  # the weight tile's scales (MX only)
    if IS_MX:
        s = _load_scale_tile(s_ptrs, 0, row_mask, groups, s_groups)
    if HAS_NORM:
        gamma = tl.load(gamma_ptr + cols, mask=cols < H, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    out_mask = batch_mask[:, None] & row_mask[None, :]
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + batch[:, None].to(tl.int64) * stride_r + rows[None, :], mask=out_mask, other=0.0)
    acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)
    sum_sq = tl.zeros([BLOCK_B], dtype=tl.float32)
    # Every tile but the last (none when BLOCK_K >= H: the whole row is the first tile), each loading the next.
    for k in range(0, last_k, BLOCK_K):
        a = tl.load(x_ptrs + k, mask=batch_mask[:, None], other=0.0)  # k + BLOCK_K < H: no column mask
        if HAS_NORM:
            a, sum_sq = _norm_prologue_tile(a, gamma, sum_sq)
        acc = _accumulate_tile(
            acc, a, w, s, x_ptr, BLOCK_B, BLOCK_N, BLOCK_K, IS_MX, USE_DOT, DOT_IN_FP32, MX_TO_X_DTYPE
        )
        w = _load_weight_tile(w_ptrs, k + BLOCK_K, w_row_mask, w_cols, H, EVEN_K, PER_WORD, W_ZERO)
        if IS_MX:
            s = _load_scale_tile(s_ptrs, k + BLOCK_K, row_mask, groups, s_groups)
        if HAS_NORM:
            gamma = tl.load(gamma_ptr + cols + k + BLOCK_K, mask=cols + k + BLOCK_K < H, other=0.0)
    x_mask = batch_mask[:, None] if EVEN_K else batch_mask[:, None] & (cols + last_k < H)[None, :]
    a = tl.load(x_ptrs + last_k, mask=x_mask, other=0.0)
    if HAS_NORM:
        a, sum_sq = _norm_prologue_tile(a, gamma, sum_sq)
    acc = _accumulate_tile(acc, a, w, s, x_ptr, BLOCK_B, BLOCK_N, BLOCK_K, IS_MX, USE_DOT, DOT_IN_FP32, MX_TO_X_DTYPE)
    if HAS_NORM:
        rstd = tl.rsqrt(sum_sq / H + eps)
        acc *= rstd[:, None]
        if STORE_NORMED and pid == tl.num_programs(0) - 1:  # the extra program, whose rows are all masked off
            _store_rmsnorm(x_ptrs, gamma_ptr, normed_ptrs, rstd, batch_mask, H, BLOCK_K)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)[None, :]
    y = round_to(acc, x_ptr.dtype.element_ty)
    if HAS_RESIDUAL:
        y = round_to(y.to(tl.float32) + r.to(tl.float32), x_ptr.dtype.element_ty)
    tl.store(y_ptr + batch[:, None].to(tl.int64) * stride_y + rows[None, :], y, mask=out_mask)


def _check_vector(name: str, t: torch.Tensor, size: int, x: torch.Tensor) -> None:
    if t.shape != (size,):
        raise ValueError(f"{name} must be [{size}], got shape {tuple(t.shape)}")
    if t.dtype != x.dtype or t.device != x.device:
        raise ValueError(f"{name} must be {x.dtype} on {x.device}, got {t.dtype} on {t.device}")
    if size > 1 and t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous (stride {t.stride(0)})")


def _check_rows(name: str, t: torch.Tensor, shape: tuple[int, int], x: torch.Tensor) -> None:
    if t.dim() != 2 or tuple(t.shape) != shape:
        raise ValueError(f"{name} must be {list(shape)}, got shape {tuple(t.shape)}")
    if t.dtype != x.dtype or t.device != x.device:
        raise ValueError(f"{name} must be {x.dtype} on {x.device}, got {t.dtype} on {t.device}")
    if shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{name} rows must be contiguous (stride along the last dimension is {t.stride(1)})")


def check_apart(name: str, t: torch.Tensor, read_name: str, read: torch.Tensor) -> None:
    """For [rows, columns] tensors with contiguous rows, t written while every program reads all of `read`: a store
    into read's memory would race the other programs' loads."""

    def span(u: torch.Tensor) -> tuple[int, int]:
        return u.data_ptr(), u.data_ptr() + ((u.shape[0] - 1) * u.stride(0) + u.shape[1]) * u.element_size()

    (start, end), (read_start, read_end) = span(t), span(read)
    if start < read_end and read_start < end:
        raise ValueError(f"{name} must not overlap {read_name} (every program reads the whole of {read_name})")


def gemv(
    x: torch.Tensor,  # [B, H], 1 <= B <= 16
    w: torch.Tensor | MXTensor,  # [N, H], rows contiguous; or MXFP8 (data [N, H], scales [N, ceil(H / 32)])
    bias: torch.Tensor | None = None,  # [N]
    config: GemvConfig | None = None,
    *,
    out: torch.Tensor | None = None,  # [B, N] x.dtype, preallocated (CUDA graphs); may be `residual`
    norm_weight: torch.Tensor | None = None,  # [H] x.dtype: RMSNorm's gamma, multiply RMSNorm(x) instead of x
    eps: float | None = None,  # RMSNorm's epsilon, with norm_weight
    normed_out: torch.Tensor | None = None,  # [B, H] x.dtype: also store RMSNorm(x) (needs norm_weight)
    residual: torch.Tensor | None = None,  # [B, N] x.dtype: add the projection to it
) -> torch.Tensor:
    """y [B, N] = x @ w.T (+ bias) in x.dtype, accumulated in fp32 and rounded once; with norm_weight, x is replaced
    by RMSNorm(x), unrounded; with residual, y = round(residual + y) (module docstring). An MX w is dequantised
    in the kernel (exactly, to fp32; to x.dtype for the tensor cores)."""
    if x.dim() != 2:
        raise ValueError(f"x must be [B, H], got shape {tuple(x.shape)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"x must be bf16, fp16 or fp32, got {x.dtype}")
    batch, hidden = x.shape
    if not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"gemv handles 1..{MAX_BATCH} rows, got B = {batch} (use torch.nn.functional.linear)")
    if hidden < 1:
        raise ValueError("x must have H >= 1 columns")
    _check_rows("x", x, (batch, hidden), x)
    if w.dim() != 2 or w.shape[1] != hidden or w.shape[0] < 1:
        raise ValueError(f"w must be [N >= 1, H = {hidden}], got shape {tuple(w.shape)}")
    n = w.shape[0]
    mx = is_mx(w)
    if mx:
        if w.device != x.device:
            raise ValueError(f"w must be on {x.device}, got {w.device}")
        data, scales = w.data, w.scales
    else:
        _check_rows("w", w, (n, hidden), x)
        data, scales = w, w
    if bias is not None:
        _check_vector("bias", bias, n, x)
    if norm_weight is None:
        if eps is not None or normed_out is not None:
            raise ValueError("eps and normed_out belong to the RMSNorm prologue: pass norm_weight too")
    else:
        _check_vector("norm_weight", norm_weight, hidden, x)
        if not isinstance(eps, (int, float)):
            raise ValueError(f"norm_weight needs eps as a Python number (a tensor would sync), got {type(eps)}")
    if normed_out is not None:
        _check_rows("normed_out", normed_out, (batch, hidden), x)
        check_apart("normed_out", normed_out, "x", x)
    if residual is not None:
        _check_rows("residual", residual, (batch, n), x)
    out = torch.empty((batch, n), device=x.device, dtype=x.dtype) if out is None else out
    _check_rows("out", out, (batch, n), x)
    check_apart("out", out, "x", x)
    config = config or default_gemv_config(n, hidden, batch, mx=mx)
    if mx and config.block_k < SCALE_GROUP:
        raise ValueError(
            f"MX weights need GemvConfig.block_k >= {SCALE_GROUP} (whole scale groups), got {config.block_k}"
        )
    if mx and not config.use_dot:
        if hidden % 4 or data.stride(0) % 4 or data.data_ptr() % 4:  # rows of whole int32 words: else tensor cores
            config = dataclasses.replace(config, use_dot=True, block_n=max(8, config.block_n))
        else:
            data = data.view(torch.int32)
    dot_in_fp32 = x.dtype == torch.float32 or INTERPRETER
    programs = triton.cdiv(n, config.block_n) + (normed_out is not None)
    _gemv_kernel[(programs,)](
        x, data, scales, x if bias is None else bias, x if norm_weight is None else norm_weight,
        x if residual is None else residual, out, x if normed_out is None else normed_out,
        batch, n, hidden, 0.0 if eps is None else float(eps),
        x.stride(0), data.stride(0), scales.stride(0), 0 if residual is None else residual.stride(0), out.stride(0),
        0 if normed_out is None else normed_out.stride(0),
        BLOCK_B=max(16 if config.use_dot else 1, triton.next_power_of_2(batch)), BLOCK_N=config.block_n,
        BLOCK_K=config.block_k, HAS_BIAS=bias is not None, HAS_NORM=norm_weight is not None,
        STORE_NORMED=normed_out is not None, HAS_RESIDUAL=residual is not None, EVEN_K=hidden % config.block_k == 0,
        USE_DOT=config.use_dot, DOT_IN_FP32=dot_in_fp32, IS_MX=mx, MX_TO_X_DTYPE=config.use_dot and not dot_in_fp32,
        num_warps=config.num_warps, num_stages=config.num_stages, **pdl_options(x.device),
    )  # fmt: skip
    return out


def gemv_reference(x: torch.Tensor, w: torch.Tensor | MXTensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ w.T (+ bias) accumulated in fp32 (float64 for float64 inputs), rounded once to x.dtype; an MX w is
    dequantised exactly first."""
    wide = torch.promote_types(x.dtype, torch.float32)
    y = x.to(wide) @ dequantize_any(w, wide).T
    if bias is not None:
        y = y + bias.to(wide)
    return y.to(x.dtype)
