"""add_rmsnorm and qk_norm_rope_cache: the Triton kernels (CPU interpreter here) against a float64 evaluation of
their references, and the references against the eager modules of model_runtime.layers."""

import pytest
import torch

from warpcode.kernels.norm import add_rmsnorm, add_rmsnorm_reference, add_rmsnorm_triton
from warpcode.kernels.rope_cache import qk_norm_rope_cache, qk_norm_rope_cache_reference, qk_norm_rope_cache_triton
from warpcode.model_runtime.config import ModelConfig, RopeScaling
from warpcode.model_runtime.layers import RMSNorm, RotaryEmbedding, apply_rotary, rope_frequencies

EPS = 1e-6
SENTINEL = 77.0  # exactly representable in every dtype: cache slots that must stay untouched hold it
TOLERANCE = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2}}


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------- add_rmsnorm


def norm_inputs(rows, hidden, dtype, with_residual, seed=0):
    g = generator(seed + 7 * hidden + rows)
    x = (torch.randn(rows, hidden, generator=g) * 3).to(dtype)
    weight = (1 + torch.randn(hidden, generator=g) / 4).to(dtype)
    residual = torch.randn(rows, hidden, generator=g).to(dtype) if with_residual else None
    return x, weight, residual


@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 3, 5])
@pytest.mark.parametrize("hidden", [37, 100])
def test_add_rmsnorm_matches_float64(hidden, rows, dtype, with_residual):
    x, weight, residual = norm_inputs(rows, hidden, dtype, with_residual)
    normed, summed = add_rmsnorm_triton(x, weight, EPS, residual)
    double = None if residual is None else residual.double()
    expected, _ = add_rmsnorm_reference(x.double(), weight.double(), EPS, double)
    assert normed.dtype == dtype and normed.shape == x.shape
    torch.testing.assert_close(normed.double(), expected, **TOLERANCE[dtype])
    if residual is None:
        assert summed is x
    else:
        assert torch.equal(summed, x + residual)  # one rounding of the exact sum, as PyTorch does


@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_add_rmsnorm_half_precision_is_the_reference_bit_for_bit(dtype, with_residual, rmsnorm_within_one_ulp_flips):
    x, weight, residual = norm_inputs(6, 1000, dtype, with_residual, seed=1)
    normed, summed = add_rmsnorm_triton(x, weight, EPS, residual)
    assert torch.equal(summed, add_rmsnorm_reference(x, weight, EPS, residual)[1])
    rmsnorm_within_one_ulp_flips(normed, x, weight, residual, EPS, max_fraction=0.01)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_add_rmsnorm_reference_is_the_eager_rmsnorm(dtype):
    x, weight, residual = norm_inputs(4, 64, dtype, True, seed=2)
    module = RMSNorm(64, EPS).to(dtype)
    with torch.no_grad():
        module.weight.copy_(weight)
        assert torch.equal(add_rmsnorm_reference(x, weight, EPS, residual)[0], module(x + residual))
        assert torch.equal(add_rmsnorm_reference(x, weight, EPS)[0], module(x))


def test_add_rmsnorm_out_tensors_in_place_and_nan():
    x, weight, residual = norm_inputs(3, 37, torch.bfloat16, True, seed=3)
    expected_normed, expected_summed = add_rmsnorm_triton(x, weight, EPS, residual)
    out, residual_copy = torch.empty_like(x), residual.clone()
    normed, summed = add_rmsnorm_triton(x, weight, EPS, residual_copy, out=out, summed_out=residual_copy)
    assert normed is out and summed is residual_copy  # the residual stream updated in place
    assert torch.equal(normed, expected_normed) and torch.equal(summed, expected_summed)
    x[1, 5] = float("nan")
    normed, summed = add_rmsnorm_triton(x, weight, EPS, residual)
    assert summed[1, 5].isnan() and normed[1].isnan().all() and not normed[[0, 2]].isnan().any()


