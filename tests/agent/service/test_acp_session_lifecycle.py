"""The stable ACP 1.21 session methods over a real `warpcode serve`, driven by the SDK's client: session/resume
(no replay; the session keeps its mode and model), session/close (cancels the turn, frees the session for another
connection), session/delete (refused while a connection has the session open), and the session config options:
`mode` in step with the modes API, and `model` from the user's config file's `models`, switched for the next
model request."""

from __future__ import annotations

import asyncio
from pathlib import Path

import acp
import pytest
from acp import RequestError
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient, HeldPermissions
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import connect, serving

pytestmark = pytest.mark.asyncio


async def delete_session(conn, session_id: str) -> None:
    """session/delete, which the SDK's client (0.12.1) has no method for."""
    await conn._conn.send_request("session/delete", {"sessionId": session_id})


def second_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A scripted model that answers "I am B.", offered by the user's config file beside the service's own."""
    model_b = f"scripted:{write_script(tmp_path / 'b.json', [{'text': 'I am B.'}])}"
    config = tmp_path / "config" / "warpcode" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'models = ["{model_b}"]\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return model_b


def current(options: list, option_id: str) -> str:
    return next(o.root if hasattr(o, "root") else o for o in options if o.id == option_id).current_value


async def test_resume_close_delete_and_the_mode_and_model_options(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_b = second_model(tmp_path, monkeypatch)
    turns_a = [{"tool_calls": [{"name": "run_command", "arguments": {"command": "echo a"}}]}, {"text": "A done."}]
    async with serving(tmp_path, turns_a) as server:
        client = AcpTestClient()
        conn = await connect(server.url, client)
        answer = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sessions = answer.agent_capabilities.session_capabilities
        assert sessions.resume is not None and sessions.close is not None and sessions.delete is not None

        created = await conn.new_session(cwd=str(workspace))
        session_id, options = created.session_id, created.config_options
        model_a = current(options, "model")
        assert model_a.startswith("scripted:") and current(options, "mode") == "auto"
        assert [v.value for v in options[1].options] == [model_a, model_b]  # the default first
        switched = await conn.set_config_option(session_id=session_id, config_id="model", value=model_b)
        assert current(switched.config_options, "model") == model_b
        await conn.prompt(session_id=session_id, prompt=[text_block("who?")])
        assert client.text() == "I am B."  # the next model request went to B

        await conn.set_session_mode(session_id=session_id, mode_id="ask")  # the modes API announces the option
        assert current(client.of("config_option_update")[-1].config_options, "mode") == "ask"
        await conn.set_config_option(session_id=session_id, config_id="mode", value="accept-edits")
        assert client.of("current_mode_update")[-1].current_mode_id == "accept-edits"  # and the option the mode
        with pytest.raises(RequestError, match="use one of ask, accept-edits, auto"):
            await conn.set_config_option(session_id=session_id, config_id="mode", value="yolo")

        await conn.close_session(session_id=session_id)
        with pytest.raises(RequestError, match="Unknown session"):
            await conn.prompt(session_id=session_id, prompt=[text_block("still there?")])
        with pytest.raises(RequestError, match="not open on this connection"):
            await conn.close_session(session_id=session_id)

        other = AcpTestClient()
        elsewhere = await connect(server.url, other)
        resumed = await elsewhere.resume_session(cwd=str(workspace), session_id=session_id)
        assert other.updates == []  # nothing replayed
        assert current(resumed.config_options, "model") == model_b and resumed.modes.current_mode_id == "accept-edits"
        with pytest.raises(RequestError, match="open on another connection"):
            await delete_session(conn, session_id)
        await elsewhere.prompt(session_id=session_id, prompt=[text_block("again?")])
        assert other.text() == "I am B."  # B's script, played from its start for this rebuilt session
        await elsewhere.close_session(session_id=session_id)

        await delete_session(conn, session_id)
        await delete_session(conn, session_id)  # already gone: nothing to do, no error
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []
        with pytest.raises(RequestError, match="Unknown session"):
            await conn.load_session(cwd=str(workspace), session_id=session_id)

        # Closing a session cancels its turn, here waiting on a permission question.
        held = HeldPermissions()
        asking = await connect(server.url, held)
        waiting = (await asking.new_session(cwd=str(workspace))).session_id
        await asking.set_session_mode(session_id=waiting, mode_id="ask")
        turn = asyncio.ensure_future(asking.prompt(session_id=waiting, prompt=[text_block("run it")]))
        while not held.asked:
            await asyncio.sleep(0.02)
        await asking.close_session(session_id=waiting)
        assert (await asyncio.wait_for(turn, 10)).stop_reason == "cancelled"
        await asyncio.wait_for(conn.resume_session(cwd=str(workspace), session_id=waiting), 10)  # freed for others
        for connection in (conn, elsewhere, asking):
            await connection.close()


async def test_the_model_slash_command_switches_among_the_configured_models(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_b = second_model(tmp_path, monkeypatch)
    async with serving(tmp_path, [{"text": "I am A."}]) as server:
        client = AcpTestClient()
        conn = await connect(server.url, client)
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("/model no-such-model")])
        assert "Unknown model 'no-such-model'" in client.text() and not client.of("config_option_update")
        await conn.prompt(session_id=session_id, prompt=[text_block(f"/model {model_b}")])
        assert current(client.of("config_option_update")[-1].config_options, "model") == model_b
        before = len(client.text())
        await conn.prompt(session_id=session_id, prompt=[text_block("who?")])
        assert client.text()[before:] == "I am B."  # the next model request went to B
        await conn.close()
