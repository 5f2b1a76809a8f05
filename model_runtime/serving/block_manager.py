"""KV-cache blocks: one pool of fixed-size blocks, reference counts and content-addressed prefix caching.

A full block is keyed by the hash of every token id up to and including it (its parent's key + its own ids), so
equal keys mean equal prefixes; the ids are kept and compared too, so a hash collision can never reuse a wrong block.
A sequence's partly filled last block is kept too when it ends (or is preempted), filed under its parent's key with
the ids it holds: a later request whose cached full blocks are followed by a run of those ids gets a fresh block
with the cached block's keys and values copied in (the caller copies), so an agent's next turn prefills only its new
tokens instead of the whole last block again. The cached block itself is never written: it stays reusable by
others, and a full block registered later for the same ids supersedes it. Blocks nobody references keep their
contents and stay findable until the pool runs short, then the least recently released is reused first (LRU).
A sequence's block table lists its blocks in order; slot s lives in block s // size.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class Block:
    index: int
    references: int = 0
    key: int | None = None  # set once the block is full and registered
    parent: int = 0  # the key of the blocks before it, while it holds cached ids
    token_ids: tuple[int, ...] = ()  # the ids it caches: block_size of them once registered, fewer in a partial block


class BlockManager:
    """Hands out blocks [reserved, num_blocks) of the pool; the first `reserved` are the caller's own."""

    def __init__(self, num_blocks: int, block_size: int, reserved: int = 0) -> None:
        if num_blocks - reserved < 1 or block_size < 1:
            raise ValueError(f"need at least one block of at least one token, got {num_blocks} x {block_size}")
        self.block_size, self.usable = block_size, num_blocks - reserved
        self.blocks = [Block(i) for i in range(num_blocks)]
        self._free: list[int] = list(range(num_blocks - 1, reserved - 1, -1))  # never held content worth keeping
        self._cached: OrderedDict[int, None] = OrderedDict()  # unreferenced blocks with cached ids, oldest first
        self._by_key: dict[int, int] = {}
        self._children: dict[int, set[int]] = {}  # parent key -> blocks caching ids after it, full or partial

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

    def match_partial(self, parent: int, token_ids: list[int]) -> tuple[int, int] | None:
        """(index, count): the cached block after the prefix keyed `parent` (a partial one, or a full one whose
        match the caller's limit cut) whose ids start with the longest run of `token_ids`, and that run's length;
        it gains a reference until the caller has copied it. None when no block starts with token_ids[0]."""
        best, longest = None, 0
        for index in self._children.get(parent, ()):
            count = _common_prefix(self.blocks[index].token_ids, token_ids)
            if count > longest:
                best, longest = index, count
        if best is None:
            return None
        self._reference(best)
        return best, longest

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
                self._forget(self.blocks[index])
            self.blocks[index].references = 1
            taken.append(index)
        return taken

    def register(self, index: int, parent: int, token_ids: tuple[int, ...]) -> int:
        """Makes a full block findable by its prefix key (the first of equal blocks stays the one found); returns
        the key, from the key of the block before it (`parent`, 0 for the first block). Partial blocks after the
        same parent whose ids it starts with are dropped: it holds all they do."""
        key = hash((parent, token_ids))
        for other in list(self._children.get(parent, ())):
            kept = self.blocks[other]
            if kept.key is None and token_ids[: len(kept.token_ids)] == kept.token_ids:
                self._drop(kept)
        block = self.blocks[index]
        if block.key is None and key not in self._by_key:
            block.key, block.parent, block.token_ids = key, parent, token_ids
            self._by_key[key] = index
            self._children.setdefault(parent, set()).add(index)
        return key

    def keep_partial(self, index: int, parent: int, token_ids: tuple[int, ...]) -> None:
        """Keeps a partly filled block, holding `token_ids` after the prefix keyed `parent`, findable once it is
        released; unless a cached block after that prefix already starts with these ids. Partial blocks these ids
        extend are dropped."""
        for other in list(self._children.get(parent, ())):
            kept = self.blocks[other]
            if kept.token_ids[: len(token_ids)] == token_ids:
                return
            if kept.key is None and token_ids[: len(kept.token_ids)] == kept.token_ids:
                self._drop(kept)
        block = self.blocks[index]
        block.parent, block.token_ids = parent, token_ids
        self._children.setdefault(parent, set()).add(index)

    def release(self, indices: list[int]) -> None:
        """Drops one reference from each block, last block first so that a sequence's tail is evicted before its
        (more widely shared) head."""
        for index in reversed(indices):
            block = self.blocks[index]
            block.references -= 1
            if block.references == 0:
                if block.token_ids:
                    self._cached[index] = None
                else:
                    self._free.append(index)

    def _reference(self, index: int) -> None:
        block = self.blocks[index]
        if block.references == 0:
            self._cached.pop(index)
        block.references += 1

    def _drop(self, block: Block) -> None:
        """Forgets a superseded partial block's ids: free at once if nobody references it, else once released."""
        self._forget(block)
        if block.references == 0:
            self._cached.pop(block.index)
            self._free.append(block.index)

    def _forget(self, block: Block) -> None:
        if block.key is not None:
            del self._by_key[block.key]
        siblings = self._children[block.parent]
        siblings.discard(block.index)
        if not siblings:
            del self._children[block.parent]
        block.key, block.parent, block.token_ids = None, 0, ()


def _common_prefix(cached: tuple[int, ...], token_ids: list[int]) -> int:
    count = 0
    for a, b in zip(cached, token_ids, strict=False):
        if a != b:
            break
        count += 1
    return count
