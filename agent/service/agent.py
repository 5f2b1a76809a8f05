"""The ACP agent (Agent Client Protocol v1, docs/architecture.md), transport-free.

`AcpService` is created once per server process: it owns the session store and knows which sessions are open
(each on one connection at a time: session/load reserves the id before its first await, and a session loads only
with the directory it was created in). `new_connection_agent()` gives one `WarpcodeAcpAgent` per client
connection, served with `acp.run_agent(agent)` (stdio) or `acp.run_agent(agent, transport)` (WebSocket); call
`close()` when the connection ends. A connection has at most MAX_OPEN_SESSIONS sessions open, and keeps only
the idle ones it used last in memory (open_sessions.py). The SDK does the JSON-RPC and validates params against
its schema (-32602 with the field's location); errors raised here name the session, mode or path at fault.
session/list answers in pages of SESSIONS_PER_PAGE, newest first, continued by an opaque cursor.
session/resume reopens a stored session without replaying it, session/close closes one on this connection (its
turn cancelled), session/delete removes a stored one that no connection has open (stable_routes.py routes them).
A session's mode and model are its config options (config_options.py); each configured model's backend is built
once, when a session first uses it (a scripted model is built per session: its script replays per session).
A model that fails (its server down, an HTTP error) fails the session/prompt request with a JSON-RPC error that
says so; the prompt, and what the turn did before the failure, stay in the conversation and its log.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.exceptions import RequestError
from pydantic import BaseModel, Field

from warpcode.agent.backends import BackendError, ModelBackend, backend_from_spec
from warpcode.agent.backends.spec import default_spec
from warpcode.agent.config import Settings
from warpcode.agent.loop import Limits, ModelFailure
from warpcode.agent.mcp.specs import McpServerSpec, Skipped, from_acp, session_servers
from warpcode.agent.permissions import MODES
from warpcode.agent.service.client_fs import ClientFiles
from warpcode.agent.service.config_options import config_options, session_modes
from warpcode.agent.service.open_sessions import MAX_IDLE_LOADED, MAX_OPEN_SESSIONS, TOO_MANY_SESSIONS, OpenSessions
from warpcode.agent.service.session import CLOSE_FLUSH_S, CLOSE_TURN_S, AcpSession, SessionBusy, replay
from warpcode.agent.service.session_store import ListPosition, SavedSession, SessionStore, UnknownSession
from warpcode.agent.service.slash_commands import CommandContext, advertise_commands, parse_invocation
from warpcode.agent.service.stable_routes import route_stable_session_methods
from warpcode.agent.service.update_stream import StepPacer
from warpcode.tools import CheckpointError, Checkpoints
from warpcode.tools.process import reap_leftover_commands
from warpcode.tools.sandbox import SETTINGS as SANDBOXES
from warpcode.tools.sandbox import sandbox_from_setting
from warpcode.tools.workspace import default_state_home, ensure_private_dir, workspace_state_dir

SESSION_BUSY = -32001  # JSON-RPC server-defined error: a prompt while the session's turn runs
SESSIONS_PER_PAGE = 100  # session/list: 20,000 sessions in one answer would be megabytes
MODEL_FAILED = -32603  # JSON-RPC internal error: the model server failed the turn
log = logging.getLogger(__name__)


class CheckpointsParams(BaseModel):
    session_id: str = Field(alias="sessionId")


class RestoreParams(CheckpointsParams):
    checkpoint_id: str = Field(alias="checkpointId")


@dataclass
class ServiceConfig:
    model: str | None  # a backend spec (openai:, local:, scripted:); None: prompts explain how to configure one
    state_dir: Path
    default_mode: str = "ask"
    limits: Limits = field(default_factory=Limits)
    sandbox: str = "none"  # tools/sandbox.py SETTINGS: where the sessions' commands and tests run
    sandbox_network: bool = False  # whether commands in the sandbox may use the network
    secrets: tuple[Path, ...] = ()  # what else of ours the sandbox hides besides the state dir: serve's token file
    sessions_per_connection: int = MAX_OPEN_SESSIONS  # open at once on one connection; more are refused
    idle_sessions_in_memory: int = MAX_IDLE_LOADED  # per connection; older idle ones are unloaded until used
    max_tokens: int | None = None  # one answer's token limit; None: the backend's own
    models: tuple[str, ...] = ()  # the backend specs sessions may choose from; `model` (the default) comes first
    mcp_servers: tuple[McpServerSpec, ...] = ()  # the config file's: every session connects to them

    def __post_init__(self) -> None:
        if self.model is None:  # the config's first model, else the built-in one where it runs
            self.model = self.models[0] if self.models else default_spec()
        if self.model is not None:
            self.models = tuple(dict.fromkeys((self.model, *self.models)))
        if self.default_mode not in MODES:
            raise ValueError(f"unknown mode {self.default_mode!r}: use one of {', '.join(MODES)}")
        if self.limits.max_turn_requests < 1 or self.limits.tool_output_tokens < 1:
            raise ValueError("limits must be positive")
        if self.sessions_per_connection < 1 or self.idle_sessions_in_memory < 1:
            raise ValueError("session limits must be positive")
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"unknown sandbox {self.sandbox!r}: use one of {', '.join(SANDBOXES)}")
        self.state_dir = Path(self.state_dir).expanduser().resolve()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        state_dir: Path | None,
        mode: str | None,
        sandbox: str | None = None,
        sandbox_network: bool | None = None,
    ) -> ServiceConfig:
        """The service's configuration: command-line values first, then the user's settings."""
        answer_room = settings.max_tokens or Limits.answer_reserve_tokens  # the context keeps room for the answer
        limits = Limits(settings.max_turn_requests, settings.tool_output_tokens, answer_room)
        state = state_dir or default_state_home()
        network = settings.sandbox_network if sandbox_network is None else sandbox_network
        return cls(
            settings.model,
            state,
            mode or settings.mode,
            limits,
            sandbox or settings.sandbox,
            network,
            max_tokens=settings.max_tokens,
            models=tuple(settings.models),
            mcp_servers=settings.mcp_servers,
        )


class AcpService:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        ensure_private_dir(config.state_dir)  # at start-up, so that a state home we must refuse fails the command
        # Likewise a sandbox that is not installed or cannot start here.
        self.sandbox = sandbox_from_setting(config.sandbox, config.sandbox_network, (config.state_dir, *config.secrets))
        if leftovers := reap_leftover_commands():
            log.warning(
                "stopped %d commands left running by a crashed warpcode (pids %s)",
                len(leftovers),
                ", ".join(map(str, leftovers)),
            )
        self.store = SessionStore(config.state_dir)
        self.open_sessions: dict[str, WarpcodeAcpAgent] = {}  # session id -> the connection serving it
        self.pacer = StepPacer()  # all sessions' model events take turns with each other and with I/O
        # A scripted model replays its script per session; any other backend (a loaded model, an HTTP client) is
        # built once and shared. The default's now, so a bad spec fails at start-up rather than at the first prompt.
        self._backends: dict[str, ModelBackend] = {}
        self.backend_for_session(config.model)

    def backend_for_session(self, model: str | None) -> ModelBackend:
        """The backend of the spec `model` (None, which ServiceConfig leaves only where the built-in model cannot
        run: the one that explains how to configure a model)."""
        if model is None or model.startswith("scripted:"):
            return backend_from_spec(model)
        if model not in self._backends:
            self._backends[model] = backend_from_spec(model, self.config.max_tokens)
        return self._backends[model]

    def model_of(self, saved: SavedSession) -> str | None:
        """A stored session's model: the one it chose, while the service still offers it; else the default."""
        return saved.model if saved.model in self.config.models else self.config.model

    def new_connection_agent(self) -> WarpcodeAcpAgent:
        return WarpcodeAcpAgent(self)


