"""`warpcode serve` for real: a subprocess listening on a free loopback port, the ACP SDK's own WebSocket client."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import time
import uuid
from pathlib import Path

import acp
import pytest
import websockets
from acp.schema import ToolCallProgress, ToolCallStart

from tests.agent.acp_clients import RecordingClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import AUTH, TOKEN, connect, start_server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


@pytest.fixture
def server(tmp_path: Path, workspace: Path):
    script = write_script(tmp_path / "model.json", [
        {"text": "Reading a.txt.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "It says alpha."},
    ])  # fmt: skip
    process, url = start_server(tmp_path, script, "--token", TOKEN)
    yield url
    process.terminate()
    process.wait(timeout=10)


async def test_sdk_client_runs_a_turn_over_websocket(server: str, workspace: Path):
    client = RecordingClient()
    connection = await connect(server, client)
    session = await connection.new_session(cwd=str(workspace))
    response = await connection.prompt(session_id=session.session_id, prompt=[acp.text_block("What is in a.txt?")])
    assert response.stop_reason == "end_turn"
    updates = client.updates[session.session_id]
    assert any(isinstance(u, ToolCallStart) and u.kind == "read" for u in updates)
    assert any(isinstance(u, ToolCallProgress) and u.status == "completed" for u in updates)
    assert client.text(session.session_id) == "Reading a.txt.It says alpha."
    await connection.close()


async def test_two_clients_with_several_sessions_at_once(server: str, workspace: Path):
    clients = [RecordingClient() for _ in range(2)]
    connections = [await connect(server, client) for client in clients]
    sessions = [(c, client, (await c.new_session(cwd=str(workspace))).session_id)
                for c, client in zip(connections, clients, strict=True) for _ in range(3)]  # fmt: skip
    results = await asyncio.gather(*(c.prompt(session_id=sid, prompt=[acp.text_block("go")]) for c, _, sid in sessions))
    assert [r.stop_reason for r in results] == ["end_turn"] * 6
    for _, client, session_id in sessions:  # each session got its own stream, nothing interleaved
        assert client.text(session_id) == "Reading a.txt.It says alpha."
    for connection in connections:
        await connection.close()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}, 403),
    ],
    ids=["no token", "wrong token", "foreign origin"],
)
async def test_upgrade_refusals(server: str, headers: dict, status: int):
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server, additional_headers=headers)
    assert refused.value.response.status_code == status


async def test_wrong_path_is_not_found(server: str):
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server.replace("/acp", "/other"), additional_headers=AUTH)
    assert refused.value.response.status_code == 404


async def test_allowed_origin_connects(tmp_path: Path, workspace: Path):
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    process, url = start_server(tmp_path, script, "--token", TOKEN, "--allow-origin", "https://editor.example")
    try:
        client = RecordingClient()
        connection = await connect(url, client, headers={"Origin": "https://editor.example"})
        session = await connection.new_session(cwd=str(workspace))
        assert session.session_id
        await connection.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_malformed_frames_get_json_rpc_errors_and_the_connection_stays_usable(server: str):
    async with websockets.connect(server, additional_headers=AUTH) as socket:
        await socket.send("{not json")
        assert json.loads(await socket.recv())["error"]["code"] == -32700
        await socket.send("[1, 2]")
        assert json.loads(await socket.recv())["error"]["code"] == -32600
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "no/such_method", "params": {}}))
        answer = json.loads(await socket.recv())
        assert answer["id"] == 7 and answer["error"]["code"] == -32601
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "initialize",
                                      "params": {"protocolVersion": acp.PROTOCOL_VERSION}}))  # fmt: skip
        answer = json.loads(await socket.recv())
        assert answer["id"] == 8 and answer["result"]["protocolVersion"] == acp.PROTOCOL_VERSION


async def test_oversized_frame_closes_the_connection_with_1009(tmp_path: Path):
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    process, url = start_server(tmp_path, script, "--token", TOKEN, "--max-frame-mb", "0.01")
    try:
        async with websockets.connect(url, additional_headers=AUTH) as socket:
            await socket.send("x" * 20_000)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await socket.recv()
            assert closed.value.rcvd.code == 1009
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_closed_connection_cancels_its_running_turn(tmp_path: Path, workspace: Path):
    marker = f"warpcode-test-{uuid.uuid4().hex}"
    script = write_script(tmp_path / "model.json", [
        {"text": "Waiting.",
         "tool_calls": [{"name": "run_command", "arguments": {"command": f"sleep 30; echo {marker}"}}]},
    ])  # fmt: skip
    process, url = start_server(tmp_path, script, "--token", TOKEN)
    try:
        client = RecordingClient()
        connection = await connect(url, client)
        session = await connection.new_session(cwd=str(workspace))
        turn = asyncio.ensure_future(connection.prompt(session_id=session.session_id, prompt=[acp.text_block("go")]))
        await wait_for(lambda: running(marker), "the command to start")
        await connection.close()
        turn.cancel()
        await wait_for(lambda: not running(marker), "the command's process group to be killed")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
def test_generated_token_file_is_private_and_reused(tmp_path: Path):
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    token_file = tmp_path / "state" / "serve-token"
    for _ in range(2):
        process, _ = start_server(tmp_path, script)
        process.terminate()
        process.wait(timeout=10)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text()
        assert len(token.strip()) >= 32
    assert token_file.read_text() == token


def running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


async def wait_for(condition, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
