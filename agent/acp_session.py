"""One ACP session: the agent loop, its session/update stream to the client, permission questions, persistence.

Streaming policy: the loop's `emit` is synchronous, so updates are queued per session and one sender task
sends each batch, in order, while the batch is written to the session log (fsync) beside it. The queue is
bounded by backpressure on the turn: each model event and each tool call waits while MAX_QUEUED_UPDATES updates
are unsent, so a slow client slows the turn instead of growing memory. Streamed command output, the only thing
produced without the model, is coalesced: a newer output snapshot of a call replaces one still waiting in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from acp import schema
from acp.exceptions import RequestError
from acp.helpers import update_user_message_text

from warpcode.agent.backends import ModelBackend, ModelEvent
from warpcode.agent.client_fs import ClientFiles, ClientFileWorkspace
from warpcode.agent.events import SessionUpdate
from warpcode.agent.loop import Agent, Limits, TurnResult
from warpcode.agent.messages import Message
from warpcode.agent.permissions import Decision, PermissionPolicy, mode_policy
from warpcode.agent.session_store import SavedSession, SessionStore, message_record

MAX_QUEUED_UPDATES = 256
CLOSE_FLUSH_S = 2.0
PERMISSION_OPTIONS = [
    schema.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    schema.PermissionOption(option_id="allow_always", name="Always allow this kind of action", kind="allow_always"),
    schema.PermissionOption(option_id="reject_once", name="Reject once", kind="reject_once"),
    schema.PermissionOption(option_id="reject_always", name="Always reject this kind of action", kind="reject_always"),
]
log = logging.getLogger(__name__)


class SessionBusy(RuntimeError):
    """A prompt (or restore) arrived while the session's turn is still running: refused, never interleaved."""


