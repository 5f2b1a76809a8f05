"""Bad requests get JSON-RPC errors that name what is wrong, and the connection stays usable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio

SLOW = {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 30"}}]}


async def _error(request) -> RequestError:
    with pytest.raises(RequestError) as caught:
        await request
    return caught.value


async def test_errors_name_the_session_field_mode_and_busy_turn(tmp_path: Path, scripted_model) -> None:
    client = AcpTestClient()
    async with acp_process(client, tmp_path / "state", "--model", scripted_model([SLOW]), "--mode", "auto") as (
        conn,
        _,
    ):
        unknown = await _error(conn.prompt(session_id="no-such-session", prompt=[text_block("hi")]))
        assert unknown.code == -32602 and "no-such-session" in str(unknown)
        assert "no-such-session" in str(
            await _error(conn.load_session(cwd=str(tmp_path), session_id="no-such-session"))
        )
        assert "'../x'" in str(await _error(conn.load_session(cwd=str(tmp_path), session_id="../x")))

        missing = await _error(conn._conn.send_request("session/new", {}))
        assert missing.code == -32602 and missing.data["errors"][0]["loc"] == ["cwd"]
        relative = await _error(conn.new_session(cwd="relative/dir"))
        assert relative.code == -32602 and relative.data == {"cwd": "relative/dir"}
        assert (await _error(conn._conn.send_request("session/nonsense", {}))).code == -32601

        session_id = (await conn.new_session(cwd=str(tmp_path))).session_id
        mode = await _error(conn.set_session_mode(session_id=session_id, mode_id="yolo"))
        assert mode.code == -32602 and "'yolo'" in str(mode) and "accept-edits" in str(mode)
        no_session = await _error(conn.ext_method("warpcode/checkpoints", {}))
        assert no_session.code == -32602 and no_session.data["errors"][0]["loc"] == ["sessionId"]

        turn = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[text_block("first")]))
        while not client.of("tool_call"):
            await asyncio.sleep(0.02)
        busy = await _error(conn.prompt(session_id=session_id, prompt=[text_block("second")]))
        assert busy.code == -32001 and "already running" in str(busy)
        await conn.cancel(session_id=session_id)
        assert (await turn).stop_reason == "cancelled"
    commands = [u for u in client.of("tool_call") if u.title == "Run sleep 30"]
    assert len(commands) == 1  # the refused prompt never ran
