"""o_proj + folded router with an MXFP8 Wo (CPU interpreter) against float64 on the dequantised Wo: K not a
multiple of 32, odd H and E, a poisoned output; router_fold from the dequantised Wo."""

import pytest
import torch

from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.o_proj_router import o_proj_router, router_fold

from .o_proj_router_checks import assert_matches_float64


def layer(hidden, k, experts, dtype, seed):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g) * scale

    o_proj = randn(hidden, k, scale=k**-0.5) * torch.exp2(torch.randint(-4, 4, (hidden, 1), generator=g).float())
    return dict(
        attn=randn(1, k).to(dtype),
        h=randn(1, hidden, scale=3.0).to(dtype),
        o_proj=quantize_mxfp8(o_proj),
        router=randn(experts, hidden, scale=hidden**-0.5).to(dtype),
        gamma=(0.5 + torch.rand(hidden, generator=g)).to(dtype),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("hidden", "k", "experts"), [(24, 40, 5), (37, 16, 8), (9, 100, 3), (33, 64, 7)])
def test_o_proj_router_mx_matches_float64(hidden, k, experts, dtype):
    p = layer(hidden, k, experts, dtype, seed=hidden * k + experts)
    wo64 = dequantize_mxfp8(p["o_proj"], torch.float64)
    fold = router_fold(p["router"], p["gamma"], p["o_proj"])
    assert all(f.dtype == dtype for f in fold)
    expected_fold = (p["router"].double() * p["gamma"].double()) @ wo64
    torch.testing.assert_close(fold[0].double(), expected_fold, rtol=2**-8 if dtype == torch.bfloat16 else 1e-6,
                               atol=1e-6)  # fmt: skip
    h_before = p["h"].clone()
    out = torch.full_like(p["h"], float("nan"))
    h_new, z = o_proj_router(p["attn"], p["o_proj"], p["h"], fold, out=out)
    assert h_new is out and not h_new.isnan().any()
    assert torch.equal(p["h"], h_before), "h is read, never written"
    assert_matches_float64(h_new, z, p, wo64, h_before, dtype)


def test_o_proj_router_mx_matches_the_dequantised_weights_plain():
    """fp32: the MX launch and the plain launch on the dequantised Wo compute the same sums."""
    p = layer(21, 70, 6, torch.float32, seed=3)
    plain = dequantize_mxfp8(p["o_proj"])
    fold = router_fold(p["router"], p["gamma"], p["o_proj"])
    assert all(torch.equal(a, b) for a, b in zip(fold, router_fold(p["router"], p["gamma"], plain), strict=True))
    h_mx, z_mx = o_proj_router(p["attn"], p["o_proj"], p["h"], fold)
    h_plain, z_plain = o_proj_router(p["attn"], plain, p["h"], fold)
    torch.testing.assert_close(h_mx, h_plain, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(z_mx, z_plain, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="o_proj must be"):
        o_proj_router(p["attn"][:, :69], p["o_proj"], p["h"], fold)
