"""The expert-centric path with MXFP8 w13/w2 (CPU interpreter) against the float64 reference on the dequantised
weights: hidden and intermediate sizes not multiples of 32, odd shapes, poisoned outputs; its config choice."""

import dataclasses
import json
import math

import pytest
import torch

from warpcode.kernels import moe_expert_centric, moe_reference, route_reference, tuning
from warpcode.kernels.mx import MXTensor, dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.mx_tile import MAX_BF16_TILE_SCALE
from warpcode.kernels.tuning import GroupedGemmConfig

# as tests/kernels/test_moe_kernels.py (bf16: the path rounds its intermediates to bf16)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2.5e-2}
SMALL = GroupedGemmConfig(block_m=16, block_n=16, block_k=32, num_warps=1, num_stages=1)  # several K tiles
WIDE_K = GroupedGemmConfig(block_m=16, block_n=32, block_k=64, num_warps=1, num_stages=1)  # two groups per tile
CASES = {
    "one token": dict(tokens=1, hidden=37, intermediate=23, experts=5, top_k=2),
    "33 tokens": dict(tokens=33, hidden=50, intermediate=19, experts=6, top_k=3),
    "K multiple of 32": dict(tokens=5, hidden=64, intermediate=32, experts=3, top_k=2),
    "top-k = every expert": dict(tokens=3, hidden=70, intermediate=40, experts=4, top_k=4),
}


def make_case(tokens, hidden, intermediate, experts, top_k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g).to(dtype)

    def weight(rows, columns):  # rows in several binades, so the scales differ
        w = torch.randn(experts, rows, columns, generator=g) / math.sqrt(columns)
        return quantize_mxfp8(w * torch.exp2(torch.randint(-3, 3, (experts, rows, 1), generator=g).float()))

    topk_weights, topk_ids = route_reference(torch.randn(tokens, experts, generator=g), top_k)
    return x, topk_weights, topk_ids, weight(2 * intermediate, hidden), weight(hidden, intermediate)


@pytest.mark.parametrize("config", [SMALL, WIDE_K, None], ids=["small", "wide_k", "default"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_expert_centric_mx_matches_float64(case, dtype, config):
    x, topk_weights, topk_ids, w13, w2 = make_case(dtype=dtype, seed=sum(case.values()) + (config is None), **case)
    w13_64, w2_64 = dequantize_mxfp8(w13, torch.float64), dequantize_mxfp8(w2, torch.float64)
    reference = moe_reference(x.double(), topk_weights.double(), topk_ids, w13_64, w2_64, torch.float64)
    # MX weights go into the reference as they are (dequantised exactly there): the same float64 products, up to
    # the BLAS's summation order, which may depend on the operands' memory alignment.
    from_mx = moe_reference(x.double(), topk_weights.double(), topk_ids, w13, w2, torch.float64)
    torch.testing.assert_close(from_mx, reference, rtol=1e-12, atol=1e-14)
    poisoned = torch.full_like(x, float("nan"))
    out = moe_expert_centric(x, topk_weights, topk_ids, w13, w2, config=config, out=poisoned)
    assert out.data_ptr() == poisoned.data_ptr() and not out.isnan().any()
    error = ((out.double() - reference).norm() / reference.norm()).item()
    assert error < TOLERANCE[dtype], error


def test_mx_config_choice_and_checks(tmp_path):
    x, topk_weights, topk_ids, w13, w2 = make_case(4, 40, 24, 4, 2, torch.float32, seed=1)
    with pytest.raises(ValueError, match="block_k >= 32"):
        moe_expert_centric(x, topk_weights, topk_ids, w13, w2, config=dataclasses.replace(SMALL, block_k=16))
    with pytest.raises(ValueError, match="both be MXFP8"):
        moe_expert_centric(x, topk_weights, topk_ids, w13, dequantize_mxfp8(w2))
    beyond = MXTensor(w2.data, w2.scales.clone())  # a block maximum above 57,344: inf in 16-bit tiles
    beyond.scales[1, 3, 0] = MAX_BF16_TILE_SCALE + 1
    with pytest.raises(ValueError, match="57,344"):
        moe_expert_centric(x.to(torch.bfloat16), topk_weights, topk_ids, w13, beyond)
    assert not moe_expert_centric(x, topk_weights, topk_ids, w13, beyond).isinf().any()  # fp32 tiles hold it
    # a shape without MX entries: bf16's choice, block_k at least 32
    for tokens in (1, 16, 128, 1024):
        config = tuning.grouped_gemm_config(2048, 1024, 64, 8, tokens, mx=True)
        bf16 = tuning.grouped_gemm_config(2048, 1024, 64, 8, tokens)
        assert config == dataclasses.replace(bf16, block_k=max(32, bf16.block_k))
    # a measured MX entry is read from its own key, never the bf16 one
    measured_mx = dict(block_m=32, block_n=128, block_k=256, num_warps=8, num_stages=2)
    path = tmp_path / "NVIDIA_H200.json"
    path.write_text(json.dumps({"expert_centric": {tuning.shape_key(2048, 768, 128, 8, mx=True): {"16": measured_mx}}}))
    tables = tuning.load_tables(path)
    assert tuning.grouped_gemm_config(2048, 768, 128, 8, 9, mx=True, tables=tables) == GroupedGemmConfig(**measured_mx)
    assert tuning.grouped_gemm_config(2048, 768, 128, 8, 9, tables=tables) != GroupedGemmConfig(**measured_mx)


def test_tuner_writes_mx_results_under_their_own_key(tmp_path, monkeypatch):
    from warpcode.bench import tune_expert_centric
    from warpcode.bench.moe import MoeShape

    shape = MoeShape(2048, 768, 128, 8)
    mx_candidates = tune_expert_centric.candidates(shape, 128, mx=True)
    assert all(c.block_k % 32 == 0 for c in mx_candidates)
    assert set(tune_expert_centric.candidates(shape, 128)) < set(mx_candidates)
    path = tmp_path / "configs.json"
    path.write_text(json.dumps({"expert_centric": {"2048,768,128,8": {"32": {"block_m": 16}}}}))
    best = GroupedGemmConfig(block_m=16, block_n=128, block_k=256, num_warps=4, num_stages=3)
    seen = []
    monkeypatch.setattr(
        tune_expert_centric, "tune", lambda shape, batch, mx=False, caps=(): seen.append(mx) or (best, 1, 2)
    )
    argv = ["--shape", "2048,768,128,8", "--batch", "32", "--write", str(path), "--weights", "mxfp8"]
    tune_expert_centric.main(argv)
    data = json.loads(path.read_text())["expert_centric"]
    assert seen == [True]
    assert data["2048,768,128,8"] == {"32": {"block_m": 16}}  # the bf16 entry untouched
    assert GroupedGemmConfig(**data["2048,768,128,8,mx"]["32"]) == best
