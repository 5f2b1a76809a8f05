"""add_rmsnorm, qk_norm_rope_cache, route's normed row and the greedy finish on the GPU at
Qwen3-30B-A3B shapes, and replayed from CUDA graphs after their inputs change in place (run on the device:
pytest -m gpu tests/kernels)."""

import pytest
import torch

from warpcode.kernels.greedy import greedy_finish_triton
from warpcode.kernels.moe_reference import route_reference
from warpcode.kernels.norm import add_rmsnorm, add_rmsnorm_reference, add_rmsnorm_triton
from warpcode.kernels.rope_cache import qk_norm_rope_cache, qk_norm_rope_cache_reference, qk_norm_rope_cache_triton
from warpcode.kernels.route import prefetched_rows, route_settings, route_triton
from warpcode.model_runtime.config import RopeScaling
from warpcode.model_runtime.layers import rope_frequencies

pytestmark = pytest.mark.gpu

EPS = 1e-6
SENTINEL = 77.0
HEADS, KV_HEADS, HEAD_DIM, SLOTS = 32, 4, 128, 4096
CUDA = torch.device("cuda")


def generator(seed: int) -> torch.Generator:
    return torch.Generator(device=CUDA).manual_seed(seed)


def norm_inputs(rows, hidden, seed=0):
    g = generator(seed)
    x = (torch.randn(rows, hidden, generator=g, device=CUDA) * 3).bfloat16()
    weight = (1 + torch.randn(hidden, generator=g, device=CUDA) / 4).bfloat16()
    residual = torch.randn(rows, hidden, generator=g, device=CUDA).bfloat16()
    return x, weight, residual


@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("rows", [1, 8, 32])
@pytest.mark.parametrize("hidden", [2048, 4096])
def test_add_rmsnorm_at_model_shapes(hidden, rows, with_residual, rmsnorm_within_one_ulp_flips):
    x, weight, residual = norm_inputs(rows, hidden)
    residual = residual if with_residual else None
    normed, summed = add_rmsnorm_triton(x, weight, EPS, residual)
    assert torch.equal(summed, x if residual is None else x + residual)
    rmsnorm_within_one_ulp_flips(normed, x, weight, residual, EPS, max_fraction=1e-3)
    double = None if residual is None else residual.double()
    expected, _ = add_rmsnorm_reference(x.double(), weight.double(), EPS, double)
    torch.testing.assert_close(normed.double(), expected, rtol=1e-2, atol=1e-2)
    assert torch.equal(add_rmsnorm(x, weight, EPS, residual)[0], normed)


def rope_inputs(batch, dtype, with_norm, index_dtype=torch.int64, seed=0):
    g = generator(seed + batch)
    qkv = (torch.randn(batch, (HEADS + 2 * KV_HEADS) * HEAD_DIM, generator=g, device=CUDA) * 2).to(dtype)
    norms = [(1 + torch.randn(HEAD_DIM, generator=g, device=CUDA) / 4).to(dtype) if with_norm else None for _ in "qk"]
    inv_freq, scaling = rope_frequencies(
        HEAD_DIM, 1e6, RopeScaling("yarn", 4.0, original_max_position_embeddings=32768)
    )  # attention_scaling 1.139; positions up to 131071 reach the slow range reduction of sin/cos
    positions = torch.randint(0, 131072, (batch,), generator=g, device=CUDA).to(index_dtype)
    slots = torch.randperm(SLOTS, generator=g, device=CUDA)[:batch].to(index_dtype)
    k_cache = torch.full((batch + 2, KV_HEADS, SLOTS, HEAD_DIM), SENTINEL, dtype=dtype, device=CUDA)
    return [qkv, HEADS, KV_HEADS, HEAD_DIM, *norms, EPS, inv_freq.to(CUDA), scaling, positions, k_cache,
            k_cache.clone(), slots]  # fmt: skip


def float64_expected(args):
    """(q, k, v) [B, heads, D] in float64: the reference writing into one-slot caches at slot 0."""
    args = list(args)
    for i in (0, 4, 5):
        args[i] = None if args[i] is None else args[i].double()
    batch = args[0].shape[0]
    args[10] = torch.zeros(batch, KV_HEADS, 1, HEAD_DIM, dtype=torch.float64, device=CUDA)
    args[11] = torch.zeros_like(args[10])
    args[12] = torch.zeros(batch, dtype=torch.int64, device=CUDA)
    q = qk_norm_rope_cache_reference(*args)
    return q, args[10][:, :, 0], args[11][:, :, 0]


