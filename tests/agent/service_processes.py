"""Real agent services for the tests: `warpcode serve` (websocket) and `warpcode acp` (stdio) as subprocesses, and
connections to them through the SDK."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import acp
from acp.ws import create_websocket_stream

from tests.agent.acp_clients import AcpTestClient, RecordingClient
from tests.agent.scripted_model import write_script
from warpcode.agent.service.listening import listening_url

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


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


@contextlib.asynccontextmanager
async def acp_process(client: AcpTestClient, state_dir: Path, *options: str):
    """`warpcode acp` as a real subprocess, initialized; yields (connection, process)."""
    args = ["-m", "warpcode.agent", "acp", "--state-dir", str(state_dir), *options]
    async with acp.spawn_agent_process(client, sys.executable, *args, env=dict(os.environ)) as (conn, process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=client.capabilities())
        yield conn, process


class Server:
    """`warpcode serve` with its stderr collected by a thread (a chatty server never blocks on a full pipe)."""

    def __init__(self, tmp_path: Path, turns: list[dict], *options: str) -> None:
        self.process, self.url = start_server(tmp_path, write_script(tmp_path / "model.json", turns), *options)
        self.log: list[str] = []
        self._collector = threading.Thread(target=self._collect, daemon=True)
        self._collector.start()

    def _collect(self) -> None:
        for line in self.process.stderr:
            self.log.append(line)

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))

    def stop(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:  # a connection that never finishes closing holds the shutdown up
            self.process.kill()
            raise
        self._collector.join(timeout=5)  # the last lines
        return "".join(self.log)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, turns: list[dict], *options: str):
    """A `Server` that wants the test token, stopped on the way out; yields it."""
    server = Server(tmp_path, turns, "--token", TOKEN, *options)
    try:
        yield server
    finally:
        server.stop()
