"""gemv (CPU interpreter here) against float64 evaluations, whole-row tiles (block_k >= H), the fused RMSNorm
prologue and residual epilogue against add_rmsnorm's reference, and bad inputs."""

import dataclasses
import json

import pytest
import torch

from warpcode.kernels import tuning
from warpcode.kernels.gemv import GemvConfig, default_gemv_config, gemv, gemv_reference
from warpcode.kernels.norm import add_rmsnorm_reference

# bf16: y is rounded once from an fp32 sum, so it is within half an ulp (2**-9 relative) plus the fp32 sum's error
BF16_TOLERANCE = {"rtol": 2**-8, "atol": 1e-3}
# fp32: the sum's rounding error, relative to the sum of the products' magnitudes (y itself may cancel to ~0)
FP32_ERROR = 1e-6
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
    return x, w, bias


def double(t):
    return None if t is None else t.double()


def assert_matches_float64(y, x, w, bias, exact_x=None):
    """y vs x @ w.T (+ bias) in float64; exact_x: the float64 input x was rounded from, when there is one."""
    expected = gemv_reference(x.double() if exact_x is None else exact_x, w.double(), double(bias))
    if x.dtype == torch.float32:
        magnitude = gemv_reference(x.double().abs(), w.double().abs(), None if bias is None else bias.double().abs())
        assert ((y.double() - expected).abs() <= FP32_ERROR * magnitude).all()
        return
    torch.testing.assert_close(y.double(), expected, **BF16_TOLERANCE)
    # rounded once from fp32: the reference's fp32 sum only differs in its order (or rounded from float64, which
    # the fp32 sum is far closer to than one bf16 ulp)
    reference = gemv_reference(x, w, bias) if exact_x is None else expected.to(y.dtype)
    assert (y != reference).float().mean() <= 0.02


