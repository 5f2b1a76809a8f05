"""router_topk (gemv + softmax + top-k in one launch, "last program finishes") in the Triton interpreter: bit for bit
what gemv followed by route_triton gives, near float64 routing, ties, counter reset, argument checks."""

import pytest
import torch

from warpcode.kernels import counters as counters_module
from warpcode.kernels import decode_attention as decode_attention_module
from warpcode.kernels import router as module
from warpcode.kernels.counters import arrival_counters
from warpcode.kernels.gemv import GemvConfig, gemv, gemv_reference
from warpcode.kernels.moe_reference import route_reference
from warpcode.kernels.route import route_triton
from warpcode.kernels.router import router_config, router_topk, router_topk_reference, router_topk_triton

BF16, FP32 = torch.bfloat16, torch.float32


def make_case(batch, experts, hidden, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, hidden, generator=g).to(dtype)
    w = (torch.randn(experts, hidden, generator=g) / hidden**0.5).to(dtype)
    return x, w


def two_kernels(x, w, k, normalize, config=None):
    """What the model ran before: the router linear (gemv, same tiles), then route_triton on its logits."""
    logits = gemv(x, w, config=config or router_config(w.shape[0], x.shape[1], x.shape[0]))
    return logits, route_triton(logits, k, normalize)


def assert_near_float64(x, w, k, normalize, weights, ids, logits):
    """ids: the j-th pick's float64 logit is the j-th largest float64 logit, up to the rounding of the logits (an
    exchange is only allowed between near ties); weights: route_reference in float64 on the same rounded logits."""
    logits64 = gemv_reference(x.double(), w.double())
    _, expected_ids = route_reference(logits64, k, normalize)
    ulp = torch.finfo(x.dtype).eps
    tolerance = 2 * ulp * logits64.abs().max().item() + 1e-5
    assert (logits64.gather(1, ids) - logits64.gather(1, expected_ids)).abs().max().item() <= tolerance
    assert all(len(set(row)) == k for row in ids.tolist())
    expected_weights, _ = route_reference(logits.double(), k, normalize)
    torch.testing.assert_close(weights.double(), expected_weights, rtol=1e-6, atol=1e-7)


# (B, E, H, K, normalize, dtype, config): every B, E, H, K value, odd sizes, both dtypes and both normalisations;
# one case on the real grid (one program per expert row), the rest on fewer programs to keep the interpreter fast.
CASES = [
    (1, 128, 130, 8, True, BF16, None),
    (4, 128, 64, 8, True, BF16, GemvConfig(block_n=16, block_k=64)),
    (2, 128, 37, 128, False, FP32, GemvConfig(block_n=32, block_k=64)),
    (3, 128, 130, 2, False, BF16, GemvConfig(block_n=16, block_k=256)),
    (1, 37, 37, 1, True, FP32, None),
    (2, 37, 64, 8, False, BF16, None),
    (3, 37, 130, 37, True, FP32, GemvConfig(block_n=4, block_k=256)),
    (4, 37, 37, 2, True, BF16, GemvConfig(block_n=8, block_k=64)),
    (1, 8, 64, 8, False, FP32, None),
    (2, 8, 130, 2, True, BF16, None),
    (3, 8, 37, 1, False, BF16, None),
    (4, 8, 64, 8, True, FP32, None),
]


@pytest.mark.parametrize(("batch", "experts", "hidden", "k", "normalize", "dtype", "config"), CASES)
def test_bit_identical_to_gemv_then_route(batch, experts, hidden, k, normalize, dtype, config):
    x, w = make_case(batch, experts, hidden, dtype, seed=batch * 1000 + experts + hidden + k)
    logits = torch.full((batch, experts), float("nan"), dtype=dtype)
    weights, ids = router_topk_triton(x, w, k, normalize, config, logits=logits)
    expected_logits, (expected_weights, expected_ids) = two_kernels(x, w, k, normalize, config)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int64 and ids.shape == weights.shape == (batch, k)
    assert torch.equal(logits, expected_logits)
    assert torch.equal(ids, expected_ids)
    assert torch.equal(weights, expected_weights)
    assert_near_float64(x, w, k, normalize, weights, ids, logits)
    if normalize:
        torch.testing.assert_close(weights.sum(-1), torch.ones(batch))


@pytest.mark.parametrize(("hidden", "block_k"), [(130, 32), (64, 16), (37, 16)])
def test_rows_walked_in_several_tiles(hidden, block_k):
    """H longer than a tile: gemv's loop over full tiles, then the last one (ragged unless H % BLOCK_H == 0)."""
    config = GemvConfig(block_n=4, block_k=block_k, num_warps=4)
    x, w = make_case(3, 13, hidden, BF16, seed=hidden)
    logits = torch.empty(3, 13, dtype=BF16)
    result = router_topk_triton(x, w, 4, True, config, logits=logits)
    expected_logits, expected = two_kernels(x, w, 4, True, config)
    assert torch.equal(logits, expected_logits)
    assert all(torch.equal(a, b) for a, b in zip(result, expected, strict=True))


@pytest.mark.parametrize("dtype", [BF16, FP32])
def test_exact_ties_pick_the_lowest_index_first(dtype):
    """Every weight row twice (rows 2i and 2i + 1 equal), so every logit appears twice: each pick is a tie, and the
    even expert of a pair must come right before the odd one, as route_triton orders them."""
    x, w = make_case(4, 32, 64, dtype, seed=7)
    w[1::2] = w[0::2]
    config = GemvConfig(block_n=4, block_k=64)  # 8 programs; a pair's two rows in one program or in two
    for k in (8, 7):
        weights, ids = router_topk_triton(x, w, k, True, config)
        expected = two_kernels(x, w, k, True, config)[1]
        assert all(torch.equal(a, b) for a, b in zip((weights, ids), expected, strict=True))
        assert (ids[:, 0::2] % 2 == 0).all() and torch.equal(ids[:, 1::2], ids[:, 0 : k - 1 : 2] + 1)
        assert torch.equal(weights[:, 0 : k - 1 : 2], weights[:, 1::2])


