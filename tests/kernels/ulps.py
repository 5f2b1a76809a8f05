"""Comparing a fused norm kernel with its reference to the last bit, allowing only the rounding flips that a
different order of summation explains."""

import torch

from warpcode.kernels.norm import add_rmsnorm_reference


def ordered_bits(t: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 values as integers in the order of the values, one apart between neighbours (+0 == -0)."""
    bits = t.view(torch.int16).int()
    magnitude = bits & 0x7FFF
    return torch.where(bits < 0, -magnitude, magnitude)


def next_value(t: torch.Tensor, direction: int) -> torch.Tensor:
    """The neighbouring bf16/fp16 value of each element, towards +inf (1) or -inf (-1)."""
    key = ordered_bits(t) + direction
    return torch.where(key < 0, -key - 32768, key).to(torch.int16).view(t.dtype)


def assert_reference_but_rare_one_ulp_flips(normed, x, weight, residual, eps, max_fraction):
    """normed is the reference bit for bit, except in a few elements where the normalised value n (before the
    weight) is one ulp away: the fp32 sum of squares is added in another order, so rsqrt may differ in its last
    bit and flip the rounding of n. (After the multiply by the weight such a flip can reach 2 ulp of normed.)"""
    expected, summed = add_rmsnorm_reference(x, weight, eps, residual)
    s32 = summed.float()
    n = (s32 * torch.rsqrt(s32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    flips = [weight * next_value(n, direction) for direction in (-1, 1)]
    differ = normed != expected
    assert ((normed == flips[0]) | (normed == flips[1]))[differ].all(), "more than a 1-ulp flip of n"
    assert differ.float().mean().item() <= max_fraction, f"{int(differ.sum())} of {differ.numel()} elements differ"
