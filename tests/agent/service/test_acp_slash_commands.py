"""Slash commands over a real `warpcode acp`: advertised after session/new and session/load, run from the prompt
instead of a model turn (the scripted model's turns show which prompts reached it), an unknown one sent to the
model as text."""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from acp.helpers import resource_link_block, text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import acp_process
from warpcode.agent.service.slash_commands import parse_invocation

EDIT = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}


async def _commands(client: AcpTestClient) -> dict:
    """The commands of the first available_commands_update, waited for (it follows the answer that set up the
    session)."""
    for _ in range(200):
        if updates := client.of("available_commands_update"):
            return {c.name: c for c in updates[0].available_commands}
        await asyncio.sleep(0.01)
    raise AssertionError("no available_commands_update")


async def _say(conn, client: AcpTestClient, session_id: str, text: str) -> str:
    client.updates.clear()
    result = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
    assert result.stop_reason == "end_turn"
    return client.text()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/mode auto", ("mode", "auto")),
        ("  /undo\tabc1234  ", ("undo", "abc1234")),
        ("/compact", ("compact", "")),
        ("/foo bar", None),  # unknown: the model's
        ("/ mode", None),
        ("/", None),
        ("please /undo", None),
    ],
)
def test_which_prompts_are_commands(text: str, expected: tuple | None) -> None:
    invocation = parse_invocation([text_block(text)])
    assert (invocation and (invocation.command.name, invocation.argument)) == expected
    assert parse_invocation([resource_link_block("mode", "file:///mode"), text_block(text)]) is None


def _frames(stdout, count: int, timeout_s: float = 20.0) -> list[dict]:
    """Up to `count` JSON lines, as many as come within `timeout_s` (unbuffered: select sees every byte)."""
    frames, deadline = [], time.monotonic() + timeout_s
    while len(frames) < count and select.select([stdout], [], [], max(deadline - time.monotonic(), 0))[0]:
        frames.append(json.loads(stdout.readline()))
    return frames


def test_the_commands_follow_the_answer_that_names_the_session(tmp_path: Path, workspace: Path) -> None:
    """On the wire (raw JSON lines to `warpcode acp`): the editor learns the session id before it hears of the
    session's commands, so it can tell which session they are for."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}},
    ]
    command = [sys.executable, "-m", "warpcode.agent", "acp", "--state-dir", str(tmp_path / "state")]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0) as agent:
        agent.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        frames = _frames(agent.stdout, 3)
        agent.stdin.close()
        agent.wait(20)
    assert [f.get("id") for f in frames] == [1, 2, None]
    session_id = frames[1]["result"]["sessionId"]
    assert frames[2]["method"] == "session/update" and frames[2]["params"]["sessionId"] == session_id
    assert frames[2]["params"]["update"]["sessionUpdate"] == "available_commands_update"


def _git_repo(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src").mkdir()
    (root / "test_it.py").write_text("def test_it():\n    pass\n")
    return root


@pytest.mark.asyncio
async def test_undo_checkpoints_init_and_unknown_commands(tmp_path: Path, failing_repo: Path, scripted_model) -> None:
    model = scripted_model([{"tool_calls": [EDIT]}, {"text": "Fixed."}, {"text": "The model answers /foo."}])
    client = AcpTestClient(answers=["reject_once", "allow_once"])  # for /init
    async with acp_process(client, tmp_path / "state", "--model", model, "--mode", "auto") as (conn, _):
        session_id = (await conn.new_session(cwd=str(failing_repo))).session_id
        commands = await _commands(client)
        assert list(commands) == ["undo", "checkpoints", "compact", "init", "mode", "model"]
        assert commands["undo"].input.root.hint == "checkpoint id" and commands["compact"].input is None
        assert all(c.description for c in commands.values())
        assert "nothing to undo" in await _say(conn, client, session_id, "/undo")
        await _say(conn, client, session_id, "Fix add()")
        assert "a + b" in (failing_repo / "calc.py").read_text()

        listed = await _say(conn, client, session_id, "/checkpoints")
        assert "before: Fix add()" in listed
        undone = await _say(conn, client, session_id, "/undo")
        assert undone.startswith("Restored checkpoint") and "M calc.py" in undone
        assert (failing_repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        redo = undone.rsplit("/undo ", 1)[1].rstrip(".")
        assert "Restored" in await _say(conn, client, session_id, f"/undo {redo}")  # the undo undone
        assert "a + b" in (failing_repo / "calc.py").read_text()
        assert "Unknown checkpoint" in await _say(conn, client, session_id, "/undo deadbeef")

        # None of the commands used a model turn: the third scripted turn answers the unknown command.
        assert await _say(conn, client, session_id, "/foo bar") == "The model answers /foo."

        repo = _git_repo(tmp_path / "project")
        session_id = (await conn.new_session(cwd=str(repo))).session_id
        assert await _say(conn, client, session_id, "/init") == "AGENTS.md was not written."
        assert not (repo / "AGENTS.md").exists()
        assert [u.status for u in client.of("tool_call_update")] == ["failed"]

        assert (await _say(conn, client, session_id, "/init")).startswith("Wrote AGENTS.md")
        (request, options), _ = client.permission_requests  # asked even in auto mode
        assert options == ["allow_once", "reject_once"] and request.content[0].type == "diff"
        written = (repo / "AGENTS.md").read_text()
        assert "- `src/`" in written and "`pytest -q`" in written and request.content[0].new_text == written
        assert [u.status for u in client.of("tool_call_update")] == ["completed"]
        assert "already exists" in await _say(conn, client, session_id, "/init")


@pytest.mark.asyncio
async def test_mode_model_and_compact(tmp_path: Path, workspace: Path, scripted_model) -> None:
    run = {"name": "run_command", "arguments": {"command": "echo ran > ran.txt"}}
    model = scripted_model([{"text": "Hello."}, {"tool_calls": [run]}, {"text": "Done."}])
    client = AcpTestClient()  # rejects every permission question
    async with acp_process(client, tmp_path / "state", "--model", model) as (conn, _):
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        assert "no conversation" in await _say(conn, client, session_id, "/compact")
        await _say(conn, client, session_id, "Say hello")
        compacted = await _say(conn, client, session_id, "/compact")
        assert compacted.startswith("Compacted the conversation: 2 messages")

        assert (await _say(conn, client, session_id, "/mode")).startswith("Mode: ask.")
        assert "Unknown mode 'yolo'" in await _say(conn, client, session_id, "/mode yolo")
        await _say(conn, client, session_id, "/mode auto")
        assert [u.current_mode_id for u in client.of("current_mode_update")] == ["auto"]
        await _say(conn, client, session_id, "Run it")
        assert client.permission_requests == [] and (workspace / "ran.txt").exists()  # auto asks nothing

        assert model in await _say(conn, client, session_id, "/model")

    reopened = AcpTestClient()
    async with acp_process(reopened, tmp_path / "state", "--model", model) as (conn, _):
        loaded = await conn.load_session(cwd=str(workspace), session_id=session_id)
        assert loaded.modes.current_mode_id == "auto"  # /mode is a mode switch like session/set_mode
        assert "compact" in await _commands(reopened)  # advertised after session/load too
