"""Session persistence: one append-only JSONL event log per session, `<state_dir>/sessions/<sessionId>.jsonl`.

The logs hold file contents and command output: the sessions folder is private (0700, checked before each new
session) and each log is created 0600.

Records, one JSON object a line, in the order they happened:
  {"type": "created", "cwd", "mode", "time", "model"}  first line ("model": the backend spec; older logs lack it)
  {"type": "prompt", "text", "messageId", "blocks"}  a user prompt: what the model saw, and the ACP content blocks
                                                     as sent (older logs: only the text; prompt_record.py)
  {"type": "update", "update": {...}}                every session/update sent to the client (ACP JSON)
  {"type": "mode", "mode"}                           a mode change
  {"type": "model", "model"}                         a model change (a backend spec)
  {"type": "announced", "update": {...}}             a session/update of the session's state (mode, config
                                                     options) sent to the client: not replayed
  {"type": "grant", "scope", "decision"}             an "always" permission answer, for a GrantScope (its record)
  {"type": "turn_end", "stopReason", "messages"}     the whole trajectory (bar the system prompt) after the turn

Grants of older versions, `{"type": "grant", "kind", ...}`, covered a whole tool kind ("execute": every command):
loading ignores them, so the user is asked again, and an answer then is recorded with its scope.

The trajectory is snapshotted whole at each turn end because context compaction rewrites older messages in
place, so appending only the turn's new messages could not rebuild it. Each batch is flushed and fsynced (the
ACP session writes them in order, in groups, beside the sends: see session.py), and a line only counts once
its newline is on disk: a crash mid-write leaves at most a torn last line, which loading ignores and the next
append cuts off.

Listing (`page`) goes by the files' last change, newest first, in pages that continue from a `ListPosition`
(last change, id): sessions created meanwhile come before it and never shift the later pages. It reads only
the head of each listed log.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from warpcode.agent.permissions import GrantScope
from warpcode.agent.service.prompt_record import prompt_title
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.tools.workspace import ensure_private_dir

WRITER_THREADS = 4
LOG_MODE = 0o600
TITLE_SEARCH_LINES = 16  # a log's first prompt (its title) comes after its first record and a few mode changes
_PROMPT_RECORD = b'{"type": "prompt"'  # how json.dumps writes a prompt record's head (_write)
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")  # never a path: ids come from clients


class UnknownSession(LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"Unknown session {session_id!r}: no such session in this server's state directory.")
        self.session_id = session_id


@dataclass
class SavedSession:
    """What a session log holds, folded: enough to rebuild the session and replay it to a client."""

    session_id: str
    cwd: str
    mode: str
    created: str
    model: str | None = None  # the backend spec it was last given; None: the service's default
    grants: dict[GrantScope, str] = field(default_factory=dict)  # "allow" | "reject"
    messages: list[Message] = field(default_factory=list)  # without the system prompt
    history: list[dict[str, Any]] = field(default_factory=list)  # the prompt and update records, in order


@dataclass(frozen=True, order=True)
class ListPosition:
    """Where a session stands in session/list's order: by last change, then by id."""

    mtime_ns: int
    session_id: str


@dataclass
class SessionSummary:
    session_id: str
    cwd: str
    title: str | None
    changed: float  # the log's last change, seconds since the epoch


