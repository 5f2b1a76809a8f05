"""What the ACP session's sender works with: queued session updates (serialised once, text chunks merged while
queued, never beyond TEXT_CHUNK_CHARS, and longer chunks split to that size), the SDK connection's raw
notification sender, and the pacer that makes the server's sessions take turns.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from acp import schema
from acp.connection import Connection
from acp.helpers import text_block

from warpcode.agent.events import SessionUpdate
from warpcode.agent.frame_limits import TEXT_CHUNK_CHARS

DUMP: dict[str, Any] = {"mode": "json", "by_alias": True, "exclude_none": True}


class PendingUpdate:
    """A queued session update (or a log-only record). Consecutive text chunks of one kind merge into one, up to
    TEXT_CHUNK_CHARS."""

    __slots__ = ("chars", "record", "texts", "update")

    def __init__(self, record: dict[str, Any] | None, update: SessionUpdate | None) -> None:
        self.record, self.update = record, update
        self.texts: list[str] | None = None  # the texts of chunks merged into this one, in order
        self.chars = 0  # their length in all

    def merge(self, update: SessionUpdate) -> bool:
        first, text = plain_chunk_text(self.update), plain_chunk_text(update)
        if type(update) is not type(self.update) or first is None or text is None:
            return False
        if update.message_id != self.update.message_id:  # type: ignore[union-attr]  # chunks of two messages
            return False
        if self.texts is None:
            self.texts, self.chars = [first], len(first)
        if self.chars + len(text) > TEXT_CHUNK_CHARS:
            return False
        self.texts.append(text)
        self.chars += len(text)
        return True

    def finish(self) -> dict[str, Any]:
        """The log record, built once: for an update, its ACP JSON (which is also what is sent)."""
        if self.record is None:
            if self.texts is not None:  # a copy keeps the chunk's messageId
                self.update = self.update.model_copy(update={"content": text_block("".join(self.texts))})
                self.texts = None
            assert self.update is not None
            self.record = {"type": "update", "update": self.update.model_dump(**DUMP)}
        return self.record


def split_long_chunk(update: SessionUpdate) -> list[SessionUpdate]:
    """A plain text chunk longer than TEXT_CHUNK_CHARS as chunks of at most that; any other update as it is."""
    text = plain_chunk_text(update)
    if text is None or len(text) <= TEXT_CHUNK_CHARS:
        return [update]
    pieces = range(0, len(text), TEXT_CHUNK_CHARS)  # copies keep the chunk's messageId
    return [update.model_copy(update={"content": text_block(text[i : i + TEXT_CHUNK_CHARS])}) for i in pieces]


def plain_chunk_text(update: SessionUpdate | None) -> str | None:
    """The text of a message or thought chunk that is nothing but text (no annotations, no _meta)."""
    if not isinstance(update, schema.AgentMessageChunk | schema.AgentThoughtChunk) or update.field_meta is not None:
        return None
    content = update.content
    if not isinstance(content, schema.TextContentBlock) or content.annotations is not None:
        return None
    return None if content.field_meta is not None else content.text


def raw_notifier(conn: Any) -> Any:
    """The SDK connection's JSON-RPC notification sender, when `conn` is the SDK's AgentSideConnection: session
    updates already dumped to ACP JSON for the log go out as they are, without building and dumping the SDK's
    SessionNotification model again. None for anything else (tests' fakes), which gets the models."""
    inner = getattr(conn, "_conn", None)
    return inner.send_notification if isinstance(inner, Connection) else None


class StepPacer:
    """Fair turns for the model events of all sessions of a server: each is handled in a pass of the event loop
    of its own, in the order they arrived, so the I/O that became ready meanwhile (a tool's output from its worker
    thread, a client's message, the sends) is handled before the next one and never waits behind a burst of other
    sessions' model output. Without contention an event goes on at once."""

    def __init__(self) -> None:
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._granting: asyncio.AbstractEventLoop | None = None  # the loop a grant is scheduled on

    async def wait_turn(self) -> None:
        loop = asyncio.get_running_loop()
        if self._granting is not loop:  # nobody is being served (or a stale grant on a closed loop): go on
            self._granting = loop
            self._waiters.clear()
            loop.call_soon(self._grant)
            return
        future = loop.create_future()
        self._waiters.append(future)
        await future

    def _grant(self) -> None:
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():  # not cancelled while it waited
                future.set_result(None)
                asyncio.get_running_loop().call_soon(self._grant)  # the next one after that event's pass
                return
        self._granting = None
