"""What the service sets up when it starts, checked on the real `warpcode serve`: commands a crashed warpcode left
running are stopped and reported, and `--sandbox bwrap` reaches every session's commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import TOKEN, one_turn, start_server, write_script
from warpcode.tools.process import COMMAND_MARKER

pytestmark = pytest.mark.asyncio


def _stop(server: subprocess.Popen) -> str:
    server.terminate()
    _, stderr = server.communicate(timeout=10)
    return stderr


async def test_commands_left_by_a_crashed_server_are_stopped_at_start_up(tmp_path: Path) -> None:
    crashed = subprocess.Popen(["true"])
    crashed.wait()  # its pid names a server that is no longer running
    leftover = subprocess.Popen(["sleep", "60"], env={**os.environ, COMMAND_MARKER: f"{crashed.pid}:1:1"})
    try:
        server, _ = start_server(tmp_path, write_script(tmp_path / "model.json", [{"text": "hi"}]), "--token", TOKEN)
        assert leftover.wait(timeout=10) < 0  # stopped by a signal
        stderr = "".join(server.startup_lines) + _stop(server)
    finally:
        leftover.kill()
        leftover.wait()
    assert f"stopped 1 commands left running by a crashed warpcode (pids {leftover.pid})" in stderr


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_sandbox_bwrap_confines_the_sessions_commands_to_the_workspace(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "repo", tmp_path / "outside"
    workspace.mkdir(), outside.mkdir()
    script = write_script(tmp_path / "model.json", [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": f"touch inside.txt {outside}/escaped.txt"}}]},
        {"text": "done"},
    ])  # fmt: skip
    server, url = start_server(tmp_path, script, "--token", TOKEN, "--sandbox", "bwrap")
    try:
        assert await one_turn(url, workspace) == "end_turn"
    finally:
        _stop(server)
    assert (workspace / "inside.txt").exists()
    assert not (outside / "escaped.txt").exists()


async def test_a_sandbox_that_is_not_installed_stops_the_server_with_one_line(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    tools = tmp_path / "bin"
    tools.mkdir()
    for program in ("git", "env"):  # what the service needs, and no bwrap
        (tools / program).symlink_to(shutil.which(program))
    env = {**os.environ, "PATH": str(tools)}
    command = [str(Path(sys.executable).with_name("warpcode")), "serve", "--port", "0", "--sandbox", "bwrap",
               "--model", f"scripted:{script}", "--state-dir", str(tmp_path / "state")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "install bubblewrap" in done.stderr


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_a_system_without_user_namespaces_stops_the_server_with_one_line(tmp_path: Path) -> None:
    """bubblewrap's --disable-userns gives the server a system where creating a user namespace is refused, as a
    kernel or container forbidding unprivileged ones does."""
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    no_user_namespaces = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-user",
                          "--disable-userns", "--"]  # fmt: skip
    serve = [str(Path(sys.executable).with_name("warpcode")), "serve", "--port", "0", "--sandbox", "bwrap",
             "--model", f"scripted:{script}", "--state-dir", str(tmp_path / "state")]  # fmt: skip
    done = subprocess.run([*no_user_namespaces, *serve], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "user namespace" in done.stderr and "without --sandbox" in done.stderr
