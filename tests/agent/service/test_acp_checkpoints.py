"""`_warpcode/checkpoints` and `_warpcode/restore`: undo a turn's edits, in a directory that is not a git repo."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process

pytestmark = pytest.mark.asyncio


async def test_list_and_restore_checkpoints_without_git(tmp_path: Path, failing_repo: Path, scripted_model) -> None:
    assert not (failing_repo / ".git").exists()
    edit = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
    model = scripted_model([{"tool_calls": [edit]}, {"text": "Fixed."}])
    async with acp_process(AcpTestClient(), tmp_path / "state", "--model", model, "--mode", "auto") as (conn, _):
        session_id = (await conn.new_session(cwd=str(failing_repo))).session_id
        assert (await conn.ext_method("warpcode/checkpoints", {"sessionId": session_id})) == {"checkpoints": []}
        await conn.prompt(session_id=session_id, prompt=[text_block("Fix add()")])
        assert "a + b" in (failing_repo / "calc.py").read_text()

        (checkpoint,) = (await conn.ext_method("warpcode/checkpoints", {"sessionId": session_id}))["checkpoints"]
        assert checkpoint["message"] == "before: Fix add()" and checkpoint["time"].startswith("20")
        restored = await conn.ext_method(
            "warpcode/restore", {"sessionId": session_id, "checkpointId": checkpoint["id"]}
        )
        assert restored["restored"] == checkpoint["id"] and restored["changed"] == ["M calc.py"]
        assert (failing_repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"

        with pytest.raises(RequestError) as unknown:
            await conn.ext_method("warpcode/restore", {"sessionId": session_id, "checkpointId": "deadbeef"})
        assert unknown.value.code == -32602 and "deadbeef" in str(unknown.value)
        listed = (await conn.ext_method("warpcode/checkpoints", {"sessionId": session_id}))["checkpoints"]
        assert [c["id"] for c in listed] == [restored["undoCheckpointId"], checkpoint["id"]]  # newest first
