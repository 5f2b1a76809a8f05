"""`$/cancel_request` (ACP 1.21, docs/protocol/v1/cancellation.mdx) over both transports, with the real services:
a cancelled prompt stops its turn as session/cancel does (its command killed, the session usable) and answers
-32800; a cancel for a finished request is ignored; a request cancelled before its handler runs answers -32800
and does nothing."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from tests.agent.acp_schema import validate_frame
from tests.agent.raw_wire import TRANSPORTS, raw_service

pytestmark = pytest.mark.asyncio

LONG_COMMAND = {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo $$ > pgid.txt; sleep 30"}}]}


def cancel(request_id: object) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}})


async def started_command(workspace: Path) -> int:
    for _ in range(200):
        if (pid := workspace / "pgid.txt").is_file() and pid.read_text().strip():
            return int(pid.read_text())
        await asyncio.sleep(0.05)
    raise AssertionError("the command never started")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_cancelled_prompt_stops_its_turn_and_answers_request_cancelled(transport: str, tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with raw_service(transport, tmp_path, [LONG_COMMAND, {"text": "again"}]) as (wire, log):
        await wire.request(1, "initialize", {"protocolVersion": 1})
        await wire.answer()
        await wire.send(json.dumps(new_session(2, workspace)))
        session_id = (await wire.answer())["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "wait"}]}
        await wire.request("turn-1", "session/prompt", prompt)
        pgid = await started_command(workspace)
        started = time.monotonic()
        await wire.send(cancel("turn-1"))
        answer = await wire.answer()
        assert time.monotonic() - started < 2.0
        assert answer["id"] == "turn-1" and answer["error"]["code"] == -32800
        validate_frame(answer, "agent", "session/prompt")
        assert not group_alive(pgid)
        await wire.send(cancel("turn-1"))  # answered already: nothing happens
        await wire.request("turn-2", "session/prompt", prompt)  # the session goes on
        assert (await wire.answer())["result"] == {"stopReason": "end_turn"}
        # A short request is not stopped once running (session/new writes its file in a thread): cancelled before
        # its handler runs it answers -32800 and makes no session, else it answers with the session it made.
        await wire.send_together(json.dumps(new_session(5, workspace)), cancel(5))
        answer = await wire.answer()
        await wire.request(6, "session/list", {})
        listed = [s["sessionId"] for s in (await wire.answer())["result"]["sessions"]]
        if transport == "stdio":  # one write of both lines: the cancel is read before the handler's task runs
            assert answer["error"]["code"] == -32800
        made = [answer["result"]["sessionId"]] if "result" in answer else []
        assert sorted(listed) == sorted([session_id, *made])
    assert not [line for line in log if "ERROR" in line or "Traceback" in line]


def new_session(request_id: int, cwd: Path) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/new", "params": {"cwd": str(cwd), "mcpServers": []}}
