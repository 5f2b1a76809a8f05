"""How many drafted tokens a request verifies each step: the guard that keeps speculation from costing time.

Verifying k drafted tokens costs about a decode step of k + 1 rows (on the H200 a step of 32 rows costs 6.7 of one
row), so a long draft pays only when it is likely to be accepted whole, and a request whose drafts keep failing
should stop drafting. The policy, fed with each step's (drafted, accepted):

- it starts with a probe (`probe` tokens, e.g. 3);
- after a draft accepted whole it asks for the full draft (`max_draft`, e.g. 32), or with `growth` g for g times as
  many rows as it verified (d drafted: min(max_draft, g * (d + 1) - 1), so 3, 7, 15, 31 with g = 2); after a draft
  accepted in part, for a probe again;
- after `patience` drafts in a row of which no token was accepted it stops drafting (length 0);
- while stopped, every step counts down `retry_after` steps, then one probe is allowed: accepted whole, drafting is
  back on (the full draft next); otherwise the wait doubles (up to 64 x retry_after) and the countdown restarts;
  accepted in part, drafting is back on at the probe length. A success resets the wait.

A step that drafted nothing (the policy said 0, or the drafter had no match) tells nothing about acceptance: it only
counts down a stopped request's wait.
"""

from __future__ import annotations

from warpcode.model_runtime.speculative.drafter import DraftConfig

MAX_BACKOFF = 64  # the longest wait while stopped, in units of retry_after


class DraftPolicy:
    """The draft length for one request's next step (`length()`), from its past steps (`update`)."""

    def __init__(self, config: DraftConfig | None = None) -> None:
        self.config = config or DraftConfig()
        self._length = self.config.probe
        self._failures = 0  # drafts in a row with nothing accepted
        self._stopped = False
        self._wait = self.config.retry_after  # the countdown's start while stopped
        self._countdown = 0

    @property
    def stopped(self) -> bool:
        return self._stopped

    def length(self) -> int:
        """The most tokens to draft this step (0: do not draft)."""
        if self._stopped:
            return self.config.probe if self._countdown == 0 else 0
        return self._length

    def update(self, drafted: int, accepted: int) -> None:
        """One step's outcome: `drafted` tokens verified, the first `accepted` of them right."""
        if drafted < 0 or not 0 <= accepted <= drafted:
            raise ValueError(f"need 0 <= accepted <= drafted, got drafted={drafted}, accepted={accepted}")
        config = self.config
        if drafted == 0:
            if self._stopped and self._countdown > 0:
                self._countdown -= 1
            return
        if accepted == 0:
            self._failures += 1
            if self._stopped:  # a retry that failed: wait twice as long
                self._wait = min(2 * self._wait, MAX_BACKOFF * config.retry_after)
                self._countdown = self._wait
            elif self._failures >= config.patience:
                self._stopped, self._countdown = True, self._wait
            self._length = config.probe
            return
        self._failures = 0
        self._stopped = False
        self._wait = config.retry_after
        if accepted < drafted:
            self._length = config.probe
        elif config.growth:
            self._length = min(config.max_draft, config.growth * (drafted + 1) - 1)
        else:
            self._length = config.max_draft
