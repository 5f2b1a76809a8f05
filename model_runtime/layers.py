"""Building blocks shared by every architecture: RMSNorm, rotary position embeddings, the dense SwiGLU MLP."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from warpcode.model_runtime.config import ModelConfig, RopeScaling
from warpcode.model_runtime.mx_weights import Linear


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 and cast back before the weight, exactly as the reference checkpoints were trained.
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class DenseMLP(nn.Module):
    """SwiGLU MLP: down(silu(gate(x)) * up(x)); the dense layers and qwen2_moe's shared expert (weights may be MX)."""

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.gate_proj = Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class RotaryEmbedding(nn.Module):
    """cos/sin tables for positions [B, T], with the config's frequency scaling folded into inv_freq."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        # Built on the CPU even when the model is created on the meta device: it is derived, never loaded.
        inv_freq, self.attention_scaling = rope_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
        self._inv_freq = inv_freq  # fp32 [head_dim / 2]; a plain attribute so to_empty() and loading leave it alone

    def frequencies(self, device: torch.device) -> tuple[torch.Tensor, float]:
        """(inv_freq fp32 [head_dim / 2] on `device`, cos/sin scale), for kernels that compute the angles."""
        if self._inv_freq.device != device:
            self._inv_freq = self._inv_freq.to(device)
        return self._inv_freq, self.attention_scaling

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq, _ = self.frequencies(positions.device)
        freqs = positions[..., None].float() * inv_freq  # [B, T, head_dim / 2]
        angles = torch.cat((freqs, freqs), dim=-1)  # [B, T, head_dim]
        cos = angles.cos() * self.attention_scaling
        sin = angles.sin() * self.attention_scaling
        return cos.to(dtype), sin.to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, head_dim]; cos, sin [B, T, head_dim]. Rotates the two halves of each head (HF layout)."""
    cos, sin = cos[:, None], sin[:, None]
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def rope_frequencies(dim: int, theta: float, scaling: RopeScaling | None) -> tuple[torch.Tensor, float]:
    """(inv_freq fp32 [dim / 2], cos/sin scale) for plain, linear and yarn RoPE, as defined by transformers."""
    wavelength_base = theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device="cpu") / dim)
    inv_freq = 1.0 / wavelength_base
    if scaling is None:
        return inv_freq, 1.0
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor, 1.0
    return _yarn(wavelength_base, dim, theta, scaling)


def _yarn(wavelength_base: torch.Tensor, dim: int, theta: float, s: RopeScaling) -> tuple[torch.Tensor, float]:
    # YaRN (arXiv 2309.00071): interpolate the low frequencies by `factor`, keep the high ones, ramp in between.
    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = s.attention_factor
    if attention_factor is None:
        attention_factor = (
            mscale(s.factor, s.mscale) / mscale(s.factor, s.mscale_all_dim)
            if s.mscale and s.mscale_all_dim
            else mscale(s.factor)
        )

    def correction_dim(rotations: float) -> float:
        return dim * math.log(s.original_max_position_embeddings / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low)).clamp(0, 1)
    keep_original = 1 - ramp  # 1 for high frequencies (extrapolate), 0 for low ones (interpolate)
    interpolated, original = 1.0 / (s.factor * wavelength_base), 1.0 / wavelength_base
    return interpolated * (1 - keep_original) + original * keep_original, float(attention_factor)
