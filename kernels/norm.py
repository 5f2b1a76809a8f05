"""RMSNorm with an optional fused residual add, one Triton program per row (the decode step's layer norms).

For a row x [H], an optional residual r [H] and a weight w [H], all in one dtype (bf16, fp16 or fp32):

    s      = x + r                                   rounded to x.dtype (s = x when there is no residual)
    n      = s32 * rsqrt(mean(s32 ** 2) + eps)       in fp32, s32 = s.float(); then rounded to x.dtype
    normed = w * n                                   both in x.dtype, the product rounded to x.dtype

These are exactly the rounding steps of the eager `model_runtime.layers.RMSNorm` applied to `x + residual`:
normalise in fp32, cast back, multiply by the weight. The sum and the product of two bf16/fp16 values are
formed exactly in fp32 before their single rounding (to nearest even), as PyTorch does, so the only difference
from the eager module is the order of the fp32 sum of squares (and the GPU's rsqrt): rstd may differ in its last
bits, which rarely moves n by one ulp (and normed, after the weight, by one or two).

The launcher reads shapes and strides only, never a device value, so it can be captured in a CUDA graph.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import pdl_options, wait_for_inputs

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
MAX_BLOCK_H = 65536  # one program holds a whole row in registers


@triton.jit
def round_to(x, dtype: tl.constexpr):
    """fp32 -> dtype, rounding to nearest even. bf16 is rounded by hand because the Triton CPU interpreter
    truncates fp32 -> bf16 casts; on the GPU this gives the bits of cvt.rn.bf16.f32 (NaN stays NaN)."""
    if dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        bits = tl.where(x != x, 0x7FC0, bits)
        rounded = bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        rounded = x.to(dtype)
    return rounded


@triton.jit
def rounded_rmsnorm(s32, rstd, weight, dtype: tl.constexpr):
    """round(weight * round(s32 * rstd)) in `dtype` (module docstring); rstd broadcasts against s32."""
    n = round_to(s32 * rstd, dtype)
    return round_to(weight.to(tl.float32) * n.to(tl.float32), dtype)


@triton.jit
def _add_rmsnorm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    normed_ptr,
    summed_ptr,
    H,
    eps,
    stride_x,
    stride_r,
    stride_n,
    stride_s,
    BLOCK_H: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    wait_for_inputs(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    dtype = x_ptr.dtype.element_ty
    s = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row * stride_r + cols, mask=mask, other=0.0)
        s = round_to(s.to(tl.float32) + r.to(tl.float32), dtype)
        tl.store(summed_ptr + row * stride_s + cols, s, mask=mask)
    s32 = s.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s32 * s32, axis=0) / H + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    tl.store(normed_ptr + row * stride_n + cols, rounded_rmsnorm(s32, rstd, w, dtype), mask=mask)


def _num_warps(block_h: int) -> int:
    # Liger-Kernel's calculate_settings: 8-16 elements per thread up to 2048, wider blocks get more warps.
    if block_h >= 32768:
        return 32
    if block_h >= 8192:
        return 16
    if block_h >= 2048:
        return 8
    return 4


def _check_rows(name: str, t: torch.Tensor, x: torch.Tensor) -> None:
    if t.shape != x.shape:
        raise ValueError(f"{name} must have the shape of x {tuple(x.shape)}, got {tuple(t.shape)}")
    if t.dtype != x.dtype:
        raise ValueError(f"{name} must have the dtype of x ({x.dtype}), got {t.dtype}")
    if t.device != x.device:
        raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous along its last dimension (stride {t.stride(1)})")


def add_rmsnorm_triton(
    x: torch.Tensor,  # [N, H]
    weight: torch.Tensor,  # [H], x.dtype
    eps: float,
    residual: torch.Tensor | None = None,  # [N, H], x.dtype
    *,
    out: torch.Tensor | None = None,  # [N, H] for normed; allocated when omitted
    summed_out: torch.Tensor | None = None,  # [N, H] for x + residual; may be x or residual itself (in place)
    num_warps: int | None = None,  # a program's warps (default: by the row's width)
) -> tuple[torch.Tensor, torch.Tensor]:
    """(normed, summed); summed is x itself when there is no residual."""
    if not isinstance(eps, (int, float)):
        raise ValueError(f"eps must be a Python number (never a tensor: reading it would sync), got {type(eps)}")
    if x.dim() != 2:
        raise ValueError(f"x must be [N, H], got shape {tuple(x.shape)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"x must be bf16, fp16 or fp32, got {x.dtype}")
    rows, hidden = x.shape
    if hidden > 1 and x.stride(1) != 1:
        raise ValueError(f"x must be contiguous along its last dimension (stride {x.stride(1)})")
    if weight.shape != (hidden,):
        raise ValueError(f"weight must be [H] = [{hidden}], got shape {tuple(weight.shape)}")
    if weight.dtype != x.dtype:
        raise ValueError(f"weight must have the dtype of x ({x.dtype}), got {weight.dtype}")
    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device} but x is on {x.device}")
    if hidden > 1 and weight.stride(0) != 1:
        raise ValueError("weight must be contiguous")
    block_h = triton.next_power_of_2(hidden)
    if block_h > MAX_BLOCK_H:
        raise ValueError(f"H {hidden} is too wide for one program per row (at most {MAX_BLOCK_H})")
    if residual is not None:
        _check_rows("residual", residual, x)
    if out is None:
        out = torch.empty_like(x)
    _check_rows("out", out, x)
    if residual is None:
        if summed_out is not None:
            raise ValueError("summed_out needs a residual: without one the sum is x itself")
        summed = x
    else:
        summed = torch.empty_like(x) if summed_out is None else summed_out
        _check_rows("summed_out", summed, x)
    if rows and hidden:
        _add_rmsnorm_kernel[(rows,)](
            x, x if residual is None else residual, weight, out, summed,
            hidden, float(eps), x.stride(0), x.stride(0) if residual is None else residual.stride(0), out.stride(0),
            summed.stride(0),
            BLOCK_H=block_h, HAS_RESIDUAL=residual is not None, num_warps=num_warps or _num_warps(block_h),
            **pdl_options(x.device),
        )  # fmt: skip
    return out, summed


def add_rmsnorm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager math of `layers.RMSNorm` on x + residual; float64 inputs are evaluated in float64."""
    summed = x if residual is None else x + residual
    s32 = summed.to(torch.promote_types(summed.dtype, torch.float32))
    normed = weight * (s32 * torch.rsqrt(s32.pow(2).mean(-1, keepdim=True) + eps)).to(summed.dtype)
    return normed, summed


def add_rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    summed_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(normed, summed): the Triton kernel on CUDA, the PyTorch reference elsewhere."""
    if x.is_cuda:
        return add_rmsnorm_triton(x, weight, eps, residual, out=out, summed_out=summed_out)
    if residual is None and summed_out is not None:
        raise ValueError("summed_out needs a residual: without one the sum is x itself")
    normed, summed = add_rmsnorm_reference(x, weight, eps, residual)
    if out is not None:
        normed = out.copy_(normed)
    if summed_out is not None:
        summed = summed_out.copy_(summed)
    return normed, summed
