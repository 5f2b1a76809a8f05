"""The KV-cache block pool: reference counts, prefix keys, LRU eviction of unreferenced cached blocks."""

from __future__ import annotations

import pytest

from warpcode.model_runtime.serving.block_manager import BlockManager


def fill(manager: BlockManager, tokens: list[int]) -> list[int]:
    """Allocates and registers the full blocks of `tokens`, as a sequence computing them would."""
    size = manager.block_size
    blocks, parent = manager.allocate(manager.blocks_for(len(tokens))), 0
    for number in range(len(tokens) // size):
        parent = manager.register(blocks[number], parent, tuple(tokens[number * size : (number + 1) * size]))
    return blocks


def test_a_released_prefix_is_found_again_and_shared():
    manager = BlockManager(10, 4, reserved=1)
    tokens = list(range(10))  # two full blocks and a partial one
    blocks = fill(manager, tokens)
    assert 0 not in blocks and manager.available == 6
    manager.release(blocks)
    assert manager.available == 9  # cached blocks count as available
    matched, keys = manager.match_prefix([*tokens, 99], limit=10)
    assert matched == blocks[:2] and len(keys) == 2
    again, _ = manager.match_prefix(tokens[:8], limit=10)  # a second sequence shares them
    assert again == blocks[:2]
    assert manager.blocks[blocks[0]].references == 2
    assert manager.match_prefix(tokens, limit=1)[0] == blocks[:1]  # the caller's limit holds


def test_a_different_earlier_block_means_no_match():
    manager = BlockManager(10, 4)
    manager.release(fill(manager, [1, 2, 3, 4, 5, 6, 7, 8]))
    assert manager.match_prefix([0, 2, 3, 4, 5, 6, 7, 8], limit=5) == ([], [])  # the second block's key differs too


def test_eviction_takes_the_least_recently_released_and_tails_first():
    manager = BlockManager(4, 2)
    first = fill(manager, [1, 2, 3, 4])  # two blocks
    second = fill(manager, [5, 6, 7, 8])
    manager.release(first)
    manager.release(second)
    (taken,) = manager.allocate(1)
    assert taken == first[1]  # the oldest release, its tail first
    assert manager.match_prefix([1, 2, 3, 4], limit=2)[0] == first[:1]
    assert manager.match_prefix([5, 6, 7, 8], limit=2)[0] == second


def test_a_hash_collision_never_reuses_a_wrong_block():
    manager = BlockManager(4, 2)
    (block,) = manager.allocate(1)
    manager.register(block, 0, (1, 2))
    manager.blocks[block].token_ids = (9, 9)  # as if another prefix had hashed to the same key
    manager.release([block])
    assert manager.match_prefix([1, 2], limit=1) == ([], [])


def test_allocating_more_than_available_is_refused():
    manager = BlockManager(3, 2, reserved=1)
    manager.allocate(2)
    with pytest.raises(RuntimeError, match="1 blocks wanted, 0 available"):
        manager.allocate(1)
    with pytest.raises(ValueError, match="at least one block"):
        BlockManager(1, 4, reserved=1)