class WarpcodeAcpAgent:
    """The SDK's Agent protocol for one client connection, with any number of sessions."""

    def __init__(self, service: AcpService) -> None:
        self.service = service
        self.conn: Any = None
        config = service.config
        self.open = OpenSessions(self._release, config.sessions_per_connection, config.idle_sessions_in_memory)
        self.client_fs = schema.FileSystemCapabilities()
        self.client_terminal = False  # whether the client runs commands in its terminals (client_terminal.py)
        self.mcp_servers: dict[str, tuple[McpServerSpec | Skipped, ...]] = {}  # open session id -> its servers
        self.closed = asyncio.Event()  # set once close() has released every session of this connection
        self.closing = False

    @property
    def sessions(self) -> dict[str, AcpSession]:
        """The open sessions in memory (the others are unloaded until used: open_sessions.py)."""
        return self.open.loaded

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        route_stable_session_methods(conn, self)

    async def initialize(
        self, protocol_version: int, client_capabilities: schema.ClientCapabilities | None = None, **kwargs: Any
    ) -> schema.InitializeResponse:
        if client_capabilities and client_capabilities.fs:
            self.client_fs = client_capabilities.fs
        self.client_terminal = bool(client_capabilities and client_capabilities.terminal)
        # We speak exactly one version: the answer is ours, and a client that cannot speak it disconnects.
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(embedded_context=True),
                session_capabilities=schema.SessionCapabilities(
                    list=schema.SessionListCapabilities(),
                    resume=schema.SessionResumeCapabilities(),
                    close=schema.SessionCloseCapabilities(),
                    delete=schema.SessionDeleteCapabilities(),
                ),
                mcp_capabilities=schema.McpCapabilities(http=True),  # stdio always; not the deprecated SSE
            ),
            auth_methods=[],
            agent_info=schema.Implementation(name="warpcode", title="warpcode", version=_version()),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> schema.AuthenticateResponse:
        # ACP: methodId is one of the authMethods initialize advertised, and we advertise none.
        message = f"Unknown authentication method {method_id!r}: warpcode needs none (its authMethods is empty)."
        raise RequestError(-32602, message, {"methodId": method_id})

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.NewSessionResponse:
        _check_cwd(cwd)
        config = self.service.config
        session_id, mode, model = uuid.uuid4().hex, config.default_mode, config.model
        self._reserve(session_id)
        self.use_mcp_servers(session_id, mcp_servers)
        try:
            await asyncio.to_thread(self.service.store.create, session_id, cwd, mode, model)
        except BaseException:
            self._unreserve(session_id)
            raise
        session = self._open(session_id, cwd, mode, model)
        await asyncio.to_thread(session.agent.toolbox.finish_interrupted_patch)  # the workspace whole before a tool
        advertise_commands(self.conn, session_id)
        return schema.NewSessionResponse(
            session_id=session_id, modes=session_modes(mode), config_options=self._config_options(session)
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.LoadSessionResponse:
        session = await self._reopen(cwd, session_id, mcp_servers, replay_history=True)
        return schema.LoadSessionResponse(
            modes=session_modes(session.mode), config_options=self._config_options(session)
        )

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.ResumeSessionResponse:
        """session/load without the replay: the client shows the conversation already."""
        session = await self._reopen(cwd, session_id, mcp_servers, replay_history=False)
        return schema.ResumeSessionResponse(
            modes=session_modes(session.mode), config_options=self._config_options(session)
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse:
        """Cancel the session's turn, as session/cancel would, and free it: another connection may open it now."""
        if not await self.open.close_one(session_id):
            raise RequestError(
                -32602,
                f"Session {session_id!r} is not open on this connection: nothing to close.",
                {"sessionId": session_id},
            )
        return schema.CloseSessionResponse()

    async def delete_session(self, session_id: str, **kwargs: Any) -> schema.DeleteSessionResponse:
        """Remove a stored session (its log); one that does not exist is already deleted. A session open on a
        connection is refused: its log is still being written."""
        holder = self.service.open_sessions.get(session_id)
        if holder is not None:
            where = (
                "this connection: close it (session/close)" if holder is self else "another connection: close it there"
            )
            raise RequestError(
                -32602, f"Session {session_id!r} is open on {where} before deleting it.", {"sessionId": session_id}
            )
        with contextlib.suppress(UnknownSession):
            await asyncio.to_thread(self.service.store.delete, session_id)
        return schema.DeleteSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> schema.ListSessionsResponse:
        """A page of stored sessions, newest first; `nextCursor` continues it (ACP's opaque cursor)."""
        if cwd is not None and not os.path.isabs(cwd):
            raise RequestError(-32602, f"cwd must be an absolute path, got {cwd!r}.", {"cwd": cwd})
        after = _read_cursor(cursor) if cursor else None
        found, last = await asyncio.to_thread(self.service.store.page, cwd, after, SESSIONS_PER_PAGE)
        sessions = [
            schema.SessionInfo(
                session_id=s.session_id,
                cwd=s.cwd,
                title=s.title,
                updated_at=datetime.fromtimestamp(s.changed, UTC).isoformat(timespec="seconds"),
            )
            for s in found
        ]
        return schema.ListSessionsResponse(sessions=sessions, next_cursor=_cursor(last) if last else None)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        async with self._session(session_id) as session:
            invocation = parse_invocation(prompt)  # a slash command runs instead of a model turn
            commands = CommandContext(session, self.service.config.models, self.service.backend_for_session)
            run = (lambda: invocation.run(commands)) if invocation else None
            try:
                result = await session.prompt(prompt, run)
            except SessionBusy as exc:
                raise RequestError(SESSION_BUSY, str(exc), {"sessionId": session_id}) from None
        if result.failure is not None:  # not a refusal (that would drop the prompt from the conversation): a failure
            raise RequestError(MODEL_FAILED, _model_failed(result.failure), {"sessionId": session_id})
        return schema.PromptResponse(stop_reason=result.stop_reason)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if (session := self.sessions.get(session_id)) is not None:
            session.cancel()
        elif self.open.reloading(session_id):  # for a prompt sent just before: it starts first, then is cancelled
            async with self._session(session_id) as session:
                session.cancel()
        elif self.service.open_sessions.get(session_id) is not self:  # open here, unloaded: it runs no turn
            log.warning("session/cancel for unknown session %r ignored", session_id)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> schema.SetSessionModeResponse:
        async with self._session(session_id) as session:
            if mode_id not in MODES:
                message = f"Unknown mode {mode_id!r}: use one of {', '.join(MODES)}."
                raise RequestError(-32602, message, {"modeId": mode_id})
            session.set_mode(mode_id)
            await session.announce(
                schema.ConfigOptionUpdate(
                    session_update="config_option_update", config_options=self._config_options(session)
                )
            )
        return schema.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse:
        """`mode` (also announced to modes-API clients with current_mode_update) or `model` (from the next model
        request on)."""
        models = self.service.config.models
        if config_id not in ("mode", "model") or (config_id == "model" and not models):
            known = "mode or model" if models else "mode (no models are configured to choose from)"
            raise RequestError(-32602, f"Unknown config option {config_id!r}: use {known}.", {"configId": config_id})
        choices = MODES if config_id == "mode" else models
        if value not in choices:
            message = f"Unknown {config_id} {value!r}: use one of {', '.join(choices)}."
            raise RequestError(-32602, message, {"configId": config_id, "value": value})
        async with self._session(session_id) as session:
            if config_id == "mode":
                session.set_mode(str(value))
                mode_update = schema.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=str(value))
                await session.announce(mode_update)
            elif value != session.model:  # the same model again keeps its backend (and a scripted one its place)
                try:
                    backend = self.service.backend_for_session(str(value))
                except BackendError as exc:
                    raise RequestError(-32602, f"Model {value!r} cannot be used: {exc}", {"value": value}) from None
                session.set_model(str(value), backend)
            return schema.SetSessionConfigOptionResponse(config_options=self._config_options(session))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """`_warpcode/checkpoints` and `_warpcode/restore` (the SDK strips the leading underscore)."""
        if method == "warpcode/checkpoints":
            async with self._session(CheckpointsParams.model_validate(params).session_id) as session:
                found = await asyncio.to_thread(Checkpoints(session.workspace).list)
            return {
                "checkpoints": [{"id": c.id, "message": c.message, "time": c.created_at.isoformat()} for c in found]
            }
        if method == "warpcode/restore":
            request = RestoreParams.model_validate(params)
            async with self._session(request.session_id) as session:
                if session.running:  # the turn's own edits would interleave with the restore
                    busy = f"Session {request.session_id!r} is running a turn: cancel it first."
                    raise RequestError(SESSION_BUSY, busy)
                try:
                    restored = await asyncio.to_thread(Checkpoints(session.workspace).restore, request.checkpoint_id)
                except CheckpointError as exc:
                    raise RequestError(-32602, str(exc), {"checkpointId": request.checkpoint_id}) from None
            return {
                "restored": restored.checkpoint.id,
                "undoCheckpointId": restored.undo_checkpoint.id,
                "changed": restored.changed,
            }
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("extension notification %r ignored", method)

    async def close(self) -> None:
        """The connection ended: cancel its running turns (killing commands, abandoning permission questions),
        persist what they emitted, and release its sessions so another connection may load them."""
        self.closing = True
        try:
            await self.open.close()
        finally:
            self.closed.set()

    async def _wait_for_closing_holder(self, session_id: str) -> None:
        """A client that reconnects at once (its connection dropped) asks for its sessions while the old connection
        is still closing them: wait for that close (its turns cancelled, its log complete) rather than refuse."""
        holder = self.service.open_sessions.get(session_id)
        if holder is not None and holder is not self and holder.closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(holder.closed.wait(), CLOSE_TURN_S + CLOSE_FLUSH_S)

    async def _reopen(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None, replay_history: bool
    ) -> AcpSession:
        """A stored session opened on this connection (session/load, session/resume)."""
        _check_cwd(cwd)
        await self._wait_for_closing_holder(session_id)
        self._reserve(session_id)  # before the next await: a concurrent load of the same id is refused
        self.use_mcp_servers(session_id, mcp_servers)
        try:
            saved = await asyncio.to_thread(self._read_saved, session_id)
            _check_same_directory(saved, cwd)
            if replay_history:
                await replay(self.conn, session_id, saved.history)
        except BaseException:
            self._unreserve(session_id)
            raise
        session = self._open(session_id, saved.cwd, saved.mode, self.service.model_of(saved), saved)
        await asyncio.to_thread(session.agent.toolbox.finish_interrupted_patch)
        advertise_commands(self.conn, session_id)
        return session

    def use_mcp_servers(self, session_id: str, mcp_servers: list[Any] | None) -> None:
        """The MCP servers a reserved session connects to when it opens (session/new, load or resume: the
        config file's and the client's `mcpServers`), and again whenever it is loaded back into memory."""
        self.mcp_servers[session_id] = session_servers(self.service.config.mcp_servers, from_acp(mcp_servers))

    def _config_options(self, session: AcpSession) -> list[Any]:
        return config_options(session.mode, session.model, self.service.config.models)

    def _open(
        self, session_id: str, cwd: str, mode: str, model: str | None, saved: SavedSession | None = None
    ) -> AcpSession:
        session = self._build(session_id, cwd, mode, model, saved)
        self.open.add(session)
        return session

    async def _reload(self, session_id: str) -> AcpSession:
        """An open session that was unloaded, from its log (its client has its history: nothing is replayed)."""
        saved = await asyncio.to_thread(self._read_saved, session_id)
        return self._build(session_id, saved.cwd, saved.mode, self.service.model_of(saved), saved)

    def _build(self, session_id: str, cwd: str, mode: str, model: str | None, saved: SavedSession | None) -> AcpSession:
        files = None
        if self.client_fs.read_text_file or self.client_fs.write_text_file:
            files = ClientFiles(
                self.conn,
                session_id,
                asyncio.get_running_loop(),
                bool(self.client_fs.read_text_file),
                bool(self.client_fs.write_text_file),
            )
        return AcpSession(
            session_id,
            cwd,
            mode,
            self.conn,
            self.service.store,
            self.service.backend_for_session(model),
            self.service.config.limits,
            files,
            saved,
            self.service.pacer,
            workspace_state_dir(self.service.config.state_dir, cwd),
            self.service.sandbox,
            model,
            self.client_terminal,
            self.mcp_servers.get(session_id, ()),
        )

    def _reserve(self, session_id: str) -> None:
        if session_id in self.service.open_sessions:
            raise RequestError(
                -32602, f"Session {session_id!r} is already open on a connection.", {"sessionId": session_id}
            )
        if self.open.full:
            raise RequestError(
                TOO_MANY_SESSIONS,
                f"This connection has {self.open.max_open:,} sessions open, the most one connection may have: open "
                "another connection for more. Sessions stay stored: once this connection has closed, session/load "
                "reopens any of them.",
                {"maxSessions": self.open.max_open},
            )
        self.service.open_sessions[session_id] = self
        self.open.reserve(session_id)

    def _unreserve(self, session_id: str) -> None:
        self.open.cancel_reservation(session_id)
        self._release(session_id)

    def _release(self, session_id: str) -> None:
        self.mcp_servers.pop(session_id, None)
        if self.service.open_sessions.get(session_id) is self:
            del self.service.open_sessions[session_id]

    def _read_saved(self, session_id: str) -> SavedSession:
        try:
            self.service.store.repair(session_id)
            return self.service.store.load(session_id)
        except (UnknownSession, FileNotFoundError):
            raise _unknown_session(session_id) from None

    @contextlib.asynccontextmanager
    async def _session(self, session_id: str) -> AsyncIterator[AcpSession]:
        """The open session, in memory until the block ends (open_sessions.py)."""
        async with self.open.use(session_id, self._reload) as session:
            if session is None:
                raise _unknown_session(session_id)
            yield session


def _unknown_session(session_id: str) -> RequestError:
    return RequestError(
        -32602,
        f"Unknown session {session_id!r}: create one with session/new, or open a stored one with session/load.",
        {"sessionId": session_id},
    )


def _check_cwd(cwd: str) -> None:
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise RequestError(
            -32602, f"cwd must be the absolute path of an existing directory, got {cwd!r}.", {"cwd": cwd}
        )


def _check_same_directory(saved: SavedSession, cwd: str) -> None:
    """A session's tools, checkpoints and grants belong to its directory: it never moves to another."""
    if Path(cwd).resolve() != Path(saved.cwd).resolve():
        raise RequestError(
            -32602,
            f"Session {saved.session_id!r} belongs to {saved.cwd}: load it with that cwd, or start a new session "
            f"in {cwd}.",
            {"cwd": cwd, "sessionCwd": saved.cwd},
        )


def _cursor(position: ListPosition) -> str:
    return base64.urlsafe_b64encode(json.dumps([position.mtime_ns, position.session_id]).encode()).decode()


def _read_cursor(cursor: str) -> ListPosition:
    try:
        mtime_ns, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return ListPosition(int(mtime_ns), str(session_id))
    except (ValueError, TypeError):  # binascii.Error and json's errors are ValueErrors
        raise RequestError(
            -32602, "Invalid cursor: pass the nextCursor of an earlier session/list answer.", {"cursor": cursor}
        ) from None


def _model_failed(failure: ModelFailure) -> str:
    """The turn's one report of the failure, in one line: what failed, and that the prompt is kept, so the user
    knows to go on rather than repeat it."""
    return (
        f"{failure.message} Your prompt stays in the conversation: send another prompt to go on once the model answers."
    )


def _version() -> str:
    try:
        return metadata.version("warpcode")
    except metadata.PackageNotFoundError:
        return "unknown"
