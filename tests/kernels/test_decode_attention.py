"""Flash-decoding attention against the float64 reference (CPU: TRITON_INTERPRET=1, small odd shapes)."""

import pytest
import torch
import torch.nn.functional as F

from warpcode.kernels import counters as counters_module
from warpcode.kernels.attention_splits import DecodeAttentionSettings, one_tile_block
from warpcode.kernels.decode_attention import decode_attention, decode_attention_reference, decode_attention_triton

# (B, Hq, Hkv, D, S): GQA groups of 4, 4, 2 and 1; head dims below, at and above 16; S below, across and past
# one 64-key tile.
SHAPES = [(1, 4, 1, 16, 37), (3, 8, 2, 32, 70), (2, 6, 3, 16, 129), (1, 2, 2, 64, 5)]
TOLERANCE = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])


def make_case(
    batch, q_heads, kv_heads, head_dim, slots, dtype, extra_rows=1, garbage=float("nan"), seed=0, lengths=None
):
    """Caches with `extra_rows` rows past B and `garbage` in every slot past each row's length."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, q_heads, head_dim, generator=generator).to(dtype)
    k_cache = torch.randn(batch + extra_rows, kv_heads, slots, head_dim, generator=generator).to(dtype)
    v_cache = torch.randn(batch + extra_rows, kv_heads, slots, head_dim, generator=generator).to(dtype)
    if lengths is None:  # lengths 1, S and values off the tile grid, in turn over the rows
        choices = [1, slots, max(1, slots - 3), max(1, (slots * 2) // 3 + 1)]
        lengths = [choices[(b + seed) % len(choices)] for b in range(batch)]
    seq_lens = torch.tensor(lengths, dtype=torch.int32)
    past_end = torch.arange(slots) >= seq_lens[:, None]
    for cache in (k_cache, v_cache):
        cache[:batch].masked_fill_(past_end[:, None, :, None], garbage)
        cache[batch:] = garbage
    return q, k_cache, v_cache, seq_lens, head_dim**-0.5


MERGE_MIN_SPLITS = DecodeAttentionSettings().merge_kernel_min_splits
# The launch settings and SM count this test's fixtures choose (below), passed to every launch explicitly.
LAUNCH = {}


def attend(*args, **kwargs):
    """decode_attention_triton with the fixtures' settings (the heuristic defaults for the rest)."""
    settings = DecodeAttentionSettings(**{name: value for name, value in LAUNCH.items() if name != "sms"})
    return decode_attention_triton(*args, settings=settings, sms=LAUNCH.get("sms"), **kwargs)


def float64_reference(q, k_cache, v_cache, seq_lens, scale):
    return decode_attention_reference(q.double(), k_cache.double(), v_cache.double(), seq_lens, scale)


def assert_matches(out, reference, dtype):
    assert out.dtype == dtype and out.shape == reference.shape
    assert not out.isnan().any()
    torch.testing.assert_close(out.double(), reference, **TOLERANCE[dtype])


@pytest.fixture
def small_tiles(monkeypatch):
    """16-key tiles and one split per merge step: several iterations of both loops at these small S."""
    monkeypatch.setitem(LAUNCH, "block_n", 16)
    monkeypatch.setitem(LAUNCH, "merge_elements", 1)


@pytest.fixture(params=[True, False], ids=["two-kernel", "one-launch"])
def separate_merge(request, monkeypatch):
    """Both merge paths: the merge kernel over (row, query head), or the last program of each group merging."""
    monkeypatch.setitem(LAUNCH, "merge_kernel_min_splits", 2 if request.param else 10**9)
    return request.param


@pytest.fixture
def one_launch(monkeypatch):
    monkeypatch.setitem(LAUNCH, "merge_kernel_min_splits", 10**9)


@DTYPES
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_float64_reference(shape, dtype):
    """Default tiles and splits; NaN past every length and in the cache rows past B."""
    case = make_case(*shape, dtype, seed=sum(shape))
    assert_matches(attend(*case), float64_reference(*case), dtype)


