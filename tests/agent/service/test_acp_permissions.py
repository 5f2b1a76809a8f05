""" "Always" answers over real `warpcode serve` connections with the SDK's client: each covers one tool, a command
prefix or one exact command, says so in its option's name, and survives a session/load; older kind-wide grants
in a session log are ignored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import acp
import pytest

from tests.agent.acp_clients import NamingClient
from tests.agent.service_processes import connect, serving

pytestmark = pytest.mark.asyncio

RUN = lambda command: {"name": "run_command", "arguments": {"command": command}}
TURNS = [
    {"tool_calls": [{"name": "run_tests", "arguments": {"command": "true"}}]},
    {"tool_calls": [RUN("git status")]},  # not covered by the run_tests grant
    {"tool_calls": [RUN("git status --short")]},  # covered by the `git status` prefix
    {"tool_calls": [RUN("git log -1")]},
    {"tool_calls": [RUN("git status; echo injected")]},  # control characters: this exact command only
    {"tool_calls": [RUN("git status; echo injected")]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x\n"}}]},
    {"tool_calls": [{"name": "edit_file", "arguments": {"path": "x.txt", "old_text": "x", "new_text": "y"}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "y.txt", "content": "y\n"}}]},
    {"tool_calls": [{"name": "run_tests", "arguments": {"command": "true"}}]},
    {"text": "Done."},
]
ANSWERS = ["allow_always", "allow_always", "reject_once", "reject_always", "allow_always", "allow_once"]


async def _client(url: str, answers: list[str]):
    client = NamingClient(answers)
    return client, await connect(url, client)


@pytest.mark.slow
async def test_always_answers_cover_a_tool_a_command_prefix_or_one_command(tmp_path: Path, workspace: Path):
    state = tmp_path / "state"
    async with serving(tmp_path, TURNS, "--mode", "ask") as server:
        client, connection = await _client(server.url, ANSWERS)
        session_id = (await connection.new_session(cwd=str(workspace))).session_id
        response = await connection.prompt(session_id=session_id, prompt=[acp.text_block("go")])
        assert response.stop_reason == "end_turn"
        await connection.close()
        questions = [(call.title, options) for call, options in client.permission_requests]
        assert [title for title, _ in questions] == [
            "Run tests true",
            "Run git status",
            "Run git log -1",
            "Run git status; echo injected",
            "Write x.txt",
            "Edit x.txt",
        ]
        assert all(ids == ["allow_once", "allow_always", "reject_once", "reject_always"] for _, ids in questions)
        assert (workspace / "y.txt").read_text() == "y\n"  # write_file allowed always; edit_file was asked
        records = [json.loads(line) for line in (state / "sessions" / f"{session_id}.jsonl").read_text().splitlines()]
        grants = [(r["scope"], r["decision"]) for r in records if r["type"] == "grant"]
        assert grants == [
            ({"tool": "run_tests"}, "allow"),
            ({"tool": "run_command", "prefix": ["git", "status"]}, "allow"),
            ({"tool": "run_command", "command": "git status; echo injected"}, "reject"),
            ({"tool": "write_file"}, "allow"),
        ]
        failed = [u for u in client.of("tool_call_update") if u.status == "failed"]
        assert len(failed) == 3  # git log (once), and the injected command twice

        await asyncio.sleep(0.3)  # the server releases the session
        again, connection = await _client(server.url, [])
        await connection.load_session(cwd=str(workspace), session_id=session_id)
        await connection.prompt(session_id=session_id, prompt=[acp.text_block("again")])  # the same script again
        await connection.close()
    assert [call.title for call, _ in again.permission_requests] == ["Run git log -1", "Edit x.txt"]


async def test_the_options_name_what_always_covers(tmp_path: Path, workspace: Path):
    turns = [
        {"tool_calls": [RUN("git status")]},
        {"tool_calls": [RUN("ls -l | wc -l")]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x\n"}}]},
        {"tool_calls": [{"name": "run_tests", "arguments": {"command": "true"}}]},
    ]
    async with serving(tmp_path, turns, "--mode", "ask") as server:
        client, connection = await _client(server.url, [])
        session_id = (await connection.new_session(cwd=str(workspace))).session_id
        await connection.prompt(session_id=session_id, prompt=[acp.text_block("go")])
        await connection.close()
    names = client.option_names
    assert [n[1] for n in names] == [
        "Always allow `git status …` commands",
        "Always allow exactly the command `ls -l | wc -l`",
        "Always allow edits with write_file",
        "Always allow run_tests",
    ]
    assert names[0][3] == "Always reject `git status …` commands"


@pytest.mark.slow
async def test_kind_wide_grants_of_older_logs_are_asked_again(tmp_path: Path, workspace: Path):
    state = tmp_path / "state"
    async with serving(tmp_path, TURNS, "--mode", "ask") as server:
        _, connection = await _client(server.url, [])
        session_id = (await connection.new_session(cwd=str(workspace))).session_id
        await connection.close()
        with (state / "sessions" / f"{session_id}.jsonl").open("a") as log:
            log.write(json.dumps({"type": "grant", "kind": "execute", "decision": "allow"}) + "\n")
        await asyncio.sleep(0.3)
        client, connection = await _client(server.url, [])
        await connection.load_session(cwd=str(workspace), session_id=session_id)
        await connection.prompt(session_id=session_id, prompt=[acp.text_block("go")])
        await connection.close()
    assert [call.title for call, _ in client.permission_requests][:2] == ["Run tests true", "Run git status"]
