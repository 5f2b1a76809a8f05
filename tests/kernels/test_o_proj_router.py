"""o_proj + folded router in one launch, and the route kernel's rms_of scaling and normed row, each against float64 or
the norm's reference, and together with warp decode against the unfused layer (CPU: TRITON_INTERPRET=1, small odd
shapes)."""

import pytest
import torch

from warpcode.kernels import moe_reference, moe_warp_decode, route_reference, route_triton
from warpcode.kernels.dispatch import route as dispatch_route
from warpcode.kernels.norm import add_rmsnorm_reference
from warpcode.kernels.o_proj_router import fits, o_proj_router, router_fold
from warpcode.kernels.tuning import WarpDecodeConfig

from .o_proj_router_checks import assert_matches_float64

EPS = 1e-6
SMALL_BLOCKS = WarpDecodeConfig(gate_up_rows=4, gate_up_cols=16, down_rows=8, down_cols=8)


def layer(hidden, k, experts, intermediate, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype)

    return dict(
        attn=randn(1, k),
        h=randn(1, hidden, scale=3.0),
        o_proj=randn(hidden, k, scale=k**-0.5),
        router=randn(experts, hidden, scale=hidden**-0.5),
        gamma=(0.5 + torch.rand(hidden, generator=g)).to(dtype),
        w13=randn(experts, 2 * intermediate, hidden, scale=hidden**-0.5),
        w2=randn(experts, hidden, intermediate, scale=intermediate**-0.5),
    )


def rmsnorm64(x, gamma):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("hidden", "k", "experts"), [(24, 40, 5), (37, 16, 8)])
def test_o_proj_router_matches_float64(hidden, k, experts, dtype):
    p = layer(hidden, k, experts, 8, dtype)
    fold = router_fold(p["router"], p["gamma"], p["o_proj"])
    h_before = p["h"].clone()
    h_new, z = o_proj_router(p["attn"], p["o_proj"], p["h"], fold)
    assert torch.equal(p["h"], h_before), "h is read, never written"
    assert_matches_float64(h_new, z, p, p["o_proj"].double(), h_before, dtype)


def test_o_proj_router_checks_arguments():
    p = layer(24, 40, 5, 8, torch.float32)
    fold = router_fold(p["router"], p["gamma"], p["o_proj"])
    with pytest.raises(ValueError, match="must not overlap h"):
        o_proj_router(p["attn"], p["o_proj"], p["h"], fold, out=p["h"])
    with pytest.raises(ValueError, match="one row"):
        o_proj_router(torch.zeros(2, 40), p["o_proj"], p["h"], fold)
    with pytest.raises(ValueError, match="fold must be"):
        o_proj_router(p["attn"], p["o_proj"], p["h"], (fold[0][:, :8], fold[1]))
    assert fits(2048, 4096) and not fits(2048, 8192)


@pytest.mark.parametrize("normalize", [True, False])
def test_route_scales_the_logits_by_rstd_of_rms_of(normalize):
    g = torch.Generator().manual_seed(1)
    z, rows = torch.randn(3, 10, generator=g), torch.randn(3, 33, generator=g) * 5
    weights, ids = route_triton(z, 3, normalize, rms_of=rows, eps=EPS)
    scaled = z.double() * torch.rsqrt(rows.double().pow(2).mean(-1, keepdim=True) + EPS)
    expected_weights, expected_ids = route_reference(scaled, 3, normalize)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights.double(), expected_weights, rtol=1e-6, atol=1e-7)
    reference_weights, reference_ids = route_reference(z, 3, normalize, rms_of=rows, eps=EPS)
    assert torch.equal(reference_ids, expected_ids)
    torch.testing.assert_close(reference_weights.double(), expected_weights, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hidden", [48, 37])  # 37: a masked row
def test_route_stores_the_normed_row(hidden, dtype):
    """normed_out gets RMSNorm(rms_of) * norm_weight rounded as the norm kernel rounds it, from the kernel and from
    the CPU dispatch (the reference); the routing is the same as without it."""
    g = torch.Generator().manual_seed(5)
    z, rows = torch.randn(2, 9, generator=g), (torch.randn(2, hidden, generator=g) * 3).to(dtype)
    norm_weight = (0.5 + torch.rand(hidden, generator=g)).to(dtype)
    expected_normed, _ = add_rmsnorm_reference(rows, norm_weight, EPS)
    plain = route_triton(z, 3, rms_of=rows, eps=EPS)
    for route_fn in (route_triton, dispatch_route):
        normed = torch.full_like(rows, float("nan"))
        weights, ids = route_fn(z, 3, True, rows, EPS, norm_weight, normed)
        assert torch.equal(ids, plain[1])
        torch.testing.assert_close(weights, plain[0], rtol=1e-6, atol=1e-7)
        if dtype == torch.float32:
            torch.testing.assert_close(normed, expected_normed, rtol=1e-6, atol=1e-6)
        else:  # rstd's last bits may move a rounding by one ulp
            torch.testing.assert_close(normed.float(), expected_normed.float(), rtol=2**-7, atol=0)
            assert (normed != expected_normed).float().mean() < 0.05


def test_route_checks_the_normed_arguments():
    z, rows, norm_weight = torch.randn(2, 9), torch.randn(2, 16), torch.ones(16)
    with pytest.raises(ValueError, match="needs rms_of"):
        route_triton(z, 3, normed_out=torch.empty(2, 16), norm_weight=norm_weight)
    with pytest.raises(ValueError, match="normed_out must be"):
        route_triton(z, 3, rms_of=rows, norm_weight=norm_weight, normed_out=torch.empty(2, 15))
    with pytest.raises(ValueError, match="norm_weight must be"):
        dispatch_route(z, 3, rms_of=rows, norm_weight=norm_weight[:-1], normed_out=torch.empty(2, 16))


def test_folded_layer_equals_the_unfused_layer():
    """o_proj, add, RMSNorm, router, route, experts, add: the unfused chain in float64 against the folded kernels."""
    p = layer(40, 24, 7, 12, torch.float32, seed=4)
    fold = router_fold(p["router"], p["gamma"], p["o_proj"])
    h_new, z = o_proj_router(p["attn"], p["o_proj"], p["h"], fold)
    normed = torch.empty_like(h_new)
    weights, ids = route_triton(z, 3, True, rms_of=h_new, eps=EPS, norm_weight=p["gamma"], normed_out=normed)
    out = moe_warp_decode(normed, weights, ids, p["w13"], p["w2"], SMALL_BLOCKS, out=h_new, residual=h_new)

    h64 = p["h"].double() + p["attn"].double() @ p["o_proj"].double().T
    normed = rmsnorm64(h64, p["gamma"])
    expected_weights, expected_ids = route_reference(normed @ p["router"].double().T, 3)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights.double(), expected_weights, rtol=1e-5, atol=1e-6)
    expected = h64 + moe_reference(normed, expected_weights, expected_ids, p["w13"].double(), p["w2"].double(),
                                   torch.float64)  # fmt: skip
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)
