"""`$/cancel_request` (ACP 1.21, docs/protocol/v1/cancellation.mdx) over both transports, with the real services:
a cancelled prompt stops its turn as session/cancel does (its command killed, the session usable) and answers
-32800; a cancel for a finished request is ignored; a request cancelled before its handler runs answers -32800
and does nothing; a cancelled session/load stops its replay and leaves the session closed (in-process)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import acp
import pytest
from acp._transport import memory_transport_pair

from tests.agent.acp_clients import AcpTestClient
from tests.agent.acp_schema import validate_frame
from tests.agent.raw_wire import TRANSPORTS, raw_service
from tests.agent.scripted_model import write_script
from tests.agent.service.in_process import served
from warpcode.agent.service.agent import AcpService, ServiceConfig
from warpcode.agent.service.connection import serve_connection

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


class HeldSends:
    """The agent's end of an in-memory connection whose client stops reading while `reading` is clear."""

    def __init__(self, inner) -> None:
        self.inner, self.reading, self.held = inner, asyncio.Event(), asyncio.Event()
        self.reading.set()

    async def send(self, message: dict) -> None:
        if not self.reading.is_set():
            self.held.set()
            await self.reading.wait()
        await self.inner.send(message)

    async def receive(self):
        return await self.inner.receive()

    async def close(self) -> None:
        await self.inner.close()


async def test_a_cancelled_session_load_stops_its_replay_and_leaves_the_session_to_load_again(tmp_path: Path):
    config = ServiceConfig(f"scripted:{write_script(tmp_path / 'model.json', [{'text': 'hi'}])}", tmp_path / "state")
    async with served(config, AcpTestClient()) as (conn, _, _):  # a stored session with a turn to replay
        session_id = (await conn.new_session(cwd=str(tmp_path))).session_id
        await conn.prompt(session_id=session_id, prompt=[acp.text_block("hello")])
    agent_end, client_end = memory_transport_pair()
    transport = HeldSends(agent_end)
    agent = AcpService(config).new_connection_agent()  # as after a restart
    server = asyncio.create_task(serve_connection(agent, transport, 8, "the test"))
    load = {"cwd": str(tmp_path), "sessionId": session_id, "mcpServers": []}
    try:
        transport.reading.clear()
        await client_end.send({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": load})
        await asyncio.wait_for(transport.held.wait(), 5)  # the replay is under way, its first update held
        await client_end.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})
        await asyncio.sleep(0.05)
        transport.reading.set()
        answer = await answer_to(client_end, 1)
        assert answer["error"]["code"] == -32800
        await client_end.send({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": load})
        assert "result" in await answer_to(client_end, 2)  # not "already open": the cancelled load let it go
    finally:
        await agent.close()
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)


async def answer_to(client_end, request_id: int) -> dict:
    while "method" in (message := await asyncio.wait_for(client_end.receive(), 5)) or message["id"] != request_id:
        pass
    return message
