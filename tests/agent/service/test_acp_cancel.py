"""Cancelling over ACP: session/cancel and a dropped connection both stop the turn and kill its commands."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio

LONG_COMMAND = {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo $$ > pgid.txt; sleep 30"}}]}


async def _command_group(workspace: Path) -> int:
    """The process group of the running command (its shell leads it), once the command has started."""
    pid_file = workspace / "pgid.txt"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        await asyncio.sleep(0.05)
    raise AssertionError("the command never started")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_cancel_during_a_long_command_returns_cancelled_fast_and_kills_it(tmp_path: Path, scripted_model) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted_model([LONG_COMMAND, {"text": "never reached"}])
    client = AcpTestClient()
    async with acp_process(client, tmp_path / "state", "--model", model, "--mode", "auto") as (conn, _):
        session = await conn.new_session(cwd=str(workspace))
        turn = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("wait")]))
        pgid = await _command_group(workspace)
        assert _group_alive(pgid)
        started = time.monotonic()
        await conn.cancel(session_id=session.session_id)
        response = await asyncio.wait_for(turn, 5)
        elapsed = time.monotonic() - started
        assert response.stop_reason == "cancelled"
        assert elapsed < 1.0
        assert not _group_alive(pgid)
        # The session stays usable: the next prompt runs (the script has one turn left).
        again = await conn.prompt(session_id=session.session_id, prompt=[text_block("go on")])
    assert again.stop_reason == "end_turn"
    assert "never reached" in client.text()
    assert [u.status for u in client.of("tool_call_update")][-1] == "failed"


async def test_a_dropped_connection_cancels_its_running_turn(tmp_path: Path, scripted_model) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    client = AcpTestClient()
    async with acp_process(client, tmp_path / "state", "--model", scripted_model([LONG_COMMAND]), "--mode", "auto") as (
        conn,
        process,
    ):
        session = await conn.new_session(cwd=str(workspace))
        turn = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("wait")]))
        pgid = await _command_group(workspace)
        process.stdin.close()  # the editor went away
        await asyncio.wait_for(process.wait(), 10)
    (unanswered,) = await asyncio.gather(turn, return_exceptions=True)
    assert isinstance(unanswered, ConnectionError)
    assert process.returncode == 0
    assert not _group_alive(pgid)
