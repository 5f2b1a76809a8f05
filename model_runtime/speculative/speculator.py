"""One request's speculation inside the serving engine: its drafter, fed every token the request gets, and its
draft-length policy, told each verify step's outcome."""

from __future__ import annotations

from collections.abc import Iterable

from warpcode.model_runtime.speculative.drafter import DraftConfig, SuffixDrafter
from warpcode.model_runtime.speculative.policy import DraftPolicy


class Speculator:
    def __init__(self, config: DraftConfig, prompt_ids: Iterable[int], documents: Iterable[Iterable[int]] = ()) -> None:
        """`documents`: token sequences to copy from besides the request's own tokens (the plain text of files the
        agent read)."""
        self.drafter = SuffixDrafter(config, prompt_ids)
        for document in documents:
            self.drafter.add_document(document)
        self.policy = DraftPolicy(config)

    def observe(self, token: int) -> None:
        """A token the request committed (by a decode step, a prefill or a verify step)."""
        self.drafter.extend((token,))

    def draft(self, room: int) -> list[int]:
        """The tokens to verify next step, at most `room` (what the cache and max_tokens leave); [] to decode."""
        length = min(self.policy.length(), room)
        return self.drafter.propose(length) if length > 0 else []

    def verified(self, drafted: int, accepted: int) -> None:
        self.policy.update(drafted, accepted)

    def decoded(self) -> None:
        """A plain decode step: it counts down the wait of a request whose drafts stopped."""
        self.policy.update(0, 0)
