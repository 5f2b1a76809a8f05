"""gemv and norm_gemv (CPU interpreter here) against float64 evaluations, add_rmsnorm_reference and bad inputs."""

import dataclasses

import pytest
import torch

from warpcode.kernels import gemv as gemv_module
from warpcode.kernels.gemv import (
    GemvConfig,
    default_gemv_config,
    gemv,
    gemv_reference,
    norm_gemv,
    norm_gemv_reference,
)
from warpcode.kernels.norm import add_rmsnorm_reference

EPS = 1e-6
# bf16: y is rounded once from an fp32 sum, so it is within half an ulp (2**-9 relative) plus the fp32 sum's error
TOLERANCE = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.bfloat16: {"rtol": 2**-8, "atol": 1e-3}}
# small tiles keep the interpreter fast and give several H tiles, a ragged last tile and several column blocks
BROADCAST = GemvConfig(block_n=8, block_k=32, num_warps=1)
DOT = GemvConfig(block_n=16, block_k=64, num_warps=1, use_dot=True)
# (B, N, H); the last has H a multiple of both block_k (no column masks on the first tile)
CASES = [(1, 1, 37), (3, 5, 100), (5, 33, 130), (16, 70, 37), (16, 33, 130), (1, 70, 100), (4, 40, 128)]


def inputs(batch, n, hidden, dtype, seed=0):
    g = torch.Generator().manual_seed(seed + 1000 * batch + 10 * n + hidden)
    x = (torch.randn(batch, hidden, generator=g) * 3).to(dtype)
    w = torch.randn(n, hidden, generator=g).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype)
    norm_weight = (1 + torch.randn(hidden, generator=g) / 4).to(dtype)
    residual = torch.randn(batch, hidden, generator=g).to(dtype)
    return x, w, bias, norm_weight, residual


def double(t):
    return None if t is None else t.double()


def ordered_bits(t: torch.Tensor) -> torch.Tensor:
    bits = t.view(torch.int16).int()
    magnitude = bits & 0x7FFF
    return torch.where(bits < 0, -magnitude, magnitude)


def next_value(t: torch.Tensor, direction: int) -> torch.Tensor:
    key = ordered_bits(t) + direction
    return torch.where(key < 0, -key - 32768, key).to(torch.int16).view(t.dtype)