def test_add_rmsnorm_rejects_bad_inputs():
    x, weight, residual = norm_inputs(3, 37, torch.bfloat16, True)
    bad = {
        r"\[N, H\]": (x[0], weight, EPS, None),
        "bf16, fp16 or fp32": (x.double(), weight.double(), EPS, None),
        "contiguous": (x.t().contiguous().t(), weight, EPS, None),
        "weight must be": (x, weight[:-1], EPS, None),
        "weight must have the dtype": (x, weight.float(), EPS, None),
        "residual must have the shape": (x, weight, EPS, residual[:2]),
        "residual must have the dtype": (x, weight, EPS, residual.half()),
        "eps must be a Python number": (x, weight, torch.tensor(EPS), None),
    }
    for message, args in bad.items():
        with pytest.raises(ValueError, match=message):
            add_rmsnorm_triton(*args)
    with pytest.raises(ValueError, match="out must have the shape"):
        add_rmsnorm_triton(x, weight, EPS, out=x[:2])
    with pytest.raises(ValueError, match="summed_out needs a residual"):
        add_rmsnorm_triton(x, weight, EPS, summed_out=torch.empty_like(x))


def test_add_rmsnorm_dispatches_to_the_reference_on_cpu():
    x, weight, residual = norm_inputs(3, 37, torch.bfloat16, True)
    got, want = add_rmsnorm(x, weight, EPS, residual), add_rmsnorm_reference(x, weight, EPS, residual)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    out = torch.empty_like(x)
    assert add_rmsnorm(x, weight, EPS, out=out)[0] is out


# --------------------------------------------------------------------------------------- qk_norm_rope_cache


def rope_inputs(num_heads, num_kv_heads, head_dim, dtype, with_norm, index_dtype=torch.int64, seed=0, batch=3):
    g = generator(seed + 100 * num_heads + head_dim)
    cache_batch, slots_per_row = batch + 2, 9
    qkv = (torch.randn(batch, (num_heads + 2 * num_kv_heads) * head_dim, generator=g) * 2).to(dtype)
    norms = [(1 + torch.randn(head_dim, generator=g) / 4).to(dtype) if with_norm else None for _ in "qk"]
    # yarn: inv_freq with interpolated and original bands, and attention_scaling = 0.1 ln(4) + 1 != 1
    inv_freq, scaling = rope_frequencies(head_dim, 1e6, RopeScaling("yarn", 4.0, original_max_position_embeddings=64))
    positions = torch.tensor(([1234, 7, 402] * batch)[:batch], dtype=index_dtype)  # not in order
    slots = torch.tensor(([6, 0, 3] * batch)[:batch], dtype=index_dtype)  # a different slot per neighbouring row
    k_cache = torch.full((cache_batch, num_kv_heads, slots_per_row, head_dim), SENTINEL, dtype=dtype)
    return [qkv, num_heads, num_kv_heads, head_dim, *norms, EPS, inv_freq, scaling, positions, k_cache,
            k_cache.clone(), slots]  # fmt: skip


def float64_reference(args):
    """The reference on float64 copies of the tensors: (q, k_cache, v_cache)."""
    args = list(args)
    for i in (0, 4, 5, 10, 11):
        args[i] = None if args[i] is None else args[i].double()
    return qk_norm_rope_cache_reference(*args), args[10], args[11]


def written_slots(args) -> torch.Tensor:
    """bool [Bc, S]: True at (b, slots[b]) for b < B."""
    k_cache, slots = args[10], args[12]
    written = torch.zeros(k_cache.shape[0], k_cache.shape[2], dtype=torch.bool)
    written[torch.arange(len(slots)), slots.long()] = True
    return written


def check_against_float64(args, q, tolerance):
    expected_q, expected_k, expected_v = float64_reference(args)
    torch.testing.assert_close(q.double(), expected_q, **tolerance)
    written, k_cache, v_cache = written_slots(args), args[10], args[11]
    rows, slots = written.nonzero(as_tuple=True)
    torch.testing.assert_close(k_cache[rows, :, slots].double(), expected_k[rows, :, slots], **tolerance)
    assert torch.equal(v_cache[rows, :, slots].double(), expected_v[rows, :, slots])  # values copied bit for bit
    for cache in (k_cache, v_cache):
        assert (cache.transpose(1, 2)[~written] == SENTINEL).all(), "a slot other than slots[b] was written"


