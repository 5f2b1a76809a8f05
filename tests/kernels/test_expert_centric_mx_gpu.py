"""The expert-centric path with MXFP8 w13/w2 on the GPU at Qwen3-30B-A3B's MoE shape (H 2048, I 768, E 128, top-8),
decode to prefill token counts, against the float64 reference on the dequantised weights (pytest -m gpu)."""

import math
from dataclasses import replace

import pytest
import torch

from warpcode.kernels import moe_expert_centric, moe_reference, route_reference
from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8_torch
from warpcode.kernels.tuning import GroupedGemmConfig

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
HIDDEN, INTERMEDIATE, EXPERTS, TOP_K = 2048, 768, 128, 8


@pytest.fixture(scope="module")
def weights():
    g = torch.Generator(device=CUDA).manual_seed(0)
    w13 = torch.randn(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=g, device=CUDA) / math.sqrt(HIDDEN)
    w2 = torch.randn(EXPERTS, HIDDEN, INTERMEDIATE, generator=g, device=CUDA) / math.sqrt(INTERMEDIATE)
    return quantize_mxfp8_torch(w13), quantize_mxfp8_torch(w2)


@pytest.mark.parametrize("tokens", [1, 16, 128, 1024])
def test_expert_centric_mx_at_model_shape(weights, tokens):
    w13, w2 = weights
    g = torch.Generator(device=CUDA).manual_seed(tokens)
    x = torch.randn(tokens, HIDDEN, generator=g, device=CUDA).bfloat16()
    topk_weights, topk_ids = route_reference(torch.randn(tokens, EXPERTS, generator=g, device=CUDA), TOP_K)
    out = moe_expert_centric(x, topk_weights, topk_ids, w13, w2, out=torch.full_like(x, float("nan")))
    w13_64, w2_64 = dequantize_mxfp8(w13, torch.float64), dequantize_mxfp8(w2, torch.float64)
    reference = moe_reference(x.double(), topk_weights.double(), topk_ids, w13_64, w2_64, torch.float64)
    assert not out.isnan().any()
    assert ((out.double() - reference).norm() / reference.norm()).item() < 2.5e-2


def test_a_register_cap_that_spills_leaves_the_result_bit_for_bit(weights):
    w13, w2 = weights
    g = torch.Generator(device=CUDA).manual_seed(1)
    x = torch.randn(32, HIDDEN, generator=g, device=CUDA).bfloat16()
    topk_weights, topk_ids = route_reference(torch.randn(32, EXPERTS, generator=g, device=CUDA), TOP_K)
    tile = GroupedGemmConfig(block_m=32, block_n=128, block_k=128, num_warps=4, num_stages=2)  # 212-222 registers
    uncapped = moe_expert_centric(x, topk_weights, topk_ids, w13, w2, config=tile)
    capped = moe_expert_centric(x, topk_weights, topk_ids, w13, w2, config=replace(tile, max_registers=128))
    assert torch.equal(capped, uncapped)
