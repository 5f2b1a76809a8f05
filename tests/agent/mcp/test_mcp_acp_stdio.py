"""MCP servers given in session/new, over a real `warpcode acp` driven by the SDK's client: stdio servers written
with the `mcp` SDK (mcp_fixture_server.py), one that prints garbage on stdout and one that cannot start. Their
tools go through the permission policy (allow-always covers one tool of one server), their results are the tool
calls' content, the failures are told in the session, and no server process outlives the connection."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import acp
import pytest
from acp import schema

from tests.agent.acp_clients import NamingClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import acp_process
from tests.processes import process_running

pytestmark = pytest.mark.asyncio
FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))


def _call(tool: str, **arguments) -> dict:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


TURNS = [
    _call("mcp__fixture__add", a=1, b=2),  # asked: allow always
    _call("mcp__fixture__add", a=2, b=3),  # covered
    _call("mcp__fixture__getenv", name="FIXTURE_TOKEN"),  # another tool of the same server: asked, allowed once
    _call("mcp__fixture__getenv", name="HOME"),  # asked again: rejected
    _call("mcp__fixture__pid"),  # allowed once
    _call("mcp__fixture__explode", reason="on purpose"),  # allowed once, fails (isError)
    {"text": "All done."},
]
ANSWERS = ["allow_always", "allow_once", "reject_once", "allow_once", "allow_once"]


@pytest.mark.slow
async def test_stdio_servers_from_session_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no config-file servers
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    script = write_script(tmp_path / "model.json", TURNS)
    servers = [
        schema.McpServerStdio(
            name="fixture",
            command=sys.executable,
            args=[FIXTURE, "--garbage"],  # it prints lines that are not MCP messages before serving
            env=[schema.EnvVariable(name="FIXTURE_TOKEN", value="s3cret")],
        ),
        schema.McpServerStdio(name="missing", command=str(tmp_path / "no-such-server"), args=[], env=[]),
    ]
    client = NamingClient(ANSWERS)
    options = ("--model", f"scripted:{script}", "--mode", "ask")
    async with acp_process(client, tmp_path / "state", *options) as (connection, _):
        answer = await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)  # what it said at first
        capabilities = answer.agent_capabilities.mcp_capabilities
        assert capabilities.http is True and not capabilities.sse
        started = await connection.new_session(cwd=str(workspace), mcp_servers=servers)
        response = await connection.prompt(session_id=started.session_id, prompt=[acp.text_block("go")])
    assert response.stop_reason == "end_turn"

    questions = [(call.title, call.kind) for call, _ in client.permission_requests]
    assert questions == [
        ("fixture: add", "other"),
        ("fixture: getenv", "other"),
        ("fixture: getenv", "other"),
        ("fixture: pid", "other"),
        ("fixture: explode", "other"),
    ]
    assert client.option_names[0][1] == "Always allow the MCP tool fixture: add"
    finals = [u for u in client.of("tool_call_update") if u.status in ("completed", "failed")]
    outcomes = [(u.status, u.content[0].content.text) for u in finals]
    assert outcomes[:3] == [("completed", "3"), ("completed", "5"), ("completed", "s3cret")]
    assert outcomes[3][0] == "failed" and outcomes[3][1].startswith("Permission denied: mcp__fixture__getenv")
    server_pid = int(outcomes[4][1])
    assert outcomes[5] == (
        "failed",
        "The MCP tool explode of server 'fixture' reported an error: "
        "Error executing tool explode: exploded: on purpose",
    )

    said = client.text()
    assert f"MCP server 'missing' could not start: no such program {tmp_path / 'no-such-server'}" in said
    assert "MCP server 'fixture' wrote lines that are not MCP messages on its stdout" in said
    assert said.endswith("All done.")

    deadline = time.monotonic() + 5  # the agent has exited: the server stopped with its session
    while time.monotonic() < deadline and process_running(server_pid):
        time.sleep(0.05)
    assert not process_running(server_pid)