@pytest.mark.parametrize(("num_splits", "dtype"), [(2, torch.bfloat16), (5, torch.float32)], ids=["2-bf16", "5-fp32"])
def test_small_tiles_and_explicit_splits(small_tiles, separate_merge, num_splits, dtype):
    case = make_case(3, 8, 2, 32, 70, dtype, seed=num_splits)
    assert_matches(attend(*case, num_splits=num_splits), float64_reference(*case), dtype)


def test_huge_values_past_the_lengths_are_ignored(small_tiles, separate_merge):
    """Finite garbage would win the softmax if any masked slot leaked into it."""
    case = make_case(2, 6, 3, 16, 129, torch.float32, extra_rows=2, garbage=1e30)
    assert_matches(attend(*case, num_splits=3), float64_reference(*case), torch.float32)


@pytest.mark.parametrize("num_splits", [4, 17])
def test_more_splits_than_chunks(separate_merge, num_splits):
    """S = 37 is one 64-key tile: every split but the first is empty (and 17 pads the combine's vector to 32)."""
    case = make_case(2, 4, 1, 16, 37, torch.float32)
    assert_matches(attend(*case, num_splits=num_splits), float64_reference(*case), torch.float32)


@pytest.fixture
def fresh_counters(monkeypatch):
    """An empty counter cache (restored afterwards) that starts at 8 counters, so that growing is exercised."""
    counters = {}
    monkeypatch.setattr(counters_module, "COUNTERS", counters)
    monkeypatch.setattr(counters_module, "MIN_COUNTERS", 8)
    return counters


def assert_counters_reset(counters, separate_merge=False):
    """The one-launch path leaves its counters at zero; the two-kernel path allocates none."""
    if separate_merge:
        assert not counters, "the two-kernel path allocated arrival counters"
        return
    assert counters, "no counter was allocated"
    for key, tensor in counters.items():
        assert tensor.dtype == torch.int32 and not tensor.any(), (key, tensor)


@pytest.mark.slow
@pytest.mark.parametrize("merge_elements", [1, 128], ids=["1-split-steps", "4-split-steps"])
def test_many_splits_most_of_them_empty(small_tiles, separate_merge, fresh_counters, monkeypatch, merge_elements):
    """12 splits of 16-key tiles over S = 129: rows of length 1, 129, 126 and 87 use 1, 9, 8 and 6 of them, so the
    program that arrives last and merges is often one of an empty split, and the merge kernel's last step of 4
    splits (D = 32) is partly masked; the counters end at zero."""
    monkeypatch.setitem(LAUNCH, "merge_elements", merge_elements)
    case = make_case(4, 8, 2, 32, 129, torch.float32, seed=0)
    assert case[3].tolist() == [1, 129, 126, 87]
    assert_matches(attend(*case, num_splits=12), float64_reference(*case), torch.float32)
    assert_counters_reset(fresh_counters, separate_merge)


@pytest.mark.slow
def test_repeated_calls_with_new_lengths(small_tiles, separate_merge, fresh_counters):
    """The same tensors called three times with new lengths (what a CUDA-graph replay does): each call recomputes
    the splits from the lengths it reads, and starts from the counters the previous one left at zero."""
    q, k_cache, v_cache, seq_lens, scale = make_case(3, 8, 2, 32, 70, torch.bfloat16, garbage=0.0)
    for lengths in ([70, 1, 33], [5, 70, 69], [17, 2, 1]):
        seq_lens.copy_(torch.tensor(lengths, dtype=torch.int32))
        out = attend(q, k_cache, v_cache, seq_lens, scale, num_splits=4)
        assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens, scale), torch.bfloat16)
        assert_counters_reset(fresh_counters, separate_merge)
    assert len(fresh_counters) == (0 if separate_merge else 1)


@pytest.mark.slow
def test_calls_with_other_batches_grow_the_counters_and_keep_the_old_ones(small_tiles, one_launch, fresh_counters):
    """B * Hkv = 2, then 10 (past the 8 first allocated: a 16-counter tensor joins the cache, the 8-counter one stays
    alive for graphs captured with it), then 2 again, served by the larger tensor."""
    for batch, seed in [(1, 1), (5, 2), (1, 3)]:
        case = make_case(batch, 8, 2, 32, 70, torch.float32, seed=seed)
        assert_matches(attend(*case, num_splits=3), float64_reference(*case), torch.float32)
        assert_counters_reset(fresh_counters)
    assert sorted(size for _, size in fresh_counters) == [8, 16]


