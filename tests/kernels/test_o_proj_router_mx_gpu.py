"""o_proj + folded router with an MXFP8 Wo on the GPU at Qwen3-30B-A3B's shapes (H 2048, K 4096, E 128) against
float64 on the dequantised Wo (run on the device: pytest -m gpu)."""

import pytest
import torch

from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8_torch
from warpcode.kernels.o_proj_router import fits, o_proj_router, router_fold

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")


def test_o_proj_router_mx_at_model_shape():
    hidden, k, experts = 2048, 4096, 128
    assert fits(hidden, k)
    g = torch.Generator(device=CUDA).manual_seed(0)
    wo = quantize_mxfp8_torch(torch.randn(hidden, k, generator=g, device=CUDA) / k**0.5)
    attn = torch.randn(1, k, generator=g, device=CUDA).bfloat16()
    h = (torch.randn(1, hidden, generator=g, device=CUDA) * 3).bfloat16()
    router = (torch.randn(experts, hidden, generator=g, device=CUDA) / hidden**0.5).bfloat16()
    gamma = (0.5 + torch.rand(hidden, generator=g, device=CUDA)).bfloat16()
    fold = router_fold(router, gamma, wo)
    h_new, z = o_proj_router(attn, wo, h, fold, out=torch.full_like(h, float("nan")))
    projected = attn.double() @ dequantize_mxfp8(wo, torch.float64).T
    expected_h = (h.double() + projected.bfloat16().double()).bfloat16()
    expected_z = (h.double() + projected) * gamma.double() @ router.double().T
    torch.testing.assert_close(h_new.double(), expected_h.double(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(z.double(), expected_z, rtol=2e-2, atol=2e-2)
