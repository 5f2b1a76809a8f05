"""Warp decode with MXFP8 weights against the float64 reference on the same (exactly dequantised) weights
(CPU: TRITON_INTERPRET=1, small odd shapes whose last scale group is partial), and the MX entries of the tuning
tables, the dispatcher and the route kernel's prefetch hint."""

import json
import math
from dataclasses import replace

import pytest
import torch

from warpcode.bench import tune_warp_decode
from warpcode.bench.moe import MoeShape
from warpcode.kernels import (
    moe,
    moe_reference,
    moe_warp_decode,
    quantize_mxfp8,
    route,
    route_reference,
    route_triton,
    tuning,
)
from warpcode.kernels.dispatch import uses_warp_decode
from warpcode.kernels.mx import MXTensor, dequantize_mxfp8
from warpcode.kernels.mx_down import launch_down_mma
from warpcode.kernels.tuning import WarpDecodeConfig, warp_decode_config, warp_decode_max_tokens

# 32 columns (one scale group) per tile: every kernel loop runs several iterations over these shapes.
SMALL_MX_BLOCKS = WarpDecodeConfig(gate_up_rows=16, gate_up_cols=32, down_rows=16, down_cols=32)
DOWN_ON_MMA = replace(SMALL_MX_BLOCKS, down_on_mma=True)  # kernel 2 on tensor cores (kernels/mx_down.py)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2.5e-2}  # as tests/kernels/test_moe_kernels.py


def make_mx_case(tokens, hidden, intermediate, experts, top_k, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=generator).to(dtype)
    w13 = torch.randn(experts, 2 * intermediate, hidden, generator=generator) / math.sqrt(hidden)
    w2 = torch.randn(experts, hidden, intermediate, generator=generator) / math.sqrt(intermediate)
    # Rows of very different magnitudes: the per-group scales span many exponents.
    w13 = w13 * torch.exp2(torch.randint(-6, 7, (experts, 2 * intermediate, 1), generator=generator))
    topk_weights, topk_ids = route_reference(torch.randn(tokens, experts, generator=generator), top_k)
    return x, topk_weights, topk_ids, quantize_mxfp8(w13), quantize_mxfp8(w2)


def float64_reference(x, topk_weights, topk_ids, w13, w2):
    return moe_reference(x.double(), topk_weights.double(), topk_ids, w13, w2, compute_dtype=torch.float64)


def relative_error(out, reference):
    return ((out.double() - reference).norm() / reference.norm()).item()