class AcpSession:
    def __init__(
        self,
        session_id: str,
        cwd: str,
        mode: str,
        conn: Any,
        store: SessionStore,
        backend: ModelBackend,
        limits: Limits,
        client_files: ClientFiles | None = None,
        saved: SavedSession | None = None,
    ) -> None:
        self.session_id, self.cwd, self.conn, self.store, self.client_files = session_id, cwd, conn, store, client_files
        self.grants: dict[str, Decision] = dict(saved.grants) if saved else {}  # tool kind -> the "always" answer
        self._queue: deque[tuple[dict[str, Any], SessionUpdate | None]] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set when nothing is queued or being sent
        self._room = asyncio.Event()  # cleared while the queue is over MAX_QUEUED_UPDATES
        self._no_turn = asyncio.Event()
        for event in (self._idle, self._room, self._no_turn):
            event.set()
        self._connected = True
        self._current_call: schema.ToolCallStart | None = None  # the call the policy is asked about
        workspace = ClientFileWorkspace(cwd, client_files) if client_files else cwd
        self.agent = Agent(workspace, _PacedBackend(backend, self), self._emit, mode, self._policy(mode), limits)
        if saved:
            self.agent.messages[1:] = saved.messages
        self._sender = asyncio.create_task(self._send_loop(), name=f"warpcode.session.{session_id}.sender")

    @property
    def mode(self) -> str:
        return self.agent.mode

    @property
    def running(self) -> bool:
        return not self._no_turn.is_set()

    async def prompt(self, text: str) -> TurnResult:
        if self.running:
            raise SessionBusy(
                f"Session {self.session_id!r} is already running a prompt turn: wait for its answer "
                f"or send session/cancel first."
            )
        self._no_turn.clear()
        result = TurnResult("cancelled")
        try:
            self._record({"type": "prompt", "text": text})
            result = await self.agent.prompt(text)
            return result
        finally:
            messages = [message_record(m) for m in self.agent.messages[1:]]
            self._record({"type": "turn_end", "stopReason": result.stop_reason, "messages": messages})
            if self._connected:  # every update of the turn reaches the client before the prompt's answer
                await self.flush()
            self._no_turn.set()

    def cancel(self) -> None:
        if self.client_files is not None:
            self.client_files.cancel_pending()
        self.agent.cancel()

    def set_mode(self, mode: str) -> None:
        self.agent.set_mode(mode, self._policy(mode))
        self._record({"type": "mode", "mode": mode})

    async def replay(self, history: list[dict[str, Any]]) -> None:
        """Send a loaded session's whole history as session/update notifications, oldest first."""
        for record in history:
            if record["type"] == "prompt":
                update = update_user_message_text(record["text"])
            else:
                update = schema.SessionNotification.model_validate(
                    {"sessionId": self.session_id, "update": record["update"]}
                ).update
            await self.conn.session_update(session_id=self.session_id, update=update)

    async def flush(self) -> None:
        await self._idle.wait()

    async def wait_for_room(self) -> None:
        await self._room.wait()

    async def close(self) -> None:
        """Cancel the running turn, persist everything it emitted, stop sending. A client that stopped reading
        cannot hold this up: after CLOSE_FLUSH_S the sender is stopped mid-send (its batch is already on disk)."""
        self._connected = False
        self.cancel()
        await self._no_turn.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), CLOSE_FLUSH_S)
        self._sender.cancel()
        await asyncio.gather(self._sender, return_exceptions=True)
        if self._queue:
            await self.store.append_async(self.session_id, [record for record, _ in self._queue])
            self._queue.clear()

    @property
    def queued_updates(self) -> int:
        return len(self._queue)

    def _policy(self, mode: str) -> PermissionPolicy:
        decide = mode_policy(mode, self._ask)

        async def paced(tool_name: str, kind: str, arguments: dict[str, Any]) -> Decision:
            await self.wait_for_room()  # each tool call emits a few updates: it waits, like model events do
            return await decide(tool_name, kind, arguments)

        return paced

    async def _ask(self, tool_name: str, kind: str, arguments: dict[str, Any]) -> Decision:
        if kind in self.grants:
            return self.grants[kind]
        await self.flush()  # the client hears of the tool call before it is asked about it
        call = self._current_call
        tool_call = schema.ToolCallUpdate(
            tool_call_id=call.tool_call_id if call else "unknown",
            title=call.title if call else tool_name,
            kind=kind,  # type: ignore[arg-type]
            status="pending",
            locations=call.locations if call else None,
            raw_input=arguments,
        )
        try:
            response = await self.conn.request_permission(
                session_id=self.session_id, tool_call=tool_call, options=PERMISSION_OPTIONS
            )
        except (ConnectionError, RequestError) as exc:  # no answer: never run unasked
            log.warning("permission request for %s failed: %s", tool_name, exc)
            return "reject"
        outcome = response.outcome
        if not isinstance(outcome, schema.AllowedOutcome):
            return "reject"  # cancelled: the turn is being cancelled too
        decision: Decision = "allow" if outcome.option_id in ("allow_once", "allow_always") else "reject"
        if outcome.option_id in ("allow_always", "reject_always"):
            self.grants[kind] = decision
            self._record({"type": "grant", "kind": kind, "decision": decision})
        return decision

    def _emit(self, update: SessionUpdate) -> None:
        if isinstance(update, schema.ToolCallStart):
            self._current_call = update
        if _is_output_snapshot(update) and self._queue:
            _, last = self._queue[-1]
            if _is_output_snapshot(last) and last.tool_call_id == update.tool_call_id:  # type: ignore[union-attr]
                self._queue.pop()
        update_json = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._enqueue({"type": "update", "update": update_json}, update)

    def _record(self, record: dict[str, Any]) -> None:
        self._enqueue(record, None)

    def _enqueue(self, record: dict[str, Any], update: SessionUpdate | None) -> None:
        self._queue.append((record, update))
        self._idle.clear()
        self._wake.set()
        if len(self._queue) >= MAX_QUEUED_UPDATES:
            self._room.clear()

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = list(self._queue)
                self._queue.clear()
                # The fsync runs beside the sends (a client sees an update without waiting for the disk); the next
                # batch waits for both, so the log keeps the order and batches grow under load (group commit).
                records = [record for record, _ in batch]
                persisted, _ = await asyncio.gather(
                    self.store.append_async(self.session_id, records), self._send_batch(batch), return_exceptions=True
                )
                if isinstance(persisted, OSError):  # a full disk must not silence the session: the client got it
                    log.error("session %s: could not persist %d events: %s", self.session_id, len(batch), persisted)
                elif isinstance(persisted, BaseException):
                    raise persisted
                self._room.set()
            self._idle.set()

    async def _send_batch(self, batch: list[tuple[dict[str, Any], SessionUpdate | None]]) -> None:
        for _, update in batch:
            if update is not None and self._connected:
                await self._send(update)

    async def _send(self, update: SessionUpdate) -> None:
        try:
            await self.conn.session_update(session_id=self.session_id, update=update)
        except Exception as exc:  # the connection is gone: keep persisting, stop sending
            log.warning("session %s: client unreachable, updates are only persisted now: %s", self.session_id, exc)
            self._connected = False


class _PacedBackend:
    """The session's model backend, paused between events while the client is behind (the backpressure)."""

    def __init__(self, backend: ModelBackend, session: AcpSession) -> None:
        self.backend, self.session = backend, session
        self.context_window = backend.context_window

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        async for event in self.backend.stream(messages, tools):
            await self.session.wait_for_room()
            yield event


def flatten_prompt(blocks: list[Any]) -> str:
    """The user message of an ACP prompt: text as is, embedded resources (the editor's context) as delimited
    blocks the model can tell apart, links by their URI. Images and audio are not advertised, so not expected."""
    parts = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, schema.TextResourceContents):
                parts.append(f'<context uri="{resource.uri}">\n{resource.text}\n</context>')
            else:
                parts.append(f"[binary resource {resource.uri} not shown]")
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(f"[resource {block.name}: {block.uri}]")
        else:
            parts.append(f"[{block.type} content not supported]")
    return "\n\n".join(parts)


def _is_output_snapshot(update: SessionUpdate | None) -> bool:
    return isinstance(update, schema.ToolCallProgress) and update.status == "in_progress" and update.content is not None
