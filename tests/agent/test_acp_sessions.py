"""Stored sessions over real `warpcode serve` connections with the SDK's client: one connection at a time may hold
a session, and a session opens only in its own directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError

from tests.agent.conftest import RecordingClient, connect
from tests.agent.test_ws_limits import serving

pytestmark = pytest.mark.asyncio


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


async def test_concurrent_loads_of_one_session_open_it_on_exactly_one_connection(tmp_path: Path, workspace: Path):
    async with serving(tmp_path, [{"text": "hi"}]) as server:
        creator = await connect(server.url, RecordingClient())
        session_ids = [(await creator.new_session(cwd=str(workspace))).session_id for _ in range(20)]
        await creator.close()
        await asyncio.sleep(0.3)  # the server releases the creator's sessions
        for session_id in session_ids:
            rivals = [await connect(server.url, RecordingClient()) for _ in range(2)]
            loads = [c.load_session(cwd=str(workspace), session_id=session_id) for c in rivals]
            outcomes = await asyncio.gather(*loads, return_exceptions=True)
            refused = [o for o in outcomes if isinstance(o, Exception)]
            assert len(refused) == 1, outcomes
            assert isinstance(refused[0], RequestError) and "is already open on a connection" in str(refused[0])
            for connection in rivals:
                await connection.close()


async def test_a_session_loads_only_in_its_own_directory(tmp_path: Path, workspace: Path):
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "link").symlink_to(workspace)
    async with serving(tmp_path, [{"text": "hi"}]) as server:
        creator = await connect(server.url, RecordingClient())
        session_id = (await creator.new_session(cwd=str(workspace))).session_id
        await creator.close()
        await asyncio.sleep(0.3)
        connection = await connect(server.url, RecordingClient())
        with pytest.raises(RequestError) as refused:
            await connection.load_session(cwd=str(other), session_id=session_id)
        assert refused.value.code == -32602 and str(workspace) in str(refused.value)
        loaded = await connection.load_session(cwd=str(tmp_path / "link"), session_id=session_id)  # the same place
        assert loaded.modes.current_mode_id == "auto"
        await connection.close()
