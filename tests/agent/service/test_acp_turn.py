"""`warpcode acp` over stdio with the SDK's own client: a full edit + test turn with permission questions."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio


@pytest.mark.slow
async def test_edit_and_test_turn_asks_permission_and_streams_everything(
    tmp_path: Path, failing_repo: Path, fix_turns: list[dict], scripted_model
) -> None:
    second_edit = {"name": "edit_file", "arguments": {"path": "NOTES.md", "old_text": "", "new_text": "add() fixed\n"}}
    fix_turns.insert(2, {"tool_calls": [second_edit]})  # an edit_file after its "always": not asked again
    model = scripted_model(fix_turns)
    client = AcpTestClient(answers=["allow_always", "allow_once"])
    async with acp_process(client, tmp_path / "state", "--model", model) as (conn, _):
        session = await conn.new_session(cwd=str(failing_repo))
        assert session.modes.current_mode_id == "ask"
        assert [m.id for m in session.modes.available_modes] == ["ask", "accept-edits", "auto"]
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("Fix add()")])
    assert response.stop_reason == "end_turn"
    assert (failing_repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (failing_repo / "NOTES.md").read_text() == "add() fixed\n"
    asked = [(call.kind, call.tool_call_id, options) for call, options in client.permission_requests]
    assert [kind for kind, _, _ in asked] == ["edit", "execute"]
    assert asked[0][2] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    started = {u.tool_call_id: u for u in client.of("tool_call")}
    assert started[asked[0][1]].title == "Edit calc.py"
    diffs = [c for u in client.of("tool_call_update") for c in u.content or [] if c.type == "diff"]
    assert diffs[0].path == str(failing_repo / "calc.py") and "a + b" in diffs[0].new_text
    finished = [u for u in client.of("tool_call_update") if u.status == "completed"]
    assert any("passed" in c.content.text for u in finished for c in u.content if c.type == "content")
    assert client.of("plan")[0].entries[0].content == "Fix add()"
    assert "The test passes now." in client.text()
