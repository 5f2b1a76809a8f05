"""The serving engine's speculation switch: `off`, `ngram` or `suffix`, and when the engine speculates at all.

- `suffix` (the default): the suffix drafter (drafter.py) with its measured defaults: a repeat of at least 4 tokens,
  a 3-token probe, the full 32-token draft after a fully accepted one, off after failures (policy.py).
- `ngram`: prompt-lookup decoding's rule: the continuation of the longest earlier repeat of the last tokens, down to
  two tokens (a single token's repeats are mostly chance: drafting from them trips the guard before copies start),
  a fixed 10-token draft; the same guard turns it off while it fails.
- `off`: the engine runs exactly as without speculation.

Verifying k drafted tokens runs the request as an extension of its cached history (prefill's path), which costs
about a decode step of k + 1 rows on a GPU; while several requests decode, their batched step already uses the
device well and a verify pass per request would delay all of them, so the engine speculates only while at most
`max_running` requests hold the cache (batch-1 traffic: an agent's turn). On a CPU, where a step's cost grows with
its tokens from the first, two requests verifying together pay too (`default_max_running`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from warpcode.model_runtime.speculative.drafter import DraftConfig

Mode = Literal["off", "ngram", "suffix"]
MODES: tuple[Mode, ...] = ("off", "ngram", "suffix")
_DRAFTS: dict[str, DraftConfig] = {
    "suffix": DraftConfig(),
    "ngram": DraftConfig(min_match=2, max_draft=10, probe=10),
}


@dataclass(frozen=True)
class SpeculativeConfig:
    mode: Mode = "suffix"
    max_running: int = 1  # speculate only while at most this many requests are admitted

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"speculative decoding is one of {', '.join(MODES)}; got {self.mode!r}")
        if not isinstance(self.max_running, int) or isinstance(self.max_running, bool) or self.max_running < 1:
            raise ValueError(f"speculative max_running must be a positive integer, got {self.max_running!r}")

    @classmethod
    def for_device(cls, mode: Mode | None, device: str) -> SpeculativeConfig:
        """`mode` as asked, or None: the device's default (default_mode); the device's max_running."""
        return cls(mode or default_mode(device), default_max_running(device))

    @property
    def draft(self) -> DraftConfig | None:
        """How each request drafts; None when off."""
        return _DRAFTS.get(self.mode)


def default_mode(device: str) -> Mode:
    """The mode when none is asked for, on `device` ("cpu", "cuda", "cuda:1"): `suffix` on a CPU, where verifying
    drafts is measured to pay (the built-in model's agent turns decode 2x faster, BENCHMARKS.md); `off` on a GPU,
    whose verify pass still runs outside the CUDA graphs that the single-token step replays, until it is measured
    there to pay too."""
    return "suffix" if device.split(":")[0] == "cpu" else "off"


def default_max_running(device: str) -> int:
    """How many requests may hold the cache while the engine still speculates, on `device`: 2 on a CPU, where two
    agents' turns at once (`warpcode batch --workers 2` on 2 cores) finished the 100 held-out tasks in 612 s with
    both speculating against 1,209 s with speculation stepping aside (BENCHMARKS.md); 1 elsewhere, unmeasured."""
    return 2 if device.split(":")[0] == "cpu" else 1
