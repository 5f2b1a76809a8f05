from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from acp import schema

from tests.processes import process_running
from warpcode.agent.backends import NO_MODEL_MESSAGE, backend_from_spec
from warpcode.agent.backends.scripted import ScriptedBackend
from warpcode.agent.loop import Agent, Limits, ModelFailure
from warpcode.model_runtime import builtin_model
from warpcode.tools.sandbox import Sandbox


def _agent(repo: Path, turns: list[dict], events, mode: str = "auto", **limits) -> Agent:
    return Agent(repo, ScriptedBackend(turns), events, mode, limits=Limits(**limits))


async def test_scripted_model_fixes_a_failing_test(failing_repo: Path, fix_turns, events) -> None:
    agent = _agent(failing_repo, fix_turns, events)
    result = await agent.prompt("Make the tests pass.")

    assert result.stop_reason == "end_turn"
    assert (failing_repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "test passes now" in events.text()
    starts = {u.tool_call_id: u for u in events.of("tool_call")}
    assert [(u.title, u.kind) for u in starts.values()] == [
        ("Update plan", "think"),
        ("Read calc.py", "read"),
        ("Edit calc.py", "edit"),
        ("Run tests", "execute"),
    ]
    assert starts["call_2_0"].locations[0].path == str(failing_repo.resolve() / "calc.py")
    finals = {u.tool_call_id: u for u in events.of("tool_call_update") if u.status in ("completed", "failed")}
    assert all(u.status == "completed" for u in finals.values())
    (diff,) = finals["call_2_0"].content
    assert isinstance(diff, schema.FileEditToolCallContent) and diff.type == "diff"
    assert (diff.old_text, diff.new_text) == (
        "def add(a, b):\n    return a - b\n",
        "def add(a, b):\n    return a + b\n",
    )
    assert "1 passed, 0 failed" in finals["call_3_0"].content[0].content.text
    (plan,) = events.of("plan")
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [("Fix add()", "in_progress", "high")]
    assert len(events.of("usage_update")) == 4
    # the trajectory: system, user, then each reply followed by one observation per call
    roles = [m.role for m in agent.messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    (checkpoint,) = agent.checkpoints  # taken once, before the first edit
    assert checkpoint.message == "before: Make the tests pass."


async def test_malformed_and_unknown_tool_calls_become_error_observations(failing_repo: Path, events) -> None:
    turns = [
        {
            "tool_calls": [
                {"name": "launch_rockets", "arguments": {}},
                {"name": "read_file", "arguments": '{"path": "calc.py"'},
                {"name": "edit_file", "arguments": {"path": "calc.py"}},
                {"name": "read_file", "arguments": {"path": "calc.py", "line": 3}},
                {"arguments": {"path": "calc.py"}},
            ]
        },
        {
            "text": "Sorry, let me try again properly.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}],
        },
        {"text": "Done."},
    ]
    agent = _agent(failing_repo, turns, events)
    result = await agent.prompt("Look at calc.py")

    assert result.stop_reason == "end_turn"
    observations = [m.content for m in agent.messages if m.role == "tool"]
    assert observations[0].startswith("Unknown tool 'launch_rockets'. Available tools: read_file, list_files")
    assert "arguments are not valid JSON" in observations[1] and '\'{"path": "calc.py"\'' in observations[1]
    assert observations[2] == "Invalid arguments for edit_file: missing required argument 'old_text'. Nothing was run."
    assert observations[3].startswith("Invalid arguments for read_file: unknown argument 'line'; allowed: path,")
    assert "a tool call needs a 'name'" in observations[4]
    assert "return a - b" in observations[5]
    statuses = [u.status for u in events.of("tool_call_update") if u.status in ("completed", "failed")]
    assert statuses == ["failed"] * 5 + ["completed"]


async def test_max_turn_requests_stops_the_turn(failing_repo: Path, events) -> None:
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}
    backend = ScriptedBackend([read] * 5)
    agent = Agent(failing_repo, backend, events, "auto", limits=Limits(max_turn_requests=2))
    result = await agent.prompt("Read forever")
    assert result.stop_reason == "max_turn_requests"
    assert backend.calls == 2
    assert agent.messages[-1].role == "tool"  # every call of the last reply was answered


def _said(events) -> str:
    return "".join(u.content.text for u in events.of("agent_message_chunk"))


async def test_the_same_call_with_the_same_result_three_times_ends_the_turn(failing_repo: Path, events) -> None:
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}
    backend = ScriptedBackend([read] * 10)
    result = await Agent(failing_repo, backend, events, "auto").prompt("Read forever")
    assert result.stop_reason == "max_turn_requests" and backend.calls == 3
    assert "Stopped: the model made the same calls (read_file) 3 times in a row" in _said(events)


