"""mx_linear (the Triton GEMM with MXFP8 weights), dequantize_weight and linear_mx (CPU interpreter) against
float64 on the dequantised weights: K not a multiple of 32, odd N, M = 1..33, bias or not, several tile shapes."""

import pytest
import torch

from warpcode.kernels import mx_linear as mx_linear_module
from warpcode.kernels import tuning
from warpcode.kernels.counters import arrival_counters
from warpcode.kernels.mx import MXTensor, dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.mx_linear import (
    MxLinearConfig,
    MxLinearSettings,
    default_mx_linear_config,
    dequantize_weight,
    linear_mx,
    mx_linear,
    mx_linear_reference,
    mx_linear_settings,
)
from warpcode.kernels.mx_tile import MAX_BF16_TILE_SCALE

BF16_TOLERANCE = {"rtol": 2**-8, "atol": 1e-3}  # as tests/kernels/test_gemv.py: rounded once from an fp32 sum
FP32_ERROR = 1e-6
CONFIGS = {
    "small": MxLinearConfig(block_m=16, block_n=16, block_k=32, num_warps=1, num_stages=1, group_m=2),
    "wide_k": MxLinearConfig(block_m=32, block_n=16, block_k=64, num_warps=1, num_stages=1, group_m=1),
    # three K shares (some K's leave the last one empty: it contributes zeros)
    "split": MxLinearConfig(block_m=16, block_n=16, block_k=32, num_warps=1, num_stages=1, split_k=3),
    "default": None,
}
CASES = [(1, 7, 37), (5, 33, 100), (17, 16, 64), (33, 21, 130), (2, 1, 40)]  # (M, N, K)


def inputs(m, n, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(m, k, generator=g) * 3).to(dtype)
    w = torch.randn(n, k, generator=g) * torch.exp2(torch.randint(-6, 6, (n, 1), generator=g).float())
    return x, quantize_mxfp8(w), torch.randn(n, generator=g).to(dtype)


def assert_matches_float64(y, x, w, bias):
    w64 = dequantize_mxfp8(w, torch.float64)
    expected = x.double() @ w64.T + (0 if bias is None else bias.double())
    assert y.shape == expected.shape and y.dtype == x.dtype and not y.isnan().any()
    if x.dtype == torch.float32:
        magnitude = x.double().abs() @ w64.abs().T + (0 if bias is None else bias.double().abs())
        assert ((y.double() - expected).abs() <= FP32_ERROR * magnitude).all()
    else:
        scale = expected.abs().amax(dim=0, keepdim=True)  # the weight rows' binades make columns differ in scale
        torch.testing.assert_close(y.double() / scale, expected / scale, **BF16_TOLERANCE)


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=[f"M{m}-N{n}-K{k}" for m, n, k in CASES])
def test_mx_linear_matches_float64(case, dtype, config_name):
    m, n, k = case
    x, w, bias = inputs(m, n, k, dtype, seed=100 * m + 10 * n + k + len(config_name))
    bias = bias if (m + n) % 2 else None
    assert_matches_float64(mx_linear(x, w, bias, CONFIGS[config_name]), x, w, bias)


def test_mx_linear_reference_and_strided_rows():
    x, w, bias = inputs(6, 9, 70, torch.float64, seed=1)
    expected = x @ dequantize_mxfp8(w, torch.float64).T + bias
    torch.testing.assert_close(mx_linear_reference(x, w, bias), expected, rtol=0, atol=0)
    x, w, bias = inputs(6, 9, 70, torch.float32, seed=2)
    wide = torch.full((6, 90), float("nan"))
    wide[:, :70] = x
    assert_matches_float64(mx_linear(wide[:, :70], w, bias, CONFIGS["small"]), x, w, bias)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dequantize_weight_is_the_exact_dequantisation(dtype):
    _, w, _ = inputs(1, 13, 100, torch.float32, seed=3)
    assert torch.equal(dequantize_weight(w, dtype), dequantize_mxfp8(w, torch.float64).to(dtype))


def test_linear_mx_picks_by_rows(monkeypatch):
    x, w, bias = inputs(12, 9, 70, torch.float32, seed=4)
    x3 = x.view(3, 4, 70)
    calls = []
    monkeypatch.setattr(mx_linear_module, "mx_linear", lambda *a, **k: calls.append("triton") or mx_linear(*a, **k))
    y = linear_mx(x3, w, bias, MxLinearSettings(max_rows=12))
    assert y.shape == (3, 4, 9) and calls == ["triton"]
    assert_matches_float64(y.view(12, 9), x, w, bias)
    y = linear_mx(x3, w, bias, MxLinearSettings(max_rows=11))  # 12 rows: dequantise + F.linear
    assert calls == ["triton"]
    assert_matches_float64(y.view(12, 9), x, w, bias)


