from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema as acp_schema
from acp.schema import AgentMessageChunk
from acp.ws import create_websocket_stream

from warpcode.agent.cli.serve import listening_url
from warpcode.agent.events import SessionUpdate

FIX_SCRIPT = {
    "turns": [
        {
            "text": "I will look at the code first.",
            "tool_calls": [
                {
                    "name": "update_plan",
                    "arguments": {"entries": [{"content": "Fix add()", "status": "in_progress", "priority": "high"}]},
                },
                {"name": "read_file", "arguments": {"path": "calc.py"}},
            ],
        },
        {
            "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
            ]
        },
        {"tool_calls": [{"name": "run_tests", "arguments": {}}]},
        {"text": "Fixed add(): it subtracted instead of adding. The test passes now."},
    ]
}


@pytest.fixture
def failing_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return repo


@pytest.fixture
def fix_turns() -> list[dict]:
    """Scripted model turns that fix `failing_repo`: plan, read, edit, test, summary."""
    return json.loads(json.dumps(FIX_SCRIPT["turns"]))


@pytest.fixture
def scripted_model(tmp_path: Path):
    """Writes turns to a script file; returns its `scripted:PATH` model spec."""

    def write(turns: list[dict]) -> str:
        path = tmp_path / "script.json"
        path.write_text(json.dumps({"turns": turns}))
        return f"scripted:{path}"

    return write


@pytest.fixture
def events() -> Recorder:
    return Recorder()


class Recorder(list):
    """An event sink keeping every session update, with filters by type."""

    def __call__(self, update: SessionUpdate) -> None:
        self.append(update)

    def of(self, kind: str) -> list[SessionUpdate]:
        return [u for u in self if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))


class AcpTestClient:
    """The client end of ACP tests, driven by the SDK: records every session/update, answers permission
    questions with the given option ids in order (then reject_once), and when given `buffers` (absolute path ->
    text) serves fs/read_text_file and fs/write_text_file from them, like an editor's unsaved buffers."""

    def __init__(self, answers: list[str] | None = None, buffers: dict[str, str] | None = None) -> None:
        self.answers = list(answers or [])
        self.buffers = buffers
        self.updates: list[Any] = []
        self.permission_requests: list[Any] = []
        self.file_requests: list[tuple[str, str]] = []  # ("read" | "write", path)

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        self.permission_requests.append((tool_call, [o.option_id for o in options]))
        choice = self.answers.pop(0) if self.answers else "reject_once"
        return acp_schema.RequestPermissionResponse(
            outcome=acp_schema.AllowedOutcome(option_id=choice, outcome="selected")
        )

    async def read_text_file(self, path: str, session_id: str, **kwargs: Any) -> Any:
        self.file_requests.append(("read", path))
        if self.buffers is None or path not in self.buffers:
            return acp_schema.ReadTextFileResponse(content=Path(path).read_text())
        return acp_schema.ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(self, path: str, content: str, session_id: str, **kwargs: Any) -> Any:
        assert self.buffers is not None, "the client did not advertise fs.writeTextFile"
        self.file_requests.append(("write", path))
        self.buffers[path] = content
        return acp_schema.WriteTextFileResponse()

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))

    def capabilities(self) -> Any:
        served = self.buffers is not None
        fs = acp_schema.FileSystemCapabilities(read_text_file=served, write_text_file=served)
        return acp_schema.ClientCapabilities(fs=fs)


@contextlib.asynccontextmanager
async def acp_process(client: AcpTestClient, state_dir: Path, *options: str):
    """`warpcode acp` as a real subprocess, initialized; yields (connection, process)."""
    args = ["-m", "warpcode.agent", "acp", "--state-dir", str(state_dir), *options]
    async with acp.spawn_agent_process(client, sys.executable, *args, env=dict(os.environ)) as (conn, process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=client.capabilities())
        yield conn, process


TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class RecordingClient:
    """An ACP client that records every session update and allows every permission request once."""

    def __init__(self) -> None:
        self.updates: dict[str, list] = {}

    async def session_update(self, session_id: str, update, **kwargs) -> None:
        self.updates.setdefault(session_id, []).append(update)

    async def request_permission(self, session_id: str, tool_call, options, **kwargs):
        allow = next(option for option in options if option.kind == "allow_once")
        return acp.schema.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    def on_connect(self, conn) -> None:
        self.connection = conn

    def text(self, session_id: str) -> str:
        return "".join(u.content.text for u in self.updates.get(session_id, []) if isinstance(u, AgentMessageChunk))


def write_script(path: Path, turns: list[dict]) -> Path:
    path.write_text(json.dumps({"turns": turns}))
    return path


def start_server(tmp_path: Path, script: Path, *options: str) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "warpcode.agent", "serve", "--port", "0", "--model", f"scripted:{script}",
               "--state-dir", str(tmp_path / "state"), "--mode", "auto", *options]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    process.startup_lines = []  # what it printed before listening
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            line = process.stderr.readline()
            url = listening_url(line)
            if url:
                return process, url
            process.startup_lines.append(line)
            if not line and process.poll() is not None:
                break
    process.kill()
    raise AssertionError(f"server did not start: {process.stderr.read()}")


async def connect(url: str, client: RecordingClient, headers: dict | None = None):
    transport = await create_websocket_stream(url, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})})
    connection = acp.connect_to_agent(client, transport)
    await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)
    return connection


async def one_turn(url: str, cwd: Path, text: str = "go") -> str:
    """Connect to a real server, open a session in `cwd`, run one prompt turn, disconnect: its stop reason."""
    connection = await connect(url, RecordingClient())
    session_id = (await connection.new_session(cwd=str(cwd))).session_id
    result = await connection.prompt(session_id=session_id, prompt=[acp.text_block(text)])
    await connection.close()
    return result.stop_reason
