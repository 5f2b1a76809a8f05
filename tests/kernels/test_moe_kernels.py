"""Both Triton MoE paths against the float64 reference (CPU: TRITON_INTERPRET=1, small odd shapes)."""

import math

import pytest
import torch

from warpcode.kernels import moe, moe_expert_centric, moe_reference, moe_warp_decode, route_reference, uses_warp_decode
from warpcode.kernels.tuning import WarpDecodeConfig

# Small blocks make every kernel loop run several masked iterations over these odd shapes, and keep the
# interpreter's program count low.
SMALL_BLOCKS = WarpDecodeConfig(gate_up_rows=16, gate_up_cols=16, down_rows=16, down_cols=8)
PATHS = {
    "warp_decode": lambda *args, **kwargs: moe_warp_decode(*args, config=SMALL_BLOCKS, **kwargs),
    "expert_centric": moe_expert_centric,
}
# Relative error vs float64: fp32 math lands far under 1e-5; bf16 inputs and outputs near 1e-3..1e-2
# (the expert-centric path also rounds its intermediates to bf16).
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2.5e-2}


def make_case(tokens, hidden, intermediate, experts, top_k, dtype, routing="random", seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=generator).to(dtype)
    w13 = (torch.randn(experts, 2 * intermediate, hidden, generator=generator) / math.sqrt(hidden)).to(dtype)
    w2 = (torch.randn(experts, hidden, intermediate, generator=generator) / math.sqrt(intermediate)).to(dtype)
    topk_weights, topk_ids = route_reference(torch.randn(tokens, experts, generator=generator), top_k)
    if routing == "one_expert":
        topk_ids = (torch.arange(top_k) * 2 % experts).repeat(tokens, 1).contiguous()
    return x, topk_weights, topk_ids, w13, w2


def relative_error(out, reference):
    return ((out.double() - reference).norm() / reference.norm()).item()


CASES = {
    "one token": dict(tokens=1, hidden=37, intermediate=23, experts=5, top_k=2),
    "33 tokens": dict(tokens=33, hidden=50, intermediate=19, experts=6, top_k=3),
    "top-1": dict(tokens=4, hidden=40, intermediate=24, experts=4, top_k=1),
    "top-k = every expert": dict(tokens=3, hidden=24, intermediate=20, experts=4, top_k=4),
    "all tokens on the same experts": dict(
        tokens=7, hidden=30, intermediate=18, experts=6, top_k=2, routing="one_expert"
    ),
    "experts repeat across tokens": dict(tokens=9, hidden=33, intermediate=17, experts=3, top_k=2),
}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("path", PATHS.keys())
def test_path_matches_float64_reference_and_writes_every_output(path, case, dtype):
    x, topk_weights, topk_ids, w13, w2 = make_case(dtype=dtype, **case)
    reference = moe_reference(
        x.double(), topk_weights.double(), topk_ids, w13.double(), w2.double(), compute_dtype=torch.float64
    )
    poisoned = torch.full_like(x, float("nan"))
    out = PATHS[path](x, topk_weights, topk_ids, w13, w2, out=poisoned)
    assert out.data_ptr() == poisoned.data_ptr()
    assert out.dtype == dtype and out.shape == x.shape
    assert not out.isnan().any(), "some outputs were never written"
    assert relative_error(out, reference) < TOLERANCE[dtype]


@pytest.mark.parametrize("case", [CASES["one token"], CASES["top-k = every expert"]], ids=["one token", "K = E"])
def test_warp_decode_default_blocks(case):
    x, topk_weights, topk_ids, w13, w2 = make_case(dtype=torch.float32, **case)
    reference = moe_reference(x, topk_weights, topk_ids, w13, w2, compute_dtype=torch.float64)
    assert relative_error(moe_warp_decode(x, topk_weights, topk_ids, w13, w2), reference) < 1e-5


@pytest.mark.parametrize("path", PATHS.keys())
def test_int32_ids_and_zero_tokens(path):
    x, topk_weights, topk_ids, w13, w2 = make_case(5, 24, 16, 4, 2, torch.float32)
    expected = PATHS[path](x, topk_weights, topk_ids, w13, w2)
    assert torch.equal(PATHS[path](x, topk_weights, topk_ids.int(), w13, w2), expected)
    empty = PATHS[path](x[:0], topk_weights[:0], topk_ids[:0], w13, w2)
    assert empty.shape == (0, 24)


