import pytest
import torch

from warpcode.kernels import route, route_reference, route_triton


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize(("tokens", "experts", "top_k"), [(1, 8, 2), (5, 7, 3), (3, 128, 8), (2, 6, 6), (4, 60, 1)])
def test_triton_route_matches_softmax_topk(tokens, experts, top_k, normalize):
    logits = torch.randn(tokens, experts, generator=torch.Generator().manual_seed(experts))
    weights, ids = route_triton(logits, top_k, normalize)
    expected_weights, expected_ids = route_reference(logits.double(), top_k, normalize)
    assert ids.dtype == torch.int64 and weights.dtype == torch.float32
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights.double(), expected_weights, rtol=1e-6, atol=1e-7)
    if normalize:
        torch.testing.assert_close(weights.sum(-1), torch.ones(tokens))


def test_bf16_logits_are_read_as_fp32():
    # Distinct values in every row: tied experts may come in either order from torch.topk.
    generator = torch.Generator().manual_seed(0)
    logits = torch.stack([torch.randperm(16, generator=generator) / 4 - 2 for _ in range(6)]).to(torch.bfloat16)
    weights, ids = route_triton(logits, 4)
    expected_weights, expected_ids = route_reference(logits, 4)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights, expected_weights)


def test_route_dispatches_to_the_reference_on_cpu_and_checks_arguments():
    logits = torch.randn(3, 8)
    assert all(torch.equal(a, b) for a, b in zip(route(logits, 2), route_reference(logits, 2), strict=True))
    with pytest.raises(ValueError, match="top-k"):
        route_triton(logits, 9)
    with pytest.raises(ValueError, match=r"\[T, E\]"):
        route_triton(logits[0], 2)


def test_ties_go_to_the_lowest_expert_index():
    logits = torch.tensor([[0.5, 2.0, 2.0, -1.0, 2.0, 0.5, 0.5]])
    weights, ids = route_triton(logits, 4)
    assert ids.tolist() == [[1, 2, 4, 0]]
    torch.testing.assert_close(weights, route_reference(logits, 4)[0])