def test_one_split_writes_out_without_workspaces_or_counters(small_tiles, separate_merge, fresh_counters):
    case = make_case(3, 8, 2, 32, 70, torch.float32, seed=4)
    assert_matches(attend(*case, num_splits=1), float64_reference(*case), torch.float32)
    assert not fresh_counters


@pytest.mark.parametrize("num_splits", [1, 3])
def test_writes_every_element_of_a_strided_out_buffer_and_reads_strided_caches(separate_merge, num_splits):
    batch, q_heads, kv_heads, head_dim, slots = 3, 8, 2, 32, 70
    q, k_cache, v_cache, seq_lens, scale = make_case(batch, q_heads, kv_heads, head_dim, slots, torch.bfloat16)
    # [Bc, S, Hkv, D] storage viewed as [Bc, Hkv, S, D], and q and out as slices of wider buffers.
    k_strided = k_cache.transpose(1, 2).contiguous().transpose(1, 2)
    v_strided = v_cache.transpose(1, 2).contiguous().transpose(1, 2)
    q_strided = torch.cat([q, torch.zeros_like(q)], dim=1)[:, :q_heads]
    storage = torch.full((batch, q_heads + 1, head_dim), float("nan"), dtype=torch.bfloat16)
    out = storage[:, 1:]
    result = attend(q_strided, k_strided, v_strided, seq_lens, scale, num_splits, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert storage[:, 0].isnan().all(), "wrote outside out"
    assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens, scale), torch.bfloat16)


def test_zero_length_rows_give_zeros_not_nan(separate_merge):
    """Outside the contract (lengths >= 1), but padded batch rows of a captured graph may carry 0."""
    q, k_cache, v_cache, seq_lens, scale = make_case(3, 8, 2, 32, 70, torch.float32)
    seq_lens[1] = 0
    out = attend(q, k_cache, v_cache, seq_lens, scale, num_splits=2)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    keep = [0, 2]
    expected = float64_reference(q[keep], k_cache[keep], v_cache[keep], seq_lens[keep], scale)
    assert_matches(out[keep], expected, torch.float32)


def test_fp16():
    case = make_case(2, 6, 3, 16, 129, torch.float16)
    torch.testing.assert_close(attend(*case).double(), float64_reference(*case), atol=2e-3, rtol=2e-3)


