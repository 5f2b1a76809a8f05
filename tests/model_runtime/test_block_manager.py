"""The KV-cache block pool: reference counts, prefix keys, LRU eviction of unreferenced cached blocks."""

from __future__ import annotations

import pytest

from tests.model_runtime.block_pool_books import check_pool
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


def keep_last_partial(manager: BlockManager, blocks: list[int], tokens: list[int]) -> int:
    """Files the sequence's partly filled last block as it ends; returns its parent key."""
    size, parent = manager.block_size, 0
    full = len(tokens) // size
    for number in range(full):
        parent = hash((parent, tuple(tokens[number * size : (number + 1) * size])))
    manager.keep_partial(blocks[full], parent, tuple(tokens[full * size :]))
    return parent


def test_a_kept_partial_block_is_found_by_the_longest_run_of_ids_and_copied_not_shared():
    manager = BlockManager(10, 4, reserved=1)
    tokens = [1, 2, 3, 4, 5, 6, 7]  # one full block, three ids in the second
    blocks = fill(manager, tokens)
    parent = keep_last_partial(manager, blocks, tokens)
    manager.release(blocks)
    check_pool(manager)
    assert manager.available == 9  # both blocks cached, both evictable
    matched, keys = manager.match_prefix([*tokens[:4], 5, 6, 9, 9], limit=1)
    assert matched == blocks[:1] and keys == [parent]
    assert manager.match_partial(parent, [5, 6, 9]) == (blocks[1], 2)  # the run of ids the two share
    assert manager.blocks[blocks[1]].references == 1  # held until the caller copied it
    manager.release([blocks[1]])
    assert manager.match_partial(parent, [5, 6, 7, 8]) == (blocks[1], 3)
    manager.release([blocks[1]])
    assert manager.match_partial(parent, [6]) is None  # no kept block starts with it
    assert manager.match_partial(hash((0, (9, 9, 9, 9))), [5]) is None  # another prefix
    manager.release(matched)
    check_pool(manager)
    assert manager.available == 9


def test_the_next_full_block_serves_a_prompt_the_cache_holds_whole():
    manager = BlockManager(10, 4)
    tokens = list(range(1, 9))  # two full blocks
    manager.release(fill(manager, tokens))
    matched, keys = manager.match_prefix(tokens, limit=(len(tokens) - 1) // 4)  # the last token is computed again
    assert len(matched) == 1
    index, count = manager.match_partial(keys[-1], tokens[4:7])
    assert count == 3 and manager.blocks[index].token_ids == (5, 6, 7, 8)


def test_a_full_block_registered_later_supersedes_a_partial_one():
    manager = BlockManager(10, 4, reserved=1)
    tokens = [1, 2, 3, 4, 5, 6]
    first = fill(manager, tokens)
    parent = keep_last_partial(manager, first, tokens)
    manager.release(first)
    # A longer sequence on the same prefix fills that block: it holds all the partial block did.
    second = fill(manager, [1, 2, 3, 4, 5, 6, 7, 8])
    assert manager.blocks[first[1]].token_ids == ()
    assert first[1] in manager._free
    check_pool(manager)
    index, count = manager.match_partial(parent, [5, 6, 7])
    assert (index, count) == (second[1], 3)


def test_a_partial_block_adding_nothing_is_not_kept_and_a_longer_one_replaces_a_shorter():
    manager = BlockManager(10, 4, reserved=1)
    short = fill(manager, [1, 2, 3, 4, 5])
    parent = keep_last_partial(manager, short, [1, 2, 3, 4, 5])
    longer = manager.allocate(1)
    manager.keep_partial(longer[0], parent, (5, 6, 7))  # extends the kept (5,): that one goes once released
    manager.release(short)
    assert manager.blocks[short[1]].token_ids == () and short[1] in manager._free
    covered = manager.allocate(1)
    manager.keep_partial(covered[0], parent, (5, 6))  # the kept (5, 6, 7) holds it already
    manager.release(covered + longer)
    assert covered[0] in manager._free and manager.blocks[longer[0]].token_ids == (5, 6, 7)
    check_pool(manager)


def test_an_evicted_partial_block_is_found_no_more():
    manager = BlockManager(3, 4)
    tokens = [1, 2, 3, 4, 5, 6]
    blocks = fill(manager, tokens)
    parent = keep_last_partial(manager, blocks, tokens)
    manager.release(blocks)
    (taken,) = manager.allocate(2)[1:]  # the free block, then the oldest release: the sequence's tail
    assert taken == blocks[1] and manager.blocks[taken].token_ids == ()
    assert manager.match_partial(parent, [5, 6]) is None
    check_pool(manager)
