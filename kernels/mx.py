"""MXFP8 weights (OCP Microscaling v1.0): FP8 E4M3 elements, one power-of-two E8M0 scale per 32 along K.

For a weight W [..., N, K] (K = the reduction / input dimension), each block of 32 consecutive elements of a row
(the last block of a row padded with zeros when K is not a multiple of 32) shares one scale 2**e with

    e = the smallest integer with amax(block) <= 448 * 2**e, clamped to [-127, 127]   (all-zero block: e = -127)
    data = round_to_nearest_even_e4m3(W / 2**e),   scales = e + 127 as uint8 (E8M0 bits)

the round-up rule of NVIDIA's recipe, cuBLAS and triton_kernels (the spec's floor rule clips block maxima).

Layout, as the kernels read it (`MXTensor` is also the exchange format, docs/reference/mxfp8.md):
    data   float8_e4m3fn [..., N, K]            row-major, K contiguous: a 16-byte load is 16 weights of one row
    scales uint8         [..., N, ceil(K / 32)] row-major: the scale of data[..., n, k] is scales[..., n, k // 32]
Dequantised, an element is data * 2**(scale - 127); the kernels build 2**(s - 127) from the bits (s << 23 as
fp32, 2**-127's subnormal pattern for s = 0). The tensor-core kernels place the e4m3 bits into bf16 instead
(kernels/mx_tile.py dot_operand_tile), exact for scales up to 134 (block maxima up to 448 * 2**7); loading a model
refuses weights beyond that (model_runtime/mx_weights.py), and so do those kernels' launchers at bf16 or fp16.

`quantize_mxfp8` runs a Triton kernel on CUDA tensors (kernels/mx_quantize.py: loading quantises on the device) and
the PyTorch definition below elsewhere; both compute the same bits. Weights must be finite: inf or NaN is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from warpcode.kernels.mx_quantize import quantize_rows

WEIGHT_FORMATS = ("bf16", "mxfp8")  # "bf16": a model's weights in its dtype, whatever it is; "mxfp8": this module's
SCALE_GROUP = 32  # elements per scale, along K: the one name of the MX group size
E4M3_MAX = 448.0
SCALE_BIAS = 127
MIN_EXPONENT, MAX_EXPONENT = -127, 127


@dataclass(frozen=True)
class MXTensor:
    """An MXFP8 weight: `data` fp8 e4m3 [..., N, K] and `scales` uint8 (E8M0) [..., N, ceil(K / 32)]."""

    data: torch.Tensor
    scales: torch.Tensor

    def __post_init__(self) -> None:
        if self.data.dim() < 2:
            raise ValueError(f"MXTensor data must be [..., N, K], got shape {tuple(self.data.shape)}")
        if self.data.dtype != torch.float8_e4m3fn:
            raise ValueError(f"MXTensor data must be float8_e4m3fn, got {self.data.dtype}")
        if self.scales.dtype != torch.uint8:
            raise ValueError(f"MXTensor scales must be uint8 (E8M0 bits), got {self.scales.dtype}")
        expected = (*self.data.shape[:-1], scale_columns(self.data.shape[-1]))
        if tuple(self.scales.shape) != expected:
            raise ValueError(
                f"MXTensor scales {tuple(self.scales.shape)} do not match data {tuple(self.data.shape)}: "
                f"expected {expected} (one scale per 32 elements of the last dimension)"
            )
        if self.data.device != self.scales.device:
            raise ValueError(f"MXTensor data on {self.data.device} but scales on {self.scales.device}")
        if self.data.stride(-1) != 1 or self.scales.stride(-1) != 1:
            raise ValueError("MXTensor data and scales must be contiguous in their last dimension")

    # Enough of a tensor's surface for the shape, device and dispatch checks that take weights.
    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def dim(self) -> int:
        return self.data.dim()

    def stride(self, dim: int | None = None):
        return self.data.stride() if dim is None else self.data.stride(dim)

    def __getitem__(self, index) -> MXTensor:
        """Indexes the leading (non-K) dimensions, e.g. one expert `w13[e]` or rows `w[a:b]`."""
        parts = index if isinstance(index, tuple) else (index,)
        if Ellipsis in parts or len(parts) >= self.data.dim():
            raise IndexError("MXTensor indexing selects leading dimensions only (no `...`, nothing along K)")
        return MXTensor(self.data[index], self.scales[index])

    @property
    def nbytes(self) -> int:
        """Data plus scales, like torch.Tensor.nbytes."""
        return self.data.numel() * self.data.element_size() + self.scales.numel()

    def to(self, device: torch.device | str) -> MXTensor:
        return MXTensor(self.data.to(device), self.scales.to(device))

    def contiguous(self) -> MXTensor:
        return MXTensor(self.data.contiguous(), self.scales.contiguous())


class NonFiniteWeights(ValueError):
    """quantize_mxfp8 was given inf or NaN (a corrupt checkpoint, or a diverged training run)."""


def scale_columns(k: int) -> int:
    return -(-k // SCALE_GROUP)


def is_mx(weight: object) -> bool:
    return isinstance(weight, MXTensor)


def quantize_mxfp8(w: torch.Tensor) -> MXTensor:
    """w [..., N, K] float -> MXTensor (the rule in the module docstring); a Triton kernel on CUDA."""
    if not w.is_floating_point() or w.dtype == torch.float8_e4m3fn:
        raise ValueError(f"quantize_mxfp8 takes a float tensor of bf16/fp16/fp32/fp64, got {w.dtype}")
    if w.dim() < 2:
        raise ValueError(f"quantize_mxfp8 takes a weight [..., N, K], got shape {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()):  # a load-time check: MXFP8 has no inf, and a NaN would poison its block
        raise NonFiniteWeights("the weight holds inf or NaN values, which MXFP8 cannot represent")
    return quantize_mxfp8_triton(w) if w.is_cuda else quantize_mxfp8_torch(w)


def quantize_mxfp8_triton(w: torch.Tensor) -> MXTensor:
    """w [..., N, K] float (on the GPU, or anywhere under TRITON_INTERPRET) -> MXTensor, by kernels/mx_quantize.py."""
    *lead, k = w.shape
    flat = w.reshape(-1, k)
    if flat.stride(-1) != 1:
        flat = flat.contiguous()
    groups = scale_columns(k)
    data = torch.empty((flat.shape[0], k), device=w.device, dtype=torch.float8_e4m3fn)
    scales = torch.empty((flat.shape[0], groups), device=w.device, dtype=torch.uint8)
    quantize_rows(flat, data.view(torch.uint8), scales, SCALE_GROUP)
    return MXTensor(data.view(*lead, k), scales.view(*lead, groups))


def quantize_mxfp8_torch(w: torch.Tensor) -> MXTensor:
    """The PyTorch definition: exact integer exponent arithmetic on the fp32 bits of each block's maximum."""
    *lead, k = w.shape
    columns = scale_columns(k)
    w32 = w.to(torch.float32)  # exact for bf16/fp16; fp64 rounds once here
    padded = torch.nn.functional.pad(w32, (0, columns * SCALE_GROUP - k))
    blocks = padded.reshape(*lead, columns, SCALE_GROUP)
    exponent = block_exponent(blocks.abs().amax(dim=-1))  # int32 [..., N, columns]
    data = blocks * exp2_float32(-exponent)[..., None]  # exact: a power-of-two scaling of fp32 values
    data = data.reshape(*lead, columns * SCALE_GROUP)[..., :k].to(torch.float8_e4m3fn)  # round to nearest even
    return MXTensor(data.contiguous(), (exponent + SCALE_BIAS).to(torch.uint8).contiguous())


