"""A permission question about an edit carries the edit's exact diff (ACP `diff` content), computed without
writing anything: the real `warpcode acp`, the SDK's own client."""

from __future__ import annotations

from pathlib import Path

import acp
import pytest

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio

PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return b + a\n"


@pytest.mark.slow
async def test_the_question_shows_the_exact_diff_and_nothing_is_written_before_the_answer(
    tmp_path: Path, failing_repo: Path, scripted_model
) -> None:
    edit = lambda old, new: {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": old, "new_text": new}}
    turns = [
        {"tool_calls": [edit("a - b", "a + b")]},
        {"tool_calls": [{"name": "apply_patch", "arguments": {"patch": PATCH}}]},
        {"tool_calls": [edit("nowhere", "x")]},
        {"text": "done"},
    ]
    original = (failing_repo / "calc.py").read_text()
    client = AcpTestClient(answers=["reject_once", "reject_once", "reject_once"])
    async with acp_process(client, tmp_path / "state", "--model", scripted_model(turns), "--mode", "ask") as (conn, _):
        session_id = (await conn.new_session(cwd=str(failing_repo))).session_id
        result = await conn.prompt(session_id=session_id, prompt=[acp.text_block("fix")])
    assert result.stop_reason == "end_turn"
    (edited, _), (patch, _), (failing, _) = client.permission_requests
    [diff] = edited.content
    assert diff.type == "diff" and diff.path == str(failing_repo.resolve() / "calc.py")
    assert diff.old_text == original and diff.new_text == original.replace("a - b", "a + b")
    assert patch.content[0].new_text == original.replace("a - b", "b + a")
    assert failing.content is None  # a call that would fail shows its arguments; it says why when it runs
    assert (failing_repo / "calc.py").read_text() == original  # every question was answered no