def check_written(args, q, tolerance):
    expected_q, expected_k, expected_v = float64_expected(args)
    torch.testing.assert_close(q.double(), expected_q, **tolerance)
    k_cache, v_cache, slots = args[10], args[11], args[12]
    rows = torch.arange(len(slots), device=CUDA)
    torch.testing.assert_close(k_cache[rows, :, slots].double(), expected_k, **tolerance)
    assert torch.equal(v_cache[rows, :, slots].double(), expected_v)
    for cache in (k_cache, v_cache):
        untouched = cache.clone()
        untouched[rows, :, slots] = SENTINEL
        assert (untouched == SENTINEL).all(), "a slot other than slots[b] was written"


@pytest.mark.parametrize("with_norm", [True, False])
@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.bfloat16, {"rtol": 1e-2, "atol": 1e-2}), (torch.float32, {"rtol": 1e-5, "atol": 1e-5})],
    ids=["bf16", "fp32"],
)
@pytest.mark.parametrize("batch", [1, 8, 32])
def test_qk_norm_rope_cache_at_model_shapes(batch, dtype, tolerance, with_norm):
    args = rope_inputs(batch, dtype, with_norm)
    q = qk_norm_rope_cache_triton(*args)
    check_written(args, q, tolerance)
    again = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    again[10].fill_(SENTINEL)
    again[11].fill_(SENTINEL)
    assert torch.equal(qk_norm_rope_cache(*again), q)  # the dispatcher takes the kernel on CUDA
    assert torch.equal(again[10], args[10]) and torch.equal(again[11], args[11])


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_qk_norm_rope_cache_paged_at_model_shapes(batch, block_table, paged_pool):
    """64-slot blocks of a pool in random order, garbage in the table past each row's blocks: the paged writes are
    the static ones scattered through the table, bit for bit, and every other element of the pool keeps SENTINEL."""
    args = rope_inputs(batch, torch.bfloat16, True)
    q = qk_norm_rope_cache_triton(*args)
    lengths = (args[12] + 1).tolist()  # each row owns the blocks through its slot
    table, num_blocks = block_table(lengths, 64, SLOTS // 64, seed=batch, device=CUDA)
    paged = list(args)
    pool_shape = (num_blocks, KV_HEADS, 64, HEAD_DIM)
    paged[10], paged[11] = (torch.full(pool_shape, SENTINEL, dtype=torch.bfloat16, device=CUDA) for _ in "kv")
    assert torch.equal(qk_norm_rope_cache_triton(*paged, block_tables=table), q)
    for pool, cache in zip(paged[10:12], args[10:12], strict=True):
        assert torch.equal(pool, paged_pool(cache, table, lengths, 64, num_blocks, SENTINEL))


def capture(call):
    """A CUDA graph of call(), warmed up (compiled) on a side stream first."""
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
        with torch.cuda.graph(graph, stream=stream):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_qk_norm_rope_cache_replays_from_a_cuda_graph_with_new_positions_and_slots(index_dtype):
    args = rope_inputs(8, torch.bfloat16, True, index_dtype)
    out = torch.empty(8, HEADS, HEAD_DIM, dtype=torch.bfloat16, device=CUDA)
    graph = capture(lambda: qk_norm_rope_cache_triton(*args, out=out))
    new = rope_inputs(8, torch.bfloat16, True, index_dtype, seed=1)
    assert not torch.equal(new[9], args[9]) and not torch.equal(new[12], args[12])
    old_slots = args[12].clone()
    for i in (0, 9, 12):  # qkv, positions and slots change in place; the caches are reset
        args[i].copy_(new[i])
    for cache in args[10:12]:
        cache.fill_(SENTINEL)
    graph.replay()
    torch.cuda.synchronize()
    eager = qk_norm_rope_cache_triton(*[new[0], *args[1:9], new[9], *new[10:12], new[12]])
    assert torch.equal(out, eager)
    assert torch.equal(args[10], new[10]) and torch.equal(args[11], new[11])
    rows = torch.arange(8, device=CUDA)
    moved = old_slots != args[12]
    assert (args[10][rows, :, old_slots][moved] == SENTINEL).all()  # the slots of the capture were not written
    check_written(args, out, {"rtol": 1e-2, "atol": 1e-2})


def test_add_rmsnorm_replays_from_a_cuda_graph():
    x, weight, residual = norm_inputs(8, 2048)
    normed, summed = torch.empty_like(x), torch.empty_like(x)
    graph = capture(lambda: add_rmsnorm_triton(x, weight, EPS, residual, out=normed, summed_out=summed))
    new_x, _, new_residual = norm_inputs(8, 2048, seed=1)
    x.copy_(new_x)
    residual.copy_(new_residual)
    graph.replay()
    torch.cuda.synchronize()
    expected_normed, expected_summed = add_rmsnorm_triton(new_x, weight, EPS, new_residual)
    assert torch.equal(normed, expected_normed) and torch.equal(summed, expected_summed)


def test_route_stores_the_normed_row_at_model_shapes(rmsnorm_within_one_ulp_flips):
    """The folded router's route call (kernels/o_proj_router.py): 128 experts, top 8, h of 2048."""
    h, weight, _ = norm_inputs(1, 2048)
    logits = torch.randn(1, 128, generator=generator(4), device=CUDA)
    normed = torch.empty_like(h)
    weights, ids = route_triton(logits, 8, True, rms_of=h, eps=EPS, norm_weight=weight, normed_out=normed)
    expected_weights, expected_ids = route_reference(logits, 8, True, rms_of=h, eps=EPS)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights, expected_weights, rtol=1e-5, atol=1e-6)
    rmsnorm_within_one_ulp_flips(normed, h, weight, None, EPS, max_fraction=1e-3)


