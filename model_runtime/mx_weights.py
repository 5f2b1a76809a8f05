"""Projection weights that may be MXFP8 (docs/reference/mxfp8.md): the `Linear` layer holding a tensor or an MXTensor,
the one `linear` dispatch every projection of the model goes through, and how weights of either kind are listed and
filled (model.py says which of the model's weights are MX).

With weights="mxfp8" the q/k/v/o projections, the routed experts (w13, w2), the shared experts and the dense MLP
layers hold MXTensors; the routers, the shared-expert gates, embeddings, norms and the LM head keep the model dtype
(they are small, or read once per token where precision matters most). An MX weight replaces its parameter under the
same name as a plain attribute (an MXTensor is no nn.Parameter), so `named_weights` lists both kinds.

    linear(x, w, bias):  plain w: the GEMV kernel where `uses_gemv`, else F.linear
                         MX w on CUDA: the GEMV kernel where `uses_gemv`, else kernels/mx_linear.py
                         MX w elsewhere: F.linear(x, dequantize_mxfp8(w, x.dtype), bias), the exact reference
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from warpcode.kernels.gemv import gemv, has_tuned_mx_config
from warpcode.kernels.mx import MXTensor, dequantize_mxfp8, is_mx, quantize_mxfp8, scale_columns
from warpcode.kernels.mx_tile import MAX_BF16_TILE_SCALE

Weight = torch.Tensor | MXTensor
# The names an MX weight can replace a parameter under (Linear.weight, StackedExperts.w13 / .w2).
MX_ATTRIBUTES = ("weight", "w13", "w2")


class BeyondMXRange(ValueError):
    """A weight too large for the MXFP8 kernels (kernels/mx_tile.py MAX_BF16_TILE_SCALE)."""


class Linear(nn.Module):
    """nn.Linear's parameters (`weight` [N, K], optional `bias` [N]), whose weight may be an MXTensor."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


# Rows up to which the GEMV takes narrow projections (at most NARROW_GEMV_OUTPUTS outputs, the router), H200: the
# qwen3 router [128, 2048] at 4 rows 2.1 us against cuBLAS's 5.0, at 8 rows 2.4 against 5.6 (bench_gemv).
NARROW_GEMV_ROWS = 8
NARROW_GEMV_OUTPUTS = 1024


def uses_gemv(x: torch.Tensor, weight: Weight) -> bool:
    """Whether x @ weight.T runs as the GEMV kernel: on the GPU, where `gemv_wins` says."""
    return x.is_cuda and x.dim() == 2 and gemv_wins(x.shape[0], weight)


def gemv_wins(rows: int, weight: Weight) -> bool:
    """Where the GEMV measured faster than cuBLAS (or mx_linear) on the H200: one row, every projection of the layer;
    up to NARROW_GEMV_ROWS rows, narrow outputs such as the router; an MX weight where kernels/gemv.py holds a tuned
    tile for its shape and rows (qwen3's q/k/v at two rows: MX decode at batch 2 +1.2 % at 512 keys, equal at 8K;
    o_proj there too gave +0.8 % more at 512 keys but -1.0 % at 8K, its weights fetched before the wait meeting
    attention streaming the KV cache, so it has no entry)."""
    outputs, inputs = weight.shape
    narrow = rows <= NARROW_GEMV_ROWS and outputs <= NARROW_GEMV_OUTPUTS
    return rows == 1 or narrow or (is_mx(weight) and has_tuned_mx_config(outputs, inputs, rows))


def linear(x: torch.Tensor, weight: Weight, bias: torch.Tensor | None) -> torch.Tensor:
    """x [..., K] @ weight.T + bias -> [..., N] (module docstring)."""
    if uses_gemv(x, weight):
        return gemv(x, weight, bias)
    if not is_mx(weight):
        return F.linear(x, weight, bias)
    if not x.is_cuda:
        return F.linear(x, dequantize_mxfp8(weight, x.dtype), bias)
    from warpcode.kernels.mx_linear import linear_mx

    return linear_mx(x, weight, bias)


def set_weight(module: nn.Module, name: str, weight: Weight) -> None:
    """module.<name> = weight: a frozen parameter for a tensor, a plain attribute (same name) for an MXTensor."""
    if is_mx(weight):
        module._parameters.pop(name, None)
        setattr(module, name, weight)
    else:
        setattr(module, name, nn.Parameter(weight, requires_grad=False))


def concat_rows(weights: list[Weight]) -> Weight:
    """Weights [N_i, K] stacked along N (for MX: the data and the scales, each row keeping its own scales)."""
    if all(is_mx(w) for w in weights):
        return MXTensor(torch.cat([w.data for w in weights]), torch.cat([w.scales for w in weights]))
    return torch.cat(weights)


def empty_mx(shape: torch.Size, device: torch.device) -> MXTensor:
    """An uninitialised MXTensor of `shape` [..., N, K] on `device`."""
    *lead, k = shape
    data = torch.empty(shape, dtype=torch.float8_e4m3fn, device=device)
    return MXTensor(data, torch.empty((*lead, scale_columns(k)), dtype=torch.uint8, device=device))


def named_weights(model: nn.Module) -> Iterator[tuple[str, Weight]]:
    """Every parameter and every MX weight, by parameter name (`model.layers.0.self_attn.q_proj.weight`, ...)."""
    for prefix, module in model.named_modules():
        dot = f"{prefix}." if prefix else ""
        for name in MX_ATTRIBUTES:
            if is_mx(value := module.__dict__.get(name)):
                yield dot + name, value
        for name, param in module._parameters.items():
            if param is not None:
                yield dot + name, param


@torch.no_grad()
def store_(destination: Weight, source: torch.Tensor) -> None:
    """Writes the float tensor `source` into `destination`: converted for a plain tensor, quantised for MX."""
    if is_mx(destination):
        quantised = quantize_mxfp8(source)
        if int(quantised.scales.max()) > MAX_BF16_TILE_SCALE:
            limit = 448 * 2 ** (MAX_BF16_TILE_SCALE - 127)
            raise BeyondMXRange(
                f"the weight holds magnitudes above {limit:,}, beyond what the MXFP8 kernels dequantise exactly: "
                "load this model with --weights bf16"
            )
        destination.data.copy_(quantised.data)
        destination.scales.copy_(quantised.scales)
    else:
        destination.copy_(source)


@torch.no_grad()
def fill_(destination: Weight, make: Callable[[torch.Size], torch.Tensor]) -> None:
    """destination <- make(shape); an MX weight of more than two dimensions one [N, K] slice at a time (one expert),
    so that only that slice ever exists unquantised."""
    if is_mx(destination) and destination.dim() > 2:
        for index in range(destination.shape[0]):
            fill_(destination[index], make)
    else:
        store_(destination, make(destination.shape))
