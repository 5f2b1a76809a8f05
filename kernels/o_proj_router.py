"""One token's attention output projection and the next router's logits in one launch.

A decoder layer routes from RMSNorm(h + attn @ Wo.T). RMSNorm's rstd is one positive scalar per row, so (with gamma
the post-attention norm weight and Wr the router)

    z      = Wr diag(gamma) h + (Wr diag(gamma) Wo) attn      = Wr (gamma * (h + Wo attn))     fp32 [E]
    logits = rstd(h_new) * z,   h_new = round(h + round(attn @ Wo.T))

and z needs only what the projection itself reads: the router's rows run beside o_proj's, from the folded weights
Wr diag(gamma) [E, H] and Wr diag(gamma) Wo [E, K] (router_fold), instead of as a GEMV after it. The route kernel
then scales z by rstd(h_new) (route.py, rms_of) and stores the experts' input RMSNorm(h_new) (normed_out): it
loads h_new for rstd anyway (normalising inside warp decode's gate/up kernel instead was slower: a reduction in
every tile of its loop). The folded product is rounded to the weights' dtype once, and
z uses h + Wo attn before the two roundings of h_new: the logits differ from the eager model's by bf16 rounding.

Grid: cdiv(H, BLOCK_N) programs of o_proj rows (whole rows of Wo: one tile each, fetched before the PDL wait), then
E programs of one router row each (both folded rows, also fetched before the wait). One row of input only.

Wo may be MXFP8 (kernels/mx.py; weight-only): an o_proj program then loads its fp8 rows [BLOCK_N, K] and their
scales [BLOCK_N, ceil(K / 32)] before the wait and dequantises them exactly to fp32 after it, data * 2**(s - 127)
per 32 columns (mx_tile.py). The folded router weights are plain tensors in the router's dtype, folded from the
dequantised Wo (router_fold), so z is that of the MX model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from warpcode.kernels.gemv import check_apart
from warpcode.kernels.launch import pdl_options
from warpcode.kernels.moe_args import check_like_x
from warpcode.kernels.mx import MXTensor, dequantize_any, is_mx
from warpcode.kernels.mx_tile import scaled_group_sums
from warpcode.kernels.norm import round_to
from warpcode.kernels.tuning import TunedTables, kernel_settings


@dataclass(frozen=True)
class OProjRouterSettings:
    """The defaults (as measured on the H200) serve devices without measurements."""

    block_n: int = 4  # o_proj rows per program: the batch-1 o_proj GEMV tile (kernels/gemv.py)
    num_warps: int = 8


def o_proj_router_settings(tables: TunedTables | None = None) -> OProjRouterSettings:
    return kernel_settings(OProjRouterSettings, "o_proj_router", tables)


MAX_TILE = 16384  # elements of one program's weight tile: beyond it, the unfused kernels


@triton.jit
def _o_proj_router_kernel(
    x_ptr, wo_ptr, scales_ptr, h_ptr, out_ptr, wa_ptr, wh_ptr, z_ptr,
    H, K, E,
    stride_wo, stride_s, stride_wa, stride_wh,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr, IS_MX: tl.constexpr, USE_PDL: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    o_programs = tl.cdiv(H, BLOCK_N)
    cols = tl.arange(0, BLOCK_K)
    col_mask = cols < K
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if pid < o_programs:
        rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        row_mask = rows < H
        w_ptrs = wo_ptr + rows[:, None].to(tl.int64) * stride_wo + cols[None, :]
        w = tl.load(w_ptrs, mask=row_mask[:, None] & col_mask[None, :], other=0.0, eviction_policy="evict_first")
        if IS_MX:
            groups = tl.arange(0, BLOCK_K // 32)
            s_ptrs = scales_ptr + rows[:, None].to(tl.int64) * stride_s + groups[None, :]
            s_mask = row_mask[:, None] & (groups < tl.cdiv(K, 32))[None, :]
            s = tl.load(s_ptrs, mask=s_mask, other=0, eviction_policy="evict_first")
        if USE_PDL:
            tl.extra.cuda.gdc_wait()
        r = tl.load(h_ptr + rows, mask=row_mask, other=0.0)
        x = tl.load(x_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        if IS_MX:
            y = scaled_group_sums(w.to(tl.float32) * x[None, :], s, BLOCK_N, BLOCK_K)
        else:
            y = tl.sum(w.to(tl.float32) * x[None, :], axis=1)
        y = round_to(y, out_ptr.dtype.element_ty)
        y = round_to(y.to(tl.float32) + r.to(tl.float32), out_ptr.dtype.element_ty)
        tl.store(out_ptr + rows, y, mask=row_mask)
    else:
        expert = (pid - o_programs).to(tl.int64)
        h_cols = tl.arange(0, BLOCK_H)
        h_mask = h_cols < H
        wa = tl.load(wa_ptr + expert * stride_wa + cols, mask=col_mask, other=0.0, eviction_policy="evict_first")
        wh = tl.load(wh_ptr + expert * stride_wh + h_cols, mask=h_mask, other=0.0, eviction_policy="evict_first")
        if USE_PDL:
            tl.extra.cuda.gdc_wait()
        x = tl.load(x_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        h = tl.load(h_ptr + h_cols, mask=h_mask, other=0.0).to(tl.float32)
        z = tl.sum(wa.to(tl.float32) * x, axis=0) + tl.sum(wh.to(tl.float32) * h, axis=0)
        tl.store(z_ptr + expert, z)


def router_fold(
    router: torch.Tensor,  # [E, H]
    norm_weight: torch.Tensor,  # [H]: the post-attention RMSNorm's gamma
    o_proj: torch.Tensor | MXTensor,  # [H, K]
) -> tuple[torch.Tensor, torch.Tensor]:  # ([E, K] Wr diag(gamma) Wo, [E, H] Wr diag(gamma)), router.dtype
    """The folded router weights, computed in fp32 (fp64 for fp64 weights) and rounded once; an MX o_proj is
    dequantised exactly first (the folded weights stay plain tensors in the router's dtype)."""
    wide = torch.promote_types(router.dtype, torch.float32)
    scaled = router.to(wide) * norm_weight.to(wide)[None, :]
    return (scaled @ dequantize_any(o_proj, wide)).to(router.dtype).contiguous(), scaled.to(router.dtype).contiguous()


def fits(hidden: int, k: int) -> bool:
    """Whether one launch holds these shapes: whole-row tiles of at most MAX_TILE elements."""
    return (
        o_proj_router_settings().block_n * triton.next_power_of_2(k) <= MAX_TILE
        and triton.next_power_of_2(hidden) <= MAX_TILE
    )


def o_proj_router(
    x: torch.Tensor,  # [1, K]: the attention output
    o_proj: torch.Tensor | MXTensor,  # [H, K]; or MXFP8 (data [H, K], scales [H, ceil(K / 32)])
    h: torch.Tensor,  # [1, H]: the residual stream before the projection
    fold: tuple[torch.Tensor, torch.Tensor],  # router_fold(...): [E, K], [E, H]
    out: torch.Tensor | None = None,  # [1, H]: h + attn @ o_proj.T; must not overlap h or x
) -> tuple[torch.Tensor, torch.Tensor]:  # (h_new [1, H] x.dtype, z [1, E] fp32)
    folded_attn, folded_h = fold
    if x.dim() != 2 or x.shape[0] != 1:
        raise ValueError(f"x must be one row [1, K], got shape {tuple(x.shape)}")
    k = x.shape[1]
    hidden, experts = o_proj.shape[0], folded_h.shape[0]
    if tuple(o_proj.shape) != (hidden, k) or tuple(h.shape) != (1, hidden):
        raise ValueError(f"o_proj must be [H, {k}] and h [1, H], got {tuple(o_proj.shape)} and {tuple(h.shape)}")
    if tuple(folded_attn.shape) != (experts, k) or tuple(folded_h.shape) != (experts, hidden):
        raise ValueError(f"fold must be ([E, {k}], [E, {hidden}]), got {tuple(folded_attn.shape)}, "
                         f"{tuple(folded_h.shape)}")  # fmt: skip
    if not fits(hidden, k):
        raise ValueError(f"H = {hidden}, K = {k} do not fit one launch's tiles (see fits())")
    mx = is_mx(o_proj)
    if mx and o_proj.device != x.device:
        raise ValueError(f"o_proj must be on {x.device}, got {o_proj.device}")
    checked = [("x", x), ("h", h), ("fold[0]", folded_attn), ("fold[1]", folded_h)]
    if not mx:  # MXTensor checks its own dtypes and layout
        checked.append(("o_proj", o_proj))
    for name, t in checked:
        if t.dtype != x.dtype or t.device != x.device or t.stride(-1) != 1:
            raise ValueError(f"{name} must be {x.dtype} on {x.device}, contiguous in its last dimension")
    if out is None:
        out = torch.empty_like(h)
    check_like_x("out", out, h)
    check_apart("out", out, "h", h)  # the router rows read all of h, the o_proj rows all of x
    check_apart("out", out, "x", x)
    z = torch.empty((1, experts), device=x.device, dtype=torch.float32)
    data, scales = (o_proj.data, o_proj.scales) if mx else (o_proj, o_proj)
    settings = o_proj_router_settings()
    _o_proj_router_kernel[(triton.cdiv(hidden, settings.block_n) + experts,)](
        x, data, scales, h, out, folded_attn, folded_h, z,
        hidden, k, experts,
        data.stride(0), scales.stride(0), folded_attn.stride(0), folded_h.stride(0),
        BLOCK_N=settings.block_n, BLOCK_K=max(32 if mx else 1, triton.next_power_of_2(k)),
        BLOCK_H=triton.next_power_of_2(hidden), IS_MX=mx, num_warps=settings.num_warps, **pdl_options(x.device),
    )  # fmt: skip
    return out, z
