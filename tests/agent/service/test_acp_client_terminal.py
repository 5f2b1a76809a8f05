"""Client terminals over a real `warpcode acp`: with a client that advertises `terminal` (and really runs the
commands, tests/agent/acp_clients.py), run_command and run_tests run in its terminals, the tool call embeds the
terminal, a timeout or cancel kills it, it is always released; run_tests still parses the results; a configured
sandbox keeps commands local."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import acp
import pytest
from acp.helpers import text_block
from acp.ws import create_websocket_stream

from tests.agent.acp_clients import TerminalClient
from tests.agent.service_processes import AUTH, acp_process, serving

pytestmark = pytest.mark.asyncio


def _run(command: str, **more) -> dict:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": command, **more}}]}


def _final(client: TerminalClient) -> list:
    return [u for u in client.of("tool_call_update") if u.status in ("completed", "failed")]


async def test_commands_and_tests_run_in_the_client_terminal(
    tmp_path: Path, failing_repo: Path, scripted_model
) -> None:
    script = [_run("echo hello; echo oops >&2; exit 3"), {"tool_calls": [{"name": "run_tests", "arguments": {}}]}]
    client = TerminalClient()
    async with acp_process(client, tmp_path / "state", "--model", scripted_model(script), "--mode", "auto") as (
        conn,
        _,
    ):
        session_id = (await conn.new_session(cwd=str(failing_repo))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("go")])

    methods = [method for method, _ in client.calls]
    assert methods == ["create", "wait_for_exit", "output", "release"] * 2
    command, tests = client.calls[0][1], client.calls[4][1]
    assert command["command"] == "/bin/sh" and command["args"] == ["-c", "echo hello; echo oops >&2; exit 3"]
    assert command["cwd"] == str(failing_repo) and command["outputByteLimit"] > 0
    assert tests["env"]["CI"] == "true" and "pytest" in tests["args"][1]

    embedded = [u for u in client.of("tool_call_update") if u.status == "in_progress" and u.content]
    assert [u.content[0].terminal_id for u in embedded] == ["term-1", "term-2"]
    ran, tested = _final(client)
    assert ran.content[0].type == "terminal" and ran.content[0].terminal_id == "term-1"
    assert "hello\noops" in ran.content[1].content.text and "exit code 3" in ran.content[1].content.text
    assert tested.status == "failed" and tested.content[0].terminal_id == "term-2"
    report = tested.content[1].content.text  # parsed from what ran in the terminal
    assert report.startswith("pytest: FAILED: 0 passed, 1 failed") and "test_calc.py::test_add" in report


async def test_a_timeout_or_a_cancel_kills_the_terminal(tmp_path: Path, workspace: Path, scripted_model) -> None:
    script = [_run("sleep 30", timeout_s=0.5), {"text": "Timed out."}, _run("sleep 30")]
    client = TerminalClient()
    async with acp_process(client, tmp_path / "state", "--model", scripted_model(script), "--mode", "auto") as (
        conn,
        _,
    ):
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("time out")])
        (timed_out,) = _final(client)
        assert timed_out.status == "failed" and "timed out after 0.5 s" in timed_out.content[1].content.text
        assert [m for m, _ in client.calls] == ["create", "wait_for_exit", "kill", "output", "release"]

        client.calls.clear()
        turn = asyncio.ensure_future(conn.prompt(session_id=session_id, prompt=[text_block("cancel")]))
        while not client.calls:
            await asyncio.sleep(0.02)
        await conn.cancel(session_id=session_id)
        assert (await asyncio.wait_for(turn, 20)).stop_reason == "cancelled"
    assert [m for m, _ in client.calls] == ["create", "wait_for_exit", "kill", "output", "release"]
    assert client.terminals == {}  # every terminal released, its command killed


async def test_over_websocket_too(tmp_path: Path, workspace: Path) -> None:
    """`warpcode serve`: the same terminal requests, and the session's commands announced, over the WebSocket."""
    client = TerminalClient()
    async with serving(tmp_path, [_run("echo over the socket")]) as server:
        transport = await create_websocket_stream(server.url, headers=AUTH)
        conn = acp.connect_to_agent(client, transport)
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=client.capabilities())
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("go")])
        await conn.close()
    assert [m for m, _ in client.calls] == ["create", "wait_for_exit", "output", "release"]
    (ran,) = _final(client)
    assert ran.content[0].terminal_id == "term-1" and "over the socket" in ran.content[1].content.text
    assert client.of("available_commands_update")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_a_sandboxed_session_keeps_its_commands_local(tmp_path: Path, workspace: Path, scripted_model) -> None:
    client = TerminalClient()
    model = scripted_model([_run("echo boxed > out.txt")])
    options = ("--model", model, "--mode", "auto", "--sandbox", "bwrap")
    async with acp_process(client, tmp_path / "state", *options) as (conn, _):
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("go")])
    assert client.calls == [] and (workspace / "out.txt").read_text() == "boxed\n"
