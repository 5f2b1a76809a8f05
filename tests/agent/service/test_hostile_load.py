"""One session's heavy work must not stall the others: a catastrophic regex in `search`, and the repository map of a
large workspace, run against the real `warpcode serve` while a second client on its own connection needs answers."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import acp
import pytest

from tests.agent.acp_clients import RecordingClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, connect, one_turn, start_server

pytestmark = pytest.mark.asyncio


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # a server frozen by the bug under test ignores SIGTERM
        process.kill()
        process.wait()


async def _quick_turn(url: str, workspace: Path) -> float:
    """Seconds a second client needs to open a session and run a whole (scripted) turn."""
    started = time.monotonic()
    assert await one_turn(url, workspace) == "end_turn"
    return time.monotonic() - started


@pytest.mark.slow
async def test_a_backtracking_search_pattern_does_not_freeze_the_server(tmp_path: Path) -> None:
    bait, small = tmp_path / "bait", tmp_path / "small"
    bait.mkdir(), small.mkdir()
    (bait / "bait.txt").write_text("a" * 50_000 + "\n")
    (small / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "model.json", [
        {"tool_calls": [{"name": "search", "arguments": {"pattern": "(a*)*b"}}]},
        {"text": "No match."},
    ])  # fmt: skip
    process, url = start_server(tmp_path, script, "--token", TOKEN)
    try:
        client = RecordingClient()
        connection = await connect(url, client)
        session_id = (await connection.new_session(cwd=str(bait))).session_id
        hostile = asyncio.create_task(connection.prompt(session_id=session_id, prompt=[acp.text_block("find")]))
        await asyncio.sleep(0.5)  # the search has started
        assert await asyncio.wait_for(_quick_turn(url, small), 20) < 5.0
        assert (await asyncio.wait_for(hostile, 10)).stop_reason == "end_turn"
    finally:
        _stop(process)


@pytest.mark.slow
async def test_a_large_workspace_map_is_built_off_the_event_loop(tmp_path: Path) -> None:
    large, small = tmp_path / "large", tmp_path / "small"
    large.mkdir(), small.mkdir()
    (small / "a.py").write_text("def alpha():\n    return 1\n")
    for package in range(40):  # a cold repository map of these 3,000 files takes seconds to parse
        folder = large / f"pkg{package}"
        folder.mkdir()
        for module in range(75):
            helpers = "".join(
                f"def helper_{module}_{k}(value):\n    return helper_{module}_{(k + 1) % 20}(value) + {k}\n\n\n"
                for k in range(20)
            )
            (folder / f"mod{module}.py").write_text(
                f"from pkg{(package + 1) % 40}.mod{module} import helper_{module}_0\n\n\n{helpers}"
                f"class Model{package}_{module}:\n    def forward(self, x):\n        return helper_{module}_0(x)\n"
            )
    script = write_script(tmp_path / "model.json", [{"text": "Hello."}])
    process, url = start_server(tmp_path, script, "--token", TOKEN)
    try:
        client = RecordingClient()
        connection = await connect(url, client)
        opened = time.monotonic()
        session_id = (await asyncio.wait_for(connection.new_session(cwd=str(large)), 30)).session_id
        assert time.monotonic() - opened < 2.0  # session/new does not wait for the map
        turn = asyncio.create_task(connection.prompt(session_id=session_id, prompt=[acp.text_block("hi")]))
        await asyncio.sleep(0.3)  # the large workspace's map is being built
        assert await asyncio.wait_for(_quick_turn(url, small), 30) < 4.0
        assert (await asyncio.wait_for(turn, 30)).stop_reason == "end_turn"
        await connection.close()
    finally:
        _stop(process)
