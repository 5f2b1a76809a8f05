"""ACP over stdio with the requests in flight bounded (`request_limit.serve_stdio`): the real `warpcode acp`,
driven by the SDK's own client: beyond the limit requests are refused at once, while the answers to the agent's
permission questions and session/cancel still get through."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import acp
import pytest
from acp import RequestError

from tests.agent.acp_clients import HeldPermissions
from tests.agent.scripted_model import write_script
from warpcode.agent.service.request_limit import MAX_IN_FLIGHT, TOO_MANY_REQUESTS

pytestmark = pytest.mark.asyncio


@pytest.mark.slow
async def test_stdio_refuses_requests_over_the_limit_and_lets_answers_and_cancels_through(tmp_path: Path):
    script = write_script(tmp_path / "model.json", [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo ran"}}]}, {"text": "done"},
    ])  # fmt: skip
    client, extra = HeldPermissions(), 6
    command = ("-m", "warpcode.agent", "acp", "--model", f"scripted:{script}", "--state-dir", str(tmp_path / "state"))
    async with acp.spawn_agent_process(client, sys.executable, *command, env=dict(os.environ)) as (connection, _):
        await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sessions = [(await connection.new_session(cwd=str(tmp_path))).session_id for _ in range(MAX_IN_FLIGHT + extra)]
        prompts = [
            asyncio.ensure_future(connection.prompt(session_id=s, prompt=[acp.text_block("go")])) for s in sessions
        ]
        while len(client.asked) < MAX_IN_FLIGHT:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        refused = [p for p in prompts if p.done()]
        assert len(refused) == extra
        assert all(isinstance(p.exception(), RequestError) and p.exception().code == TOO_MANY_REQUESTS for p in refused)
        await connection.cancel(session_id=client.asked[0])
        client.answer.set()
        results = await asyncio.wait_for(asyncio.gather(*(p for p in prompts if p not in refused)), 30)
    assert sorted(r.stop_reason for r in results) == ["cancelled"] + ["end_turn"] * (MAX_IN_FLIGHT - 1)
