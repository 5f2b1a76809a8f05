"""The ids a session gives its messages and tool calls.

Tool call ids must be unique within a session (clients key their tool call views by them), and a restarted
service goes on with a session from its log: the ids its earlier turns used are read back from the log
(`used_tool_call_ids`), and the loop renames any new call that repeats one (model servers often number calls
from zero in every response). Derived from the log, not guessed: unique, not just unlikely to collide.

Message ids (`messageId` on message chunks): every chunk of one message carries the message's id, and a new id
means a new message. The agent's text and its thoughts are messages of their own; anything else sent between
two chunks (a tool call, usage) ends the message, so the model's next words start a new one.
"""

from __future__ import annotations

import uuid
from typing import Any

from acp import schema

from warpcode.agent.service.session_store import SavedSession

_MESSAGE_CHUNKS = (schema.AgentMessageChunk, schema.AgentThoughtChunk)


def new_message_id() -> str:
    return uuid.uuid4().hex


def used_tool_call_ids(saved: SavedSession) -> set[str]:
    """Every tool call id the session's log holds: those shown to the client and those in the trajectory."""
    shown = {
        record["update"].get("toolCallId")
        for record in saved.history
        if record["type"] == "update" and record["update"].get("sessionUpdate") == "tool_call"
    }
    called = {call.id for message in saved.messages for call in message.tool_calls}
    return {i for i in shown | called if isinstance(i, str) and i}


class MessageIds:
    """Stamps the agent's message and thought chunks with their message's id, as they are emitted."""

    def __init__(self) -> None:
        self._kind: str | None = None  # the kind of the message being streamed, None between messages
        self._id = ""

    def stamp(self, update: Any) -> Any:
        if not isinstance(update, _MESSAGE_CHUNKS):
            self._kind = None
            return update
        if update.session_update != self._kind:
            self._kind, self._id = update.session_update, new_message_id()
        return update.model_copy(update={"message_id": self._id})

    def end_message(self) -> None:
        """The next chunk starts a new message (a new turn)."""
        self._kind = None