async def test_two_calls_in_turn_going_round_end_the_turn_though_timings_differ(failing_repo: Path, events) -> None:
    # each test run reports its own duration and junit file: numbers and temporary paths do not hide the repeat
    search = {"tool_calls": [{"name": "search", "arguments": {"pattern": "def add"}}]}
    tests = {"tool_calls": [{"name": "run_tests", "arguments": {}}]}
    backend = ScriptedBackend([search, tests] * 6)
    result = await Agent(failing_repo, backend, events, "auto").prompt("Fix it")
    assert result.stop_reason == "max_turn_requests" and backend.calls == 6
    assert "(search, run_tests) 3 times" in _said(events)


async def test_repeated_calls_whose_results_change_go_on(failing_repo: Path, events) -> None:
    # read, edit, read, edit...: the first edit changes what the next read shows and the later edits fail, so the
    # rounds repeat only from the second read on; three cycles of those end the turn at the 8th request
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}
    edit = {
        "tool_calls": [
            {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
        ]
    }
    backend = ScriptedBackend([read, edit] * 6)
    result = await Agent(failing_repo, backend, events, "auto").prompt("Fix it")
    assert result.stop_reason == "max_turn_requests" and backend.calls == 8
    assert (failing_repo / "calc.py").read_text().endswith("a + b\n")


async def test_response_cut_by_the_token_limit_ends_with_max_tokens(failing_repo: Path, events) -> None:
    turns = [{"text": "Let me", "finish": "length", "tool_calls": [{"name": "read_file", "arguments": {}}]}]
    agent = _agent(failing_repo, turns, events)
    assert (await agent.prompt("hi")).stop_reason == "max_tokens"
    assert agent.messages[-1].tool_calls == [] and not events.of("tool_call")


async def test_ask_mode_without_anyone_to_ask_rejects_edits_but_reads(failing_repo: Path, fix_turns, events) -> None:
    agent = Agent(failing_repo, ScriptedBackend(fix_turns), events, "ask")
    assert (await agent.prompt("fix")).stop_reason == "end_turn"
    assert (failing_repo / "calc.py").read_text().endswith("a - b\n")
    observations = [m.content for m in agent.messages if m.role == "tool"]
    assert "return a - b" in observations[1]
    assert observations[2].startswith("Permission denied: edit_file (edit) was not allowed in mode 'ask'.")
    assert observations[3].startswith("Permission denied: run_tests (execute)")
    assert agent.checkpoints == []


async def test_accept_edits_mode_asks_only_for_commands(failing_repo: Path, fix_turns, events) -> None:
    asked = []

    async def ask(tool_name: str, kind: str, arguments: dict) -> str:
        asked.append((tool_name, kind))
        return "allow"

    from warpcode.agent.permissions import mode_policy

    agent = Agent(failing_repo, ScriptedBackend(fix_turns), events, "accept-edits", mode_policy("accept-edits", ask))
    assert (await agent.prompt("fix")).stop_reason == "end_turn"
    assert asked == [("run_tests", "execute")]
    assert (failing_repo / "calc.py").read_text().endswith("a + b\n")


async def test_cancel_kills_a_running_command_within_a_second(failing_repo: Path, events) -> None:
    command = "sleep 30 & echo $! > sleep.pid; wait"
    run = {"name": "run_command", "arguments": {"command": command}}
    turns = [{"tool_calls": [run, {"name": "read_file", "arguments": {"path": "calc.py"}}]}, {"text": "again"}]
    agent = _agent(failing_repo, turns, events)
    turn = asyncio.ensure_future(agent.prompt("wait"))
    pid_file = failing_repo / "sleep.pid"
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    started = time.monotonic()
    agent.cancel()
    result = await turn
    assert time.monotonic() - started < 1.0
    assert result.stop_reason == "cancelled"
    assert not process_running(pid)
    # both calls of the reply are answered, so the trajectory stays valid; only the announced one is reported
    stopped, not_run = agent.messages[-2:]
    assert (stopped.tool_call_id, not_run.tool_call_id) == ("call_1_0", "call_1_1")
    assert stopped.content == "Stopped: the user cancelled the turn before this call finished."
    assert not_run.content == "Not run: the user cancelled the turn."
    assert [u.tool_call_id for u in events.of("tool_call")] == ["call_1_0"]
    assert (events[-1].tool_call_id, events[-1].status) == ("call_1_0", "failed")
    # the session stays usable after a cancel
    assert (await agent.prompt("again")).stop_reason == "end_turn"


async def test_without_a_model_the_prompt_says_how_to_configure_one(failing_repo: Path, events, monkeypatch) -> None:
    monkeypatch.setattr(builtin_model, "BUILTIN_DIR", failing_repo)  # an installation that cannot run the built-in
    result = await Agent(failing_repo, backend_from_spec(None), events).prompt("hi")
    assert result.stop_reason == "refusal" and result.failure == ModelFailure(NO_MODEL_MESSAGE, unavailable=False)
    assert result.failure.message == f"The model could not answer: {NO_MODEL_MESSAGE}"
    assert not events.of("agent_message_chunk")  # reported by whoever ran the turn, never as the model's text


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("WARPCODE_MODEL", "XDG_CONFIG_HOME")}
    env["HOME"] = str(cwd)  # no user config file
    return subprocess.run(
        [sys.executable, "-m", "warpcode.agent", "run", *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.slow
def test_cli_run_json_lines_parse_as_acp_updates(failing_repo: Path, tmp_path: Path, fix_turns, scripted_model) -> None:
    model = scripted_model(fix_turns)
    done = _cli("--cwd", str(failing_repo), "--model", model, "--mode", "auto", "--json", "Fix it", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    *lines, last = done.stdout.splitlines()
    assert last == '{"stopReason": "end_turn"}'
    updates = [
        schema.SessionNotification.model_validate_json(f'{{"sessionId": "s", "update": {line}}}').update
        for line in lines
    ]
    kinds = {type(u).__name__ for u in updates}
    assert {"AgentMessageChunk", "ToolCallStart", "ToolCallProgress", "AgentPlanUpdate", "UsageUpdate"} <= kinds
    diffs = [c for u in updates if isinstance(u, schema.ToolCallProgress) for c in u.content or [] if c.type == "diff"]
    assert [d.path for d in diffs] == [str(failing_repo.resolve() / "calc.py")]
    assert (failing_repo / "calc.py").read_text().endswith("a + b\n")


@pytest.mark.slow
def test_cli_run_human_output_and_exit_codes(failing_repo: Path, tmp_path: Path, fix_turns, scripted_model) -> None:
    model = scripted_model(fix_turns)
    done = _cli("--cwd", str(failing_repo), "--model", model, "--yes", "Fix it", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "▶ Edit calc.py" in done.stdout and "-    return a - b" in done.stdout and "+    return a + b" in done.stdout
    assert "✓ pytest: 1 passed" in done.stdout

    unreachable = _cli("--cwd", str(failing_repo), "--model", "openai:http://127.0.0.1:9", "hi", cwd=tmp_path)
    assert unreachable.returncode == 1 and "could not answer" not in unreachable.stdout
    [report] = unreachable.stderr.splitlines()  # its one report
    assert report.startswith("The model could not answer: ") and "127.0.0.1:9" in report

    limited = _cli(
        "--cwd", str(failing_repo), "--model", model, "--mode", "auto", "--max-turn-requests", "1", "go", cwd=tmp_path
    )
    assert limited.returncode == 1 and "stopped: max_turn_requests" in limited.stderr


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_the_agent_runs_its_commands_in_its_sandbox(tmp_path: Path, events) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    command = f"touch {outside}/x.txt; touch inside.txt"
    turns = [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, {"text": "Done."}]
    agent = Agent(repo, ScriptedBackend(turns), events, "auto", sandbox=Sandbox.bwrap())
    assert (await agent.prompt("touch both")).stop_reason == "end_turn"
    assert (repo / "inside.txt").exists() and not (outside / "x.txt").exists()
