"""Client file system: a client advertising fs read/write gets the reads and writes; its unsaved buffers win."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio


def _calls(*calls: tuple[str, dict]) -> list[dict]:
    return [{"tool_calls": [{"name": name, "arguments": arguments}]} for name, arguments in calls] + [{"text": "Done."}]


async def test_reads_and_edits_go_through_the_editor_buffers(
    tmp_path: Path, failing_repo: Path, scripted_model
) -> None:
    calc = str(failing_repo / "calc.py")
    unsaved = "def add(a, b):\n    return a * b  # unsaved\n"
    turns = _calls(
        ("read_file", {"path": "calc.py"}),
        ("edit_file", {"path": "calc.py", "old_text": "a * b", "new_text": "a + b"}),
        ("write_file", {"path": "notes.txt", "content": "new file\n"}),
        ("read_file", {"path": "../outside.txt"}),
    )
    (tmp_path / "outside.txt").write_text("secret")
    client = AcpTestClient(buffers={calc: unsaved})
    async with acp_process(client, tmp_path / "state", "--model", scripted_model(turns), "--mode", "auto") as (conn, _):
        session = await conn.new_session(cwd=str(failing_repo))
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("fix it")])
    assert response.stop_reason == "end_turn"
    results = [u for u in client.of("tool_call_update") if u.status in ("completed", "failed")]
    assert "a * b  # unsaved" in results[0].content[0].content.text  # the buffer, not the disk
    assert client.buffers[calc] == "def add(a, b):\n    return a + b  # unsaved\n"
    assert (failing_repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"  # disk untouched
    assert client.buffers[str(failing_repo / "notes.txt")] == "new file\n"
    assert not (failing_repo / "notes.txt").exists()
    assert results[-1].status == "failed" and "outside" in results[-1].content[0].content.text
    assert all(path.startswith(str(failing_repo) + "/") for _, path in client.file_requests)


async def test_patches_apply_to_the_editor_buffers(tmp_path: Path, failing_repo: Path, scripted_model) -> None:
    calc = str(failing_repo / "calc.py")
    unsaved = "def add(a, b):\n    return a * b  # unsaved\n"
    patch = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
        "-    return a * b  # unsaved\n+    return a + b  # unsaved\n"
    )
    client = AcpTestClient(buffers={calc: unsaved})
    turns = _calls(("apply_patch", {"patch": patch}))
    async with acp_process(client, tmp_path / "state", "--model", scripted_model(turns), "--mode", "auto") as (conn, _):
        session = await conn.new_session(cwd=str(failing_repo))
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("patch it")])
    assert response.stop_reason == "end_turn"
    [result] = [u for u in client.of("tool_call_update") if u.status in ("completed", "failed")]
    assert result.status == "completed", result.content
    assert client.buffers[calc] == "def add(a, b):\n    return a + b  # unsaved\n"  # patched against the buffer
    assert (failing_repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"  # disk untouched