@pytest.mark.slow
def test_warp_decode_is_more_accurate_than_bf16_expert_centric():
    """fp32 accumulation and an fp16 intermediate against bf16 rounding between every stage."""
    errors = {"warp_decode": 0.0, "expert_centric": 0.0}
    for seed in range(3):
        x, topk_weights, topk_ids, w13, w2 = make_case(4, 256, 96, 8, 2, torch.bfloat16, seed=seed)
        reference = moe_reference(
            x.double(), topk_weights.double(), topk_ids, w13.double(), w2.double(), compute_dtype=torch.float64
        )
        for path in errors:
            call = moe_warp_decode if path == "warp_decode" else PATHS[path]
            errors[path] += relative_error(call(x, topk_weights, topk_ids, w13, w2), reference)
    assert errors["warp_decode"] < 0.75 * errors["expert_centric"], errors


@pytest.mark.parametrize("path", PATHS.keys())
def test_shape_errors_name_the_tensors(path):
    x, topk_weights, topk_ids, w13, w2 = make_case(2, 16, 8, 4, 2, torch.float32)
    with pytest.raises(ValueError, match="w2"):
        PATHS[path](x, topk_weights, topk_ids, w13, w2[:, :, :4])
    with pytest.raises(ValueError, match="topk_ids"):
        PATHS[path](x, topk_weights, topk_ids[:1], w13, w2)
    with pytest.raises(ValueError, match="contiguous"):
        PATHS[path](x, topk_weights, topk_ids, w13.transpose(1, 2).contiguous().transpose(1, 2), w2)
    with pytest.raises(ValueError, match="out must be"):
        PATHS[path](x, topk_weights, topk_ids, w13, w2, out=torch.empty(3, 16))


def test_dispatcher_uses_the_reference_off_the_gpu():
    x, topk_weights, topk_ids, w13, w2 = make_case(3, 16, 8, 4, 2, torch.float32)
    assert torch.equal(moe(x, topk_weights, topk_ids, w13, w2), moe_reference(x, topk_weights, topk_ids, w13, w2))


def test_warp_decode_saturates_an_intermediate_beyond_fp16_instead_of_overflowing():
    """bf16 inputs keep the intermediate in fp16: silu(gate) * up of about 1e6 saturates at 65504 (finite output),
    where an unclamped fp16 store would give inf and then NaN."""
    x, topk_weights, topk_ids, w13, w2 = make_case(2, 16, 8, 4, 2, torch.bfloat16)
    w13 = torch.full_like(w13, 8.0)  # every gate and up value: 16 * 8 * x; x = 8 makes it ~1e3, squared ~1e6
    out = moe_warp_decode(torch.full_like(x, 8.0), topk_weights, topk_ids, w13, w2, config=SMALL_BLOCKS)
    assert out.isfinite().all()
    w2_sums = w2.float().sum(-1)  # [E, H]: each output is sum_k w_k * 65504 * rowsum(W2[e_k])
    expected = torch.einsum("tk,tkh->th", topk_weights, 65504.0 * w2_sums[topk_ids])
    torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", ["one token", "experts repeat across tokens", "top-k = every expert"])
def test_warp_decode_adds_a_residual_to_its_rounded_output(case, dtype):
    """out = round(residual + round(moe)): the decoder layer's add in kernel 2's epilogue, also in place."""
    x, topk_weights, topk_ids, w13, w2 = make_case(dtype=dtype, seed=1, **CASES[case])
    residual = (torch.randn(x.shape, generator=torch.Generator().manual_seed(2)) * 4).to(dtype)
    args = (x, topk_weights, topk_ids, w13, w2)
    expected = (residual.float() + moe_warp_decode(*args, config=SMALL_BLOCKS).float()).to(dtype)
    out = moe_warp_decode(*args, config=SMALL_BLOCKS, residual=residual)
    assert torch.equal(out, expected) and out is not residual
    reference = moe_reference(*(t.double() for t in args[:2]), topk_ids, w13.double(), w2.double(), torch.float64)
    assert relative_error(out - residual, reference) < TOLERANCE[dtype]
    in_place = residual.clone()
    assert moe_warp_decode(*args, config=SMALL_BLOCKS, out=in_place, residual=in_place) is in_place
    assert torch.equal(in_place, expected)


def test_only_warp_decode_takes_a_residual():
    x, topk_weights, topk_ids, w13, w2 = make_case(3, 16, 8, 4, 2, torch.float32)
    assert not uses_warp_decode(x, w13, 2)  # off the GPU: the reference
    with pytest.raises(ValueError, match="only warp decode"):
        moe(x, topk_weights, topk_ids, w13, w2, residual=torch.zeros_like(x))
    with pytest.raises(ValueError, match="residual must be"):
        moe_warp_decode(x, topk_weights, topk_ids, w13, w2, residual=torch.zeros(3, 15))
