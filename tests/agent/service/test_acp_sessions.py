"""Stored sessions over real `warpcode serve` connections with the SDK's client: one connection at a time may hold
a session, a session opens only in its own directory, and session/list pages through many sessions."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from acp import RequestError

from tests.agent.acp_clients import RecordingClient
from tests.agent.service_processes import connect, serving
from warpcode.agent.service.session_store import SessionStore

pytestmark = pytest.mark.asyncio


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


@pytest.mark.slow
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


@pytest.mark.slow
async def test_session_list_pages_newest_first_and_stays_stable_while_sessions_are_created(
    tmp_path: Path, workspace: Path
):
    store, stored = SessionStore(tmp_path / "state"), []
    for n in range(250):
        session_id = f"stored-{n:03d}"
        store.create(session_id, str(workspace if n % 5 else tmp_path), "ask")
        os.utime(store.path(session_id), ns=(n * 10**9, 1_000_000 * 10**9 + n * 10**9))
        stored.append(session_id)
    newest_first = stored[::-1]
    async with serving(tmp_path, [{"text": "hi"}]) as server:
        connection = await connect(server.url, RecordingClient())
        first = await connection.list_sessions()
        assert [s.session_id for s in first.sessions] == newest_first[:100] and first.next_cursor
        created = (await connection.new_session(cwd=str(workspace))).session_id  # newer than every page
        second = await connection.list_sessions(cursor=first.next_cursor)
        third = await connection.list_sessions(cursor=second.next_cursor)
        assert [s.session_id for s in second.sessions + third.sessions] == newest_first[100:]
        assert third.next_cursor is None
        assert (await connection.list_sessions()).sessions[0].session_id == created

        pages, cursor = [], None
        while True:
            page = await connection.list_sessions(cwd=str(workspace), cursor=cursor)
            pages.append(page.sessions)
            if not (cursor := page.next_cursor):
                break
        listed = [s.session_id for page in pages for s in page]
        assert listed == [created, *[s for n, s in enumerate(stored) if n % 5][::-1]]
        assert [len(page) for page in pages] == [100, 100, 1]

        with pytest.raises(RequestError) as invalid:
            await connection.list_sessions(cursor="not-a-cursor")
        assert invalid.value.code == -32602 and "cursor" in str(invalid.value)
        await connection.close()
