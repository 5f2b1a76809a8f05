"""Linear layers with MXFP8 weights for prefill and batches past the GEMV: y [M, N] = x [M, K] @ dequant(w).T (+ bias).

Weight-only MXFP8 (kernels/mx.py): x, bias and y are bf16/fp16/fp32; w is data fp8 e4m3 [N, K] and scales uint8
[N, ceil(K / 32)], w[n, k] = data[n, k] * 2**(scales[n, k // 32] - 127). Two ways to compute it:

    mx_linear:        a Triton GEMM; each program owns a [BLOCK_M, BLOCK_N] output tile and walks K in BLOCK_K tiles
                      (a multiple of 32: whole scale groups), loading the weight tile as rows [BLOCK_N, BLOCK_K]
                      (16 fp8 weights per 16-byte load) with its scales [BLOCK_N, BLOCK_K / 32], dequantising it in
                      registers to x.dtype (exact in bf16 down to its subnormals, for scales up to
                      mx_tile.MAX_BF16_TILE_SCALE: bf16 and fp16 calls refuse larger) and multiplying on tensor cores,
                      accumulated in fp32; bias is added in fp32 and y rounded once. The weights move as 1 byte
                      (+ 1/32) per element; output tiles are visited in groups of GROUP_M row blocks so that
                      the weight tiles they share are read from L2. At decode batches the few output tiles are
                      split along K (split_k programs each; the last to finish sums the fp32 partials in order).
    dequantise+cuBLAS: dequantize_weight (one Triton pass: 1 byte read, 2 written per element) then F.linear, whose
                      GEMM reads the 2-byte weights again: more traffic, but cuBLAS's tensor-core efficiency.

linear_mx picks by M: the Triton GEMM up to MxLinearSettings.max_rows rows, where the weight bytes dominate, else
dequantise + cuBLAS, where the FLOPs do. `python -m warpcode.bench.gemv --weights mxfp8` times both
(and gemv for M <= 16) per M, to confirm or move the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from warpcode.kernels.counters import arrival_counters, arrive
from warpcode.kernels.launch import INTERPRETER, as_int64, pdl_options, sm_count, wait_for_inputs
from warpcode.kernels.mx import SCALE_GROUP, MXTensor, dequantize_mxfp8, is_mx
from warpcode.kernels.mx_tile import dot_operand_tile, require_16_bit_tile_range
from warpcode.kernels.norm import SUPPORTED_DTYPES, round_to
from warpcode.kernels.tuning import TunedTables, kernel_settings, require_powers_of_two


@dataclass(frozen=True)
class MxLinearConfig:
    block_m: int
    block_n: int
    block_k: int  # a multiple of 32 (whole scale groups)
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8  # row blocks that visit the same weight tiles together (L2 reuse)
    split_k: int = 1  # programs per output tile, each over its share of K; the last to finish sums their partials

    def __post_init__(self) -> None:
        require_powers_of_two(self, ("block_m", "block_n", "block_k", "num_warps", "group_m"))
        if min(self.block_m, self.block_n) < 16 or self.block_k < SCALE_GROUP:
            raise ValueError(f"MxLinearConfig needs block_m, block_n >= 16 (tl.dot) and block_k >= 32, got {self}")
        if self.num_stages < 1 or self.split_k < 1:
            raise ValueError(f"MxLinearConfig.num_stages and split_k must be >= 1, got {self}")


@dataclass(frozen=True)
class MxLinearTile:
    """One rule of the tile table: the tile for up to max_rows rows (None: any), of narrowing projections only
    (outputs <= inputs, o_proj's shape) where `narrowing`; K split until the SMs hold about split_programs_per_sm
    programs each (None: unsplit)."""

    config: MxLinearConfig
    max_rows: int | None = None
    narrowing: bool = False
    split_programs_per_sm: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.config, dict):  # as the data file holds it
            object.__setattr__(self, "config", MxLinearConfig(**self.config))

    def matches(self, m: int, n: int, k: int) -> bool:
        return (self.max_rows is None or m <= self.max_rows) and (not self.narrowing or n <= k)


@dataclass(frozen=True)
class MxLinearSettings:
    """linear_mx's choice and mx_linear's tiles. The defaults are the heuristic for devices without measurements:
    narrow tiles with K split to about 4 programs an SM for decode batches (the few output tiles leave the SMs
    idle otherwise), short wide tiles up to 64 rows (the weights dominate), square tiles beyond. The H200's file holds
    the decode tiles decided in the model (64 columns on 4 warps up to 2 rows, and up to 8 for narrowing projections;
    half the programs an SM for 32-row tiles: BENCHMARKS.md)."""

    max_rows: int = 32  # linear_mx: the Triton GEMM up to this many rows, dequantise + cuBLAS beyond
    tiles: tuple[MxLinearTile, ...] = (
        MxLinearTile(MxLinearConfig(16, 32, 128, num_warps=2, num_stages=3), 16, split_programs_per_sm=4),
        MxLinearTile(MxLinearConfig(32, 32, 128, num_warps=2, num_stages=3), 32, split_programs_per_sm=4),
        MxLinearTile(MxLinearConfig(64, 64, 128, num_warps=4, num_stages=4), 64),
        MxLinearTile(MxLinearConfig(128, 128, 64, num_warps=8, num_stages=3)),
    )

    def __post_init__(self) -> None:
        tiles = tuple(MxLinearTile(**tile) if isinstance(tile, dict) else tile for tile in self.tiles)
        if not tiles or tiles[-1].max_rows is not None or tiles[-1].narrowing:
            raise ValueError("MxLinearSettings.tiles must end with a rule for any rows and any shape")
        object.__setattr__(self, "tiles", tiles)


def mx_linear_settings(tables: TunedTables | None = None) -> MxLinearSettings:
    """The device's measured "mx_linear" section, else the heuristic defaults."""
    return kernel_settings(MxLinearSettings, "mx_linear", tables)


def default_mx_linear_config(
    m: int, n: int = 4096, k: int = 4096, sms: int = 132, settings: MxLinearSettings | None = None
) -> MxLinearConfig:
    """The first tile rule that matches m rows of an n x k projection, K split in a power of two of shares until
    the `sms` SMs hold about the rule's programs each (two K tiles a share at least) where it says so."""
    tile = next(tile for tile in (settings or mx_linear_settings()).tiles if tile.matches(m, n, k))
    if tile.split_programs_per_sm is None:
        return tile.config
    return with_decode_split(tile.config, m, n, k, sms, tile.split_programs_per_sm)


def with_decode_split(config: MxLinearConfig, m: int, n: int, k: int, sms: int, programs_per_sm: int) -> MxLinearConfig:
    """config with K split in the largest power of two of shares that keeps the `sms` SMs at about programs_per_sm
    programs each or fewer, two K tiles a share at least."""
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    wanted = triton.cdiv(programs_per_sm * sms, tiles)
    splits = min(1 << (wanted.bit_length() - 1), max(1, triton.cdiv(k, config.block_k) // 2))
    return replace(config, split_k=splits)


@triton.jit
def _mx_linear_kernel(
    x_ptr, w_ptr, scales_ptr, bias_ptr, y_ptr, partial_ptr, counter_ptr,
    M, N, K,
    stride_xm, stride_wn, stride_sn, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, UPCAST_DOT_OPERANDS: tl.constexpr, DOT_PRECISION: tl.constexpr,
    USE_PDL: tl.constexpr,
):  # fmt: skip
    """Output tile pid's product over K share program_id(1) of SPLIT_K into y (+ bias). With SPLIT_K > 1 each share
    stores its fp32 partial and the tile's last program to arrive sums them in share order (the same sum whichever
    arrives last), adds the bias, stores y and resets the tile's arrival counter (kernels/counters.py)."""
    wait_for_inputs(USE_PDL)
    pid = tl.program_id(0)
    share = tl.program_id(1)
    row_blocks = tl.cdiv(M, BLOCK_M)
    col_blocks = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * col_blocks
    first_row_block = pid // per_group * GROUP_M
    group_rows = tl.minimum(row_blocks - first_row_block, GROUP_M)
    row_block = first_row_block + (pid % per_group) % group_rows
    col_block = (pid % per_group) // group_rows
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    offs_k = tl.arange(0, BLOCK_K)
    groups = tl.arange(0, BLOCK_K // 32)
    num_groups = tl.cdiv(K, 32)
    x_ptrs = x_ptr + rows[:, None].to(tl.int64) * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + cols[:, None].to(tl.int64) * stride_wn + offs_k[None, :]
    s_ptrs = scales_ptr + cols[:, None].to(tl.int64) * stride_sn + groups[None, :]
    share_width = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    k_begin = share * share_width
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(k_begin, tl.minimum(K, k_begin + share_width), BLOCK_K):
        k_mask = offs_k < K - k
        a = tl.load(x_ptrs + k, mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        w = tl.load(w_ptrs + k, mask=col_mask[:, None] & k_mask[None, :], other=0.0)
        s = tl.load(s_ptrs + k // 32, mask=col_mask[:, None] & (groups < num_groups - k // 32)[None, :], other=0)
        b = tl.trans(dot_operand_tile(w, s, BLOCK_N, BLOCK_K, x_ptr.dtype.element_ty))
        if UPCAST_DOT_OPERANDS:  # the interpreter multiplies bf16 dot operands as raw bits (expert_centric.py)
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    out_mask = row_mask[:, None] & col_mask[None, :]
    last = True
    if SPLIT_K > 1:
        partial_ptrs = partial_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
        share_stride = as_int64(M) * N  # elements per share's partial [M, N]
        tl.store(partial_ptrs + share * share_stride, acc, mask=out_mask)
        last = arrive(counter_ptr + pid, SPLIT_K)
        if last:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for index in tl.static_range(SPLIT_K):
                acc += tl.load(partial_ptrs + index * share_stride, mask=out_mask, other=0.0)
    if last:
        if HAS_BIAS:
            acc += tl.load(bias_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
        y_ptrs = y_ptr + rows[:, None].to(tl.int64) * stride_ym + cols[None, :]
        tl.store(y_ptrs, round_to(acc, y_ptr.dtype.element_ty), mask=out_mask)


def mx_linear(
    x: torch.Tensor,  # [M, K] bf16/fp16/fp32, rows contiguous
    weight: MXTensor,  # data [N, K], scales [N, ceil(K / 32)]
    bias: torch.Tensor | None = None,  # [N] x.dtype
    config: MxLinearConfig | None = None,
    settings: MxLinearSettings | None = None,  # the tile table config comes from when not given
) -> torch.Tensor:  # [M, N] x.dtype
    """y = x @ dequant(weight).T (+ bias), fp32 accumulation rounded once (the Triton GEMM of the module docstring)."""
    if x.dim() != 2 or x.dtype not in SUPPORTED_DTYPES or (x.shape[1] > 1 and x.stride(1) != 1):
        raise ValueError(f"x must be [M, K] bf16/fp16/fp32 with contiguous rows, got {x.dtype} {tuple(x.shape)}")
    m, k = x.shape
    if not is_mx(weight) or weight.dim() != 2 or weight.shape[1] != k:
        raise ValueError(f"weight must be an MXTensor [N, {k}], got {type(weight).__name__} {tuple(weight.shape)}")
    n = weight.shape[0]
    if weight.device != x.device:
        raise ValueError(f"weight must be on {x.device}, got {weight.device}")
    if bias is not None and (bias.shape != (n,) or bias.dtype != x.dtype or bias.device != x.device):
        raise ValueError(f"bias must be [{n}] {x.dtype} on {x.device}, got {bias.dtype} {tuple(bias.shape)}")
    require_16_bit_tile_range(weight, x.dtype)
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)
    if m == 0 or n == 0:
        return y
    config = config or default_mx_linear_config(m, n, k, sm_count(x.device), settings)
    bias_arg = x if bias is None else bias.contiguous()
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    partial, counters = y, y  # never dereferenced unsplit
    if config.split_k > 1:
        partial = torch.empty((config.split_k, m, n), device=x.device, dtype=torch.float32)
        counters = arrival_counters(x.device, tiles)
    _mx_linear_kernel[(tiles, config.split_k)](
        x, weight.data, weight.scales, bias_arg, y, partial, counters,
        m, n, k,
        x.stride(0), weight.data.stride(0), weight.scales.stride(0), y.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        SPLIT_K=config.split_k, HAS_BIAS=bias is not None, UPCAST_DOT_OPERANDS=INTERPRETER,
        # fp32 models get fp32 products (Triton's default for fp32 is tf32); bf16 operands are exact either way
        DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
        num_warps=config.num_warps, num_stages=config.num_stages, **pdl_options(x.device),
    )  # fmt: skip
    return y


@triton.jit
def _dequantize_kernel(
    w_ptr, scales_ptr, out_ptr, N, K, stride_wn, stride_sn, stride_on, ROWS: tl.constexpr, BLOCK_K: tl.constexpr
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    k = tl.program_id(1) * BLOCK_K
    cols = k + tl.arange(0, BLOCK_K)
    groups = k // 32 + tl.arange(0, BLOCK_K // 32)
    mask = (rows < N)[:, None] & (cols < K)[None, :]
    w = tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_wn + cols[None, :], mask=mask, other=0.0)
    s_mask = (rows < N)[:, None] & (groups < tl.cdiv(K, 32))[None, :]
    s = tl.load(scales_ptr + rows[:, None].to(tl.int64) * stride_sn + groups[None, :], mask=s_mask, other=0)
    out = dot_operand_tile(w, s, ROWS, BLOCK_K, out_ptr.dtype.element_ty)
    tl.store(out_ptr + rows[:, None].to(tl.int64) * stride_on + cols[None, :], out, mask=mask)


def dequantize_weight(weight: MXTensor, dtype: torch.dtype) -> torch.Tensor:
    """MXTensor [N, K] -> a contiguous [N, K] tensor in `dtype` (one Triton pass; kernels/mx.dequantize_mxfp8's
    values, rounded to `dtype` once)."""
    if weight.dim() != 2:
        raise ValueError(f"dequantize_weight takes a 2-D MXTensor, got shape {tuple(weight.shape)}")
    require_16_bit_tile_range(weight, dtype)
    n, k = weight.shape
    out = torch.empty((n, k), device=weight.device, dtype=dtype)
    if n and k:
        rows, block_k = 4, 512
        _dequantize_kernel[(triton.cdiv(n, rows), triton.cdiv(k, block_k))](
            weight.data, weight.scales, out, n, k, weight.data.stride(0), weight.scales.stride(0), out.stride(0),
            ROWS=rows, BLOCK_K=block_k, num_warps=4,
        )  # fmt: skip
    return out


def linear_mx(
    x: torch.Tensor, weight: MXTensor, bias: torch.Tensor | None = None, settings: MxLinearSettings | None = None
) -> torch.Tensor:
    """y [..., N] = x [..., K] @ dequant(weight).T (+ bias) in x.dtype: mx_linear up to settings.max_rows rows
    (all leading dimensions together), else dequantize_weight then cuBLAS (F.linear)."""
    settings = settings or mx_linear_settings()
    rows = x.reshape(-1, x.shape[-1])
    if rows.shape[0] <= settings.max_rows:
        y = mx_linear(rows if rows.stride(-1) == 1 else rows.contiguous(), weight, bias, settings=settings)
    else:
        y = F.linear(rows, dequantize_weight(weight, x.dtype), bias)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def mx_linear_reference(x: torch.Tensor, weight: MXTensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ dequant(weight).T (+ bias) accumulated in fp32 (float64 for float64 inputs), rounded once to x.dtype."""
    wide = torch.promote_types(x.dtype, torch.float32)
    y = x.to(wide) @ dequantize_mxfp8(weight, wide).T
    if bias is not None:
        y = y + bias.to(wide)
    return y.to(x.dtype)