class SessionStore:
    def __init__(self, state_dir: Path) -> None:
        self.directory = Path(state_dir) / "sessions"
        # Own threads for fsync: the default executor runs tools, and a few long commands must not stall logging.
        self._writer = ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="warpcode-session-log")

    def path(self, session_id: str) -> Path:
        if not _SESSION_ID.match(session_id):
            raise UnknownSession(session_id)
        return self.directory / f"{session_id}.jsonl"

    def create(self, session_id: str, cwd: str, mode: str, model: str | None = None) -> None:
        ensure_private_dir(self.directory)
        with _open_log(self.path(session_id), os.O_EXCL) as log:
            _write(log, [{"type": "created", "cwd": cwd, "mode": mode, "time": _now(), "model": model}])

    def append(self, session_id: str, records: list[dict[str, Any]]) -> None:
        """Append a batch and make it durable (flush + fsync) before returning."""
        with _open_log(self.path(session_id), os.O_APPEND) as log:
            _write(log, records)

    async def append_async(self, session_id: str, records: list[dict[str, Any]]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer, self.append, session_id, records)

    def load(self, session_id: str) -> SavedSession:
        records = self._records(session_id)
        first = records[0] if records else {}
        if first.get("type") != "created":
            raise UnknownSession(session_id)
        saved = SavedSession(session_id, first["cwd"], first["mode"], first["time"], first.get("model"))
        for record in records[1:]:
            kind = record.get("type")
            if kind in ("prompt", "update"):
                saved.history.append(record)
            elif kind == "mode":
                saved.mode = record["mode"]
            elif kind == "model":
                saved.model = record["model"]
            elif kind == "grant" and (scope := GrantScope.from_record(record.get("scope"))):
                saved.grants[scope] = record["decision"]
            elif kind == "turn_end":
                saved.messages = [_message(m) for m in record["messages"]]
        return saved

    def delete(self, session_id: str) -> None:
        """Remove the session's log (an unknown id: UnknownSession, nothing removed)."""
        try:
            self.path(session_id).unlink()
        except FileNotFoundError:
            raise UnknownSession(session_id) from None

    def turns(self, session_id: str) -> int:
        """How many prompts the session was given, counted from its log's lines without parsing them (a log holds
        file contents and command output: listing many sessions stays quick)."""
        with open(self.path(session_id), "rb") as log:
            return sum(line.startswith(_PROMPT_RECORD) for line in log)

    def repair(self, session_id: str) -> None:
        """Cut a torn last line left by a crash, so the next append starts on a line of its own."""
        path = self.path(session_id)
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(path, "r+b") as log:
                log.truncate(data.rfind(b"\n") + 1)
                os.fsync(log.fileno())

    def page(
        self, cwd: str | None, after: ListPosition | None, limit: int
    ) -> tuple[list[SessionSummary], ListPosition | None]:
        """Up to `limit` stored sessions (only those of `cwd` if given), the latest changed first, starting after
        `after`; and the position to continue from, None at the end. Each listed log is read up to its first
        prompt only. The order is by last change: a session changed while a client pages moves to the front."""
        positions = sorted(self._positions(), reverse=True)
        if after is not None:
            positions = [p for p in positions if p < after]
        found: list[SessionSummary] = []
        for index, position in enumerate(positions):
            summary = self._summary(position)
            if summary is None or (cwd is not None and summary.cwd != cwd):
                continue
            found.append(summary)
            if len(found) == limit:
                return found, position if index + 1 < len(positions) else None
        return found, None

    def _positions(self) -> list[ListPosition]:
        positions = []
        for path in self.directory.glob("*.jsonl") if self.directory.is_dir() else []:
            with contextlib.suppress(OSError):  # deleted meanwhile
                positions.append(ListPosition(path.stat().st_mtime_ns, path.stem))
        return positions

    def _summary(self, position: ListPosition) -> SessionSummary | None:
        """The session's directory and title from the head of its log; None for a file that is not a log of ours
        (listing must not fail for it)."""
        try:
            with open(self.path(position.session_id), encoding="utf-8") as log:
                created = json.loads(log.readline())
                prompts = (json.loads(line) for line in itertools.islice(log, TITLE_SEARCH_LINES))
                titles = (prompt_title(r) for r in prompts if r.get("type") == "prompt")
                title = next((t for t in titles if t), None)  # the first prompt with words: as the session's update
            if created.get("type") != "created":
                return None
            return SessionSummary(position.session_id, created["cwd"], title, position.mtime_ns / 1e9)
        except (UnknownSession, OSError, KeyError, TypeError, ValueError):
            return None

    def _records(self, session_id: str) -> list[dict[str, Any]]:
        try:
            lines = self.path(session_id).read_text(encoding="utf-8").split("\n")
        except FileNotFoundError:
            raise UnknownSession(session_id) from None
        # split leaves "" after the final newline; anything else there is a torn line from a crash.
        return [json.loads(line) for line in lines[:-1] if line]


def message_record(message: Message) -> dict[str, Any]:
    """`dataclasses.asdict(message)` without its deep copies (a turn end snapshots every message): the same keys,
    sharing the tool calls' argument dicts, which nothing changes once a call is made."""
    calls = [
        {"id": c.id, "name": c.name, "arguments": c.arguments, "error": c.error, "raw_arguments": c.raw_arguments}
        for c in message.tool_calls
    ]
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": calls,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "reasoning": message.reasoning,
    }


def _message(record: dict[str, Any]) -> Message:
    calls = [ToolCall(**call) for call in record.get("tool_calls", [])]
    thought = record.get("reasoning")  # absent from logs written before reasoning was kept
    return Message(record["role"], record["content"], calls, record.get("tool_call_id"), record.get("name"), thought)


def _open_log(path: Path, flags: int) -> Any:
    """A session log opened for writing, created with mode 0600 whatever the umask would give."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | flags, LOG_MODE), "w", encoding="utf-8")


def _write(log: Any, records: list[dict[str, Any]]) -> None:
    log.write("".join(json.dumps(record) + "\n" for record in records))
    log.flush()
    os.fsync(log.fileno())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
