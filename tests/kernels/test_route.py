import pytest
import torch
import triton
import triton.language as tl

from warpcode.kernels import route, route_reference, route_triton
from warpcode.kernels.route import _prefetch_targets, prefetched_rows


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


@triton.jit
def _prefetch_targets_probe(
    logits_ptr, offsets_ptr, sizes_ptr, slot, chunk, E, intermediate, rows, row_bytes, stride_we, stride_wr,
    K: tl.constexpr, BLOCK_E: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr,
):  # fmt: skip
    experts = tl.arange(0, BLOCK_E)
    logits = tl.load(logits_ptr + experts, mask=experts < E, other=-float("inf"))
    offsets, sizes = _prefetch_targets(
        logits,
        experts,
        slot,
        chunk,
        E,
        intermediate,
        rows,
        row_bytes,
        stride_we,
        stride_wr,
        K,
        BLOCK_E,
        ROWS_PER_PROGRAM,
    )
    lanes = tl.arange(0, 2 * ROWS_PER_PROGRAM)
    tl.store(offsets_ptr + lanes, offsets)
    tl.store(sizes_ptr + lanes, sizes)


def prefetch_targets(logits, slot, chunk, top_k, intermediate, rows, hidden, per_program):
    experts = logits.shape[0]
    offsets = torch.empty(2 * per_program, dtype=torch.int64)
    sizes = torch.empty(2 * per_program, dtype=torch.int32)
    stride_wr, stride_we = hidden, 2 * intermediate * hidden  # a contiguous [E, 2I, H] bf16 tensor
    _prefetch_targets_probe[(1,)](
        logits, offsets, sizes, slot, chunk, experts, intermediate, rows, 2 * hidden, stride_we, stride_wr,
        K=top_k, BLOCK_E=triton.next_power_of_2(experts), ROWS_PER_PROGRAM=per_program,
    )  # fmt: skip
    return offsets, sizes


@pytest.mark.parametrize(
    ("experts", "top_k", "intermediate", "rows", "per_program", "slot", "chunk"),
    [(12, 3, 7, 5, 4, 0, 0), (12, 3, 7, 5, 4, 2, 1), (128, 8, 768, 64, 16, 7, 3), (60, 4, 1408, 64, 16, 1, 2)],
)
def test_prefetch_programs_target_the_routed_experts_first_gate_and_up_rows(
    experts, top_k, intermediate, rows, per_program, slot, chunk
):
    """Program (slot, chunk) of the route kernel's prefetch: rows [chunk * P, (chunk + 1) * P) of gate and of up
    of the slot-th routed expert, the rows at or past `rows` skipped (size 0)."""
    hidden = 10
    logits = torch.randperm(experts, generator=torch.Generator().manual_seed(experts)).float() / 3 - 5  # no ties
    offsets, sizes = prefetch_targets(logits, slot, chunk, top_k, intermediate, rows, hidden, per_program)
    expert = torch.topk(logits, top_k).indices[slot].item()
    gate_rows = torch.arange(chunk * per_program, (chunk + 1) * per_program)
    all_rows = torch.cat([gate_rows, gate_rows + intermediate])
    assert offsets.tolist() == (expert * 2 * intermediate * hidden + all_rows * hidden).tolist()
    assert sizes.tolist() == torch.where(torch.cat([gate_rows, gate_rows]) < rows, 2 * hidden, 0).tolist()


def test_prefetch_of_nan_logits_stays_inside_the_weights():
    offsets, sizes = prefetch_targets(torch.full((12,), float("nan")), 2, 0, 3, 7, 5, 10, 4)
    assert offsets.min() >= 0 and (offsets.max() + 10) <= 12 * 14 * 10
    assert (sizes == 20).sum() == 8


def test_route_takes_a_prefetch_hint_and_checks_it():
    logits = torch.randn(2, 12, generator=torch.Generator().manual_seed(3))
    w13 = torch.randn(12, 14, 16)
    assert prefetched_rows(w13) == 0  # no bulk prefetch off Hopper: the launch has no prefetch programs
    for run in (route_triton, route):
        plain, hinted = run(logits, 3), run(logits, 3, prefetch=w13)
        assert all(torch.equal(a, b) for a, b in zip(plain, hinted, strict=True))
        for bad in (w13[:11], w13[:, :13], w13.transpose(1, 2)):
            with pytest.raises(ValueError, match="prefetch must be"):
                run(logits, 3, prefetch=bad)
