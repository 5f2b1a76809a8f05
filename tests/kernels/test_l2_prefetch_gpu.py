"""L2 prefetch kernels on the GPU: every launcher runs (eagerly and replayed from a CUDA graph) without faulting on
ragged sizes, out-of-range expert ids and lengths, and leaves every byte as it was (run on the device)."""

import pytest
import torch

from warpcode.kernels.l2_prefetch import prefetch_experts_l2, prefetch_kv_l2, prefetch_l2, prefetch_supported

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")


def test_prefetch_is_supported_on_hopper():
    assert prefetch_supported(CUDA) == (torch.cuda.get_device_capability()[0] >= 9)


@pytest.mark.parametrize("elements", [1, 7, 8, 1000, 3 * 2**20 + 5])
def test_range_prefetch_keeps_data(elements):
    data = torch.randn(elements, device=CUDA, dtype=torch.bfloat16)
    before = data.clone()
    prefetch_l2(data)
    torch.cuda.synchronize()
    assert torch.equal(data, before)


def test_expert_prefetch_clamps_ids_and_keeps_data():
    w2 = torch.randn(16, 96, 40, device=CUDA, dtype=torch.bfloat16)  # [E, H, I]: 7680 bytes per expert
    before = w2.clone()
    ids = torch.tensor([[0, 15, 3], [-5, 99, 15]], device=CUDA)
    prefetch_experts_l2(w2, ids)
    prefetch_experts_l2(w2, ids.int())
    torch.cuda.synchronize()
    assert torch.equal(w2, before)


def test_kv_prefetch_clamps_lengths_and_replays_from_a_graph():
    keys = torch.randn(3, 2, 300, 128, device=CUDA, dtype=torch.bfloat16)
    values = torch.randn_like(keys)
    saved = keys.clone(), values.clone()
    lens = torch.tensor([0, 300, 5], device=CUDA, dtype=torch.int32)
    prefetch_kv_l2(keys, values, lens)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        prefetch_kv_l2(keys, values, lens)
        prefetch_l2(keys)
    lens.copy_(torch.tensor([-1, 10_000, 299], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(keys, saved[0]) and torch.equal(values, saved[1])


def test_non_contiguous_tensor_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        prefetch_l2(torch.randn(64, 64, device=CUDA).T)
