"""Which sequences hold cache blocks, which prefill next and with how many tokens, and who is preempted.

First come, first served: a waiting sequence is admitted when its blocks fit (after reusing every cached block of
its longest cached prefix) with one block to spare for each decoding sequence, so that admissions do not starve
running streams of room to grow. Past its cached full blocks, the cached block that shares the most leading ids
with the sequence's next ones (a partial block another sequence ended with) is copied into its first fresh block,
and those ids count as computed too. When a sequence leaves (finished, cancelled or preempted), its full blocks stay
in the prefix cache and so does its partly filled last one. When a decoding sequence finds no block, the newest
admitted sequence is preempted: its blocks are released and it waits at the front of the queue, to be prefilled
again from its prompt and the tokens it had generated.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from warpcode.model_runtime.serving.block_manager import BlockManager
from warpcode.model_runtime.serving.sequence import Sequence


class Scheduler:
    def __init__(
        self, blocks: BlockManager, max_num_seqs: int, copy_blocks: Callable[[list[tuple[int, int]]], None]
    ) -> None:
        """`copy_blocks` copies the keys and values of blocks (source, target) in every layer before any later
        forward pass runs (in stream order)."""
        self.blocks, self.max_num_seqs, self.copy_blocks = blocks, max_num_seqs, copy_blocks
        self.waiting: deque[Sequence] = deque()
        self.admitted: list[Sequence] = []  # holding blocks, in admission order

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.admitted

    def admit(self) -> list[Sequence]:
        """Admits waiting sequences in order while they fit; returns them."""
        if not self.waiting:
            return []
        decoding = sum(1 for s in self.admitted if s.pending == 1)
        admitted, copies = [], []
        while self.waiting and len(self.admitted) < self.max_num_seqs:
            if self.waiting[0].suspect and any(s.suspect for s in self.admitted):
                break  # one suspect at a time: if it fails again, it fails alone
            if not self._allocate(self.waiting[0], decoding, copies):
                break
            admitted.append(self.waiting.popleft())
            self.admitted.append(admitted[-1])
            decoding += admitted[-1].pending == 1  # a fully cached prompt decodes at once: it needs its spare block
        if copies:
            self.copy_blocks(copies)
            self.blocks.release([source for source, _ in copies])  # copied: evictable again
        return admitted

    def prefill_plan(self, budget: int) -> list[tuple[Sequence, int]]:
        """(sequence, tokens) to prefill in the next forward pass, at most `budget` tokens in all; a sequence's last
        chunk stops at its last token, whose logits give its next token."""
        plan = []
        for seq in self.admitted:
            if budget == 0:
                break
            if seq.pending > 1 and seq.finish_reason is None:
                count = min(seq.pending, budget)
                plan.append((seq, count))
                budget -= count
        return plan

    def grow(self, seq: Sequence, slots: int) -> bool:
        """Gives `seq` blocks for its first `slots` slots; False when the pool has none left."""
        needed = self.blocks.blocks_for(slots) - len(seq.block_table)
        if needed <= 0:
            return True
        if needed > self.blocks.available:
            return False
        seq.block_table += self.blocks.allocate(needed)
        return True

    def register_computed(self, seq: Sequence) -> None:
        """Makes the sequence's newly completed full blocks findable by later requests."""
        size = self.blocks.block_size
        while seq.registered < seq.computed // size:
            number = seq.registered
            parent = seq.block_keys[-1] if seq.block_keys else 0
            block_ids = tuple(seq.tokens(number * size, (number + 1) * size))
            seq.block_keys.append(self.blocks.register(seq.block_table[number], parent, block_ids))
            seq.registered += 1

    def preempt_newest(self) -> Sequence:
        """The newest admitted sequence still running goes back to the front of the queue, its blocks released."""
        victim = next(s for s in reversed(self.admitted) if s.finish_reason is None)
        self.requeue(victim)
        victim.handle.stats.preemptions += 1
        return victim

    def requeue(self, seq: Sequence) -> None:
        """Puts an admitted (or waiting) sequence back at the front of the queue, its blocks released."""
        if seq in self.admitted:
            self.admitted.remove(seq)
            self._release(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.waiting.appendleft(seq)

    def retire(self, seq: Sequence) -> None:
        """Drops a finished (or cancelled) sequence, wherever it is."""
        if seq in self.admitted:
            self.admitted.remove(seq)
            self._release(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def _allocate(self, seq: Sequence, decoding: int, copies: list[tuple[int, int]]) -> bool:
        tokens, size = seq.token_ids, self.blocks.block_size
        # The last token is always computed again: its logits give the next token.
        matched, keys = self.blocks.match_prefix(tokens, (len(tokens) - 1) // size)
        start = len(matched) * size
        partial = self.blocks.match_partial(keys[-1] if keys else 0, tokens[start : min(start + size, len(tokens) - 1)])
        needed = self.blocks.blocks_for(len(tokens)) - len(matched)
        if partial and needed + decoding > self.blocks.available:
            # Held for the copy, the source no longer counts as available, yet it saves no block: when the pool is
            # that tight, recompute its ids instead of waiting for a block that only this sequence could free.
            self.blocks.release([partial[0]])
            partial = None
        if needed + decoding > self.blocks.available:
            self.blocks.release(matched)
            return False
        fresh = self.blocks.allocate(needed)
        seq.block_table, seq.block_keys = matched + fresh, keys
        seq.computed, seq.registered = start, len(matched)
        if partial:
            copies.append((partial[0], fresh[0]))
            seq.computed += partial[1]
        # A preempted sequence comes back with its output as part of its tokens: only prompt tokens count as cached.
        seq.handle.stats.cached_tokens = min(seq.computed, len(seq.prompt_ids))
        return True

    def _release(self, seq: Sequence) -> None:
        """Releases the sequence's blocks, keeping its partly filled last one (its ids up to `computed`) cached."""
        self.register_computed(seq)
        full, rest = divmod(seq.computed, self.blocks.block_size)
        if rest:
            parent = seq.block_keys[full - 1] if full else 0
            ids = tuple(seq.tokens(full * self.blocks.block_size, seq.computed))
            self.blocks.keep_partial(seq.block_table[full], parent, ids)
        self.blocks.release(seq.block_table)
        seq.block_table, seq.block_keys = [], []
        seq.computed = seq.registered = 0
