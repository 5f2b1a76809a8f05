"""Flash-decoding attention at Qwen3-30B-A3B shapes on the GPU (run on the device: pytest -m gpu tests/kernels)."""

import dataclasses

import pytest
import torch

from warpcode.bench.timing import time_per_call
from warpcode.kernels import counters as counters_module
from warpcode.kernels.attention_splits import attention_settings
from warpcode.kernels.decode_attention import decode_attention, decode_attention_reference, decode_attention_triton

pytestmark = pytest.mark.gpu

Q_HEADS, KV_HEADS, HEAD_DIM = 32, 4, 128  # Qwen3-30B-A3B: GQA groups of 8
SCALE = HEAD_DIM**-0.5
BLOCK_SIZE = 64  # slots per block of the paged cache


@pytest.fixture(autouse=True, params=[True, False], ids=["two-kernel", "one-launch"])
def separate_merge(request, monkeypatch):
    """Every test on both merge paths: the merge kernel over (row, query head), or the last program of each group."""
    monkeypatch.setitem(LAUNCH, "merge_kernel_min_splits", 2 if request.param else 10**9)
    return request.param


# The settings this test's fixture changes from the device's, passed to every launch explicitly.
LAUNCH = {}


def attend(*args, **kwargs):
    return decode_attention_triton(*args, settings=dataclasses.replace(attention_settings(), **LAUNCH), **kwargs)


def dispatch(*args, **kwargs):
    return decode_attention(*args, settings=dataclasses.replace(attention_settings(), **LAUNCH), **kwargs)


def make_case(batch, slots, dtype=torch.bfloat16, extra_rows=3, seed=0):
    """Random lengths per row (row 0 full, row 1 a single key), NaN past every length and in the rows past B."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, Q_HEADS, HEAD_DIM, generator=generator)
    k_cache = torch.randn(batch + extra_rows, KV_HEADS, slots, HEAD_DIM, generator=generator)
    v_cache = torch.randn(batch + extra_rows, KV_HEADS, slots, HEAD_DIM, generator=generator)
    seq_lens = torch.randint(1, slots + 1, (batch,), generator=generator, dtype=torch.int32)
    seq_lens[0] = slots
    if batch > 1:
        seq_lens[1] = 1
    past_end = torch.arange(slots) >= seq_lens[:, None]
    for cache in (k_cache, v_cache):
        cache[:batch].masked_fill_(past_end[:, None, :, None], float("nan"))
        cache[batch:] = float("nan")
    return q.to("cuda", dtype), k_cache.to("cuda", dtype), v_cache.to("cuda", dtype), seq_lens.cuda()


def float64_reference(q, k_cache, v_cache, seq_lens):
    return decode_attention_reference(q.double(), k_cache.double(), v_cache.double(), seq_lens, SCALE)


def assert_matches(out, reference, atol=2e-2, rtol=2e-2):
    assert not out.isnan().any(), "unwritten or NaN outputs"
    torch.testing.assert_close(out.double(), reference, atol=atol, rtol=rtol)
    relative_error = ((out.double() - reference).norm() / reference.norm()).item()
    assert relative_error < 1e-2, relative_error


@pytest.mark.parametrize("slots", [512, 8192])
@pytest.mark.parametrize("batch", [1, 8, 32])
def test_matches_float64_at_qwen3_shapes(batch, slots):
    q, k_cache, v_cache, seq_lens = make_case(batch, slots, seed=batch + slots)
    out = attend(q, k_cache, v_cache, seq_lens, SCALE, out=torch.full_like(q, float("nan")))
    assert out.dtype == torch.bfloat16
    assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens))
    torch.testing.assert_close(dispatch(q, k_cache, v_cache, seq_lens, SCALE), out, atol=0, rtol=0)


@pytest.mark.parametrize("slots", [512, 8192])
@pytest.mark.parametrize("batch", [1, 8, 32])
def test_paged_cache_matches_the_static_one_at_qwen3_shapes(batch, slots, block_table, paged_pool):
    """The same keys in 64-slot blocks of a pool, in random order, NaN in the blocks no row owns and garbage in the
    table past each row's blocks (-1, the pool size, the int32 extremes: an unmasked read would fault). The
    capacity is S, so the launch is the static one's."""
    q, k_cache, v_cache, seq_lens = make_case(batch, slots, seed=batch + slots + 1)
    lengths = seq_lens.tolist()
    table, num_blocks = block_table(lengths, BLOCK_SIZE, slots // BLOCK_SIZE, seed=batch, device="cuda")
    k_pool, v_pool = (paged_pool(c, table, lengths, BLOCK_SIZE, num_blocks, float("nan")) for c in (k_cache, v_cache))
    out = torch.full_like(q, float("nan"))
    paged = attend(q, k_pool, v_pool, seq_lens, SCALE, out=out, block_tables=table)
    assert_matches(paged, float64_reference(q, k_cache, v_cache, seq_lens))
    static = attend(q, k_cache, v_cache, seq_lens, SCALE)
    torch.testing.assert_close(paged, static, atol=1e-2, rtol=1e-2)
    dispatched = dispatch(q, k_pool, v_pool, seq_lens, SCALE, block_tables=table)
    torch.testing.assert_close(dispatched, paged, atol=0, rtol=0)


@pytest.mark.parametrize("num_splits", [1, 7, 200])
def test_explicit_splits_including_empty_ones(num_splits):
    """200 splits of an 8192-slot cache leave most of them empty at these lengths."""
    q, k_cache, v_cache, seq_lens = make_case(8, 8192, seed=num_splits)
    out = attend(q, k_cache, v_cache, seq_lens, SCALE, num_splits=num_splits)
    assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_fp32_and_fp16(dtype):
    """fp32 takes the IEEE (not TF32) tl.dot path; fp16 the tensor-core one."""
    q, k_cache, v_cache, seq_lens = make_case(8, 512, dtype=dtype)
    out = attend(q, k_cache, v_cache, seq_lens, SCALE)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-3
    assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens), atol=tolerance, rtol=tolerance)


