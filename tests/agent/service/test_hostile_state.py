"""A repository cannot plant warpcode's state, and the state warpcode keeps is the user's alone.

Against the real `warpcode serve` (and `warpcode acp`) with the SDK's client: a cloned `.warpcode/` is never read
nor written through (README: guarantees), and sessions and checkpoints are private (0700 folders, 0600 logs).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import acp
import pytest
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient, RecordingClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, acp_process, connect, start_server
from warpcode.tools import Checkpoints, Workspace
from warpcode.tools.workspace import workspace_state_dir

pytestmark = pytest.mark.asyncio

EDIT = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
EDIT_TURNS = [{"tool_calls": [EDIT]}, {"text": "Fixed."}]


@pytest.fixture(autouse=True)
def ordinary_umask():
    """The usual umask 022: without it the service's own modes would not show."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


async def edit_turn(tmp_path: Path, repo: Path, *options: str) -> list[dict]:
    """One `serve` session in `repo` whose turn edits calc.py; returns the session's checkpoints."""
    script = write_script(tmp_path / "model.json", EDIT_TURNS)
    process, url = start_server(tmp_path, script, "--token", TOKEN, "--mode", "accept-edits", *options)
    try:
        connection = await connect(url, RecordingClient())
        session_id = (await connection.new_session(cwd=str(repo))).session_id
        response = await connection.prompt(session_id=session_id, prompt=[acp.text_block("Fix add()")])
        assert response.stop_reason == "end_turn"
        listed = await connection.ext_method("warpcode/checkpoints", {"sessionId": session_id})
        await connection.close()
    finally:
        process.terminate()
        process.wait(timeout=10)
    return listed["checkpoints"]


def plant_shadow_repository(repo: Path) -> Path:
    """What a cloned repository can commit: a `.warpcode/checkpoints.git` that git would accept as a repository."""
    shadow = repo / ".warpcode" / "checkpoints.git"
    subprocess.run(["git", "init", "-q", "--bare", str(shadow)], check=True)
    return shadow


def marker_script(folder: Path, name: str) -> tuple[Path, Path]:
    """An executable `folder/name` that creates `folder/name.ran` when anything runs it."""
    folder.mkdir(exist_ok=True)
    script, marker = folder / name, folder / f"{name}.ran"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o755)
    return script, marker


def plant_fsmonitor(shadow: Path, tools: Path) -> Path:
    script, marker = marker_script(tools, "fsmonitor")
    with open(shadow / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = {script}\n")
    return marker


def plant_hook(shadow: Path, tools: Path) -> Path:
    _, marker = marker_script(shadow / "hooks", "reference-transaction")  # update-ref runs it
    return marker


def plant_hooks_path(shadow: Path, tools: Path) -> Path:
    _, marker = marker_script(tools, "reference-transaction")
    with open(shadow / "config", "a") as config:
        config.write(f"[core]\n\thooksPath = {tools}\n")
    return marker


@pytest.mark.slow
@pytest.mark.parametrize(
    "plant", [plant_fsmonitor, plant_hook, plant_hooks_path], ids=["fsmonitor", "hook", "hooksPath"]
)
async def test_a_planted_checkpoint_repository_runs_nothing(tmp_path: Path, failing_repo: Path, plant) -> None:
    marker = plant(plant_shadow_repository(failing_repo), tmp_path / "planted-tools")
    checkpoints = await edit_turn(tmp_path, failing_repo)
    assert not marker.exists()
    assert "a + b" in (failing_repo / "calc.py").read_text()
    assert [c["message"] for c in checkpoints] == ["before: Fix add()"]


@pytest.mark.slow
async def test_a_planted_exclude_symlink_overwrites_nothing(tmp_path: Path, failing_repo: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    exclude = plant_shadow_repository(failing_repo) / "info" / "exclude"
    exclude.unlink()
    exclude.symlink_to(outside)
    checkpoints = await edit_turn(tmp_path, failing_repo)
    assert outside.read_text() == "precious\n"
    assert len(checkpoints) == 1


@pytest.mark.slow
async def test_a_symlinked_warpcode_folder_gets_nothing_written(tmp_path: Path, failing_repo: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (failing_repo / ".warpcode").symlink_to(outside, target_is_directory=True)
    checkpoints = await edit_turn(tmp_path, failing_repo)
    assert list(outside.iterdir()) == []
    assert len(checkpoints) == 1 and "a + b" in (failing_repo / "calc.py").read_text()


def assert_private(state: Path) -> None:
    """The state home and the folders in it (sessions, each workspace's) are 0700, every session log 0600."""
    folders = [state, *(f for f in state.iterdir() if f.is_dir()), *state.glob("workspaces/*")]
    assert {str(f): stat.S_IMODE(f.stat().st_mode) for f in folders} == {str(f): 0o700 for f in folders}
    assert {f.relative_to(state).parts[0] for f in folders[1:]} == {"sessions", "workspaces"}
    assert len(list(state.glob("workspaces/*/checkpoints.git"))) == 1
    logs = list((state / "sessions").glob("*.jsonl"))
    assert logs and {stat.S_IMODE(log.stat().st_mode) for log in logs} == {0o600}


@pytest.mark.slow
async def test_serve_with_a_token_keeps_its_state_private(tmp_path: Path, failing_repo: Path) -> None:
    assert len(await edit_turn(tmp_path, failing_repo)) == 1
    assert_private(tmp_path / "state")


@pytest.mark.slow
async def test_acp_keeps_its_state_private(tmp_path: Path, failing_repo: Path, scripted_model) -> None:
    state = tmp_path / "state"
    model = scripted_model(EDIT_TURNS)
    async with acp_process(AcpTestClient(), state, "--model", model, "--mode", "auto") as (conn, _):
        session_id = (await conn.new_session(cwd=str(failing_repo))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("Fix add()")])
    assert "a + b" in (failing_repo / "calc.py").read_text()
    assert_private(state)


async def test_run_keeps_its_checkpoints_in_the_private_state_dir(
    tmp_path: Path, failing_repo: Path, scripted_model
) -> None:
    state = tmp_path / "state"
    command = ["run", "--cwd", str(failing_repo), "--model", scripted_model(EDIT_TURNS), "--mode", "auto"]
    done = subprocess.run(
        [sys.executable, "-m", "warpcode.agent", *command, "--state-dir", str(state), "Fix add()"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    checkpoints = Checkpoints(Workspace(failing_repo, workspace_state_dir(state, failing_repo))).list()
    assert [c.message for c in checkpoints] == ["before: Fix add()"]
    folders = [state, state / "workspaces", *state.glob("workspaces/*")]
    assert [stat.S_IMODE(f.stat().st_mode) for f in folders] == [0o700] * 3


@pytest.mark.slow
@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["acp"]], ids=["serve", "acp"])
async def test_a_state_dir_that_is_not_a_directory_stops_the_service_with_one_line(tmp_path: Path, command: list):
    (tmp_path / "state").write_text("mine\n")
    done = subprocess.run(
        [sys.executable, "-m", "warpcode.agent", *command, "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith(f"warpcode {command[0]}: error: {tmp_path / 'state'} is not a dir")
    assert (tmp_path / "state").read_text() == "mine\n"
