"""Spotting a turn that goes round in circles: the model making the same calls and getting the same results again.

A model that does not know what to do next often repeats itself: the same search, the same failing test run, or two
calls in turn (search, run tests, search, run tests). Nothing changes between the rounds, so nothing will: each
further request only spends time and context until the turn's request limit. Agents that run unattended stop such
loops (OpenHands' stuck detector compares its last action/observation pairs the same way); a person can then
rephrase the request or pick a stronger model.

A round is what one model request led to: its tool calls (name and arguments) and their observations. Numbers in
observations are masked before comparing, so that a test run's duration or a temporary file's name does not hide a
repeat; the calls themselves must be identical.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from warpcode.model_runtime.chat.messages import ToolCall

REPEATS = 3  # the same cycle of rounds this many times in a row ends the turn
LONGEST_CYCLE = 2  # cycles of one round (A A A) and of two (A B A B A B)
_NUMBER = re.compile(r"\d+")
_TEMPORARY = re.compile(r"/tmp/\S*")


@dataclass
class RepeatWatch:
    """Keeps the turn's rounds; `record` says when the last ones repeat a cycle REPEATS times."""

    rounds: list[tuple[str, ...]] = field(default_factory=list)

    def record(self, calls: list[ToolCall], observations: list[str]) -> str | None:
        """Adds a round; when the turn goes round in circles, returns the names of the repeated calls (one cycle's,
        comma-separated), else None."""
        self.rounds.append(tuple(_round_key(call, seen) for call, seen in zip(calls, observations, strict=True)))
        for cycle in range(1, LONGEST_CYCLE + 1):
            span = cycle * REPEATS
            last = self.rounds[-span:]
            if len(last) == span and all(last[i] == last[i % cycle] for i in range(span)):
                return ", ".join(json.loads(key)[0] for keys in last[:cycle] for key in keys)
        return None


def _round_key(call: ToolCall, observation: str) -> str:
    seen = _NUMBER.sub("#", _TEMPORARY.sub("TMP", observation))
    return json.dumps([call.name, call.arguments, seen], sort_keys=True)
