"""Argument checks shared by every MoE implementation: shapes, layouts, devices, output buffers."""

from __future__ import annotations

import torch

from warpcode.kernels.mx import MXTensor


def check_moe_args(x, topk_weights, topk_ids, w13, w2) -> None:
    if x.dim() != 2:
        raise ValueError(f"x must be [T, H], got shape {tuple(x.shape)}")
    tokens, hidden = x.shape
    if w13.dim() != 3 or w2.dim() != 3:
        raise ValueError(f"w13 must be [E, 2I, H] and w2 [E, H, I], got {tuple(w13.shape)} and {tuple(w2.shape)}")
    experts, two_i, w13_hidden = w13.shape
    if w13_hidden != hidden or two_i % 2:
        raise ValueError(f"w13 {tuple(w13.shape)} does not match x {tuple(x.shape)}: expected [E, 2I, {hidden}]")
    if tuple(w2.shape) != (experts, hidden, two_i // 2):
        raise ValueError(
            f"w2 {tuple(w2.shape)} does not match w13 {tuple(w13.shape)}: expected {(experts, hidden, two_i // 2)}"
        )
    if topk_ids.shape != topk_weights.shape or topk_ids.dim() != 2 or topk_ids.shape[0] != tokens:
        raise ValueError(
            f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} "
            f"must both be [T={tokens}, K]"
        )
    if topk_ids.dtype.is_floating_point:
        raise ValueError(f"topk_ids must be an integer tensor, got {topk_ids.dtype}")


def check_kernel_layout(x, topk_weights, topk_ids, w13, w2) -> None:
    """The kernels index with row strides and assume unit stride along the reduced dimension; MXFP8 weights
    (kernels/mx.py) come as a pair."""
    for name, tensor in (("x", x), ("w13", w13), ("w2", w2)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (stride {tensor.stride()})")
    if not (topk_ids.is_contiguous() and topk_weights.is_contiguous()):
        raise ValueError("topk_ids and topk_weights must be contiguous [T, K] tensors")
    devices = {t.device for t in (x, topk_weights, topk_ids, w13, w2)}
    if len(devices) != 1:
        raise ValueError(f"all MoE tensors must be on one device, got {sorted(map(str, devices))}")
    if isinstance(w13, MXTensor) != isinstance(w2, MXTensor):
        raise ValueError("w13 and w2 must both be MXFP8 (MXTensor) or both plain tensors")
    if not isinstance(w13, MXTensor) and w13.dtype != w2.dtype:
        raise ValueError(f"w13 and w2 must share a dtype, got {w13.dtype} and {w2.dtype}")


def check_like_x(name: str, t: torch.Tensor, x: torch.Tensor) -> None:
    if t.shape != x.shape or t.dtype != x.dtype or t.device != x.device or not t.is_contiguous():
        raise ValueError(
            f"{name} must be a contiguous {tuple(x.shape)} {x.dtype} tensor on {x.device}, got "
            f"{tuple(t.shape)} {t.dtype} on {t.device}"
        )


def output_buffer(x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    if out is None:
        return torch.empty_like(x)
    check_like_x("out", out, x)
    return out
