"""Paged prefill attention against the float64 reference (CPU: TRITON_INTERPRET=1, small odd shapes)."""

import pytest
import torch
import torch.nn.functional as F

from warpcode.kernels.prefill_attention import paged_prefill_attention, paged_prefill_attention_reference

# (T, start, Hq, Hkv, D, block_size): one token and a few, past one 64-row program; prefixes empty, inside a block
# and across several; GQA groups of 1, 3 (rows padded to a power of two) and 4; head dims at and off 16.
CASES = [
    (1, 0, 4, 4, 16, 16),
    (5, 7, 6, 2, 24, 16),
    (33, 40, 8, 2, 16, 16),
    (70, 3, 4, 1, 32, 64),
    (17, 129, 2, 2, 16, 32),
]
TOLERANCE = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}


def make_case(tokens, start, q_heads, kv_heads, dim, block_size, dtype, seed=0):
    """A pool whose every slot outside the sequence's first start + T positions is NaN, blocks shuffled, and table
    entries past the sequence's blocks out of range (they must be clamped, never read as keys)."""
    generator = torch.Generator().manual_seed(seed)
    used = -(-(start + tokens) // block_size)
    num_blocks = used + 3
    k_pool = torch.full((num_blocks, kv_heads, block_size, dim), float("nan"))
    v_pool = torch.full_like(k_pool, float("nan"))
    blocks = torch.randperm(num_blocks, generator=generator)[:used]
    table = torch.cat([blocks, torch.tensor([num_blocks + 5, -1])]).to(torch.int32)
    slots = torch.arange(start + tokens)
    for pool in (k_pool, v_pool):
        pool[blocks.long()[slots // block_size], :, slots % block_size] = torch.randn(
            start + tokens, kv_heads, dim, generator=generator
        )
    q = torch.randn(tokens, q_heads, dim, generator=generator)
    return q.to(dtype), k_pool.to(dtype), v_pool.to(dtype), table


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "T{}-start{}-h{}x{}-d{}-b{}".format(*c))
def test_matches_the_float64_reference(case, dtype):
    start = case[1]
    q, k_pool, v_pool, table = make_case(*case, dtype)
    out = paged_prefill_attention(q, k_pool, v_pool, table, torch.tensor([start], dtype=torch.int32))
    expected = paged_prefill_attention_reference(q, k_pool, v_pool, table, start)
    assert out.dtype == dtype and not out.isnan().any()
    torch.testing.assert_close(out.double(), expected, **TOLERANCE[dtype])


def test_the_reference_is_causal_attention_lower_right():
    q, k_pool, v_pool, table = make_case(6, 10, 4, 2, 16, 16, torch.float32)
    slots = torch.arange(16)
    keys = k_pool[table.long()[slots // 16], :, slots % 16].transpose(0, 1)[None].double()  # [1, Hkv, 16, D]
    values = v_pool[table.long()[slots // 16], :, slots % 16].transpose(0, 1)[None].double()
    mask = torch.ones(6, 16, dtype=torch.bool).tril(diagonal=10)
    expected = F.scaled_dot_product_attention(q.transpose(0, 1)[None].double(), keys, values, attn_mask=mask,
                                              enable_gqa=True)  # fmt: skip
    torch.testing.assert_close(paged_prefill_attention_reference(q, k_pool, v_pool, table, 10),
                               expected[0].transpose(0, 1))  # fmt: skip


@pytest.mark.parametrize("splits", [2, 3, 5])
def test_key_splits_merge_to_the_same_answer(splits):
    """Splits past the keys' end are empty (m = -inf) and weigh nothing in the merge."""
    for case in [(33, 40, 8, 2, 16, 16), (5, 0, 4, 2, 16, 16)]:
        q, k_pool, v_pool, table = make_case(*case, torch.float32)
        start = torch.tensor([case[1]], dtype=torch.int32)
        out = paged_prefill_attention(q, k_pool, v_pool, table, start, config=(64, 16, 4, 2, splits))
        expected = paged_prefill_attention_reference(q, k_pool, v_pool, table, case[1])
        torch.testing.assert_close(out.double(), expected, **TOLERANCE[torch.float32])


def test_one_launch_serves_every_prefix_length():
    """start is read on the device: the same arguments with another start value give that prefix's answer."""
    q, k_pool, v_pool, table = make_case(4, 20, 4, 2, 16, 16, torch.float32)
    start = torch.tensor([20], dtype=torch.int32)
    out = paged_prefill_attention(q, k_pool, v_pool, table, start)
    start.fill_(9)
    shorter = paged_prefill_attention(q, k_pool, v_pool, table, start)
    for answer, prefix in ((out, 20), (shorter, 9)):
        expected = paged_prefill_attention_reference(q, k_pool, v_pool, table, prefix)
        torch.testing.assert_close(answer.double(), expected, **TOLERANCE[torch.float32])


def test_bad_shapes_are_refused():
    q, k_pool, v_pool, table = make_case(4, 0, 4, 2, 16, 16, torch.float32)
    start = torch.tensor([0], dtype=torch.int32)
    with pytest.raises(ValueError, match="does not match the pools"):
        paged_prefill_attention(q[:, :3], k_pool, v_pool, table, start)
    with pytest.raises(ValueError, match="block_table must be int32"):
        paged_prefill_attention(q, k_pool, v_pool, table.long(), start)


@pytest.mark.parametrize("splits", [1, 2])
def test_rows_on_the_device_leave_the_padding_rows_alone(splits):
    q, k_pool, v_pool, table = make_case(9, 5, 4, 2, 16, 16, torch.float32)
    out = torch.full_like(q, 7.0)
    rows = torch.tensor([6], dtype=torch.int32)
    start = torch.tensor([5], dtype=torch.int32)
    paged_prefill_attention(q, k_pool, v_pool, table, start, out=out, rows=rows, config=(64, 16, 4, 2, splits))
    expected = paged_prefill_attention_reference(q[:6], k_pool, v_pool, table, 5)
    torch.testing.assert_close(out[:6].double(), expected, **TOLERANCE[torch.float32])
    assert (out[6:] == 7.0).all()
