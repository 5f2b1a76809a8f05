"""A paged KV cache built without the code under test: a block table full of traps, and the pool that holds a static
cache as that table lays it out."""

import torch


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
