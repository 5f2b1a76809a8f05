"""Persistence: a second `warpcode acp` process with the same state dir reopens a session with session/load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio


def _command(text: str, answer: str) -> list[dict]:
    return [{"tool_calls": [{"name": "run_command", "arguments": {"command": f"echo {text}"}}]}, {"text": answer}]


@pytest.mark.slow
async def test_restart_and_load_replays_history_and_keeps_mode_permissions_and_conversation(
    tmp_path: Path, scripted_model
) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    first = AcpTestClient(answers=["allow_always"])
    async with acp_process(first, state, "--model", scripted_model(_command("one", "First answer."))) as (conn, _):
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.set_session_mode(session_id=session_id, mode_id="accept-edits")
        assert (await conn.prompt(session_id=session_id, prompt=[text_block("First prompt")])).stop_reason == "end_turn"
    assert len(first.permission_requests) == 1
    log = state / "sessions" / f"{session_id}.jsonl"
    with log.open("a") as torn:
        torn.write('{"type": "update", "upd')  # a crash in the middle of a write

    second = AcpTestClient()
    async with acp_process(second, state, "--model", scripted_model(_command("two", "Second answer."))) as (conn, _):
        listed = await conn.list_sessions(cwd=str(workspace))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(session_id, "First prompt")]
        assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []
        loaded = await conn.load_session(cwd=str(workspace), session_id=session_id)
        assert loaded.modes.current_mode_id == "accept-edits"
        replayed = list(second.updates)
        kinds = [u.session_update for u in replayed]
        assert kinds[0] == "user_message_chunk" and replayed[0].content.text == "First prompt"
        assert {"tool_call", "tool_call_update", "agent_message_chunk", "usage_update"} <= set(kinds)
        assert "First answer." in second.text()

        second.updates.clear()
        continued = await conn.prompt(session_id=session_id, prompt=[text_block("Second prompt")])
        assert continued.stop_reason == "end_turn"
        assert second.permission_requests == []  # the "always" given to the first process still holds
        continued_used = second.of("usage_update")[0].used

        fresh = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.set_session_mode(session_id=fresh, mode_id="accept-edits")
        second.updates.clear()
        await conn.prompt(session_id=fresh, prompt=[text_block("Second prompt")])
    assert continued_used > second.of("usage_update")[0].used  # the model was sent the earlier conversation
    records = [json.loads(line) for line in log.read_text().splitlines()]  # the torn line was cut, not extended
    assert records[-1]["type"] == "turn_end" and records[-1]["messages"][0]["content"] == "First prompt"