def test_configs_and_bad_inputs():
    h200 = mx_linear_settings(tuning.load_tables(tuning.CONFIG_FOLDER / "NVIDIA_H200.json"))
    for m in (1, 16, 33, 64, 1024):
        for settings in (None, h200):  # the heuristic, the H200's tiles
            config = default_mx_linear_config(m, settings=settings)
            assert config.block_k % 32 == 0 and config.block_m >= 16
    # decode batches (the H200's tiles): K split until the SMs hold about the tile's programs (4 an SM, 2 for 32-row
    # tiles), two K tiles a share at least
    assert default_mx_linear_config(8, 5120, 2048, sms=132, settings=h200).split_k == 4  # 160 tiles, 16 K tiles
    assert default_mx_linear_config(16, 2048, 4096, sms=132, settings=h200).split_k == 8  # 64 tiles, 32 K tiles
    assert default_mx_linear_config(2, 2048, 4096, sms=132, settings=h200).split_k == 16  # 32 tiles 64 wide
    assert default_mx_linear_config(32, 5120, 2048, sms=132, settings=h200).split_k == 2  # about 2 programs an SM
    assert default_mx_linear_config(8, 2048, 256, sms=132, settings=h200).split_k == 1  # two K tiles

    # the tile decided in the model: 64 columns, 4 warps, 2 stages up to 2 rows, and up to 8 where outputs <= inputs
    def tile(m: int, n: int, k: int) -> tuple[int, int, int, int]:
        config = default_mx_linear_config(m, n, k, sms=132, settings=h200)
        return config.block_n, config.num_warps, config.num_stages, config.split_k

    assert tile(2, 5120, 2048) == (64, 4, 2, 4)  # 80 tiles
    assert tile(3, 2048, 4096) == tile(8, 2048, 4096) == (64, 4, 2, 16)  # o_proj: 32 tiles, 32 K tiles
    assert tile(3, 5120, 2048) == tile(8, 5120, 2048) == (32, 2, 3, 4)  # q/k/v
    assert tile(9, 2048, 4096) == (32, 2, 3, 8)
    with pytest.raises(ValueError, match="split_k"):
        MxLinearConfig(block_m=16, block_n=16, block_k=32, split_k=0)
    with pytest.raises(ValueError):
        MxLinearConfig(block_m=16, block_n=16, block_k=16)
    x, w, bias = inputs(3, 5, 40, torch.float32, seed=5)
    bad_calls = {
        "K mismatch": lambda: mx_linear(x[:, :39], w),
        "plain weight": lambda: mx_linear(x, dequantize_mxfp8(w)),
        "bias shape": lambda: mx_linear(x, w, bias[:4]),
        "bias dtype": lambda: mx_linear(x, w, bias.double()),
        "x 1-D": lambda: mx_linear(x[0], w),
    }
    for name, call in bad_calls.items():
        with pytest.raises(ValueError):
            call()
            pytest.fail(f"{name} did not raise")
    assert mx_linear(x[:0], w).shape == (0, 5)


def test_split_shares_leave_the_arrival_counters_at_zero():
    x, w, bias = inputs(5, 33, 100, torch.float32, seed=9)
    first = mx_linear(x, w, bias, CONFIGS["split"])
    assert not arrival_counters(x.device, 1).any()  # the last program of each tile reset its counter
    assert torch.equal(mx_linear(x, w, bias, CONFIGS["split"]), first)


def test_a_weight_beyond_16_bit_tiles_is_refused_where_tiles_are_16_bit():
    """A block scale above 2**7 (block maxima above 57,344) overflows bf16's bit placement and fp16; fp32 holds it."""
    x, w, bias = inputs(3, 5, 64, torch.float32, seed=6)
    at_limit = MXTensor(w.data, torch.full_like(w.scales, MAX_BF16_TILE_SCALE))
    beyond = MXTensor(w.data, at_limit.scales.clone())
    beyond.scales[2, 1] += 1
    for dtype in (torch.bfloat16, torch.float16):
        with pytest.raises(ValueError, match=r"block scale of 2\*\*8 \(magnitudes above 57,344\).*keep that weight"):
            mx_linear(x.to(dtype), beyond)
        with pytest.raises(ValueError, match="57,344"):
            dequantize_weight(beyond, dtype)
    assert_matches_float64(mx_linear(x.to(torch.bfloat16), at_limit), x.to(torch.bfloat16), at_limit, None)
    assert_matches_float64(mx_linear(x, beyond, bias), x, beyond, bias)  # fp32 tiles
    assert torch.equal(dequantize_weight(beyond, torch.float32), dequantize_mxfp8(beyond))