@pytest.mark.parametrize("config", [BROADCAST, DOT], ids=["broadcast", "dot"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=[f"B{b}-N{n}-H{h}" for b, n, h in CASES])
def test_gemv_matches_float64(case, dtype, config):
    batch, n, hidden = case
    x, w, bias = inputs(batch, n, hidden, dtype)
    bias = bias if (batch + n) % 2 else None  # half the cases with a bias
    y = gemv(x, w, bias, config)
    assert y.dtype == dtype and y.shape == (batch, n)
    assert_matches_float64(y, x, w, bias)


# One tile per row: block_k past H (the tile's column mask is all that bounds it), block_k == H (no mask at all).
WHOLE_ROW = {
    "block_k>H-broadcast": (GemvConfig(block_n=2, block_k=128, num_warps=1), 100),
    "block_k>H-dot": (GemvConfig(block_n=16, block_k=256, num_warps=2, use_dot=True), 130),
    "block_k==H-broadcast": (GemvConfig(block_n=4, block_k=128, num_warps=2), 128),
    "block_k==H-dot": (GemvConfig(block_n=16, block_k=128, num_warps=1, use_dot=True), 128),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(WHOLE_ROW))
def test_whole_row_tile(name, dtype):
    config, hidden = WHOLE_ROW[name]
    for batch, n in ((1, 37), (5, 16)):  # a ragged last column block, then an exact one
        x, w, bias = inputs(batch, n, hidden, dtype, seed=2)
        assert_matches_float64(gemv(x, w, bias, config), x, w, bias)


def test_default_config_and_fp16():
    x, w, bias = inputs(3, 33, 100, torch.float16)
    torch.testing.assert_close(gemv(x, w, bias).double(), gemv_reference(x.double(), w.double(), bias.double()),
                               rtol=2**-10, atol=1e-3)  # fmt: skip


def test_strided_rows_are_read_with_their_stride():
    x, w, bias = inputs(5, 33, 100, torch.float32)
    wide_x = torch.full((5, 150), float("nan"))
    wide_x[:, :100] = x
    wide_w = torch.full((33, 120), float("nan"))
    wide_w[:, :100] = w
    for config in (BROADCAST, DOT, GemvConfig(block_n=4, block_k=128, num_warps=1)):  # the last: one masked tile
        assert_matches_float64(gemv(wide_x[:, :100], wide_w[:, :100], bias, config), x, w, bias)


@pytest.mark.parametrize("config", [BROADCAST, DOT], ids=["broadcast", "dot"])
def test_out_poisoned_with_nan_is_fully_written(config):
    x, w, bias = inputs(5, 70, 37, torch.bfloat16)
    out = torch.full((5, 70), float("nan"), dtype=torch.bfloat16)
    y = gemv(x, w, bias, config, out=out)
    assert y is out and not y.isnan().any()


def test_default_config_heuristic_and_tuned_override(tmp_path):
    # the heuristic alone first (no tables)
    for n, hidden in [(5120, 2048), (2048, 4096), (128, 2048), (151936, 2048)]:
        for batch in (1, 2, 4, 8, 16):
            config = default_gemv_config(n, hidden, batch, tables=tuning.NO_TABLES)
            assert -(-n // config.block_n) >= 64, "too few programs to fill the SMs"
            assert 8 <= config.block_n * config.block_k // (32 * config.num_warps) <= 64  # 16-byte loads, no spill
            assert config.use_dot == (batch >= 8 and n >= 2048)
    whole_rows = GemvConfig(block_n=1, block_k=2048, num_warps=1)
    assert default_gemv_config(128, 2048, 1, tables=tuning.NO_TABLES) == whole_rows
    h200 = tuning.load_tables(tuning.CONFIG_FOLDER / "NVIDIA_H200.json")
    measured = [(*map(int, shape.split(",")), int(bucket), GemvConfig(**values))
                for shape, buckets in h200.section("gemv").items() for bucket, values in buckets.items()]  # fmt: skip
    assert measured and all(default_gemv_config(n, h, b, tables=h200) == config for n, h, b, config in measured)
    tuned = GemvConfig(block_n=32, block_k=128, num_warps=2, num_stages=3)
    path = tmp_path / "NVIDIA_H200.json"
    path.write_text(json.dumps({"gemv": {"5120,2048": {"4": dataclasses.asdict(tuned)}}}))
    variant = tuning.load_tables(path)
    assert default_gemv_config(5120, 2048, 3, tables=variant) == tuned  # batch 3 is in bucket 4
    assert default_gemv_config(5120, 2048, 5, tables=variant) != tuned


# ------------------------------------------------------------------------- fused RMSNorm prologue, residual epilogue

EPS = 1e-6
# block_k < H (the row in tiles, a ragged last one), tensor cores, one tile past H, one tile exactly H
FUSED_CONFIGS = {
    "tiles": BROADCAST,
    "dot": DOT,
    "block_k>H": GemvConfig(block_n=4, block_k=128, num_warps=1),
    "block_k==H": GemvConfig(block_n=2, block_k=64, num_warps=1),
}


def norm_weight(hidden, dtype, seed=0):
    g = torch.Generator().manual_seed(seed + hidden)
    return (0.5 + torch.rand(hidden, generator=g)).to(dtype)


def residual_for(batch, n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed + 100 * batch + n)
    return (torch.randn(batch, n, generator=g) * 4).to(dtype)


@pytest.mark.parametrize("config_name", list(FUSED_CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 2, 3, 4])
def test_norm_prologue_is_rmsnorm_then_gemv(batch, dtype, config_name, rmsnorm_within_one_ulp_flips):
    config = FUSED_CONFIGS[config_name]
    hidden = 64 if config_name == "block_k==H" else 100  # 100: ragged last tile (32, 64), one tile past H (128)
    x, w, bias = inputs(batch, 21, hidden, dtype, seed=3)
    gamma = norm_weight(hidden, dtype)
    normed = torch.full_like(x, float("nan"))
    y = gemv(x, w, bias if batch % 2 else None, config, norm_weight=gamma, eps=EPS, normed_out=normed)
    # normed: norm.py's rounding steps; only the order of the fp32 sum of squares differs from the reference
    if dtype == torch.bfloat16:
        rmsnorm_within_one_ulp_flips(normed, x, gamma, None, EPS, max_fraction=0.02)
    else:
        torch.testing.assert_close(normed, add_rmsnorm_reference(x, gamma, EPS)[0], rtol=2**-20, atol=0)
    # y: the product of the normed input before its roundings, accumulated in fp32 and rounded once
    x64 = x.double()
    exact_normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double()
    assert_matches_float64(y, exact_normed.to(dtype), w, bias if batch % 2 else None, exact_x=exact_normed)
    assert torch.equal(gemv(x, w, bias if batch % 2 else None, config, norm_weight=gamma, eps=EPS), y)


@pytest.mark.parametrize("config_name", list(FUSED_CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 3])
def test_residual_epilogue_rounds_the_projection_then_the_sum(batch, dtype, config_name):
    config = FUSED_CONFIGS[config_name]
    hidden = 64 if config_name == "block_k==H" else 100
    x, w, bias = inputs(batch, 21, hidden, dtype, seed=4)
    residual = residual_for(batch, 21, dtype)
    projection = gemv(x, w, bias, config)
    expected = (residual.float() + projection.float()).to(dtype)  # round(residual + round(x @ w.T + bias))
    y = gemv(x, w, bias, config, residual=residual)
    assert torch.equal(y, expected) and y is not residual
    # the reference in the same order: the fp32 sums differ in their order only, which flips few roundings
    reference = (residual.float() + gemv_reference(x, w, bias).float()).to(dtype)
    if dtype == torch.float32:
        torch.testing.assert_close(y, reference)
    else:
        assert (y != reference).float().mean() <= 0.02
    in_place = residual.clone()
    assert gemv(x, w, bias, config, residual=in_place, out=in_place) is in_place
    assert torch.equal(in_place, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norm_prologue_and_residual_epilogue_together(dtype):
    """The decode step never combines them, but nothing stops it: the two fusions are independent."""
    x, w, bias = inputs(2, 21, 100, dtype, seed=5)
    gamma = norm_weight(100, dtype, seed=1)
    residual = residual_for(2, 21, dtype)
    projection = gemv(x, w, bias, BROADCAST, norm_weight=gamma, eps=EPS)
    y = gemv(x, w, bias, BROADCAST, norm_weight=gamma, eps=EPS, residual=residual)
    assert torch.equal(y, (residual.float() + projection.float()).to(dtype))


def test_fused_bad_inputs_raise():
    x, w, _ = inputs(3, 5, 37, torch.float32)
    gamma = norm_weight(37, torch.float32)
    square = torch.zeros(37, 37)
    bad_calls = {
        "gamma shape": lambda: gemv(x, w, norm_weight=gamma[:36], eps=EPS),
        "gamma dtype": lambda: gemv(x, w, norm_weight=gamma.bfloat16(), eps=EPS),
        "gamma strided": lambda: gemv(x, w, norm_weight=torch.zeros(74)[::2], eps=EPS),
        "gamma without eps": lambda: gemv(x, w, norm_weight=gamma),
        "eps a tensor": lambda: gemv(x, w, norm_weight=gamma, eps=torch.tensor(EPS)),
        "eps without gamma": lambda: gemv(x, w, eps=EPS),
        "normed_out without gamma": lambda: gemv(x, w, normed_out=torch.empty_like(x)),
        "normed_out shape": lambda: gemv(x, w, norm_weight=gamma, eps=EPS, normed_out=torch.empty(3, 36)),
        "normed_out dtype": lambda: gemv(x, w, norm_weight=gamma, eps=EPS, normed_out=x.bfloat16()),
        "normed_out is x": lambda: gemv(x, w, norm_weight=gamma, eps=EPS, normed_out=x),
        "residual shape": lambda: gemv(x, w, residual=torch.zeros(3, 37)),
        "residual dtype": lambda: gemv(x, w, residual=torch.zeros(3, 5, dtype=torch.bfloat16)),
        "out is x": lambda: gemv(square[:3], square, out=square[:3]),
        "out overlaps x": lambda: gemv(square[:3], square, out=square[2:5]),
    }
    for name, call in bad_calls.items():
        with pytest.raises(ValueError):
            call()
            pytest.fail(f"{name} did not raise")
    gemv(square[:3], square, out=square[3:6])  # beside x in one buffer: fine


def test_bad_inputs_raise():
    x, w, bias = inputs(3, 5, 37, torch.float32)
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
        "bias strided": lambda: gemv(x, w, torch.zeros(10)[::2]),
        "out shape": lambda: gemv(x, w, out=torch.empty(3, 6)),
        "out dtype": lambda: gemv(x, w, out=torch.empty(3, 5, dtype=torch.bfloat16)),
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