def block_exponent(amax: torch.Tensor) -> torch.Tensor:
    """int32 e = the smallest integer with amax <= 448 * 2**e, clamped to [-127, 127], from amax's fp32 bits.

    amax = f * 2**E with f in [1, 2): 448 = 1.75 * 2**8, so e = E - 8 when f <= 1.75 (mantissa bits <= 0x600000),
    else E - 7. A subnormal or zero amax lies below 448 * 2**-127: e = -127."""
    bits = amax.to(torch.float32).view(torch.int32)
    biased = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    e = biased - 127 - 8 + (mantissa > 0x600000).to(torch.int32)
    e = torch.where(biased == 0, MIN_EXPONENT, e)
    return e.clamp(MIN_EXPONENT, MAX_EXPONENT)


def exp2_float32(e: torch.Tensor) -> torch.Tensor:
    """2**e as fp32 for integer e in [-127, 127], exactly, from the bits (2**-127 is the subnormal 0x00400000)."""
    e = e.to(torch.int32)
    bits = torch.where(e == MIN_EXPONENT, 0x00400000, (e + SCALE_BIAS) << 23)
    return bits.to(torch.int32).view(torch.float32)


def scale_values(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 bits uint8 -> fp32 2**(s - 127)."""
    return exp2_float32(scales.to(torch.int32) - SCALE_BIAS)


def dequantize_mxfp8(mx: MXTensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """MXTensor -> [..., N, K] in `dtype` (float32 by default: every MXFP8 value is exact in it)."""
    k = mx.data.shape[-1]
    scales = scale_values(mx.scales).repeat_interleave(SCALE_GROUP, dim=-1)[..., :k]
    return (mx.data.to(torch.float32) * scales).to(dtype)


def dequantize_any(weight: torch.Tensor | MXTensor, dtype: torch.dtype) -> torch.Tensor:
    """A plain tensor in `dtype`: MX weights dequantised, others converted (the references' and the CPU path's)."""
    return dequantize_mxfp8(weight, dtype) if isinstance(weight, MXTensor) else weight.to(dtype)
