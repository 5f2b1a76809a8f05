"""The trajectory: the list of messages of a session, in the shape every backend converts from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass
class ToolCall:
    """One tool call the model asked for. `error` is set when its arguments could not be parsed; the loop then
    answers with that error instead of running the tool."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    raw_arguments: str | None = None  # the model's own text when it was not a valid JSON object

    @classmethod
    def from_json(cls, call_id: str, name: str, raw: str) -> ToolCall:
        """Arguments sent as JSON text (OpenAI wire format): a parse failure becomes `error`, never an exception."""
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return cls(call_id, name, {}, f"arguments are not valid JSON ({exc.msg} at char {exc.pos}): {raw!r}", raw)
        except RecursionError:  # nested deeper than Python's stack: no tool takes such arguments
            return cls(call_id, name, {}, f"arguments are nested too deeply to read: {raw[:200]!r}...", raw)
        if not isinstance(arguments, dict):
            return cls(call_id, name, {}, f"arguments must be a JSON object, got {type(arguments).__name__}", raw)
        return cls(call_id, name, arguments)

    def arguments_json(self) -> str:
        return self.raw_arguments if self.raw_arguments is not None else json.dumps(self.arguments)


@dataclass
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # role "tool": the call this observation answers
    name: str | None = None  # role "tool": the tool's name (chat templates and summaries show it)
    reasoning: str | None = None  # role "assistant": what the model thought before answering (None: it did not)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions form (also what Hugging Face chat templates read, bar argument types)."""
        if self.role == "tool":
            return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.content}
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["content"] = self.content or None
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
                for c in self.tool_calls
            ]
        return message
