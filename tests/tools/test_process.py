from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from warpcode.tools import CommandCancelled, CommandTimeout, InvalidArgument, Workspace, run_command
from warpcode.tools.commands import run_command_async
from warpcode.tools.process import execute

# A parent that forks a child, both ignoring SIGTERM and sleeping; each prints its pid first.
# One os.write per line: a small pipe write is atomic, print() under PYTHONUNBUFFERED writes word by word and the
# two processes' words could interleave.
STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.write(1, f"child {os.getpid()}\\n".encode())
    time.sleep(600)
    sys.exit(0)
os.write(1, f"parent {os.getpid()}\\n".encode())
time.sleep(600)
"""


def _assert_group_gone(pgid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def test_output_exit_code_and_stderr_are_captured(ws: Workspace) -> None:
    result = run_command(ws, "echo out; echo err >&2; exit 3")
    assert result.exit_code == 3 and not result.ok
    assert result.output == "out\nerr\n"


def test_command_runs_in_the_workspace_root(ws: Workspace, root: Path) -> None:
    assert run_command(ws, "pwd").output.strip() == str(root.resolve())


def test_output_is_streamed_and_capped_head_and_tail(root: Path) -> None:
    chunks: list[str] = []
    script = "for i in $(seq 1 20000); do echo line$i; done"
    result = execute(script, root, on_output=chunks.append, max_output_bytes=2000)
    assert result.truncated
    assert result.output.startswith("line1\nline2\n")
    assert result.output.endswith("line19999\nline20000\n")
    assert "bytes of output omitted" in result.output
    assert "".join(chunks).count("\n") == 20000


def test_hanging_command_is_killed_on_timeout(ws: Workspace) -> None:
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="timed out") as caught:
        run_command(ws, "echo started; sleep 60", timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert "started" in caught.value.result.output


def test_children_ignoring_sigterm_are_killed_with_the_group(root: Path) -> None:
    pids: list[int] = []
    result = execute([sys.executable, "-c", STUBBORN], root, timeout_s=1.5, kill_grace_s=0.3)
    assert result.timed_out and result.exit_code is None
    for line in result.output.splitlines():
        pids.append(int(line.split()[1]))
    assert len(pids) == 2
    _assert_group_gone(pids[0])  # the parent leads the group: its pid is the group id
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_background_jobs_do_not_outlive_the_command(root: Path) -> None:
    result = execute("sleep 60 & echo $!", root, timeout_s=10)
    assert result.exit_code == 0
    with pytest.raises(ProcessLookupError):
        os.kill(int(result.output.strip()), 0)


def test_cancel_event_kills_the_group(ws: Workspace) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(CommandCancelled):
        run_command(ws, "sleep 60", cancel=cancel)


async def test_cancelling_the_async_task_kills_the_group(ws: Workspace) -> None:
    lines: list[str] = []
    task = asyncio.create_task(run_command_async(ws, "echo $$; sleep 60", on_output=lines.append))
    while not lines:
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    _assert_group_gone(int(lines[0].strip()))


def test_empty_command_and_bad_timeout_are_refused(ws: Workspace) -> None:
    with pytest.raises(InvalidArgument):
        run_command(ws, "  ")
    with pytest.raises(InvalidArgument):
        run_command(ws, "true", timeout_s=0)
