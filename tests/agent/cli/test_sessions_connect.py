"""`warpcode sessions --connect URL`: a real `warpcode serve` (scripted model) keeps a session, and the command lists,
shows and deletes it through ACP. Delete needs ACP 1.21's session/delete: against a server that does not advertise
it, the one-line refusal is checked instead (both are real answers of the server under test)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import acp
import pytest
from acp.ws import create_websocket_stream

from tests.agent.acp_clients import RecordingClient
from tests.agent.service_processes import AUTH, TOKEN, Server, one_turn
from warpcode.agent.cli.main import main

pytestmark = pytest.mark.slow  # a real `warpcode serve` subprocess


async def _deletes(url: str) -> bool:
    connection = acp.connect_to_agent(RecordingClient(), await create_websocket_stream(url, headers=AUTH))
    offered = (await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)).agent_capabilities
    await connection.close()
    return bool(offered.session_capabilities and offered.session_capabilities.delete)


def test_a_server_s_sessions_are_listed_shown_and_deleted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    server = Server(tmp_path, [{"text": "Hello from the server."}], "--token", TOKEN)
    try:
        asyncio.run(one_turn(server.url, repo, "say hello"))
        remote = ["--connect", server.url, "--token", TOKEN]

        assert main(["sessions", *remote]) == 0
        listed = capsys.readouterr().out.splitlines()
        assert listed[0].split() == ["id", "workspace", "last", "activity", "title"]
        session_id, workspace = listed[1].split()[:2]
        assert workspace == str(repo) and listed[1].split()[-2:] == ["say", "hello"]

        assert main(["sessions", "show", session_id, *remote]) == 0
        shown = capsys.readouterr().out
        assert f"session {session_id} in {repo}" in shown
        assert "> say hello" in shown and shown.count("Hello from the server.") == 1

        assert main(["sessions", "show", "no-such-id", *remote]) == 1
        assert f"{server.url} has no stored session 'no-such-id'" in capsys.readouterr().err

        deleted = main(["sessions", "delete", session_id, *remote])
        if asyncio.run(_deletes(server.url)):
            assert deleted == 0 and capsys.readouterr().out == f"deleted session {session_id}\n"
            assert main(["sessions", *remote]) == 0
            assert "no stored sessions on" in capsys.readouterr().out
        else:
            assert deleted == 1
            said = capsys.readouterr().err
            assert "cannot delete sessions (no ACP session/delete): run `warpcode sessions delete" in said
    finally:
        server.stop()
