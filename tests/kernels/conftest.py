"""Helpers shared by the CPU and GPU tests of the fused norm kernel and of the paged KV cache (fixtures: test modules
import no siblings under pytest's importlib mode)."""

import pytest
import torch

from warpcode.kernels.norm import add_rmsnorm_reference


def ordered_bits(t: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 values as integers in the order of the values, one apart between neighbours (+0 == -0)."""
    bits = t.view(torch.int16).int()
    magnitude = bits & 0x7FFF
    return torch.where(bits < 0, -magnitude, magnitude)


def next_value(t: torch.Tensor, direction: int) -> torch.Tensor:
    """The neighbouring bf16/fp16 value of each element, towards +inf (1) or -inf (-1)."""
    key = ordered_bits(t) + direction
    return torch.where(key < 0, -key - 32768, key).to(torch.int16).view(t.dtype)


def assert_reference_but_rare_one_ulp_flips(normed, x, weight, residual, eps, max_fraction):
    """normed is the reference bit for bit, except in a few elements where the normalised value n (before the
    weight) is one ulp away: the fp32 sum of squares is added in another order, so rsqrt may differ in its last
    bit and flip the rounding of n. (After the multiply by the weight such a flip can reach 2 ulp of normed.)"""
    expected, summed = add_rmsnorm_reference(x, weight, eps, residual)
    s32 = summed.float()
    n = (s32 * torch.rsqrt(s32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    flips = [weight * next_value(n, direction) for direction in (-1, 1)]
    differ = normed != expected
    assert ((normed == flips[0]) | (normed == flips[1]))[differ].all(), "more than a 1-ulp flip of n"
    assert differ.float().mean().item() <= max_fraction, f"{int(differ.sum())} of {differ.numel()} elements differ"


@pytest.fixture
def rmsnorm_within_one_ulp_flips():
    """assert_reference_but_rare_one_ulp_flips(normed, x, weight, residual, eps, max_fraction)."""
    return assert_reference_but_rare_one_ulp_flips


def make_block_table(lengths, block_size, max_blocks, seed=0, spare_blocks=2, device="cpu"):
    """A block table for rows of `lengths` slots, built without the code under test: row b owns its first
    cdiv(lengths[b], block_size) entries, all rows' blocks drawn in one random order from a pool of num_blocks (the
    spare ones owned by no row); every other entry holds garbage: -1, the pool size, the int32 extremes, a spare
    block and another row's block. int32 [B, max_blocks] on `device`, a view of a wider table (row stride
    max_blocks + 2, first column 1). Returns (table, num_blocks)."""
    owned = [-(-int(length) // block_size) for length in lengths]
    num_blocks = sum(owned) + spare_blocks
    order = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed)).int()
    garbage = torch.tensor([-1, num_blocks, 2**31 - 1, -(2**31), int(order[-1]), int(order[0])], dtype=torch.int32)
    wide = garbage[torch.arange((len(lengths) + 1) * (max_blocks + 2)) % len(garbage)].view(-1, max_blocks + 2)
    taken = 0
    for row, count in enumerate(owned):
        wide[row, 1 : 1 + count] = order[taken : taken + count]
        taken += count
    return wide.to(device)[: len(lengths), 1 : 1 + max_blocks], num_blocks


def scatter_blocks(cache, table, lengths, block_size, num_blocks, fill):
    """The pool [num_blocks, Hkv, block_size, D] holding the static cache [Bc, Hkv, S, D] as `table` lays it out:
    row b's slots [j * block_size, (j + 1) * block_size) in block table[b, j] for each block j it owns (see
    make_block_table), `fill` in every other element (spare blocks, slots past S)."""
    _, kv_heads, _, head_dim = cache.shape
    pool = torch.full((num_blocks, kv_heads, block_size, head_dim), fill, dtype=cache.dtype, device=cache.device)
    blocks = table.tolist()
    for row, length in enumerate(lengths):
        for j in range(-(-int(length) // block_size)):
            part = cache[row, :, j * block_size : (j + 1) * block_size]
            pool[blocks[row][j], :, : part.shape[1]] = part
    return pool


@pytest.fixture
def block_table():
    """make_block_table(lengths, block_size, max_blocks, seed=0, spare_blocks=2, device="cpu")."""
    return make_block_table


@pytest.fixture
def paged_pool():
    """scatter_blocks(cache, table, lengths, block_size, num_blocks, fill)."""
    return scatter_blocks
