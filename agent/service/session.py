"""One ACP session: the agent loop, its session/update stream to the client, permission questions, persistence.

Streaming policy: the loop's `emit` is synchronous, so updates are queued per session and one sender task
sends each batch, in order. Each update is serialised once: its ACP JSON is the log record and, over the SDK's
connection, the notification's params as they are (no second SessionNotification model and dump). A second
task writes the session log in the same order; a send never waits for the disk. During a turn the log is
written in groups, at least every LOG_GROUP_S (each write is an fsync) and at the turn's end, which the prompt's
answer waits for: a crash mid-turn loses at most that much of the turn's display history, and the turn's
trajectory is only ever saved at its end anyway. The queues are bounded by backpressure on the turn: each model
event and each tool call waits while MAX_QUEUED_UPDATES updates are unsent (or unwritten), so a slow client or
disk slows the turn instead of growing memory. While still queued, updates are coalesced where the protocol
allows it: consecutive plain text chunks of one kind (message or thought) go out as one chunk with their texts
joined (up to TEXT_CHUNK_CHARS: longer ones are split, so that every frame fits the client's limit), and a newer
output snapshot of a call replaces one still waiting (command output is resent whole).
Model events of all the server's sessions take turns (StepPacer): one per pass of the event loop, so a tool's
output arriving from its worker thread is sent before the next event, not after a burst of other sessions'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

from acp import schema
from acp.exceptions import RequestError
from acp.meta import CLIENT_METHODS

from warpcode.agent.backends import ModelBackend, ModelEvent
from warpcode.agent.events import SessionUpdate, edit_diffs
from warpcode.agent.frame_limits import capped_input
from warpcode.agent.loop import Agent, Limits, TurnResult
from warpcode.agent.mcp.session_tools import McpTools
from warpcode.agent.mcp.specs import McpServerSpec, Skipped
from warpcode.agent.permissions import Decision, GrantScope, PermissionPolicy, grant_scope, mode_policy
from warpcode.agent.service.client_fs import ClientFiles, ClientFileWorkspace
from warpcode.agent.service.client_terminal import ClientTerminals
from warpcode.agent.service.prompt_record import prompt_record, prompt_title, prompt_updates
from warpcode.agent.service.session_ids import MessageIds, new_message_id, used_tool_call_ids
from warpcode.agent.service.session_store import SavedSession, SessionStore, message_record
from warpcode.agent.service.update_stream import DUMP, PendingUpdate, StepPacer, raw_notifier, split_long_chunk
from warpcode.model_runtime.chat.messages import Message
from warpcode.tools import Workspace
from warpcode.tools.sandbox import Sandbox

MAX_QUEUED_UPDATES = 256
SESSION_UPDATE = CLIENT_METHODS["session_update"]
CLOSE_FLUSH_S = 2.0
CLOSE_TURN_S = 10.0  # a cancelled turn ends at its next await; a tool's worker thread is not waited for
LOG_GROUP_S = 1.0  # during a turn, the session log is written at least this often (and at its end)
SCOPE_META = "warpcode/scope"  # the always options' _meta: what they cover (GrantScope.record)
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
        pacer: StepPacer | None = None,
        state_dir: Path | None = None,  # the workspace's state (checkpoints, caches); None: the default place
        sandbox: Sandbox | None = None,  # where the session's commands and tests run; None: as the user
        model: str | None = None,  # the backend spec `backend` was built from (config_options.py)
        client_terminal: bool = False,  # the client advertised terminal/*: commands run in its terminals
        mcp_servers: tuple[McpServerSpec | Skipped, ...] = (),  # started now, stopped by close()
    ) -> None:
        self.pacer = pacer or StepPacer()  # the server's, shared by its sessions
        self.session_id, self.cwd, self.conn, self.store, self.client_files = session_id, cwd, conn, store, client_files
        self.grants: dict[GrantScope, Decision] = dict(saved.grants) if saved else {}  # the "always" answers
        self._queue: deque[PendingUpdate] = deque()  # to send, in order (records to log travel in it too)
        self._unlogged: list[dict[str, Any]] = []  # taken from the queue, not yet written to the log
        self._wake, self._log_wake = asyncio.Event(), asyncio.Event()
        self._idle = asyncio.Event()  # set when nothing is queued or being sent
        self._logged = asyncio.Event()  # set when nothing is waiting for the log or being written
        self._log_due = asyncio.Event()  # set: write the log now (the turn ends, the session closes, a backlog)
        self._room = asyncio.Event()  # cleared while the queue is over MAX_QUEUED_UPDATES
        self._no_turn = asyncio.Event()
        for event in (self._idle, self._logged, self._room, self._no_turn):
            event.set()
        self._notify = raw_notifier(conn)
        self._connected = True
        self._current_call: schema.ToolCallStart | None = None  # the call the policy is asked about
        self._message_ids = MessageIds()
        prompts = [record for record in saved.history if record["type"] == "prompt"] if saved else []
        self._titled = any(prompt_title(record) for record in prompts)  # as session/list titles it
        self.model = model
        workspace = ClientFileWorkspace(cwd, client_files, state_dir) if client_files else Workspace(cwd, state_dir)
        self._backend = _PacedBackend(backend, self)
        self.mcp = McpTools(mcp_servers, cwd) if mcp_servers else None
        self.agent = Agent(workspace, self._backend, self._emit, mode, self._policy(mode), limits, sandbox, self.mcp)
        if saved:
            self.agent.messages[1:] = saved.messages
            self.agent.remember_call_ids(used_tool_call_ids(saved))  # the new turns' ids differ from the replayed
        if client_terminal and sandbox is None:  # never around a sandbox: the editor runs commands as the user
            loop = asyncio.get_running_loop()
            self.agent.toolbox.executor = ClientTerminals(conn, session_id, loop, self.agent.show_terminal)
        self._sender = asyncio.create_task(self._send_loop(), name=f"warpcode.session.{session_id}.sender")
        self._writer = asyncio.create_task(self._log_loop(), name=f"warpcode.session.{session_id}.log")

    @property
    def mode(self) -> str:
        return self.agent.mode

    @property
    def workspace(self) -> Workspace:
        """The session's workspace: its checkpoints are those of the session's edits."""
        return self.agent.workspace

    @property
    def running(self) -> bool:
        return not self._no_turn.is_set()

    async def prompt(
        self, blocks: list[Any], command: Callable[[], Coroutine[Any, Any, TurnResult]] | None = None
    ) -> TurnResult:
        """Run a turn for the prompt's ACP content blocks (the model is shown them flattened: flatten_prompt), or,
        given `command` (slash_commands.py), that command's work instead."""
        if self.running:
            raise SessionBusy(
                f"Session {self.session_id!r} is already running a prompt turn: wait for its answer "
                f"or send session/cancel first."
            )
        self._no_turn.clear()
        self._log_due.clear()
        result = TurnResult("cancelled")
        text = flatten_prompt(blocks)
        try:
            record = prompt_record(blocks, text, new_message_id())
            self._record(record)
            self._message_ids.end_message()
            if command is None and not self._titled and (title := prompt_title(record)):
                self._titled = True
                self._emit(schema.SessionInfoUpdate(session_update="session_info_update", title=title))
            result = await (self.agent.perform(command()) if command else self.agent.prompt(text))
            return result
        finally:
            messages = [message_record(m) for m in self.agent.messages[1:]]
            self._record({"type": "turn_end", "stopReason": result.stop_reason, "messages": messages})
            try:
                if self._connected:  # every update of the turn reaches the client before the prompt's answer
                    await self.flush()
            finally:  # even when the connection's end cancels the flush: close() waits for this
                self._no_turn.set()

    def cancel(self) -> None:
        if self.client_files is not None:
            self.client_files.cancel_pending()
        self.agent.cancel()

    def set_mode(self, mode: str) -> None:
        self.agent.set_mode(mode, self._policy(mode))
        self._record({"type": "mode", "mode": mode})

    def set_model(self, model: str, backend: ModelBackend) -> None:
        """Answer with `backend` (built from the spec `model`) from the next model request on, this turn's too."""
        self._backend.backend, self.model = backend, model
        self._record({"type": "model", "model": model})

    async def announce(self, update: Any) -> None:
        """Send an update of the session's state (its mode or configuration changed), in order with the others, and
        wait until it is sent (before the request that changed the state is answered). Its log record is not an
        "update": a loaded session's answer carries its current state, so it is not replayed."""
        self._enqueue(PendingUpdate({"type": "announced", "update": update.model_dump(**DUMP)}, update))
        await self.flush()

    async def flush(self) -> None:
        """Wait until everything queued so far is sent and written to the log (the sender hands each batch to
        the log before sending it, so once it is idle the log has every record)."""
        self._log_due.set()
        await self._idle.wait()
        await self._logged.wait()

    async def wait_for_room(self) -> None:
        await self._room.wait()

    async def close(self) -> None:
        """Cancel the running turn, persist everything it emitted, stop sending. A client that stopped reading
        cannot hold this up: after CLOSE_FLUSH_S the sender is stopped mid-send (its batch is already on disk).
        A turn that does not end within CLOSE_TURN_S of its cancel is left behind (logged), never waited for."""
        self._connected = False
        self.cancel()
        try:
            await asyncio.wait_for(self._no_turn.wait(), CLOSE_TURN_S)
        except TimeoutError:
            log.error("session %s: its cancelled turn did not end within %.0f s", self.session_id, CLOSE_TURN_S)
        if self.mcp is not None:
            await self.mcp.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), CLOSE_FLUSH_S)
        self._sender.cancel()
        await asyncio.gather(self._sender, return_exceptions=True)
        if self._queue:
            self._to_log([entry.finish() for entry in self._queue])
            self._queue.clear()
        self._log_due.set()
        await self._logged.wait()
        self._writer.cancel()
        await asyncio.gather(self._writer, return_exceptions=True)

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
        scope = grant_scope(tool_name, arguments)
        if scope in self.grants:
            return self.grants[scope]
        await self._idle.wait()  # the client hears of the tool call before it is asked about it
        call = self._current_call
        preview = await asyncio.to_thread(self.agent.toolbox.preview, tool_name, arguments)
        tool_call = schema.ToolCallUpdate(
            tool_call_id=call.tool_call_id if call else "unknown",
            title=call.title if call else tool_name,
            kind=kind,  # type: ignore[arg-type]
            status="pending",
            locations=call.locations if call else None,
            raw_input=capped_input(arguments),
            content=edit_diffs(preview, self.agent.workspace.root) or None,  # the edit's exact diff, before it runs
        )
        try:
            response = await self.conn.request_permission(
                session_id=self.session_id, tool_call=tool_call, options=permission_options(scope)
            )
        except (ConnectionError, RequestError) as exc:  # no answer: never run unasked
            log.warning("permission request for %s failed: %s", tool_name, exc)
            return "reject"
        outcome = response.outcome
        if not isinstance(outcome, schema.AllowedOutcome):
            return "reject"  # cancelled: the turn is being cancelled too
        decision: Decision = "allow" if outcome.option_id in ("allow_once", "allow_always") else "reject"
        if outcome.option_id in ("allow_always", "reject_always"):
            self.grants[scope] = decision
            self._record({"type": "grant", "scope": scope.record(), "decision": decision})
        return decision

    def _emit(self, update: SessionUpdate) -> None:
        update = self._message_ids.stamp(update)
        for piece in split_long_chunk(update):  # each small enough for any client's frame limit
            self._queue_update(piece)

    def _queue_update(self, update: SessionUpdate) -> None:
        if isinstance(update, schema.ToolCallStart):
            self._current_call = update
        last = self._queue[-1] if self._queue else None
        if last is not None and last.update is not None:
            if _is_output_snapshot(update) and _is_output_snapshot(last.update):
                if last.update.tool_call_id == update.tool_call_id:  # type: ignore[union-attr]
                    self._queue.pop()
            elif last.merge(update):
                return
        self._enqueue(PendingUpdate(None, update))

    def _record(self, record: dict[str, Any]) -> None:
        self._enqueue(PendingUpdate(record, None))

    def _enqueue(self, entry: PendingUpdate) -> None:
        self._queue.append(entry)
        self._idle.clear()
        self._wake.set()
        if len(self._queue) >= MAX_QUEUED_UPDATES:
            self._room.clear()

    def _to_log(self, records: list[dict[str, Any]]) -> None:
        self._unlogged.extend(records)
        self._logged.clear()
        self._log_wake.set()
        if len(self._unlogged) >= MAX_QUEUED_UPDATES // 2:
            self._log_due.set()  # a chatty turn: write now rather than hold the turn up for room
        if len(self._unlogged) >= MAX_QUEUED_UPDATES:
            self._room.clear()

    def _check_room(self) -> None:
        if len(self._queue) < MAX_QUEUED_UPDATES and len(self._unlogged) < MAX_QUEUED_UPDATES:
            self._room.set()

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = list(self._queue)
                self._queue.clear()
                self._to_log([entry.finish() for entry in batch])  # the log keeps the order the client sees
                for entry in batch:
                    if entry.update is not None and self._connected:
                        await self._send(entry)
                self._check_room()
            self._idle.set()

    async def _log_loop(self) -> None:
        """Write the session log, in order. During a turn, records are gathered for up to LOG_GROUP_S and
        written together (each write is an fsync); the turn's end writes at once, and its answer waits for it."""
        while True:
            await self._log_wake.wait()
            self._log_wake.clear()
            if self.running and not self._log_due.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._log_due.wait(), LOG_GROUP_S)
            while self._unlogged:
                records, self._unlogged = self._unlogged, []
                try:
                    await self.store.append_async(self.session_id, records)
                except OSError as exc:  # a full disk must not silence the session: the client got it
                    log.error("session %s: could not persist %d events: %s", self.session_id, len(records), exc)
                self._check_room()
            self._logged.set()

    async def _send(self, entry: PendingUpdate) -> None:
        try:
            if self._notify is not None:  # the update's JSON as dumped for the log: no second serialisation
                await self._notify(SESSION_UPDATE, {"sessionId": self.session_id, "update": entry.record["update"]})
            else:
                await self.conn.session_update(session_id=self.session_id, update=entry.update)
        except Exception as exc:  # the connection is gone: keep persisting, stop sending
            log.warning("session %s: client unreachable, updates are only persisted now: %s", self.session_id, exc)
            self._connected = False


