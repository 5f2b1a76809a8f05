"""`scripted:PATH`: deterministic replay of model turns (design.md section 5), for tests and demos.

PATH holds `{"turns": [{"text": "...", "tool_calls": [{"name": ..., "arguments": {...}}]}, ...]}`. Each model call
consumes one turn; when the turns run out the model ends the turn. Extensions for tests: `arguments` given as a
string is sent as raw JSON text (so invalid JSON can be replayed), `"thought"` streams a thought, and
`"finish": "length"` replays a response cut by the token limit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from warpcode.agent.backends.base import (
    BackendError,
    Finish,
    ModelEvent,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    approximate_tokens,
)
from warpcode.agent.messages import Message, ToolCall

DELTAS_PER_TEXT = 3  # a turn's text arrives in a few pieces, like a real stream


class ScriptedBackend:
    context_window = 32_768

    def __init__(self, turns: list[dict[str, Any]], context_window: int | None = None) -> None:
        self.turns = list(turns)
        self.calls = 0
        if context_window:
            self.context_window = context_window

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedBackend:
        try:
            script = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BackendError(f"cannot read the scripted model {path}: {exc}") from exc
        if not isinstance(script, dict) or not isinstance(script.get("turns"), list):
            raise BackendError(f'{path}: a scripted model is a JSON object {{"turns": [...]}}')
        return cls(script["turns"], script.get("context_window"))

    def count_tokens(self, text: str) -> int:
        return approximate_tokens(text)

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        prompt_tokens = sum(self.count_tokens(m.content) for m in messages)
        turn = self.turns[self.calls] if self.calls < len(self.turns) else {}
        self.calls += 1
        if thought := turn.get("thought", ""):
            yield ThoughtDelta(thought)
        text = turn.get("text", "")
        step = max(1, -(-len(text) // DELTAS_PER_TEXT))
        for start in range(0, len(text), step):
            yield TextDelta(text[start : start + step])
        calls = [self._tool_call(spec, i) for i, spec in enumerate(turn.get("tool_calls") or [])]
        for call in calls:
            yield ToolCallReady(call)
        reason = "length" if turn.get("finish") == "length" else "tool_calls" if calls else "stop"
        output = approximate_tokens(text + "".join(c.arguments_json() for c in calls))
        yield Finish(reason, prompt_tokens, output)

    def _tool_call(self, spec: Any, index: int) -> ToolCall:
        call_id = f"call_{self.calls}_{index}"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            return ToolCall(call_id, "", error=f"a tool call needs a 'name': got {json.dumps(spec)}")
        arguments = spec.get("arguments", {})
        if isinstance(arguments, str):
            return ToolCall.from_json(call_id, spec["name"], arguments)
        if not isinstance(arguments, dict):
            return ToolCall(
                call_id, spec["name"], error="arguments must be a JSON object", raw_arguments=json.dumps(arguments)
            )
        return ToolCall(call_id, spec["name"], arguments)
