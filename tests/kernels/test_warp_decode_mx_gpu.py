"""Warp decode with MXFP8 weights at the Qwen3-30B-A3B shape on the GPU, against the float64 reference on the same
(exactly dequantised) weights, and the dispatcher's MX path (run on the device: pytest -m gpu tests/kernels)."""

import pytest
import torch

from warpcode.kernels import moe, moe_warp_decode, route, uses_warp_decode
from warpcode.kernels.bench.bench_moe import MoeShape, float64_reference, make_layers
from warpcode.kernels.tuning import warp_decode_config

pytestmark = pytest.mark.gpu

QWEN3 = MoeShape(2048, 768, 128, 8)


def relative_error(out, reference):
    return ((out.double() - reference).norm() / reference.norm()).item()


@pytest.mark.parametrize("tokens", [1, 8, 32])
def test_mx_warp_decode_matches_float64_at_the_model_shape(tokens):
    """The error of MX warp decode on its own weights is the bf16 path's (fp32 math, fp16 intermediate): the
    quantisation error is in the weights, which the reference shares."""
    device = torch.device("cuda")
    [mx_layer] = make_layers(QWEN3, tokens, torch.bfloat16, device, count=1, mx=True)
    [bf16_layer] = make_layers(QWEN3, tokens, torch.bfloat16, device, count=1)
    reference = float64_reference(*mx_layer)
    config = warp_decode_config(2048, 768, 128, 8, tokens, True)
    out = moe_warp_decode(*mx_layer, config=config, out=torch.full_like(mx_layer[0], float("nan")))
    assert not out.isnan().any(), "unwritten outputs"
    error = relative_error(out, reference)
    bf16_error = relative_error(moe_warp_decode(*bf16_layer), float64_reference(*bf16_layer))
    assert error < 1e-2 and error < 2 * bf16_error + 1e-3, (error, bf16_error)


@pytest.mark.parametrize("tokens", [1, 8, 64])
def test_dispatcher_takes_mx_weights_with_a_residual_where_warp_decode_runs(tokens):
    [layer] = make_layers(QWEN3, tokens, torch.bfloat16, torch.device("cuda"), count=1, mx=True)
    reference = float64_reference(*layer)
    assert relative_error(moe(*layer), reference) < 1e-2  # warp decode, or expert-centric above the crossover
    if uses_warp_decode(layer[0], layer[3], 8):
        residual = torch.randn_like(layer[0])
        expected = (residual.float() + moe_warp_decode(*layer).float()).to(residual.dtype)
        assert torch.equal(moe(*layer, residual=residual), expected)


def test_route_prefetches_mx_gate_up_rows_without_changing_the_routing():
    [layer] = make_layers(QWEN3, 1, torch.bfloat16, torch.device("cuda"), count=1, mx=True)
    logits = torch.randn(1, 128, device="cuda")
    plain, hinted = route(logits, 8), route(logits, 8, prefetch=layer[3])
    assert all(torch.equal(a, b) for a, b in zip(plain, hinted, strict=True))