def assert_normed_is_the_reference(normed, x, norm_weight, residual, max_fraction=0.02):
    """fp32: within a couple of ulp (the sum of squares is added in another order, so rstd may differ in its last
    bit). bf16/fp16: bit for bit, except rare elements whose normalised value n is one ulp away for that reason."""
    expected, summed = add_rmsnorm_reference(x, norm_weight, EPS, residual)
    if x.dtype == torch.float32:
        torch.testing.assert_close(normed, expected, rtol=1e-6, atol=1e-7)
        return
    s32 = summed.float()
    n = (s32 * torch.rsqrt(s32.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)
    flips = [norm_weight * next_value(n, direction) for direction in (-1, 1)]
    differ = normed != expected
    assert ((normed == flips[0]) | (normed == flips[1]))[differ].all(), "more than a 1-ulp flip of n"
    assert differ.float().mean() <= max_fraction, f"{int(differ.sum())} of {differ.numel()} elements differ"


@pytest.mark.parametrize("config", [BROADCAST, DOT], ids=["broadcast", "dot"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=[f"B{b}-N{n}-H{h}" for b, n, h in CASES])
def test_gemv_matches_float64(case, dtype, config):
    batch, n, hidden = case
    x, w, bias, _, _ = inputs(batch, n, hidden, dtype)
    bias = bias if (batch + n) % 2 else None  # half the cases with a bias
    y = gemv(x, w, bias, config)
    assert y.dtype == dtype and y.shape == (batch, n)
    torch.testing.assert_close(y.double(), gemv_reference(x.double(), w.double(), double(bias)), **TOLERANCE[dtype])
    if dtype == torch.bfloat16:  # rounded once from fp32: the reference's fp32 sum only differs in its order
        assert (y != gemv_reference(x, w, bias)).float().mean() <= 0.02


@pytest.mark.parametrize("config", [BROADCAST, DOT], ids=["broadcast", "dot"])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES[2:5] + CASES[6:], ids=[f"B{b}-N{n}-H{h}" for b, n, h in CASES[2:5] + CASES[6:]])
def test_norm_gemv_matches_add_rmsnorm_then_float64(case, dtype, with_residual, config):
    batch, n, hidden = case
    x, w, bias, norm_weight, residual = inputs(batch, n, hidden, dtype, seed=1)
    residual = residual if with_residual else None
    bias = bias if batch % 2 else None
    y, normed, summed = norm_gemv(x, norm_weight, EPS, w, residual, bias, config)
    assert y.shape == (batch, n) and normed.shape == summed.shape == x.shape
    if residual is None:
        assert summed is x
    else:
        assert torch.equal(summed, x + residual)  # one rounding of the exact sum
    assert_normed_is_the_reference(normed, x, norm_weight, residual)
    # y from the kernel's own normed (a float64 product of the rounded inputs) ...
    torch.testing.assert_close(
        y.double(), gemv_reference(normed.double(), w.double(), double(bias)), **TOLERANCE[dtype]
    )
    # ... and the whole chain in float64 from the raw inputs, looser for bf16 (normed itself is rounded there)
    chain = norm_gemv_reference(x.double(), norm_weight.double(), EPS, w.double(), double(residual), double(bias))
    loose = {"rtol": 2e-2, "atol": 2e-1} if dtype == torch.bfloat16 else TOLERANCE[dtype]
    torch.testing.assert_close(y.double(), chain[0], **loose)


def test_default_config_and_fp16():
    x, w, bias, norm_weight, residual = inputs(3, 33, 100, torch.float16)
    torch.testing.assert_close(gemv(x, w, bias).double(), gemv_reference(x.double(), w.double(), bias.double()),
                               rtol=2**-10, atol=1e-3)  # fmt: skip
    y, normed, _ = norm_gemv(x, norm_weight, EPS, w, residual)
    assert_normed_is_the_reference(normed, x, norm_weight, residual)
    torch.testing.assert_close(y.double(), gemv_reference(normed.double(), w.double()), rtol=2**-10, atol=1e-3)


def test_strided_rows_are_read_with_their_stride():
    x, w, bias, norm_weight, residual = inputs(5, 33, 100, torch.float32)
    wide_x = torch.full((5, 150), float("nan"))
    wide_x[:, :100] = x
    wide_w = torch.full((33, 120), float("nan"))
    wide_w[:, :100] = w
    y = gemv(wide_x[:, :100], wide_w[:, :100], bias, BROADCAST)
    torch.testing.assert_close(y, gemv_reference(x, w, bias), rtol=1e-5, atol=1e-5)
    y, normed, summed = norm_gemv(wide_x[:, :100], norm_weight, EPS, wide_w[:, :100], residual, config=DOT)
    assert torch.equal(summed, x + residual)
    torch.testing.assert_close(y, gemv_reference(normed, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fused", [False, True])
def test_out_poisoned_with_nan_is_fully_written(fused):
    x, w, bias, norm_weight, residual = inputs(5, 70, 37, torch.bfloat16)
    out = torch.full((5, 70), float("nan"), dtype=torch.bfloat16)
    if fused:
        y, normed, summed = norm_gemv(x, norm_weight, EPS, w, residual, bias, BROADCAST, out=out)
        assert not normed.isnan().any() and not summed.isnan().any()
    else:
        y = gemv(x, w, bias, DOT, out=out)
    assert y is out and not y.isnan().any()


def test_default_config_heuristic_and_tuned_override(monkeypatch):
    for n, hidden in [(5120, 2048), (2048, 4096), (128, 2048), (151936, 2048)]:
        for batch in (1, 2, 4, 8, 16):
            config = default_gemv_config(n, hidden, batch)
            assert -(-n // config.block_n) >= 64, "too few programs to fill the SMs"
            assert 8 <= config.block_n * config.block_k // (32 * config.num_warps) <= 64  # 16-byte loads, no spill
            assert config.use_dot == (batch >= 8 and n >= 2048)
    assert default_gemv_config(128, 2048, 1) == GemvConfig(block_n=1, block_k=2048, num_warps=1)  # whole rows
    tuned = GemvConfig(block_n=32, block_k=128, num_warps=2, num_stages=3)
    monkeypatch.setitem(gemv_module.TUNED_CONFIGS, (5120, 2048, 4), tuned)
    assert default_gemv_config(5120, 2048, 3) == tuned  # batch 3 is in bucket 4
    assert default_gemv_config(5120, 2048, 5) != tuned


def test_bad_inputs_raise():
    x, w, bias, norm_weight, residual = inputs(3, 5, 37, torch.float32)
    bad_calls = {
        "B = 0": lambda: gemv(x[:0], w),
        "B = 17": lambda: gemv(torch.zeros(17, 37), w),
        "x 1-D": lambda: gemv(x[0], w),
        "x int": lambda: gemv(x.int(), w.int()),
        "H mismatch": lambda: gemv(x, w[:, :36]),
        "dtype mismatch": lambda: gemv(x, w.bfloat16()),
        "w rows strided": lambda: gemv(x, torch.zeros(5, 74)[:, ::2]),
        "x rows strided": lambda: gemv(torch.zeros(3, 74)[:, ::2], w),
        "bias shape": lambda: gemv(x, w, bias[:4]),
        "bias dtype": lambda: gemv(x, w, bias.double()),
        "out shape": lambda: gemv(x, w, out=torch.empty(3, 6)),
        "out dtype": lambda: gemv(x, w, out=torch.empty(3, 5, dtype=torch.bfloat16)),
        "eps tensor": lambda: norm_gemv(x, norm_weight, torch.tensor(EPS), w),
        "norm_weight shape": lambda: norm_gemv(x, norm_weight[:36], EPS, w),
        "residual shape": lambda: norm_gemv(x, norm_weight, EPS, w, residual[:2]),
        "residual dtype": lambda: norm_gemv(x, norm_weight, EPS, w, residual.bfloat16()),
    }
    for name, call in bad_calls.items():
        with pytest.raises(ValueError):
            call()
            pytest.fail(f"{name} did not raise")
    for fields in (
        {"block_n": 3},
        {"block_k": 8},
        {"num_warps": 3},
        {"num_stages": 0},
        {"block_n": 4, "use_dot": True},
    ):
        with pytest.raises(ValueError):
            dataclasses.replace(BROADCAST, **fields)
