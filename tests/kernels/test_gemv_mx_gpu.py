"""gemv with MXFP8 weights on the GPU at Qwen3-30B-A3B shapes (qkv, o_proj, dense projections) against float64 on
the dequantised weights, both product paths and the default configs (run on the device: pytest -m gpu)."""

import pytest
import torch

from warpcode.kernels.gemv import GemvConfig, gemv, gemv_reference
from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8_torch

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
SHAPES = [(5120, 2048), (2048, 4096), (1536, 2048), (2048, 768)]  # (N, H): qkv, o_proj, expert-sized projections
CONFIGS = {
    "default": None,
    "broadcast": GemvConfig(block_n=8, block_k=512, num_warps=4),
    "dot": GemvConfig(block_n=16, block_k=512, num_warps=4, num_stages=3, use_dot=True),
    "whole_row": GemvConfig(block_n=2, block_k=2048, num_warps=4),
}


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("batch", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{h}" for n, h in SHAPES])
def test_gemv_mx_at_model_shapes(shape, batch, config_name):
    n, hidden = shape
    g = torch.Generator(device=CUDA).manual_seed(n + hidden + batch)
    w = quantize_mxfp8_torch(torch.randn(n, hidden, generator=g, device=CUDA) / hidden**0.5)
    x = (torch.randn(batch, hidden, generator=g, device=CUDA) * 3).bfloat16()
    bias = torch.randn(n, generator=g, device=CUDA).bfloat16() if batch == 4 else None
    out = torch.full((batch, n), float("nan"), device=CUDA, dtype=torch.bfloat16)
    y = gemv(x, w, bias, CONFIGS[config_name], out=out)
    expected = gemv_reference(x.double(), dequantize_mxfp8(w, torch.float64), None if bias is None else bias.double())
    torch.testing.assert_close(y.double(), expected, rtol=2**-8, atol=1e-2)
    assert (y != gemv_reference(x, w, bias)).float().mean().item() <= 0.02  # rounded once from fp32


def test_gemv_mx_fused_prologue_and_epilogue():
    n, hidden, eps = 5120, 2048, 1e-6
    g = torch.Generator(device=CUDA).manual_seed(1)
    w = quantize_mxfp8_torch(torch.randn(n, hidden, generator=g, device=CUDA) / hidden**0.5)
    x = (torch.randn(1, hidden, generator=g, device=CUDA) * 3).bfloat16()
    gamma = (0.5 + torch.rand(hidden, generator=g, device=CUDA)).bfloat16()
    residual = torch.randn(1, n, generator=g, device=CUDA).bfloat16()
    y = gemv(x, w, norm_weight=gamma, eps=eps)
    x64 = x.double()
    normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * gamma.double()
    torch.testing.assert_close(y.double(), normed @ dequantize_mxfp8(w, torch.float64).T, rtol=2**-8, atol=1e-2)
    projection = gemv(x, w)
    assert torch.equal(gemv(x, w, residual=residual), (residual.float() + projection.float()).bfloat16())
