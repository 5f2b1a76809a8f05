"""MCP servers over a real `warpcode serve` with the SDK's WebSocket client: a session's server stops when its
connection ends, session/load starts the servers it is given again, and stopping the service stops them."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import acp
import pytest
from acp import schema

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import TOKEN, Server, connect
from tests.processes import process_running

pytestmark = pytest.mark.asyncio
FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))
TURNS = [{"tool_calls": [{"name": "mcp__fixture__pid", "arguments": {}}]}, {"text": "Noted."}]
SERVERS = [schema.McpServerStdio(name="fixture", command=sys.executable, args=[FIXTURE], env=[])]


async def _server_pid(connection, client: AcpTestClient, session_id: str) -> int:
    await connection.prompt(session_id=session_id, prompt=[acp.text_block("which pid?")])
    (done,) = [u for u in client.of("tool_call_update") if u.status == "completed"]
    return int(done.content[0].content.text)


async def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and process_running(pid):
        await asyncio.sleep(0.05)
    return not process_running(pid)


@pytest.mark.slow
async def test_servers_stop_with_the_connection_and_the_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    server = Server(tmp_path, TURNS, "--token", TOKEN, "--mode", "auto")
    try:
        client = AcpTestClient()
        connection = await connect(server.url, client)
        session_id = (await connection.new_session(cwd=str(workspace), mcp_servers=SERVERS)).session_id
        first = await _server_pid(connection, client, session_id)
        await connection.close()

        # At once, as an editor reconnects: the old connection is still closing the session (stopping its MCP
        # server), and the load waits for that rather than refusing a session "already open".
        client = AcpTestClient()
        connection = await connect(server.url, client)
        await connection.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=SERVERS)
        assert await _gone(first)
        client.updates.clear()  # the replayed history
        second = await _server_pid(connection, client, session_id)
        assert second != first and process_running(second)
    finally:
        await asyncio.to_thread(server.stop)  # SIGTERM, the connection still open (its client answers the close)
    assert await _gone(second)
