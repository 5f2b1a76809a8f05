"""The block pool's books, checked from its inside: what every test of the pool asserts after each step."""

from __future__ import annotations

from warpcode.model_runtime.serving.block_manager import BlockManager


def check_pool(manager: BlockManager) -> None:
    """The pool's books agree: an unreferenced block is free (no ids) or cached (ids), never both; every block
    with ids is filed under its parent, and a full one under its key."""
    free, cached = set(manager._free), set(manager._cached)
    assert not free & cached and len(free) == len(manager._free)
    for block in manager.blocks[len(manager.blocks) - manager.usable :]:
        if block.references == 0:
            assert (block.index in cached) == bool(block.token_ids) and (block.index in free) != bool(block.token_ids)
        else:
            assert block.index not in free | cached
        if block.token_ids:
            assert block.index in manager._children[block.parent]
        if block.key is not None:
            assert manager._by_key[block.key] == block.index and len(block.token_ids) == manager.block_size
    filed = [i for children in manager._children.values() for i in children]
    assert sorted(filed) == sorted(b.index for b in manager.blocks if b.token_ids)
