"""The ACP agent served in-process over the SDK's in-memory transports (the seam `warpcode serve` uses)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import acp
import pytest
from acp import schema
from acp.helpers import embedded_text_resource, resource_block, resource_link_block, text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service.in_process import served
from warpcode.agent.backends import NO_MODEL_MESSAGE
from warpcode.agent.service.agent import ServiceConfig
from warpcode.agent.service.session import MAX_QUEUED_UPDATES
from warpcode.model_runtime import builtin_model

pytestmark = pytest.mark.asyncio


async def test_initialize_advertises_version_capabilities_and_no_authentication(tmp_path: Path) -> None:
    async with served(ServiceConfig(None, tmp_path), AcpTestClient()) as (conn, _, _):
        answer = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        with pytest.raises(acp.RequestError) as refused:  # a methodId must be one advertised, and none is
            await conn.authenticate(method_id="none")
    assert refused.value.code == -32602 and "needs none" in str(refused.value)
    assert answer.protocol_version == acp.PROTOCOL_VERSION
    assert answer.agent_capabilities.load_session is True
    assert answer.agent_capabilities.prompt_capabilities.embedded_context is True
    assert answer.agent_info.name == "warpcode" and answer.auth_methods == []


async def test_without_a_model_a_prompt_says_how_to_configure_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(builtin_model, "BUILTIN_DIR", tmp_path)  # an installation that cannot run the built-in model
    client = AcpTestClient()
    async with served(ServiceConfig(None, tmp_path / "state"), client) as (conn, _, _):
        session = await conn.new_session(cwd=str(tmp_path))
        with pytest.raises(acp.RequestError) as failed:  # a failure, not a refusal: the prompt is not dropped
            await conn.prompt(session_id=session.session_id, prompt=[text_block("hello")])
    assert failed.value.code == -32603
    assert str(failed.value).startswith(f"The model could not answer: {NO_MODEL_MESSAGE} Your prompt stays")
    # said once, by the error: no session update (the agent's text) repeats it
    assert not [u for u in client.updates if "No model is configured" in u.model_dump_json()]


async def test_embedded_context_and_links_are_flattened_into_the_user_message(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(builtin_model, "BUILTIN_DIR", tmp_path)  # no model to answer: the prompt fails
    state = tmp_path / "state"
    blocks = [
        text_block("Explain this:"),
        resource_block(embedded_text_resource("file:///w/a.py", "x = 1\n")),
        resource_link_block("b.py", "file:///w/b.py"),
    ]
    async with served(ServiceConfig(None, state), AcpTestClient()) as (conn, agent, _):
        session_id = (await conn.new_session(cwd=str(tmp_path))).session_id
        with pytest.raises(acp.RequestError):  # no model to answer: the model is shown the prompt all the same
            await conn.prompt(session_id=session_id, prompt=blocks)
        user = agent.sessions[session_id].agent.messages[1]
    assert (
        user.content
        == 'Explain this:\n\n<context uri="file:///w/a.py">\nx = 1\n\n</context>\n\n[resource b.py: file:///w/b.py]'
    )


async def test_a_slow_client_slows_the_turn_instead_of_growing_the_queue(tmp_path: Path, scripted_model) -> None:
    plan = {"entries": [{"content": "step", "status": "pending", "priority": "low"}]}
    calls = 150  # four updates each: far more than the queue may hold
    model = scripted_model([{"tool_calls": [{"name": "update_plan", "arguments": plan}] * calls}])
    client = AcpTestClient()
    async with served(ServiceConfig(model, tmp_path / "state", "auto"), client) as (conn, agent, transport):
        session_id = (await conn.new_session(cwd=str(tmp_path))).session_id
        transport.gate.clear()
        turn = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[text_block("plan")]))
        session, largest = agent.sessions[session_id], 0
        for _ in range(50):
            await asyncio.sleep(0.01)
            largest = max(largest, session.queued_updates)
        assert MAX_QUEUED_UPDATES <= largest <= MAX_QUEUED_UPDATES + 8  # full, and the turn waits
        assert not turn.done()
        transport.gate.set()
        response = await asyncio.wait_for(turn, 10)
    assert response.stop_reason == "end_turn"
    assert len(client.of("plan")) == calls
    assert [u.tool_call_id for u in client.of("tool_call")] == [f"call_1_{i}" for i in range(calls)]
    assert isinstance(client.updates[-1], schema.UsageUpdate)
