"""The float64 check of o_proj + folded router, shared by the tests of the float and the MXFP8 Wo."""

import torch


def assert_matches_float64(h_new, z, p, wo64, h_before, dtype):
    """h_new = round(h + round(attn @ Wo.T)) and z = (h + attn @ Wo.T) * gamma @ router.T, against float64 (wo64:
    the projection's weights in float64)."""
    projected = p["attn"].double() @ wo64.T
    expected_h = (h_before.double() + projected.to(dtype).double()).to(dtype)
    expected_z = (h_before.double() + projected) * p["gamma"].double() @ p["router"].double().T
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(h_new.double(), expected_h.double(), **tolerance)
    torch.testing.assert_close(z.double(), expected_z, **tolerance)
    assert z.dtype == torch.float32 and h_new.dtype == dtype