def test_dispatcher_uses_the_reference_off_the_gpu():
    case = make_case(3, 8, 2, 32, 70, torch.float32)
    torch.testing.assert_close(decode_attention(*case), decode_attention_reference(*case), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reference_matches_sdpa(dtype):
    """The reference checked independently: SDPA with GQA broadcasting and an explicit boolean mask."""
    batch, q_heads, kv_heads, head_dim, slots = 3, 8, 2, 32, 70
    q, k_cache, v_cache, seq_lens, scale = make_case(batch, q_heads, kv_heads, head_dim, slots, dtype, garbage=0.0)
    mask = torch.arange(slots) < seq_lens[:, None]  # [B, S]: True attends
    expected = F.scaled_dot_product_attention(
        q[:, :, None, :],
        k_cache[:batch],
        v_cache[:batch],
        attn_mask=mask[:, None, None, :],
        scale=scale,
        enable_gqa=True,
    )[:, :, 0]
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(decode_attention_reference(q, k_cache, v_cache, seq_lens, scale), expected, **tolerance)


@pytest.fixture
def one_tile_splits(monkeypatch):
    """One-tile splits in the interpreter: tiles of 16 or 32 keys, 24 SMs."""
    monkeypatch.setitem(LAUNCH, "one_tile_blocks", (16, 32))
    monkeypatch.setitem(LAUNCH, "sms", 24)


@DTYPES
@pytest.mark.parametrize(
    ("lengths", "slots", "block_n"), [([64, 47, 1], 70, 32), ([32], 37, 16), ([129, 126, 80, 1], 129, None)]
)
def test_one_tile_splits_match_float64(one_tile_splits, separate_merge, fresh_counters, lengths, slots, block_n, dtype):
    """3 rows x 2 KV heads of 70 slots: 5 tiles of 16 keys would need 30 programs, 3 tiles of 32 fit, and each row's
    newest key (re-read after the wait) ends a tile, sits inside one and starts one; 1 row of 37 slots in 3 tiles
    of 16, the newest key ending the second; 4 rows of 129 slots fit in neither (streaming splits)."""
    q, k_cache, v_cache, seq_lens, scale = make_case(len(lengths), 8, 2, 32, slots, dtype, seed=slots)
    assert (torch.tensor(lengths) <= seq_lens).all()  # shorter rows: slots past them hold finite keys, not NaN
    seq_lens.copy_(torch.tensor(lengths, dtype=torch.int32))
    assert one_tile_block(len(lengths), 2, slots, 24, DecodeAttentionSettings(one_tile_blocks=(16, 32))) == block_n
    case = q, k_cache, v_cache, seq_lens, scale
    assert_matches(attend(*case), float64_reference(*case), dtype)
    if block_n is not None and not separate_merge:
        assert_counters_reset(fresh_counters)


def good_args():
    return make_case(2, 4, 2, 16, 9, torch.float32)


BAD_INPUTS = {
    "q rank": lambda q, k, v, lens, scale: (q[0], k, v, lens, scale),
    "cache rank": lambda q, k, v, lens, scale: (q, k[0], v[0], lens, scale),
    "v shape": lambda q, k, v, lens, scale: (q, k, v[:, :, :4], lens, scale),
    "heads not a multiple": lambda q, k, v, lens, scale: (q[:, :3], k, v, lens, scale),
    "head dim": lambda q, k, v, lens, scale: (q[..., :8], k, v, lens, scale),
    "cache rows < B": lambda q, k, v, lens, scale: (q, k[:1], v[:1], lens, scale),
    "q dtype": lambda q, k, v, lens, scale: (q.double(), k, v, lens, scale),
    "k dtype": lambda q, k, v, lens, scale: (q, k.bfloat16(), v, lens, scale),
    "v dtype": lambda q, k, v, lens, scale: (q, k, v.half(), lens, scale),
    "seq_lens dtype": lambda q, k, v, lens, scale: (q, k, v, lens.long(), scale),
    "seq_lens shape": lambda q, k, v, lens, scale: (q, k, v, lens[:1], scale),
    "q not contiguous in D": lambda q, k, v, lens, scale: (
        q.transpose(1, 2).contiguous().transpose(1, 2),
        k,
        v,
        lens,
        scale,
    ),
    "k not contiguous in D": lambda q, k, v, lens, scale: (
        q,
        k.transpose(2, 3).contiguous().transpose(2, 3),
        v,
        lens,
        scale,
    ),
}


@pytest.mark.parametrize("mutate", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_inputs_raise(mutate):
    with pytest.raises(ValueError):
        attend(*mutate(*good_args()))


def test_bad_out_and_num_splits_raise():
    args = good_args()
    with pytest.raises(ValueError, match="out"):
        attend(*args, out=torch.empty(2, 4, 16, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="num_splits"):
        attend(*args, num_splits=0)
    with pytest.raises(ValueError, match="multiple"):
        decode_attention_reference(args[0][:, :3], *args[1:])


@pytest.mark.slow
@pytest.mark.parametrize("num_splits", [MERGE_MIN_SPLITS - 1, MERGE_MIN_SPLITS])
def test_the_split_count_decides_where_the_merge_runs(small_tiles, fresh_counters, num_splits):
    """Below merge_kernel_min_splits the split kernel merges (arrival counters in use), from it on a merge kernel
    does (no counters); both right."""
    case = make_case(1, 4, 1, 16, 16 * num_splits, torch.float32, seed=1)  # a full row: every split has keys
    assert_matches(attend(*case, num_splits=num_splits), float64_reference(*case), torch.float32)
    assert len(fresh_counters) == (0 if num_splits >= MERGE_MIN_SPLITS else 1)


# ------------------------------------------------------------------------------------------------ paged KV cache

# (B, Hq, Hkv, D, S): GQA groups of 4, 1 and 2.
PAGED_SHAPES = [(3, 8, 2, 32, 70), (2, 3, 3, 16, 41), (4, 6, 3, 16, 129)]


def paged_lengths(batch, slots, block_size):
    """Lengths 1, S, one ending on a block boundary before S and one off the block grid, in turn over the rows."""
    boundary = max(1, (slots - 1) // block_size * block_size)
    return [[1, slots, boundary, max(1, boundary - 1 - block_size // 2)][b % 4] for b in range(batch)]


def page(case, block_size, block_table, paged_pool, fill=float("nan"), seed=0):
    """The case's caches scattered into a pool of randomly ordered blocks (`fill` in the blocks and slots no row
    owns, garbage in the table past each row's blocks): ((q, k_pool, v_pool, seq_lens, scale), block_tables)."""
    q, k_cache, v_cache, seq_lens, scale = case
    lengths = seq_lens.tolist()
    table, num_blocks = block_table(lengths, block_size, -(-k_cache.shape[2] // block_size), seed=seed)
    k_pool, v_pool = (paged_pool(cache, table, lengths, block_size, num_blocks, fill) for cache in (k_cache, v_cache))
    return (q, k_pool, v_pool, seq_lens, scale), table


@DTYPES
@pytest.mark.parametrize("block_size", [1, 3, 16, 64])
@pytest.mark.parametrize("shape", PAGED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_paged_cache_matches_the_static_float64(shape, block_size, dtype, block_table, paged_pool):
    """Default tiles and splits; the capacity max_blocks * block_size passes S where block_size does not divide it."""
    case = make_case(*shape, dtype, seed=block_size, lengths=paged_lengths(shape[0], shape[-1], block_size))
    paged, table = page(case, block_size, block_table, paged_pool, seed=block_size)
    assert_matches(attend(*paged, block_tables=table), float64_reference(*case), dtype)


@pytest.mark.slow
@pytest.mark.parametrize("block_size", [1, 5, 16, 48])  # 16, 48: each 16-key tile within one block
@pytest.mark.parametrize(
    ("num_splits", "dtype"), [(1, torch.float32), (2, torch.bfloat16), (12, torch.float32)], ids=["1", "2", "12"]
)
def test_paged_cache_with_forced_splits(
    small_tiles, separate_merge, fresh_counters, num_splits, dtype, block_size, block_table, paged_pool
):
    """16-key tiles over 129 slots in 1, 2 and 12 splits (the shorter rows leave some of them empty, and with 12 the
    newest key opens a split's first tile, re-read through the table); blocks of 5 straddle the tiles."""
    case = make_case(4, 4, 1, 16, 129, dtype, seed=num_splits, lengths=paged_lengths(4, 129, block_size))
    paged, table = page(case, block_size, block_table, paged_pool, seed=num_splits)
    out = attend(*paged, num_splits=num_splits, block_tables=table)
    assert_matches(out, float64_reference(*case), dtype)
    if num_splits > 1:
        assert_counters_reset(fresh_counters, separate_merge)


@pytest.mark.slow
def test_paged_cache_through_the_merge_kernel(small_tiles, fresh_counters, block_table, paged_pool):
    """merge_kernel_min_splits splits: the merge kernel, which clamps the lengths to the same capacity (530 slots in
    blocks of 5 for S = 528), recomputes the same chunks."""
    num_splits = MERGE_MIN_SPLITS
    case = make_case(2, 4, 1, 16, 16 * num_splits, torch.float32, lengths=[16 * num_splits, 16 * num_splits - 7])
    paged, table = page(case, 5, block_table, paged_pool)
    out = attend(*paged, num_splits=num_splits, block_tables=table)
    assert_matches(out, float64_reference(*case), torch.float32)
    assert not fresh_counters


@pytest.mark.parametrize("block_size", [3, 16, 32, 64])  # 32, 64: each tile within one block (one table entry)
def test_paged_one_tile_splits(one_tile_splits, separate_merge, block_size, block_table, paged_pool):
    """3 rows x 2 KV heads in 32-key tiles, whose keys are all fetched before the wait; the newest key (re-read
    after it, through the table) ends a tile, sits inside one and starts one."""
    case = make_case(3, 8, 2, 32, 70, torch.bfloat16, lengths=[64, 47, 1])
    paged, table = page(case, block_size, block_table, paged_pool)
    capacity = table.shape[1] * block_size
    assert one_tile_block(3, 2, capacity, 24, DecodeAttentionSettings(one_tile_blocks=(16, 32))) == 32
    assert_matches(attend(*paged, block_tables=table), float64_reference(*case), torch.bfloat16)


def test_paged_cache_ignores_huge_values_and_reads_a_column_major_table(
    small_tiles, separate_merge, block_table, paged_pool
):
    """1e30 in every slot past the lengths and in the blocks no row owns (it would win the softmax if one leaked
    in), the table laid out column by column (strides (1, B))."""
    case = make_case(3, 6, 3, 16, 50, torch.float32, garbage=1e30, lengths=[50, 15, 1])
    paged, table = page(case, 5, block_table, paged_pool, fill=1e30)
    table = table.t().contiguous().t()
    assert table.stride() == (1, 3)
    out = attend(*paged, num_splits=3, block_tables=table)
    assert_matches(out, float64_reference(*case), torch.float32)


def test_rows_may_share_pool_blocks(separate_merge):
    """Three rows on one two-block prefix (fewer blocks than rows), the pool a strided view of row 0's cache."""
    q, k_cache, v_cache, seq_lens, scale = make_case(3, 8, 2, 32, 32, torch.float32, lengths=[32, 20, 1])
    k_cache[:], v_cache[:] = k_cache[0], v_cache[0]
    k_pool, v_pool = (cache[0].view(2, 2, 16, 32).transpose(0, 1) for cache in (k_cache, v_cache))  # [2, Hkv, 16, D]
    table = torch.tensor([[0, 1]] * 3, dtype=torch.int32)
    out = attend(q, k_pool, v_pool, seq_lens, scale, num_splits=2, block_tables=table)
    assert_matches(out, float64_reference(q, k_cache, v_cache, seq_lens, scale), torch.float32)


def test_paged_reference_and_dispatcher(block_table, paged_pool):
    """The reference gathers the rows out of the pool and is the static reference; the dispatcher passes the table."""
    case = make_case(3, 8, 2, 32, 70, torch.float64, lengths=[70, 1, 33])
    paged, table = page(case, 16, block_table, paged_pool)
    expected = decode_attention_reference(*case)
    torch.testing.assert_close(decode_attention_reference(*paged, block_tables=table), expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(decode_attention(*paged, block_tables=table), expected, atol=1e-12, rtol=0)


def test_bad_block_tables_raise():
    q, k_cache, v_cache, seq_lens, scale = good_args()  # B = 2, pools of 3 blocks of 9 slots
    table = torch.zeros(2, 4, dtype=torch.int32)
    bad = {
        "block_tables must be int32": (k_cache, table.long()),
        r"block_tables must be int32 \[>= 2": (k_cache, table[:1]),
        r"max_blocks >= 1\], got torch.int32 \(2, 0\)": (k_cache, table[:, :0]),
        r"got torch.int32 \(4,\)": (k_cache, table[0]),
        "one device": (k_cache, table.to("meta")),
        r"expected \[num_blocks >= 1, Hkv, block_size >= 1": (k_cache[:, :, :0], table),
    }
    for message, (pool, tables) in bad.items():
        with pytest.raises(ValueError, match=message):
            attend(q, pool, pool, seq_lens, scale, block_tables=tables)
        with pytest.raises(ValueError, match=message):
            decode_attention_reference(q, pool, pool, seq_lens, scale, block_tables=tables)
    # A pool of fewer blocks than rows is no error (rows may share blocks).
    attend(q, k_cache[:1], v_cache[:1], seq_lens, scale, block_tables=table)
