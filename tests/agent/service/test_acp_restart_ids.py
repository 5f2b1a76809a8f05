"""Tool call ids stay unique within a session across `warpcode acp` restarts: the new turns of a session reopened
with session/load (or session/resume) in a second process never reuse an id its replayed turns used, although the
model numbers its calls from zero again (the scripted model numbers them per process, as servers number them per
response). A client keys its tool call views by these ids: a repeat would merge a new call into an old one."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio


def _turn(word: str) -> list[dict]:
    return [{"tool_calls": [{"name": "run_command", "arguments": {"command": f"echo {word}"}}]}, {"text": "Done."}]


async def test_new_tool_calls_after_a_restart_never_reuse_the_sessions_ids(tmp_path: Path, workspace: Path) -> None:
    state, model = tmp_path / "state", write_script(tmp_path / "model.json", _turn("hi"))
    options = ("--model", f"scripted:{model}", "--mode", "auto")
    first = AcpTestClient()
    async with acp_process(first, state, *options) as (conn, _):
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("first")])
    used = [u.tool_call_id for u in first.of("tool_call")]
    assert len(used) == 1

    second = AcpTestClient()
    async with acp_process(second, state, *options) as (conn, _):
        await conn.load_session(cwd=str(workspace), session_id=session_id)
        assert [u.tool_call_id for u in second.of("tool_call")] == used  # the replay
        second.updates.clear()
        assert (await conn.prompt(session_id=session_id, prompt=[text_block("second")])).stop_reason == "end_turn"
        after_load = [u.tool_call_id for u in second.of("tool_call")]
        assert len(after_load) == 1 and not set(after_load) & set(used)
        # Every update of the new call names the new id, never the replayed one.
        assert {u.tool_call_id for u in second.of("tool_call_update")} == set(after_load)

        await conn.close_session(session_id=session_id)  # reopened from its log, as another process would
        second.updates.clear()
        await conn.resume_session(cwd=str(workspace), session_id=session_id)
        assert second.updates == []  # resume replays nothing
        await conn.prompt(session_id=session_id, prompt=[text_block("third")])
    after_resume = [u.tool_call_id for u in second.of("tool_call")]
    assert len(after_resume) == 1 and not set(after_resume) & {*used, *after_load}
