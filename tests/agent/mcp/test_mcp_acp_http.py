"""A streamable-HTTP MCP server given in session/new (with the header it requires) and a stdio server from the
user's config file, over a real `warpcode acp`: both servers' tools work in one session, a call that outlasts the
configured tool timeout fails with a clear message and the turn goes on, and the config file's server stops with
the session."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import acp
import pytest
from acp import schema

from tests.agent.acp_clients import AcpTestClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import acp_process
from tests.processes import process_running

pytestmark = pytest.mark.asyncio
FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))


def _call(tool: str, **arguments) -> dict:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


TURNS = [
    _call("mcp__web__add", a=2, b=2),
    _call("mcp__local__hang"),  # past the config's tool_timeout_s
    _call("mcp__local__add", a=1, b=1),  # the server still answers
    _call("mcp__local__pid"),
    {"text": "Finished."},
]


@pytest.mark.slow
async def test_http_server_from_the_client_and_stdio_server_from_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    web = subprocess.Popen([sys.executable, FIXTURE, "--http"], stdout=subprocess.PIPE, text=True)
    try:
        config = tmp_path / "config" / "warpcode" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            f"[mcp_servers.local]\ncommand = {sys.executable!r}\nargs = [{FIXTURE!r}]\ntool_timeout_s = 1\n"
        )
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        script = write_script(tmp_path / "model.json", TURNS)
        client = AcpTestClient()
        options = ("--model", f"scripted:{script}", "--mode", "auto")
        async with acp_process(client, tmp_path / "state", *options) as (connection, _):
            port = int(web.stdout.readline().split()[-1])  # "listening on PORT"
            header = schema.HttpHeader(name="Authorization", value="Bearer fixture-token")
            server = schema.HttpMcpServer(type="http", name="web", url=f"http://127.0.0.1:{port}/mcp", headers=[header])
            started = await connection.new_session(cwd=str(workspace), mcp_servers=[server])
            began = time.monotonic()
            response = await connection.prompt(session_id=started.session_id, prompt=[acp.text_block("go")])
            took = time.monotonic() - began
    finally:
        web.kill()
        web.wait()
    assert response.stop_reason == "end_turn"
    assert took < 15  # the hanging call was abandoned after its timeout

    finals = [u for u in client.of("tool_call_update") if u.status in ("completed", "failed")]
    outcomes = [(u.status, u.content[0].content.text) for u in finals]
    assert outcomes[:3] == [
        ("completed", "4"),
        ("failed", "The MCP tool hang was not answered: server 'local' did not answer within 1 s."),
        ("completed", "2"),
    ]
    assert client.text() == "Finished."  # both servers started: nothing to tell
    local_pid = int(outcomes[3][1])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and process_running(local_pid):
        time.sleep(0.05)
    assert not process_running(local_pid)