class _PacedBackend:
    """The session's model backend, paused between events while the client is behind (the backpressure), and
    taking turns with the other sessions' model events (the pacer)."""

    def __init__(self, backend: ModelBackend, session: AcpSession) -> None:
        self.backend, self.session = backend, session

    @property
    def context_window(self) -> int:  # the backend may learn it only in prepare()
        return self.backend.context_window

    async def prepare(self) -> None:
        await self.backend.prepare()

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        async for event in self.backend.stream(messages, tools):
            await self.session.wait_for_room()
            await self.session.pacer.wait_turn()
            yield event


async def replay(conn: Any, session_id: str, history: list[dict[str, Any]]) -> None:
    """Send a loaded session's whole history as session/update notifications, oldest first."""
    for update in history_updates(session_id, history):
        await conn.session_update(session_id=session_id, update=update)


def history_updates(session_id: str, history: list[dict[str, Any]]) -> list[SessionUpdate]:
    """A stored session's prompt and update records as the session updates the client was sent (each prompt as
    the user's message, block by block), oldest first: what a loaded session replays and `warpcode sessions show`
    prints. Message chunks of logs written before chunks had message ids are given ids now."""
    updates: list[Any] = []
    ids = MessageIds()
    for record in history:
        if record["type"] == "prompt":
            ids.end_message()
            updates.extend(prompt_updates(record, new_message_id()))
            continue
        update = schema.SessionNotification.model_validate({"sessionId": session_id, "update": record["update"]}).update
        stamped = ids.stamp(update)
        updates.append(update if getattr(update, "message_id", None) else stamped)
    return updates


def permission_options(scope: GrantScope) -> list[schema.PermissionOption]:
    """The four answers (fixed option ids, which clients match); the "always" ones name what they cover."""
    meta = {SCOPE_META: scope.record()}
    return [
        schema.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        schema.PermissionOption(
            option_id="allow_always", name=f"Always allow {scope.label()}", kind="allow_always", field_meta=meta
        ),
        schema.PermissionOption(option_id="reject_once", name="Reject once", kind="reject_once"),
        schema.PermissionOption(
            option_id="reject_always", name=f"Always reject {scope.label()}", kind="reject_always", field_meta=meta
        ),
    ]


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