@pytest.mark.parametrize(("experts", "top_k", "intermediate", "tokens"), [(128, 8, 768, 1), (60, 4, 1408, 3)])
def test_route_prefetch_changes_no_result(experts, top_k, intermediate, tokens):
    """The prefetch programs only hint L2: weights, ids and the normed row are those of the route without them, for
    NaN logits too; misaligned weights get no prefetch."""
    w13 = torch.randn(experts, 2 * intermediate, 2048, generator=generator(8), device=CUDA).bfloat16()
    assert prefetched_rows(w13) == min(route_settings().prefetch_rows, intermediate)
    assert prefetched_rows(w13[:, :, 1:]) == 0
    h, weight, _ = norm_inputs(tokens, 2048)
    logits = torch.randn(tokens, experts, generator=generator(9), device=CUDA)
    logits[-1, :3] = float("nan")
    unfolded_ids = route_triton(logits, top_k, True)[1]
    assert torch.equal(route_triton(logits, top_k, True, prefetch=w13[:, :, 1:])[1], unfolded_ids)
    for folded in ({}, {"rms_of": h, "eps": EPS, "norm_weight": weight}):
        plain_normed, hinted_normed = torch.empty_like(h), torch.empty_like(h)
        normed = {"normed_out": plain_normed} if folded else {}
        plain = route_triton(logits, top_k, True, **folded, **normed)
        normed = {"normed_out": hinted_normed} if folded else {}
        hinted = route_triton(logits, top_k, True, **folded, **normed, prefetch=w13)
        assert torch.equal(plain[1], hinted[1])
        torch.testing.assert_close(plain[0], hinted[0], rtol=0, atol=0, equal_nan=True)
        if folded:
            assert torch.equal(plain_normed, hinted_normed)


@pytest.mark.parametrize("rows", [1, 8, 32])
def test_greedy_finish_at_model_shapes_and_from_a_cuda_graph(rows):
    """151,936 logits a row (75 slices); replayed after the logits change."""
    logits = torch.randn(rows, 151936, generator=generator(5), device=CUDA).bfloat16()
    tokens = torch.zeros(rows, dtype=torch.long, device=CUDA)
    steps = torch.zeros(rows, dtype=torch.long, device=CUDA)
    seq_lens = torch.arange(rows, dtype=torch.int32, device=CUDA)
    greedy_finish_triton(logits, tokens, (steps, seq_lens))
    torch.cuda.synchronize()
    assert torch.equal(tokens, logits.argmax(-1)) and steps.tolist() == [1] * rows
    assert torch.equal(seq_lens, torch.arange(rows, dtype=torch.int32, device=CUDA) + 1)
    graph = capture(lambda: greedy_finish_triton(logits, tokens, (steps, seq_lens)))  # its warm-up: one more step
    lens_before, steps_before = seq_lens.clone(), steps.clone()
    logits.copy_(torch.randn(rows, 151936, generator=generator(7), device=CUDA))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(tokens, logits.argmax(-1)) and torch.equal(steps, steps_before + 1)
    assert torch.equal(seq_lens, lens_before + 1)
