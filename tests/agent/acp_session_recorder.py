"""Every frame of a full ACP session, both directions, over a real transport: `record_full_session`.

The real `warpcode acp` (stdio) or `warpcode serve` (WebSocket) is driven by the SDK's own client, whose
connection reports every message it sends and receives (the SDK's stream observers); each is kept as a `Frame`
with its sender and, for an answer, the method of the request it answers, so that tests/agent/acp_schema.py can
check it against the right type.

The session is the list `STEPS`, run in order, each an async function of one `Run`: initialize, a turn with tool
calls, file reads and writes and terminals through the client, and permission questions (scripted model, mode ask),
listing, modes and config options, slash commands, session/cancel and `$/cancel_request`, errors, a session/load
with its replay on a fresh connection (for stdio, a fresh process), then close, resume and delete, and a session
with an MCP server. To cover a new method, add a step to STEPS where it belongs (or pass
`extra_steps`, run last): what it sends and receives is recorded and validated with the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp.connection import StreamDirection, StreamEvent
from acp.helpers import text_block
from acp.ws import create_websocket_stream

from tests.agent.acp_clients import TerminalClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, Server

LONG_COMMAND = {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo $$ > pgid.txt; sleep 30"}}]}
# The scripted model's turns, one per model request, played from the start for each session (and after a load).
TURNS = [
    {"text": "Let me look.", "tool_calls": [
        {"name": "update_plan",
         "arguments": {"entries": [{"content": "Fix add()", "status": "in_progress", "priority": "high"}]}},
        {"name": "read_file", "arguments": {"path": "calc.py"}}]},
    {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
    {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo checked"}}]},
    {"tool_calls": [{"name": "run_command", "arguments": {"command": "ls"}}]},
    {"text": "Fixed add()."},
    LONG_COMMAND,  # cancelled with session/cancel
    LONG_COMMAND,  # cancelled with $/cancel_request
]  # fmt: skip
PERMISSION_ANSWERS = ["allow_once", "allow_always", "reject_once"]  # edit_file, echo, ls
CANCEL_REQUEST = "$/cancel_request"
MCP_SERVER = Path(__file__).parent / "mcp" / "mcp_fixture_server.py"


class EditorClient(TerminalClient):
    """What an editor offers: its buffers (fs/*) and terminals (terminal/*), permission answers in order."""

    def __init__(self) -> None:
        super().__init__(PERMISSION_ANSWERS)
        self.buffers: dict[str, str] = {}

    def capabilities(self) -> Any:
        fs = acp.schema.FileSystemCapabilities(read_text_file=True, write_text_file=True)
        return acp.schema.ClientCapabilities(fs=fs, terminal=True)


@dataclass
class Frame:
    sender: str  # "agent" or "client"
    message: dict[str, Any]
    connection: int  # which connection of the recording carried it (request ids are per connection)
    answers: str | None = None  # for an answer: the method of the request it answers


class FrameRecorder:
    """Stream observers for the client's SDK connections: every message, its sender, and what answers answer."""

    def __init__(self) -> None:
        self._frames: list[Frame] = []
        self._connections = 0

    def observer(self) -> Callable[[StreamEvent], None]:
        """An observer for one new connection."""
        self._connections += 1
        connection = self._connections

        def observe(event: StreamEvent) -> None:
            sender = "client" if event.direction is StreamDirection.OUTGOING else "agent"
            self._frames.append(Frame(sender, event.message, connection))

        return observe

    @property
    def frames(self) -> list[Frame]:
        """The frames so far, each answer with the method it answers. Matched afterwards, not as they come: the
        SDK reports a request it sent only once the send returns, and the answer may have arrived by then."""
        asked = {(f.connection, f.sender, f.message["id"]): f.message["method"] for f in self._frames
                 if "method" in f.message and "id" in f.message}  # fmt: skip
        for frame in self._frames:
            if "method" not in frame.message:
                asker = "agent" if frame.sender == "client" else "client"
                frame.answers = asked.get((frame.connection, asker, frame.message.get("id")))
        return list(self._frames)


@dataclass
class Run:
    """What the steps share: the connection, the client, the session, and a way to connect again."""

    transport: str
    tmp_path: Path
    workspace: Path
    recorder: FrameRecorder
    connector: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]]
    connections: contextlib.AsyncExitStack
    conn: Any = None
    client: EditorClient = field(default_factory=EditorClient)
    session_id: str = ""

    async def reconnect(self) -> None:
        """Close the connection and open a new one, not yet initialized (stdio: a new `warpcode acp` on the same
        state directory, as after a restart). It stays open for the next steps."""
        await self.connections.aclose()
        self.conn = await self.connections.enter_async_context(self.connector(self.client))

    async def expect_error(self, call: Awaitable[Any], code: int) -> None:
        try:
            await call
        except acp.RequestError as error:
            assert error.code == code, error
        else:
            raise AssertionError(f"expected error {code}")

    async def started_command(self) -> None:
        pid_file = self.workspace / "pgid.txt"
        for _ in range(400):
            if pid_file.is_file() and pid_file.read_text().strip():
                pid_file.unlink()
                return
            await asyncio.sleep(0.025)
        raise AssertionError("the command never started")

    def last_request_id(self, method: str) -> Any:
        return next(f.message["id"] for f in reversed(self.recorder.frames) if f.message.get("method") == method)


async def initialize(run: Run) -> None:
    await run.conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=run.client.capabilities())
    await run.expect_error(run.conn.authenticate(method_id="oauth"), -32602)


async def new_session(run: Run) -> None:
    await run.expect_error(run.conn.new_session(cwd="relative/dir"), -32602)
    run.session_id = (await run.conn.new_session(cwd=str(run.workspace))).session_id


async def turn_with_tools_and_permissions(run: Run) -> None:
    answer = await run.conn.prompt(session_id=run.session_id, prompt=[text_block("fix add()")])
    assert answer.stop_reason == "end_turn"
    assert len(run.client.permission_requests) == 3 and run.client.file_requests


async def list_sessions(run: Run) -> None:
    listed = await run.conn.list_sessions(cwd=str(run.workspace))
    assert [s.session_id for s in listed.sessions] == [run.session_id]
    await run.expect_error(run.conn.list_sessions(cursor="not-a-cursor"), -32602)


async def set_mode(run: Run) -> None:
    await run.expect_error(run.conn.set_session_mode(session_id=run.session_id, mode_id="yolo"), -32602)
    await run.conn.set_session_mode(session_id=run.session_id, mode_id="auto")


async def config_options(run: Run) -> None:
    answer = await run.conn.set_config_option(config_id="mode", session_id=run.session_id, value="auto")
    model = next(o for o in answer.config_options if o.id == "model").current_value
    await run.conn.set_config_option(config_id="model", session_id=run.session_id, value=model)
    await run.expect_error(run.conn.set_config_option(config_id="speed", session_id=run.session_id, value="x"), -32602)


async def slash_commands(run: Run) -> None:
    for command in ("/checkpoints", "/mode auto", "/model"):
        answer = await run.conn.prompt(session_id=run.session_id, prompt=[text_block(command)])
        assert answer.stop_reason == "end_turn"


async def session_cancel(run: Run) -> None:
    turn = asyncio.ensure_future(run.conn.prompt(session_id=run.session_id, prompt=[text_block("wait")]))
    await run.started_command()
    await run.conn.cancel(session_id=run.session_id)
    assert (await asyncio.wait_for(turn, 10)).stop_reason == "cancelled"


async def cancel_request(run: Run) -> None:
    turn = asyncio.ensure_future(run.conn.prompt(session_id=run.session_id, prompt=[text_block("wait")]))
    await run.started_command()
    request_id = run.last_request_id("session/prompt")
    await run.conn._conn.send_notification(CANCEL_REQUEST, {"requestId": request_id})  # the SDK has no call for it
    await run.expect_error(asyncio.wait_for(turn, 10), -32800)


async def errors_and_extensions(run: Run) -> None:
    await run.expect_error(run.conn.prompt(session_id="no-such-session", prompt=[text_block("hi")]), -32602)
    await run.expect_error(run.conn.load_session(cwd=str(run.workspace), session_id="no-such-session"), -32602)
    checkpoints = await run.conn.ext_method("warpcode/checkpoints", {"sessionId": run.session_id})
    assert checkpoints["checkpoints"]


async def load_with_replay(run: Run) -> None:
    """On a new connection (a session is open on one connection at a time): session/load replays the session."""
    await run.reconnect()
    await run.conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=run.client.capabilities())
    await run.conn.load_session(cwd=str(run.workspace), session_id=run.session_id)
    assert (await run.conn.list_sessions()).sessions


async def close_resume_delete(run: Run) -> None:
    await run.conn.close_session(session_id=run.session_id)
    await run.conn.resume_session(cwd=str(run.workspace), session_id=run.session_id)
    await run.expect_error(_delete(run, run.session_id), -32602)  # open here
    await run.conn.close_session(session_id=run.session_id)
    await _delete(run, run.session_id)
    await _delete(run, run.session_id)  # deleted already: nothing to do


async def session_with_an_mcp_server(run: Run) -> None:
    server = acp.schema.McpServerStdio(name="fixture", command=sys.executable, args=[str(MCP_SERVER)], env=[])
    session = await run.conn.new_session(cwd=str(run.workspace), mcp_servers=[server])
    await run.conn.close_session(session_id=session.session_id)


async def _delete(run: Run, session_id: str) -> None:
    await run.conn._conn.send_request("session/delete", {"sessionId": session_id})  # the SDK has no call for it


Step = Callable[[Run], Awaitable[None]]
STEPS: list[Step] = [
    initialize,
    new_session,
    turn_with_tools_and_permissions,
    list_sessions,
    set_mode,
    config_options,
    slash_commands,
    session_cancel,
    cancel_request,
    errors_and_extensions,
    load_with_replay,
    close_resume_delete,
    session_with_an_mcp_server,
]


async def record_full_session(transport: str, tmp_path: Path, extra_steps: Sequence[Step] = ()) -> list[Frame]:
    """Run STEPS (then `extra_steps`) against a real service over `transport` ("stdio" or "websocket"), each on
    the connection open at the time (`run.conn`); every frame of every connection, in order."""
    workspace = tmp_path / "repo"
    workspace.mkdir(parents=True)
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    recorder = FrameRecorder()
    async with _service(transport, tmp_path, recorder) as connector, contextlib.AsyncExitStack() as connections:
        run = Run(transport, tmp_path, workspace, recorder, connector, connections)
        await run.reconnect()
        for step in [*STEPS, *extra_steps]:
            await step(run)
    return recorder.frames


@contextlib.asynccontextmanager
async def _service(transport: str, tmp_path: Path, recorder: FrameRecorder) -> AsyncIterator[Any]:
    """Yields a connector: client -> a context manager for a new connection of that client, recorded."""
    if transport == "stdio":
        script = write_script(tmp_path / "model.json", TURNS)
        command = ("-m", "warpcode.agent", "acp", "--model", f"scripted:{script}", "--mode", "ask",
                   "--state-dir", str(tmp_path / "state"))  # fmt: skip

        @contextlib.asynccontextmanager
        async def connect_stdio(client: Any) -> AsyncIterator[Any]:
            spawned = acp.spawn_agent_process(
                client, sys.executable, *command, env=dict(os.environ), observers=[recorder.observer()]
            )
            async with spawned as (conn, _):
                yield conn

        yield connect_stdio
        return
    # Started and stopped in a thread: another recording may run meanwhile.
    server = await asyncio.to_thread(Server, tmp_path, TURNS, "--mode", "ask", "--token", TOKEN)  # last --mode counts

    @contextlib.asynccontextmanager
    async def connect_websocket(client: Any) -> AsyncIterator[Any]:
        stream = await create_websocket_stream(server.url, headers={"Authorization": f"Bearer {TOKEN}"})
        conn = acp.connect_to_agent(client, stream, observers=[recorder.observer()])
        try:
            yield conn
        finally:
            await conn.close()

    try:
        yield connect_websocket
    finally:
        await asyncio.to_thread(server.stop)