CASES = {
    "one token, H and I below one group": dict(tokens=1, hidden=37, intermediate=23, experts=5, top_k=2),
    "partial last groups (H=80, I=48)": dict(tokens=3, hidden=80, intermediate=48, experts=6, top_k=3),
    "33 tokens": dict(tokens=33, hidden=40, intermediate=19, experts=3, top_k=1),
    "top-1": dict(tokens=4, hidden=64, intermediate=32, experts=4, top_k=1),
    "top-8 of 8": dict(tokens=2, hidden=48, intermediate=40, experts=8, top_k=8),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [SMALL_MX_BLOCKS, DOWN_ON_MMA, replace(DOWN_ON_MMA, down_first_tile_early=True)],
    ids=["down on CUDA cores", "down on tensor cores", "down on tensor cores, first tile early"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_mx_warp_decode_matches_float64_and_writes_every_output(case, dtype, config):
    """fp32 inputs keep kernel 2 on CUDA cores whatever the config (their intermediate is fp32)."""
    x, topk_weights, topk_ids, w13, w2 = make_mx_case(dtype=dtype, seed=len(CASES) + case["hidden"], **case)
    poisoned = torch.full_like(x, float("nan"))
    out = moe_warp_decode(x, topk_weights, topk_ids, w13, w2, config=config, out=poisoned)
    assert out.data_ptr() == poisoned.data_ptr() and out.dtype == dtype
    assert not out.isnan().any(), "some outputs were never written"
    assert relative_error(out, float64_reference(x, topk_weights, topk_ids, w13, w2)) < TOLERANCE[dtype]


def test_wide_and_narrow_tiles_of_both_kernels():
    """Each 32-group's partial sum times its scale, in tiles of several groups per iteration (a partial one last)
    and of one."""
    x, topk_weights, topk_ids, w13, w2 = make_mx_case(2, 100, 40, 4, 2, torch.float32, seed=3)
    reference = float64_reference(x, topk_weights, topk_ids, w13, w2)
    for cols in (32, 64):
        config = WarpDecodeConfig(gate_up_rows=32, gate_up_cols=cols, down_rows=32, down_cols=cols)
        out = moe_warp_decode(x, topk_weights, topk_ids, w13, w2, config=config)
        assert relative_error(out, reference) < 1e-6


@pytest.mark.slow
def test_fresh_inputs_and_the_default_config():
    """Nothing carried over between calls: new inputs give the new reference (default config: the MX heuristic)."""
    for seed in range(2):
        x, topk_weights, topk_ids, w13, w2 = make_mx_case(2, 96, 64, 4, 2, torch.float32, seed=10 + seed)
        out = moe_warp_decode(x, topk_weights, topk_ids, w13, w2)
        assert relative_error(out, float64_reference(x, topk_weights, topk_ids, w13, w2)) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("config", [SMALL_MX_BLOCKS, DOWN_ON_MMA], ids=["down on CUDA cores", "down on tensor cores"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_mx_residual_fusion(dtype, config):
    x, topk_weights, topk_ids, w13, w2 = make_mx_case(3, 80, 48, 5, 2, dtype, seed=5)
    residual = (torch.randn(x.shape, generator=torch.Generator().manual_seed(6)) * 4).to(dtype)
    args = (x, topk_weights, topk_ids, w13, w2)
    expected = (residual.float() + moe_warp_decode(*args, config=config).float()).to(dtype)
    in_place = residual.clone()
    assert moe_warp_decode(*args, config=config, out=in_place, residual=in_place) is in_place
    assert torch.equal(in_place, expected)
    assert relative_error(in_place - residual, float64_reference(*args)) < TOLERANCE[dtype]


def down_mma_case(exponent_spread: int, seed: int = 0):
    """fp16 intermediates [T*K, I] and an MX w2 whose groups' scales within a row differ by up to 2**spread."""
    generator = torch.Generator().manual_seed(seed)
    tokens, hidden, intermediate, experts, top_k = 3, 40, 100, 5, 3  # I: three groups and a partial fourth
    w2 = torch.randn(experts, hidden, intermediate, generator=generator)
    groups = torch.randint(-exponent_spread, 1, (experts, hidden, 4), generator=generator)
    w2 = quantize_mxfp8(w2 * torch.exp2(groups.repeat_interleave(32, dim=2)[..., :intermediate]))
    hidden_rows = torch.randn(tokens * top_k, intermediate, generator=generator).to(torch.float16)
    topk_weights, topk_ids = route_reference(torch.randn(tokens, experts, generator=generator), top_k)
    return hidden_rows, topk_weights, topk_ids, w2


def down_float64(hidden_rows, topk_weights, topk_ids, w2_dequantised):
    tokens, top_k = topk_ids.shape
    per_slot = torch.einsum("shi,si->sh", w2_dequantised[topk_ids.reshape(-1)], hidden_rows.double())
    return (per_slot.view(tokens, top_k, -1) * topk_weights.double()[..., None]).sum(dim=1)


@pytest.mark.slow
@pytest.mark.parametrize("first_tile_early", [False, True], ids=["tiles after the wait", "first tile early"])
@pytest.mark.parametrize("cols", [32, 128], ids=["four tiles", "one tile wider than I"])
def test_down_on_tensor_cores_is_exact_in_fp32_for_groups_within_2_21_of_their_row(cols, first_tile_early):
    """fp32 output: only the fp32 sums round; a row's groups up to 2**21 below its largest convert exactly."""
    hidden_rows, topk_weights, topk_ids, w2 = down_mma_case(exponent_spread=21)
    out = torch.empty(topk_ids.shape[0], w2.shape[1], dtype=torch.float32)
    config = replace(DOWN_ON_MMA, down_cols=cols, down_first_tile_early=first_tile_early)
    launch_down_mma(hidden_rows, topk_weights, topk_ids, w2, out, config)
    reference = down_float64(hidden_rows, topk_weights, topk_ids, dequantize_mxfp8(w2, torch.float64))
    assert relative_error(out, reference) < 1e-6


@pytest.mark.slow
def test_down_on_tensor_cores_drops_groups_more_than_2_21_below_their_rows_largest_scale():
    """A row's largest scale sets its fp16 range. Groups 0, 2, 3 hold zeros under 2**13, group 1 the weights under
    2**(13 - gap): converted exactly at a gap of 21, dropped (the output is 0) at 22."""
    hidden_rows, topk_weights, topk_ids, w2 = down_mma_case(exponent_spread=0, seed=1)
    bits = w2.data.view(torch.uint8).clone()
    bits[..., :32] = 0
    bits[..., 64:] = 0
    data = bits.view(torch.float8_e4m3fn)
    out = torch.empty(topk_ids.shape[0], w2.shape[1], dtype=torch.float32)
    for gap in (21, 22):
        scales = torch.full_like(w2.scales, 127 + 13)
        scales[..., 1] -= gap
        weights = MXTensor(data, scales)
        launch_down_mma(hidden_rows, topk_weights, topk_ids, weights, out, DOWN_ON_MMA)
        reference = down_float64(hidden_rows, topk_weights, topk_ids, dequantize_mxfp8(weights, torch.float64))
        if gap == 21:
            assert relative_error(out, reference) < 1e-6
        else:
            assert torch.equal(out, torch.zeros_like(out)) and reference.abs().max() > 0


def test_down_on_tensor_cores_needs_mx_weights_tile_sizes_and_fp16_intermediates():
    with pytest.raises(ValueError, match="down_rows >= 16"):
        WarpDecodeConfig(down_rows=8, down_on_mma=True)
    with pytest.raises(ValueError, match="first_tile_early is an option of kernel 2 on tensor cores"):
        WarpDecodeConfig(down_first_tile_early=True)
    x, topk_weights, topk_ids, w13, w2 = make_mx_case(2, 64, 32, 4, 2, torch.bfloat16)
    plain = [torch.randn(w.shape).to(torch.bfloat16) for w in (w13, w2)]
    with pytest.raises(ValueError, match="takes MXFP8 weights"):
        moe_warp_decode(x, topk_weights, topk_ids, *plain, config=DOWN_ON_MMA)
    hidden_rows, topk_weights, topk_ids, w2 = down_mma_case(exponent_spread=0)
    out = torch.empty(topk_ids.shape[0], w2.shape[1])
    with pytest.raises(ValueError, match="fp16 intermediates"):
        launch_down_mma(hidden_rows.float(), topk_weights, topk_ids, w2, out, DOWN_ON_MMA)


def test_mixed_weight_formats_and_narrow_tiles_are_rejected():
    x, topk_weights, topk_ids, w13, w2 = make_mx_case(2, 64, 32, 4, 2, torch.float32)
    plain_w2 = torch.randn(4, 64, 32)
    with pytest.raises(ValueError, match="both be MXFP8"):
        moe_warp_decode(x, topk_weights, topk_ids, w13, plain_w2)
    with pytest.raises(ValueError, match="gate_up_cols >= 32"):
        moe_warp_decode(x, topk_weights, topk_ids, w13, w2, config=WarpDecodeConfig(gate_up_cols=16))
    with pytest.raises(ValueError, match="down_cols >= 32"):
        moe_warp_decode(x, topk_weights, topk_ids, w13, w2, config=WarpDecodeConfig(down_cols=16))


def test_dispatcher_and_route_prefetch_take_mx_weights_off_the_gpu():
    x, topk_weights, topk_ids, w13, w2 = make_mx_case(3, 64, 32, 4, 2, torch.float32)
    assert not uses_warp_decode(x, w13, 2)
    assert torch.equal(moe(x, topk_weights, topk_ids, w13, w2), moe_reference(x, topk_weights, topk_ids, w13, w2))
    logits = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    for call in (route, route_triton):  # the hint changes nothing but what L2 holds
        plain, hinted = call(logits, 2), call(logits, 2, prefetch=w13)
        assert all(torch.equal(a, b) for a, b in zip(plain, hinted, strict=True))
        with pytest.raises(ValueError, match="prefetch must be"):
            call(logits, 2, prefetch=w13[:2])


@pytest.fixture
def config_file(tmp_path):
    return tmp_path / "NVIDIA_H200.json"


def test_mx_configs_have_their_own_keys_and_default_to_the_bf16_tile_bytes(config_file):
    qwen3 = (2048, 768, 128, 8)
    bf16 = {"gate_up_rows": 1, "gate_up_cols": 512, "gate_up_warps": 2, "down_rows": 2, "down_cols": 128}
    mx = {**bf16, "gate_up_cols": 2048, "down_rows": 4}
    config_file.write_text(
        json.dumps({"warp_decode": {"2048,768,128,8": {"1": bf16, "8": bf16}, "2048,768,128,8,mx": {"1": mx}},
                    "warp_decode_crossover": {"2048,768,128,8": 8, "2048,1024,64,8,mx": 2, "2048,1024,64,8": 4}})
    )  # fmt: skip
    tables = tuning.load_tables(config_file)
    assert warp_decode_config(*qwen3, 1, tables=tables) == WarpDecodeConfig(**bf16)
    assert warp_decode_config(*qwen3, 1, True, tables) == WarpDecodeConfig(**mx)
    # no MX entry for bucket 8: the tuned bf16 tile with twice the columns (the same bytes per tile)
    assert warp_decode_config(*qwen3, 8, True, tables) == WarpDecodeConfig(
        **{**bf16, "gate_up_cols": 1024, "down_cols": 256}
    )
    # an unmeasured shape: the bf16 heuristic, doubled, never wider than the next power of two of K, nor below 32
    assert warp_decode_config(40, 12, 4, 2, 1, True, tables) == WarpDecodeConfig(
        gate_up_rows=8, gate_up_cols=64, down_rows=4, down_cols=32
    )
    assert warp_decode_max_tokens(*qwen3, True, tables) == 8  # no MX crossover: the bf16 one
    assert warp_decode_max_tokens(2048, 1024, 64, 8, True, tables) == 2
    assert warp_decode_max_tokens(2048, 1024, 64, 8, tables=tables) == 4


def test_mx_tuner_sweeps_wider_tiles_and_writes_mx_keys(config_file, monkeypatch):
    shape = MoeShape(2048, 768, 128, 8)
    mx_tiles = tune_warp_decode.gate_up_candidates(shape, mx=True)
    assert max(c.gate_up_cols for c in mx_tiles) == 2048  # no wider than H
    assert min(2 * c.gate_up_rows * c.gate_up_cols / (32 * c.gate_up_warps) for c in mx_tiles) == 16  # a 16-byte load
    assert {c.down_stages for c in tune_warp_decode.with_stages(WarpDecodeConfig(), "down")} == {1, 2, 3}
    on_mma = [c for c in tune_warp_decode.down_candidates(shape, mx=True) if c.down_on_mma]
    assert on_mma and min(c.down_rows for c in on_mma) == 16 and max(c.down_cols for c in on_mma) <= 1024
    assert not any(c.down_on_mma for c in tune_warp_decode.down_candidates(shape))
    best = WarpDecodeConfig(gate_up_cols=1024, down_cols=256, gate_up_stages=2)
    times = {"total_us": 10.0, "expert_centric_us": 20.0}
    monkeypatch.setattr(tune_warp_decode, "tune", lambda shape, batch, mx, caps: (best, times))
    config_file.write_text(
        json.dumps({"warp_decode": {"2048,768,128,8": {"1": {}}}, "warp_decode_crossover": {"2048,768,128,8": 8}})
    )
    argv = ["--weights", "mxfp8", "--shape", "2048,768,128,8", "--batch", "1,2", "--write", str(config_file)]
    tune_warp_decode.main(argv)
    data = json.loads(config_file.read_text())
    assert data["warp_decode"]["2048,768,128,8"] == {"1": {}}  # the bf16 entries stay
    written = data["warp_decode"]["2048,768,128,8,mx"]
    assert set(written) == {"1", "2"} and all(WarpDecodeConfig(**entry) == best for entry in written.values())
    assert data["warp_decode_crossover"] == {"2048,768,128,8": 8, "2048,768,128,8,mx": 2}


def test_mx_expert_bytes_count_data_and_scales():
    shape = MoeShape(80, 48, 4, 2)  # ceil(80 / 32) = 3 scales per w13 row, ceil(48 / 32) = 2 per w2 row
    assert shape.expert_bytes(torch.bfloat16) == 3 * 80 * 48 * 2
    assert shape.expert_bytes(torch.bfloat16, mx=True) == 3 * 80 * 48 + 2 * 48 * 3 + 80 * 2