def assert_counters_reset():
    """Every call leaves the arrival counters at zero (its last program per group resets its own)."""
    torch.cuda.synchronize()
    for key, counters in counters_module.COUNTERS.items():
        assert not counters.any(), (key, counters.nonzero())


@pytest.mark.parametrize("batch", [1, 8])
def test_cuda_graph_replays_with_new_lengths(batch):
    """One capture holding two calls (two layers launched back to back with PDL, sharing the counters on the
    one-launch path), replayed three rounds of four new lengths (and new queries) written into the captured tensors
    in place."""
    slots = 8192
    layers = [make_case(batch, slots, extra_rows=0, seed=batch + layer) for layer in range(2)]
    seq_lens = layers[0][3]
    for _, k_cache, v_cache, _ in layers:
        # Real values everywhere: each replay's lengths expose a different prefix of every row.
        k_cache.copy_(torch.randn_like(k_cache))
        v_cache.copy_(torch.randn_like(v_cache))
    outs = [torch.empty_like(q) for q, *_ in layers]

    def step():
        for (q, k_cache, v_cache, _), out in zip(layers, outs, strict=True):
            attend(q, k_cache, v_cache, seq_lens, SCALE, out=out)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # compile (and allocate the counters) outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    generator = torch.Generator().manual_seed(batch)
    for _ in range(3):
        new_lengths = [
            torch.ones(batch, dtype=torch.int32),
            torch.full((batch,), slots, dtype=torch.int32),
            torch.randint(1, 200, (batch,), generator=generator, dtype=torch.int32),
            torch.randint(1, slots + 1, (batch,), generator=generator, dtype=torch.int32),
        ]
        for lengths in new_lengths:
            seq_lens.copy_(lengths)
            for (q, *_), out in zip(layers, outs, strict=True):
                q.copy_(torch.randn_like(q))
                out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            for (q, k_cache, v_cache, _), out in zip(layers, outs, strict=True):
                assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens))
            assert_counters_reset()


def test_back_to_back_calls_with_other_batches_and_splits():
    """Many eager calls in a row, no synchronisation between them, over batches (so counter ranges) and split counts
    from 1 to 200: each result is checked afterwards, and the counters end at zero."""
    runs = []
    for index, (batch, num_splits) in enumerate([(8, 200), (1, None), (32, 7), (1, 1), (8, 64), (32, None), (1, 200)]):
        q, k_cache, v_cache, seq_lens = make_case(batch, 8192 if batch < 32 else 512, seed=100 + index)
        out = attend(q, k_cache, v_cache, seq_lens, SCALE, num_splits=num_splits)
        runs.append((out, q, k_cache, v_cache, seq_lens))
    for out, *case in runs:
        assert_matches(out, float64_reference(*case))
    assert_counters_reset()


@pytest.mark.slow
@pytest.mark.parametrize("paged", [False, True], ids=["static", "paged"])
def test_long_context_reads_the_cache_at_high_bandwidth(separate_merge, paged, block_table, paged_pool):
    """B = 1, S = 8192: 16.8 MB of K and V per layer, rotated over 8 layers so that HBM, not L2, serves it; static,
    or paged in 64-slot blocks in random order. The target is > 2 TB/s; the assertion only catches a collapse (too
    few programs, serialised splits)."""
    batch, slots = 1, 8192
    argument_sets = []
    for layer in range(8):
        # make_case fills row 0 to S, so every slot is read and none holds NaN.
        q, k_cache, v_cache, seq_lens = make_case(batch, slots, extra_rows=0, seed=layer)
        table = None
        if paged:
            table, blocks = block_table([slots], BLOCK_SIZE, slots // BLOCK_SIZE, layer, spare_blocks=0, device="cuda")
            k_cache, v_cache = (paged_pool(c, table, [slots], BLOCK_SIZE, blocks, 0.0) for c in (k_cache, v_cache))
        argument_sets.append((q, k_cache, v_cache, seq_lens, SCALE, table))

    def call(q, k_cache, v_cache, seq_lens, scale, table):
        return attend(q, k_cache, v_cache, seq_lens, scale, block_tables=table)

    seconds, mode = time_per_call(call, argument_sets)
    cache_bytes = 2 * batch * KV_HEADS * slots * HEAD_DIM * 2
    bandwidth = cache_bytes / seconds
    path = ("two-kernel" if separate_merge else "one-launch") + (", paged" if paged else "")
    print(
        f"decode attention ({path}) B=1 S=8192: {seconds * 1e6:.1f} us per layer ({mode}), {bandwidth / 1e12:.2f} TB/s"
    )
    assert bandwidth > 1e12, f"{bandwidth / 1e12:.2f} TB/s"
