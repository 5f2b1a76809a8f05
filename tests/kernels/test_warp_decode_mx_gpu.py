"""Warp decode with MXFP8 weights at the Qwen3-30B-A3B shape on the GPU, against the float64 reference on the same
(exactly dequantised) weights, and the dispatcher's MX path (run on the device: pytest -m gpu tests/kernels)."""

from dataclasses import replace

import pytest
import torch

from warpcode.bench.moe import MoeShape, float64_reference, make_layers
from warpcode.kernels import moe, moe_warp_decode, route, uses_warp_decode
from warpcode.kernels.mx import MXTensor, dequantize_mxfp8
from warpcode.kernels.mx_down import launch_down_mma
from warpcode.kernels.tuning import WarpDecodeConfig, warp_decode_config
from warpcode.kernels.warp_decode import launch_gate_up

pytestmark = pytest.mark.gpu

QWEN3 = MoeShape(2048, 768, 128, 8)


def relative_error(out, reference):
    return ((out.double() - reference).norm() / reference.norm()).item()


@pytest.mark.parametrize("tokens", [1, 2, 4, 8, 32])
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


def test_down_on_tensor_cores_matches_float64_in_fp32_at_the_model_shape():
    """fp32 output at 8 tokens: the fp16 operand conversion (e4m3x2 -> f16x2, f16x2 multiplies) is exact, only the
    fp32 sums round."""
    [(x, topk_weights, topk_ids, w13, w2)] = make_layers(QWEN3, 8, torch.bfloat16, torch.device("cuda"), 1, mx=True)
    config = warp_decode_config(2048, 768, 128, 8, 8, True)
    assert config.down_on_mma
    hidden = torch.empty(8 * 8, 768, device="cuda", dtype=torch.float16)
    launch_gate_up(x, topk_ids, w13, hidden, config)
    out = torch.empty(8, 2048, device="cuda", dtype=torch.float32)
    launch_down_mma(hidden, topk_weights, topk_ids, w2, out, config)
    weights = dequantize_mxfp8(w2, torch.float64)[topk_ids.reshape(-1)]  # [T*K, H, I]
    per_slot = torch.einsum("shi,si->sh", weights, hidden.double()).view(8, 8, 2048)
    reference = (per_slot * topk_weights.double()[..., None]).sum(dim=1)
    assert relative_error(out, reference) < 1e-6
    for option in ({"down_max_registers": 96}, {"down_first_tile_early": not config.down_first_tile_early}):
        variant = torch.empty_like(out)  # a register cap below what the tile takes (spills), the tile order: no bit
        launch_down_mma(hidden, topk_weights, topk_ids, w2, variant, replace(config, **option))
        assert torch.equal(variant, out), option


def test_down_on_tensor_cores_converts_every_e4m3_code_exactly():
    """One-hot intermediates pick single weights: out[t] = W2[:, t] exactly (fp32) for every finite e4m3 code,
    under groups 0 to 21 below their row's largest scale."""
    hidden_size, columns = 256, 128  # four groups a row; 128 one-hot rows, one per column
    codes = torch.arange(256, dtype=torch.uint8, device="cuda")
    codes[codes & 0x7F == 0x7F] = 0  # the two NaN codes
    # row r, column c: code (c - r) % 256, so every code appears in every column
    data = torch.stack([codes.roll(r)[:columns] for r in range(hidden_size)]).view(torch.float8_e4m3fn)[None]
    gaps = torch.arange(hidden_size, device="cuda")[:, None] % 22  # how far below 200 groups 1..3 sit
    scales = torch.cat([torch.full((hidden_size, 1), 200, device="cuda"), 200 - gaps.expand(-1, 3)], dim=1)
    w2 = MXTensor(data, scales.to(torch.uint8)[None])
    hidden = torch.eye(columns, device="cuda", dtype=torch.float16)  # slot t: column t
    topk_ids = torch.zeros(columns, 1, device="cuda", dtype=torch.int64)
    topk_weights = torch.ones(columns, 1, device="cuda")
    out = torch.empty(columns, hidden_size, device="cuda", dtype=torch.float32)
    config = WarpDecodeConfig(down_rows=64, down_cols=128, down_warps=2, down_on_mma=True)
    launch_down_mma(hidden, topk_weights, topk_ids, w2, out, config)
    assert torch.equal(out, dequantize_mxfp8(w2, torch.float32)[0].T)
