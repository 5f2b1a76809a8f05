"""`warpcode serve` with what used to break it, against the SDK's own client: big edits and long texts (every
frame stays under the client's 1 MiB limit), and clients that vanish mid-turn (the session is released at once)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import acp
import pytest
from acp import RequestError, schema
from acp.ws import create_websocket_stream

from tests.agent.acp_clients import RecordingClient
from tests.agent.service_processes import AUTH, connect, serving

pytestmark = pytest.mark.asyncio


def numbered_lines(size: int, text: str = "some text of the line") -> str:
    return "".join(f"{n:07d} {text}\n" for n in range(size // (len(text) + 9)))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


@pytest.mark.slow
async def test_big_edits_reach_the_sdk_client_as_excerpts_and_the_turn_ends(tmp_path: Path, workspace: Path):
    medium, big = numbered_lines(600_000), numbered_lines(2_000_000)
    (workspace / "medium.txt").write_text(medium)
    (workspace / "big.txt").write_text(big)
    rewritten = big.replace("some text", "other text")  # every line changes
    answer = "".join(f"Paragraph {n} of a long answer.\n" for n in range(60_000))  # 1.8 MB of message text
    huge_entry = {"content": "Plan: " + "y" * 1_500_000, "status": "pending", "priority": "high"}
    edit = lambda path, old, new: {"name": "edit_file", "arguments": {"path": path, "old_text": old, "new_text": new}}
    write = lambda path, content: {"name": "write_file", "arguments": {"path": path, "content": content}}
    turns = [
        {"tool_calls": [edit("medium.txt", "0012345 some text", "0012345 CHANGED")]},
        {"tool_calls": [write("medium.txt", medium.replace("0000100 some", "0000100 NEW"))]},
        {"tool_calls": [edit("big.txt", "0050000 some text", "0050000 CHANGED")]},
        {"tool_calls": [write("big.txt", rewritten)]},
        {"tool_calls": [{"name": "update_plan", "arguments": {"entries": [huge_entry]}}]},  # only the safety net
        {"text": answer},
    ]
    async with serving(tmp_path, turns, "--mode", "ask") as server:
        client = RecordingClient()  # allows every permission request once
        connection = await connect(server.url, client)
        session_id = (await connection.new_session(cwd=str(workspace))).session_id
        response = await connection.prompt(session_id=session_id, prompt=[acp.text_block("edit them")])
        assert response.stop_reason == "end_turn"
        assert client.text(session_id) == answer  # long text arrives whole, in chunks the client accepts
        assert (await connection.list_sessions()).sessions  # still connected
        await connection.close()
    assert (workspace / "big.txt").read_text() == rewritten
    finished = [u for u in client.updates[session_id] if isinstance(u, schema.ToolCallProgress) and u.status]
    diffs = [c for u in finished if u.status == "completed" for c in u.content or [] if c.type == "diff"]
    assert [Path(d.path).name for d in diffs] == ["medium.txt", "medium.txt", "big.txt", "big.txt"]
    assert "0012345 CHANGED" in diffs[0].new_text and "0012345 some text" in diffs[0].old_text
    assert "0000100 NEW" in diffs[1].new_text and "0050000 CHANGED" in diffs[2].new_text
    for diff in diffs:  # excerpts of the changed region, saying where they start
        assert diff.field_meta["warpcode/excerpt"]["oldStartLine"] >= 1
        assert len(diff.new_text) + len(diff.old_text or "") < 300_000
    assert diffs[2].field_meta["warpcode/excerpt"]["newStartLine"] == 50_001 - 3  # three lines of context
    (plan,) = [u for u in client.updates[session_id] if isinstance(u, schema.AgentPlanUpdate)]
    assert plan.entries[0].content.startswith("Plan: yyy") and "characters not shown" in plan.entries[0].content


@pytest.mark.slow
async def test_a_client_gone_during_the_end_of_turn_flush_leaves_a_session_that_loads_at_once(
    tmp_path: Path, workspace: Path
):
    turns = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}, {"text": "x" * 2_000_000}]
    async with serving(tmp_path, turns) as server:
        for _ in range(5):
            transport = await create_websocket_stream(server.url, headers=AUTH)
            client = VanishingClient(transport)
            connection = acp.connect_to_agent(client, transport)
            await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session_id = (await connection.new_session(cwd=str(workspace))).session_id
            with pytest.raises(ConnectionError):  # the answer never comes: the client left during the flush
                await connection.prompt(session_id=session_id, prompt=[acp.text_block("go")])
            again = await connect(server.url, RecordingClient())
            loaded = await _load_when_released(again, workspace, session_id)
            assert loaded.modes.current_mode_id == "auto"
            await again.close()
    assert "Traceback" not in server.stop()


class VanishingClient(RecordingClient):
    """Closes its WebSocket when the turn's last tool update arrives: the server is flushing the turn's end."""

    def __init__(self, transport) -> None:
        super().__init__()
        self.transport, self.closing = transport, None

    async def session_update(self, session_id: str, update, **kwargs) -> None:
        await super().session_update(session_id, update, **kwargs)
        if isinstance(update, schema.ToolCallProgress) and update.status == "completed":
            self.closing = asyncio.ensure_future(self.transport.close())


async def _load_when_released(connection, workspace: Path, session_id: str, timeout_s: float = 5.0):
    """session/load, retried while the server has not yet noticed that the previous connection is gone."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            return await connection.load_session(cwd=str(workspace), session_id=session_id)
        except RequestError as error:
            if "already open" not in str(error) or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)
