"""KV-cache blocks: one pool of fixed-size blocks, reference counts and content-addressed prefix caching.

A full block is keyed by the hash of every token id up to and including it (its parent's key + its own ids), so
equal keys mean equal prefixes; the ids are kept and compared too, so a hash collision can never reuse a wrong block.
Blocks nobody references keep their contents and stay findable until the pool runs short, then the least recently
released is reused first (LRU). A sequence's block table lists its blocks in order; slot s lives in block s // size.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class Block:
    index: int
    references: int = 0
    key: int | None = None  # set once the block is full and registered
    token_ids: tuple[int, ...] = ()


class BlockManager:
    """Hands out blocks [reserved, num_blocks) of the pool; the first `reserved` are the caller's own."""

    def __init__(self, num_blocks: int, block_size: int, reserved: int = 0) -> None:
        if num_blocks - reserved < 1 or block_size < 1:
            raise ValueError(f"need at least one block of at least one token, got {num_blocks} x {block_size}")
        self.block_size, self.usable = block_size, num_blocks - reserved
        self.blocks = [Block(i) for i in range(num_blocks)]
        self._free: list[int] = list(range(num_blocks - 1, reserved - 1, -1))  # never held content worth keeping
        self._cached: OrderedDict[int, None] = OrderedDict()  # unreferenced blocks with a key, oldest first
        self._by_key: dict[int, int] = {}

    @property
    def available(self) -> int:
        """Blocks an allocation can take now: free ones and cached ones nobody references."""
        return len(self._free) + len(self._cached)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def match_prefix(self, token_ids: list[int], limit: int) -> tuple[list[int], list[int]]:
        """(indices, keys) of the cached blocks holding the longest prefix of `token_ids`, at most `limit` blocks;
        each gains a reference."""
        matched, keys, parent, size = [], [], 0, self.block_size
        for number in range(min(limit, len(token_ids) // size)):
            ids = tuple(token_ids[number * size : (number + 1) * size])
            parent = hash((parent, ids))
            index = self._by_key.get(parent)
            if index is None or self.blocks[index].token_ids != ids:
                break
            matched.append(index)
            keys.append(parent)
        for index in matched:
            self._reference(index)
        return matched, keys

    def allocate(self, count: int) -> list[int]:
        """`count` empty blocks with one reference each; the caller checked `available`."""
        if count > self.available:
            raise RuntimeError(f"KV cache: {count} blocks wanted, {self.available} available")
        taken = []
        for _ in range(count):
            if self._free:
                index = self._free.pop()
            else:  # evict the least recently released cached block
                index, _ = self._cached.popitem(last=False)
                block = self.blocks[index]
                del self._by_key[block.key]
                block.key, block.token_ids = None, ()
            self.blocks[index].references = 1
            taken.append(index)
        return taken

    def register(self, index: int, parent: int, token_ids: tuple[int, ...]) -> int:
        """Makes a full block findable by its prefix key (the first of equal blocks stays the one found); returns
        the key, from the key of the block before it (`parent`, 0 for the first block)."""
        key = hash((parent, token_ids))
        block = self.blocks[index]
        if block.key is None and key not in self._by_key:
            block.key, block.token_ids = key, token_ids
            self._by_key[key] = index
        return key

    def release(self, indices: list[int]) -> None:
        """Drops one reference from each block, last block first so that a sequence's tail is evicted before its
        (more widely shared) head."""
        for index in reversed(indices):
            block = self.blocks[index]
            block.references -= 1
            if block.references == 0:
                if block.key is None:
                    self._free.append(index)
                else:
                    self._cached[index] = None

    def _reference(self, index: int) -> None:
        block = self.blocks[index]
        if block.references == 0:
            self._cached.pop(index)
        block.references += 1
