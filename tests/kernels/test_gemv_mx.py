"""gemv with MXFP8 weights (CPU interpreter) against float64 on the dequantised weights: both product paths, a
ragged K (not a multiple of 32 nor of block_k), odd N, the RMSNorm prologue and the residual epilogue."""

import pytest
import torch

from warpcode.kernels import tuning
from warpcode.kernels.gemv import (
    GemvConfig,
    default_gemv_config,
    default_mx_gemv_config,
    gemv,
    gemv_reference,
    measured_gemv_config,
)
from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8

BF16_TOLERANCE = {"rtol": 2**-8, "atol": 1e-3}  # as tests/kernels/test_gemv.py: y rounded once from an fp32 sum
FP32_ERROR = 1e-6
BROADCAST = GemvConfig(block_n=8, block_k=32, num_warps=1)  # several K tiles, one scale group each
WIDE = GemvConfig(block_n=4, block_k=64, num_warps=1)  # two scale groups per tile
DOT = GemvConfig(block_n=16, block_k=64, num_warps=1, use_dot=True)
WHOLE_ROW = GemvConfig(block_n=2, block_k=128, num_warps=1)  # one tile past H
CONFIGS = {"broadcast": BROADCAST, "wide": WIDE, "dot": DOT, "whole_row": WHOLE_ROW}
CASES = [(1, 1, 37), (3, 5, 100), (5, 33, 130), (16, 19, 64), (2, 21, 96)]  # (B, N, H)
EPS = 1e-6


def inputs(batch, n, hidden, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(batch, hidden, generator=g) * 3).to(dtype)
    # rows spanning several binades, so the scales differ between rows and groups
    w = torch.randn(n, hidden, generator=g) * torch.exp2(torch.randint(-6, 6, (n, 1), generator=g).float())
    bias = torch.randn(n, generator=g).to(dtype)
    return x, quantize_mxfp8(w), bias


def assert_matches_float64(y, exact_x, w64, bias, dtype):
    expected = gemv_reference(exact_x, w64, None if bias is None else bias.double())
    if dtype == torch.float32:
        magnitude = exact_x.abs() @ w64.abs().T + (0 if bias is None else bias.double().abs())
        assert ((y.double() - expected).abs() <= FP32_ERROR * magnitude).all()
    else:
        scale = expected.abs().amax(dim=1, keepdim=True)  # the weights' binades make rows differ in scale
        torch.testing.assert_close(y.double() / scale, expected / scale, **BF16_TOLERANCE)


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=[f"B{b}-N{n}-H{h}" for b, n, h in CASES])
def test_gemv_mx_matches_float64(case, dtype, config_name):
    batch, n, hidden = case
    x, w, bias = inputs(batch, n, hidden, dtype, seed=1000 * batch + 10 * n + hidden + len(config_name))
    bias = bias if (batch + n) % 2 else None
    out = torch.full((batch, n), float("nan"), dtype=dtype)
    y = gemv(x, w, bias, CONFIGS[config_name], out=out)
    assert y is out and not y.isnan().any()
    assert_matches_float64(y, x.double(), dequantize_mxfp8(w, torch.float64), bias, dtype)


@pytest.mark.parametrize("config_name", ["broadcast", "dot"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemv_mx_norm_prologue_and_residual(dtype, config_name):
    config = CONFIGS[config_name]
    x, w, bias = inputs(3, 21, 100, dtype, seed=7)
    g = torch.Generator().manual_seed(8)
    gamma = (0.5 + torch.rand(100, generator=g)).to(dtype)
    residual = (torch.randn(3, 21, generator=g) * 4).to(dtype)
    w64 = dequantize_mxfp8(w, torch.float64)
    normed = torch.full_like(x, float("nan"))
    y = gemv(x, w, bias, config, norm_weight=gamma, eps=EPS, normed_out=normed)
    x64 = x.double()
    exact_normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double()
    assert not normed.isnan().any()
    torch.testing.assert_close(normed.double(), exact_normed, rtol=2**-7, atol=1e-6)
    assert_matches_float64(y, exact_normed, w64, bias, dtype)
    projection = gemv(x, w, bias, config)
    in_place = residual.clone()
    assert gemv(x, w, bias, config, residual=in_place, out=in_place) is in_place
    assert torch.equal(in_place, (residual.float() + projection.float()).to(dtype))


def test_gemv_reference_dequantises_exactly():
    x, w, bias = inputs(2, 5, 70, torch.float64, seed=9)
    w64 = dequantize_mxfp8(w, torch.float64)
    torch.testing.assert_close(gemv_reference(x, w, bias), x @ w64.T + bias, rtol=0, atol=0)


def test_mx_default_config_and_checks():
    x, w, _ = inputs(3, 5, 100, torch.bfloat16, seed=10)
    y = gemv(x, w)  # the MX default config
    assert_matches_float64(y, x.double(), dequantize_mxfp8(w, torch.float64), None, torch.bfloat16)
    h200 = tuning.load_tables(tuning.CONFIG_FOLDER / "NVIDIA_H200.json")
    for n, hidden in [(5120, 2048), (2048, 4096), (128, 2048), (7, 37)]:
        for batch in (1, 2, 4, 8, 16):
            config = default_gemv_config(n, hidden, batch, mx=True, tables=h200)
            tuned = measured_gemv_config(n, hidden, batch, mx=True, tables=h200)
            assert config == (tuned or default_mx_gemv_config(n, hidden, batch))
            assert config.block_k % 32 == 0 and config.block_k <= max(32, 2 * hidden)
            if tuned is None:
                assert config.block_n * config.block_k // (32 * config.num_warps) <= 64
    with pytest.raises(ValueError, match="block_k >= 32"):
        gemv(x, w, config=GemvConfig(block_n=4, block_k=16, num_warps=1))
    with pytest.raises(ValueError):
        gemv(x[:, :99], w)