@pytest.mark.parametrize("with_norm", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [16, 32])
@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(4, 2), (6, 1)])
def test_qk_norm_rope_cache_matches_float64(num_heads, num_kv_heads, head_dim, dtype, with_norm):
    args = rope_inputs(num_heads, num_kv_heads, head_dim, dtype, with_norm)
    q = qk_norm_rope_cache_triton(*args)
    assert q.shape == (3, num_heads, head_dim) and q.dtype == dtype
    check_against_float64(args, q, TOLERANCE[dtype])


@pytest.mark.slow
@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(6, 2), (8, 4), (5, 1)])
def test_prefill_rows_take_several_heads_a_program(num_heads, num_kv_heads):
    """Past the decode batches (65+ rows) a program takes gcd(Hq, Hkv) heads: every row and head still matches."""
    args = rope_inputs(num_heads, num_kv_heads, 16, torch.float32, True, batch=70)
    q = qk_norm_rope_cache_triton(*args)
    check_against_float64(args, q, TOLERANCE[torch.float32])


def test_int32_indices_and_strided_tensors():
    args = rope_inputs(4, 2, 32, torch.float32, True, index_dtype=torch.int32)
    expected = qk_norm_rope_cache_triton(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    wide = torch.zeros(3, args[0].shape[1] + 24)
    wide[:, 8 : 8 + args[0].shape[1]] = args[0]
    args[0] = wide[:, 8 : 8 + args[0].shape[1]]  # row stride wider than the row
    args[9] = torch.stack([args[9], torch.zeros_like(args[9])], dim=1)[:, 0]  # positions with stride 2
    for i in (10, 11):  # caches laid out [Bc, S, Hkv, D], seen as [Bc, Hkv, S, D]
        args[i] = args[i].transpose(1, 2).contiguous().transpose(1, 2)
    out = torch.empty(3, 4, 32)
    q = qk_norm_rope_cache_triton(*args, out=out)
    assert q is out and torch.equal(q, expected)
    check_against_float64(args, q, TOLERANCE[torch.float32])


def test_slots_outside_the_cache_are_not_written():
    args = rope_inputs(4, 2, 16, torch.float32, False)
    args[12] = torch.tensor([-1, 9, 2])  # S = 9
    q = qk_norm_rope_cache_triton(*args)
    expected_q = float64_reference([*args[:12], torch.tensor([0, 0, 2])])[0]  # q does not depend on slots
    torch.testing.assert_close(q.double(), expected_q, **TOLERANCE[torch.float32])
    for cache in args[10:12]:
        assert (cache[:2] == SENTINEL).all() and (cache[2, :, 2] != SENTINEL).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_reference_is_the_eager_norm_and_rope(dtype):
    """The reference against RMSNorm + RotaryEmbedding + apply_rotary as the eager attention uses them."""
    config = ModelConfig(
        model_type="qwen3_moe", vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=4, num_experts_per_tok=2,
        rope_theta=1e6, rope_scaling=RopeScaling("yarn", 4.0, original_max_position_embeddings=64),
    )  # fmt: skip
    rotary = RotaryEmbedding(config)
    for with_norm in (False, True):
        args = rope_inputs(4, 2, 32, dtype, with_norm, seed=5)
        args[7], args[8] = rotary._inv_freq, rotary.attention_scaling
        assert args[8] != 1
        qkv, positions, batch = args[0], args[9], args[0].shape[0]
        q, k, _ = qkv.view(batch, 1, 8, 32).split([4, 2, 2], dim=2)  # [B, T = 1, heads, D]
        with torch.no_grad():
            if with_norm:
                q_norm, k_norm = RMSNorm(32, EPS).to(dtype), RMSNorm(32, EPS).to(dtype)
                q_norm.weight.copy_(args[4])
                k_norm.weight.copy_(args[5])
                q, k = q_norm(q), k_norm(k)
            cos, sin = rotary(positions[:, None], dtype)
            eager_q = apply_rotary(q.transpose(1, 2), cos, sin)[:, :, 0]
            eager_k = apply_rotary(k.transpose(1, 2), cos, sin)[:, :, 0]
        torch.testing.assert_close(qk_norm_rope_cache_reference(*args), eager_q, rtol=0, atol=0)
        rows = torch.arange(batch)
        torch.testing.assert_close(args[10][rows, :, args[12]], eager_k, rtol=0, atol=0)


def test_qk_norm_rope_cache_rejects_bad_inputs():
    def call(index, value, message):
        args = rope_inputs(4, 2, 16, torch.bfloat16, True)
        args[index] = value(args[index]) if callable(value) else value
        with pytest.raises(ValueError, match=message):
            qk_norm_rope_cache_triton(*args)

    call(0, lambda t: t[:, :-16], "columns")
    call(0, lambda t: t.double(), "bf16, fp16 or fp32")
    call(0, lambda t: t[0], r"\[B, \(Hq \+ 2 Hkv\) D\]")
    call(3, 15, "even")
    call(4, lambda t: t[:-1], "q_norm_weight")
    call(5, lambda t: t.float(), "k_norm_weight")
    call(6, torch.tensor(EPS), "eps must be a Python number")
    call(7, lambda t: t.double(), "inv_freq")
    call(9, lambda t: t.float(), "positions")
    call(9, lambda t: t[:2], "positions")
    call(12, lambda t: t.float(), "slots")
    call(10, lambda t: t[:2], r"k_cache must be \[Bc >= 3")
    call(11, lambda t: t[:, :1], "v_cache must be")
    call(10, lambda t: t.float(), "k_cache must have the dtype")
    call(11, lambda t: t[:, :, :4], "slots")
    call(10, lambda t: t.transpose(2, 3).contiguous().transpose(2, 3), "contiguous along head_dim")
    with pytest.raises(ValueError, match="out must be"):
        qk_norm_rope_cache_triton(*rope_inputs(4, 2, 16, torch.bfloat16, True), out=torch.empty(3, 4, 16))


def test_qk_norm_rope_cache_dispatches_to_the_reference_on_cpu():
    args = rope_inputs(6, 1, 16, torch.bfloat16, True)
    reference_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    q = qk_norm_rope_cache(*args)
    assert torch.equal(q, qk_norm_rope_cache_reference(*reference_args))
    assert torch.equal(args[10], reference_args[10]) and torch.equal(args[11], reference_args[11])


# ---------------------------------------------------------------------------- qk_norm_rope_cache, paged KV cache


def paged_rope_inputs(args, block_size, block_table, lengths=None, seed=0):
    """rope_inputs' arguments with SENTINEL pools for caches and a block table (garbage past each row's blocks) whose
    row b owns the blocks through slots[b], or through `lengths[b]` slots: (args, table, lengths, num_blocks)."""
    lengths = [int(slot) + 1 for slot in args[12]] if lengths is None else lengths
    table, num_blocks = block_table(lengths, block_size, -(-args[10].shape[2] // block_size), seed=seed)
    args = list(args)
    _, kv_heads, _, head_dim = args[10].shape
    pool_shape = (num_blocks, kv_heads, block_size, head_dim)
    args[10], args[11] = (torch.full(pool_shape, SENTINEL, dtype=args[0].dtype) for _ in "kv")
    return args, table, lengths, num_blocks


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(4, 2), (6, 1)])
def test_paged_writes_land_in_their_block_and_nowhere_else(
    num_heads, num_kv_heads, dtype, block_size, block_table, paged_pool
):
    """The whole pool against the static float64 result scattered into it: slots 6, 0 and 3 of 9 (blocks of 4: the
    third slot of a row's second block, the first of its first, the last of its first)."""
    index_dtype = torch.int32 if block_size == 3 else torch.int64
    static = rope_inputs(num_heads, num_kv_heads, 16, dtype, True, index_dtype=index_dtype)
    args, table, lengths, num_blocks = paged_rope_inputs(static, block_size, block_table, seed=block_size)
    q = qk_norm_rope_cache_triton(*args, block_tables=table)
    expected_q, expected_k, expected_v = float64_reference(static)
    torch.testing.assert_close(q.double(), expected_q, **TOLERANCE[dtype])
    written = written_slots(static)[:, None, :, None].expand(static[10].shape)
    written = paged_pool(written, table, lengths, block_size, num_blocks, False)
    assert written.sum() == 3 * num_kv_heads * 16
    k_pool, v_pool = (paged_pool(c, table, lengths, block_size, num_blocks, SENTINEL) for c in (expected_k, expected_v))
    for pool in args[10:12]:
        assert (pool[~written] == SENTINEL).all(), "a slot other than slots[b] was written"
    torch.testing.assert_close(args[10][written].double(), k_pool[written], **TOLERANCE[dtype])
    assert torch.equal(args[11][written].double(), v_pool[written])  # values copied bit for bit


@pytest.mark.parametrize("entry", ["owned", "-1", "pool size"])
def test_paged_slots_outside_the_table_or_the_pool_are_not_written(entry):
    """Blocks of 4 in 3 columns (capacity 12, past the 9 slots of the static caches), the table a view whose next
    column holds valid blocks too: slots -1 and 12 write nothing, slot 11 writes its row's third block, unless that
    entry lies outside the pool; the reference (on CPU, the dispatcher's path) writes exactly where the kernel does."""
    static = rope_inputs(4, 2, 16, torch.float32, False)
    static[12] = torch.tensor([-1, 12, 11])
    args, num_blocks = list(static), 9
    args[10], args[11] = (torch.full((num_blocks, 2, 4, 16), SENTINEL) for _ in "kv")
    table = (torch.arange(12, dtype=torch.int32).view(3, 4) % num_blocks)[:, :3]
    table[2, 2] = {"owned": table[2, 2], "-1": -1, "pool size": num_blocks}[entry]
    reference_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    q = qk_norm_rope_cache_triton(*args, block_tables=table)
    expected_q = float64_reference([*static[:12], torch.tensor([0, 0, 2])])[0]  # q does not depend on slots
    torch.testing.assert_close(q.double(), expected_q, **TOLERANCE[torch.float32])
    dispatched = qk_norm_rope_cache(*reference_args, block_tables=table)  # the reference, off the GPU
    torch.testing.assert_close(dispatched.double(), expected_q, **TOLERANCE[torch.float32])
    written = torch.zeros(args[10].shape, dtype=torch.bool)
    if entry == "owned":
        written[table[2, 2], :, 3] = True
    for pool in (*args[10:12], *reference_args[10:12]):
        assert torch.equal(pool != SENTINEL, written)
    for pool, reference_pool in zip(args[10:12], reference_args[10:12], strict=True):
        torch.testing.assert_close(pool, reference_pool, **TOLERANCE[torch.float32])


def test_paged_rejects_bad_block_tables_and_pools(block_table):
    args, table, _, _ = paged_rope_inputs(rope_inputs(4, 2, 16, torch.bfloat16, True), 4, block_table)
    bad = {
        "block_tables must be int32": (table.long(), args[10], args[11]),
        r"block_tables must be int32 \[>= 3": (table[:2], args[10], args[11]),
        r"got torch.int32 \(3, 0\)": (table[:, :0], args[10], args[11]),
        r"got torch.int32 \(3,\)": (table[0], args[10], args[11]),
        "block_tables is on meta": (table.to("meta"), args[10], args[11]),
        "pools of one shape": (table, args[10], args[11][:-1]),
        "block_size >= 1": (table, args[10][:, :, :0], args[11][:, :, :0]),
        r"k_cache must be \[num_blocks >= 1, Hkv = 2, block_size": (table, args[10][:0], args[11][:0]),
    }
    for message, (tables, k_pool, v_pool) in bad.items():
        with pytest.raises(ValueError, match=message):
            qk_norm_rope_cache_triton(*args[:10], k_pool, v_pool, args[12], block_tables=tables)
    # A pool of fewer blocks than rows is no error (rows may share blocks).
    qk_norm_rope_cache_triton(*args[:10], args[10][:1], args[11][:1], args[12], block_tables=table.clamp(max=0))
