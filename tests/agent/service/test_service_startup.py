"""What the service sets up when it starts, checked on the real `warpcode serve`: commands a crashed warpcode left
running are stopped and reported, and `--sandbox bwrap` reaches every session's commands, keeping serve's own
token and port out of their reach."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, one_turn, start_server
from warpcode.agent.cli.serve import TOKEN_FILE_NAME
from warpcode.tools import Workspace, run_command
from warpcode.tools.process import COMMAND_MARKER

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

pytestmark = pytest.mark.asyncio


def _stop(server: subprocess.Popen) -> str:
    server.terminate()
    _, stderr = server.communicate(timeout=10)
    return stderr


async def test_commands_left_by_a_crashed_server_are_stopped_at_start_up(tmp_path: Path) -> None:
    # Any warpcode service starting meanwhile reaps such commands too (another test's, run in parallel): the
    # scenario is tried again when the leftover was stopped without this server saying so.
    for attempt in range(3):
        crashed = subprocess.Popen(["true"])
        crashed.wait()  # its pid names a server that is no longer running
        leftover = subprocess.Popen(["sleep", "60"], env={**os.environ, COMMAND_MARKER: f"{crashed.pid}:1:1"})
        try:
            (folder := tmp_path / f"try-{attempt}").mkdir()
            server, _ = start_server(folder, write_script(folder / "model.json", [{"text": "hi"}]), "--token", TOKEN)
            assert leftover.wait(timeout=10) < 0  # stopped by a signal
            stderr = "".join(server.startup_lines) + _stop(server)
        finally:
            leftover.kill()
            leftover.wait()
        if f"stopped 1 commands left running by a crashed warpcode (pids {leftover.pid})" in stderr:
            return
    pytest.fail(f"the server never said it stopped the leftover command; its stderr: {stderr!r}")


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


@pytest.mark.slow
@needs_bwrap
async def test_sandbox_bwrap_confines_the_sessions_commands_and_keeps_serve_out_of_their_reach(tmp_path: Path) -> None:
    """Each session's commands write only in the workspace, and cannot take the way out through warpcode itself:
    read serve's token file, connect over loopback, open a session in the folder to write. The state folder is
    outside /tmp, as ~/.local/state/warpcode is: the sandbox's private /tmp would hide one under /tmp anyway."""
    workspace, outside = tmp_path / "repo", tmp_path / "outside"
    workspace.mkdir(), outside.mkdir()
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    with tempfile.TemporaryDirectory(dir="/var/tmp") as state:
        token_file = Path(state) / TOKEN_FILE_NAME
        token_file.write_text(TOKEN + "\n")  # serve's token file, as serve writes it: the test client's token
        token_file.chmod(0o600)
        server, url = start_server(tmp_path, script, "--state-dir", state, "--sandbox", "bwrap")
        try:
            connect = f"import socket; socket.create_connection(('127.0.0.1', {urlparse(url).port}), 2)"
            probe = f'cat {token_file} > token.txt; {sys.executable} -c "{connect}" && echo reached > reached.txt'
            command = f"touch inside.txt {outside}/escaped.txt; {probe}"
            turns = [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, {"text": "done"}]
            write_script(script, turns)  # a scripted model reads its script for each new session
            assert await one_turn(url, workspace) == "end_turn"
            assert (workspace / "inside.txt").exists() and not (outside / "escaped.txt").exists()
            assert (workspace / "token.txt").read_text() == "" and not (workspace / "reached.txt").exists()
            run_command(Workspace(workspace), probe)  # the same command, unsandboxed, does both
            assert (workspace / "token.txt").read_text() == TOKEN + "\n" and (workspace / "reached.txt").exists()
        finally:
            _stop(server)


@needs_bwrap
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