@pytest.mark.parametrize("normalize", [True, False])
def test_all_logits_equal(normalize):
    x, _ = make_case(2, 1, 37, BF16)
    w = torch.zeros(37, 37, dtype=BF16)
    weights, ids = router_topk_triton(x, w, 5, normalize)
    assert torch.equal(ids, torch.arange(5).expand(2, 5))
    torch.testing.assert_close(weights, torch.full((2, 5), 1 / 5 if normalize else 1 / 37), rtol=1e-6, atol=0)


@pytest.fixture
def fresh_counters(monkeypatch):
    """An empty counter cache (restored afterwards) that starts at 8 counters."""
    cache = {}
    monkeypatch.setattr(module, "_COUNTERS", cache)
    monkeypatch.setattr(module, "_MIN_COUNTERS", 8)
    return cache


def test_repeated_calls_reset_the_counter(fresh_counters):
    """The same tensors called again with new x (what a CUDA-graph replay does), then other shapes: every call
    starts from the zero the previous one left, and one 8-counter tensor serves them all."""
    x, w = make_case(2, 37, 64, BF16, seed=1)
    config = GemvConfig(block_n=8, block_k=64)  # 5 programs, the last one ragged
    for seed in range(3):
        x.copy_(make_case(2, 37, 64, BF16, seed=10 + seed)[0])
        result = router_topk_triton(x, w, 8, True, config)
        assert all(torch.equal(a, b) for a, b in zip(result, two_kernels(x, w, 8, True, config)[1], strict=True))
        assert [(key[1], tensor.any().item()) for key, tensor in fresh_counters.items()] == [(8, False)]
    for batch, experts in [(4, 8), (1, 16)]:
        x, w = make_case(batch, experts, 37, FP32, seed=experts)
        result = router_topk_triton(x, w, 2, False)
        assert all(torch.equal(a, b) for a, b in zip(result, two_kernels(x, w, 2, False)[1], strict=True))
        assert not fresh_counters[(torch.device("cpu"), 8)].any()
    assert len(fresh_counters) == 1


def test_arrival_counters_are_shared_grow_by_powers_of_two_and_keep_the_old_ones():
    assert module._COUNTERS is counters_module.COUNTERS is decode_attention_module._COUNTERS
    cache = {}
    cpu = torch.device("cpu")
    first = arrival_counters(cpu, 3, cache=cache, min_count=4)
    assert first.dtype == torch.int32 and first.shape == (4,) and not first.any()
    assert arrival_counters(cpu, 4, cache=cache, min_count=4) is first
    grown = arrival_counters(cpu, 9, cache=cache, min_count=4)
    assert grown.shape == (16,) and sorted(size for _, size in cache) == [4, 16]
    assert arrival_counters(cpu, 1, cache=cache, min_count=4) is grown  # the largest serves every later call


def test_reference_and_dispatcher_on_cpu():
    x, w = make_case(6, 37, 64, BF16, seed=3)
    expected = route_reference(gemv_reference(x, w), 8, True)
    for result in (router_topk_reference(x, w, 8), router_topk(x, w, 8)):
        assert all(torch.equal(a, b) for a, b in zip(result, expected, strict=True))
    x64, w64 = x.double(), w.double()
    weights, ids = router_topk_reference(x64, w64, 3, False)
    assert weights.dtype == torch.float64 and torch.equal(ids, route_reference(x64 @ w64.T, 3, False)[1])


def test_bad_arguments_raise_value_error():
    x, w = make_case(2, 8, 16, BF16)
    bad_calls = {
        "x 1-D": lambda: router_topk_triton(x[0], w, 2),
        "w 3-D": lambda: router_topk_triton(x, w[None], 2),
        "H mismatch": lambda: router_topk_triton(x, w[:, :8], 2),
        "dtype mismatch": lambda: router_topk_triton(x, w.float(), 2),
        "k = 0": lambda: router_topk_triton(x, w, 0),
        "k > E": lambda: router_topk_triton(x, w, 9),
        "k bool": lambda: router_topk_triton(x, w, True),
        "k float": lambda: router_topk_triton(x, w, 2.0),
        "normalize not bool": lambda: router_topk_triton(x, w, 2, 1),
        "B = 5": lambda: router_topk_triton(torch.zeros(5, 16, dtype=BF16), w, 2),
        "B = 0": lambda: router_topk_triton(x[:0], w, 2),
        "float64": lambda: router_topk_triton(x.double(), w.double(), 2),
        "strided x": lambda: router_topk_triton(torch.zeros(2, 32, dtype=BF16)[:, ::2], w, 2),
        "strided w": lambda: router_topk_triton(x, torch.zeros(8, 32, dtype=BF16)[:, ::2], 2),
        "tl.dot config": lambda: router_topk_triton(x, w, 2, config=GemvConfig(block_n=8, use_dot=True)),
        "logits shape": lambda: router_topk_triton(x, w, 2, logits=torch.empty(2, 9, dtype=BF16)),
        "logits dtype": lambda: router_topk_triton(x, w, 2, logits=torch.empty(2, 8)),
        "dispatcher k": lambda: router_topk(x, w, 9),
        "reference k": lambda: router_topk_reference(x, w, 0),
    }
    for name, call in bad_calls.items():
        with pytest.raises(ValueError):
            call()
            pytest.fail(f"{name} did not raise")
