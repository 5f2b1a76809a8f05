"""Sessions per connection, against the real WebSocket server (in this process, so that its memory and its
sessions can be inspected) and the SDK's own client: a connection keeps only its last used idle sessions in memory,
loads the others again from their logs when they are used, and is refused sessions beyond its limit."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import tracemalloc
from pathlib import Path

import acp
import pytest
from acp import RequestError
from acp.schema import AgentMessageChunk, UserMessageChunk

from tests.agent.acp_clients import RecordingClient
from tests.agent.service_processes import TOKEN, connect
from warpcode.agent.service.agent import AcpService, ServiceConfig
from warpcode.agent.service.open_sessions import MAX_IDLE_LOADED, TOO_MANY_SESSIONS
from warpcode.agent.service.ws_server import AcpWebSocketServer, Guard

pytestmark = pytest.mark.asyncio


@contextlib.asynccontextmanager
async def ws_service(config: ServiceConfig):
    """(the service, its ws:// URL): `warpcode serve`'s server on a free loopback port, in this event loop."""
    service = AcpService(config)
    server = AcpWebSocketServer(service, Guard(TOKEN))
    host, port = await server.start("127.0.0.1", 0)
    stop = asyncio.Event()
    serving = asyncio.create_task(server.serve_until_stopped(stop))
    try:
        yield service, f"ws://{host}:{port}/acp"
    finally:
        stop.set()
        await serving


def scripted(tmp_path: Path, *texts: str) -> str:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"turns": [{"text": text} for text in texts]}))
    return f"scripted:{path}"


async def test_idle_sessions_wait_on_disk_and_sessions_beyond_the_limit_are_refused(tmp_path: Path, workspace: Path):
    config = ServiceConfig(
        scripted(tmp_path, "answer"), tmp_path / "state", "auto", sessions_per_connection=6, idle_sessions_in_memory=2
    )
    async with ws_service(config) as (service, url):
        client = RecordingClient()
        connection = await connect(url, client)
        session_ids = []
        for n in range(6):
            session_ids.append((await connection.new_session(cwd=str(workspace))).session_id)
            result = await connection.prompt(session_id=session_ids[-1], prompt=[acp.text_block(f"question {n}")])
            assert result.stop_reason == "end_turn"
        agent = service.open_sessions[session_ids[0]]
        assert list(agent.sessions) == session_ids[-2:]  # the others are unloaded, yet open on this connection

        with pytest.raises(RequestError) as refused:
            await connection.new_session(cwd=str(workspace))
        assert refused.value.code == TOO_MANY_SESSIONS
        assert "6 sessions open, the most one connection may have: open another connection" in str(refused.value)

        # An unloaded session is loaded again when used: with its conversation, without replaying it to the client.
        again = await connection.prompt(session_id=session_ids[0], prompt=[acp.text_block("question again")])
        assert again.stop_reason == "end_turn"
        contents = [m.content for m in agent.sessions[session_ids[0]].agent.messages[1:]]
        assert contents == ["question 0", "answer", "question again", "answer"]
        updates = client.updates[session_ids[0]]
        assert not [u for u in updates if isinstance(u, UserMessageChunk)]
        assert "".join(u.content.text for u in updates if isinstance(u, AgentMessageChunk)) == "answer" * 2
        await connection.set_session_mode(session_id=session_ids[1], mode_id="ask")  # unloaded: loaded for this
        assert len(agent.sessions) <= 2
        # A cancel that arrives while a prompt's session is being loaded again cancels that prompt's turn.
        prompting = asyncio.ensure_future(connection.prompt(session_id=session_ids[3], prompt=[acp.text_block("go")]))
        await asyncio.sleep(0)  # the prompt is sent, the cancel right behind it: both arrive during the load
        await connection.cancel(session_id=session_ids[3])
        assert (await prompting).stop_reason == "cancelled"

        other = await connect(url, RecordingClient())  # the limit is per connection
        assert (await other.new_session(cwd=str(workspace))).session_id
        with pytest.raises(RequestError, match="already open on a connection"):  # still reserved while unloaded
            await other.load_session(cwd=str(workspace), session_id=session_ids[2])
        await connection.close()
        for _ in range(100):  # the server notices the closed connection
            if session_ids[1] not in service.open_sessions:
                break
            await asyncio.sleep(0.02)
        loaded = await other.load_session(cwd=str(workspace), session_id=session_ids[1])
        assert loaded.modes.current_mode_id == "ask"  # the mode set while it was unloaded was kept
        await other.close()


class ForgetfulClient(RecordingClient):
    """Keeps no updates (each session's announcements would be the client's memory, not the server's)."""

    async def session_update(self, session_id: str, update, **kwargs) -> None:
        pass


@pytest.mark.slow
async def test_a_connection_holding_many_idle_sessions_holds_the_memory_of_a_few(tmp_path: Path, workspace: Path):
    config = ServiceConfig(None, tmp_path / "state")  # the limits users get
    async with ws_service(config) as (service, url):
        connection = await connect(url, ForgetfulClient())  # client and server share this process: measure the server
        gc.collect()
        tracemalloc.start()
        try:
            for _ in range(MAX_IDLE_LOADED):  # all kept in memory
                await connection.new_session(cwd=str(workspace))
            gc.collect()
            loaded = tracemalloc.get_traced_memory()[0]
            for _ in range(2 * MAX_IDLE_LOADED):  # as many kept in memory, the least recently used unloaded
                await connection.new_session(cwd=str(workspace))
            await asyncio.sleep(0.2)  # the last unloads end
            gc.collect()
            more = tracemalloc.get_traced_memory()[0] - loaded
        finally:
            tracemalloc.stop()
        # All kept in memory, twice as many sessions would hold twice the memory of the first ones.
        assert more < loaded / 4, f"{MAX_IDLE_LOADED} sessions: {loaded} bytes, {2 * MAX_IDLE_LOADED} more: {more}"
        (agent,) = set(service.open_sessions.values())
        assert len(agent.sessions) == MAX_IDLE_LOADED and len(agent.open) == 3 * MAX_IDLE_LOADED
        await connection.close()
