"""L2 prefetch off Hopper: the launchers do nothing (a prefetch is only a hint)."""

import torch

from warpcode.kernels.l2_prefetch import prefetch_experts_l2, prefetch_kv_l2, prefetch_l2, prefetch_supported


def test_cpu_launchers_are_no_ops():
    assert not prefetch_supported(torch.device("cpu"))
    data = torch.randn(4, 16)
    prefetch_l2(data)
    prefetch_experts_l2(data.view(2, 2, 16), torch.tensor([[1]]))
    prefetch_kv_l2(data.view(1, 1, 4, 16), data.view(1, 1, 4, 16), torch.tensor([3], dtype=torch.int32))
