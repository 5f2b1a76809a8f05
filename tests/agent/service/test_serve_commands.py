"""Commands under the real `warpcode serve`: a flood of output stalls neither the other sessions nor shutdown, and
a server killed with SIGKILL leaves no command running."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import acp
import pytest

from tests.agent.acp_clients import RecordingClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, connect, start_server
from tests.processes import process_running

FLOOD_BYTES = 300_000_000
# Writes its pid, then a line a tenth of a second to grow.txt, forever.
GROWING = "echo $$ > pid.txt; while :; do echo tick >> grow.txt; sleep 0.1; done"
# 300 MB in one go, a mark once it is all written (so read by the server), then output without end.
FLOOD = f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' x; touch flooded; exec yes\n"


async def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def _stop(server: subprocess.Popen) -> float:
    """Seconds the server took to exit after SIGTERM (killed past 10 s). The clients' event loop keeps running
    meanwhile: the server's closing handshakes wait for their answers."""
    started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(server.wait, 10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    return time.monotonic() - started


async def _trivial_turn(url: str, cwd: Path) -> float:
    """Seconds for a new connection to open a session and run a one-tool turn (infinity past 10 s)."""
    client = RecordingClient()

    async def turn() -> None:
        connection = await connect(url, client)
        session = (await connection.new_session(cwd=str(cwd))).session_id
        answer = await connection.prompt(session_id=session, prompt=[acp.text_block("hi")])
        assert answer.stop_reason == "end_turn" and client.text(session) == "Done."

    started = time.monotonic()
    try:
        await asyncio.wait_for(turn(), 10)
    except TimeoutError:
        return float("inf")
    return time.monotonic() - started


@pytest.mark.slow
async def test_a_flooding_command_stalls_neither_other_sessions_nor_shutdown(tmp_path: Path) -> None:
    flood, quiet = tmp_path / "flood", tmp_path / "quiet"
    for workspace, body in ((flood, FLOOD), (quiet, "echo quiet\n")):
        workspace.mkdir()
        (workspace / "go.sh").write_text(body)
    script = write_script(tmp_path / "model.json", [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "sh go.sh"}}]},
        {"text": "Done."},
    ])  # fmt: skip
    server, url = start_server(tmp_path, script, "--token", TOKEN)
    try:
        flooder = await connect(url, RecordingClient())
        flood_session = (await flooder.new_session(cwd=str(flood))).session_id
        flood_turn = asyncio.ensure_future(flooder.prompt(session_id=flood_session, prompt=[acp.text_block("go")]))
        await _wait_for((flood / "flooded").exists, 20, f"the server to read the first {FLOOD_BYTES} bytes")
        quiet_turn_s = await _trivial_turn(url, quiet)
        assert not flood_turn.done(), "the flood ended early: the test no longer floods while it measures"
    finally:
        stop_s = await _stop(server)
    flood_turn.cancel()
    assert quiet_turn_s < 2.0, f"a trivial turn took {quiet_turn_s:.1f} s during the flood"
    assert stop_s < 3.0, f"the server took {stop_s:.1f} s to stop after SIGTERM during the flood"


@pytest.mark.slow
async def test_a_server_killed_with_sigkill_leaves_no_command_running(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    script = write_script(tmp_path / "model.json", [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": GROWING}}]},
    ])  # fmt: skip
    server, url = start_server(tmp_path, script, "--token", TOKEN)
    grow, pid_file = workspace / "grow.txt", workspace / "pid.txt"
    try:
        connection = await connect(url, RecordingClient())
        session = (await connection.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(connection.prompt(session_id=session, prompt=[acp.text_block("go")]))
        await _wait_for(lambda: grow.exists() and pid_file.read_text().strip(), 10, "the command to start")
        command = int(pid_file.read_text())
        server.kill()
        server.wait()
        await _wait_for(lambda: not process_running(command), 2, "the command to stop after its server was killed")
        size = grow.stat().st_size
        await asyncio.sleep(0.5)
        assert grow.stat().st_size == size, "something still writes into the workspace"
    finally:
        server.kill()
        server.wait()
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)  # what the test failed to see stopped
    turn.cancel()
