from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.processes import process_running
from warpcode.tools import CommandCancelled, CommandTimeout, InvalidArgument, Workspace, run_command
from warpcode.tools.commands import run_command_async
from warpcode.tools.process import COMMAND_MARKER, execute, reap_leftover_commands

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


# Forks twice and calls setsid in between, like a classic daemon; the daemon prints its pid and lets go of the output.
DOUBLE_FORK = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(1, f"{os.getpid()}\\n".encode())
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(1, 2)
        time.sleep(300)
    os._exit(0)
os.wait()
"""


def _children_with_host(state: str | None = None) -> list[int]:
    """The pids of this process's children (in that state, as /proc/PID/stat spells it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and state in (None, fields[0]):
            found.append(int(entry.name))
    return found


def _children(state: str | None = None) -> list[int]:
    """This process's children but the guard host, which spawns the commands."""
    return [pid for pid in _children_with_host(state) if b"command_guard.py" not in _command_line(pid)]


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


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


def test_exit_code_of_a_command_killed_by_a_signal_is_minus_the_signal(root: Path) -> None:
    assert execute("kill -9 $$", root).exit_code == -9


def test_a_program_that_cannot_be_started_exits_127_and_says_why(root: Path) -> None:
    result = execute(["warpcode-test-no-such-program"], root)
    assert result.exit_code == 127
    assert result.output == "warpcode: cannot run warpcode-test-no-such-program: No such file or directory\n"


def test_daemons_do_not_outlive_the_command(root: Path) -> None:
    script = f"setsid sleep 300 >/dev/null 2>&1 & echo $!; {shlex.quote(sys.executable)} -c {shlex.quote(DOUBLE_FORK)}"
    result = execute(script, root, timeout_s=20)
    assert result.exit_code == 0
    daemons = [int(pid) for pid in result.output.split()]
    assert len(daemons) == 2
    assert [pid for pid in daemons if process_running(pid)] == []


def test_commands_leaving_daemons_pile_up_no_zombies_under_the_server(root: Path) -> None:
    for _ in range(50):
        assert execute("setsid sh -c 'sleep 0.2' >/dev/null 2>&1 &", root).exit_code == 0
    time.sleep(0.5)  # long enough for any daemon that survived its command to exit
    assert _children("Z") == []
    assert _children() == []


def test_reap_leftover_commands_stops_what_a_dead_server_left_and_only_that(root: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    own_marker = execute(f"echo ${COMMAND_MARKER}", root).output.strip()
    leftover = subprocess.Popen(["sleep", "60"], env={**os.environ, COMMAND_MARKER: f"{gone.pid}:1234:7"})
    ours = subprocess.Popen(["sleep", "60"], env={**os.environ, COMMAND_MARKER: own_marker})
    try:
        found = reap_leftover_commands(grace_s=1.0)
        assert leftover.pid in found and ours.pid not in found
        assert leftover.wait(timeout=5) == -signal.SIGTERM
        assert ours.poll() is None
    finally:
        for process in (leftover, ours):
            process.kill()
            process.wait()


def test_a_command_gets_dev_null_and_its_output_pipe_and_nothing_else(root: Path) -> None:
    links = execute("for fd in /proc/$$/fd/*; do readlink $fd; done", root).output.split()
    assert links[0] == "/dev/null" and links[1] == links[2] and links[1].startswith("pipe:") and len(links) == 3


def _guard_host() -> int:
    (host,) = [pid for pid in _children_with_host() if b"command_guard.py" in _command_line(pid)]
    return host


def test_a_guard_host_that_died_is_replaced(root: Path) -> None:
    execute("true", root)
    host = _guard_host()
    os.kill(host, signal.SIGKILL)
    while process_running(host):
        time.sleep(0.01)
    assert execute("echo again", root).output == "again\n"
    assert _guard_host() != host


def test_what_is_left_of_a_command_whose_guard_host_was_killed_is_stopped(root: Path) -> None:
    def kill_the_host(line: str) -> None:
        shell = int(line.split()[0])
        stat = Path(f"/proc/{shell}/stat").read_text()
        os.kill(int(stat[stat.rindex(")") + 2 :].split()[1]), signal.SIGKILL)

    result = execute("sleep 60 & echo $$ $!; wait", root, timeout_s=20, on_output=kill_the_host)
    assert result.exit_code is None and result.duration_s < 10
    assert [pid for pid in map(int, result.output.split()) if process_running(pid)] == []


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _in_thread(function, *args, **kwargs) -> tuple[threading.Thread, dict]:
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(result=function(*args, **kwargs)), daemon=True)
    thread.start()
    return thread, done


def _wait_until(condition, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_two_commands_at_once_each_get_only_their_own_daemons_stopped(root: Path) -> None:
    release = root / "release"
    daemon = f"{shlex.quote(sys.executable)} -c {shlex.quote(DOUBLE_FORK)}"
    lines: list[str] = []
    second, done = _in_thread(
        execute, f"{daemon}; while [ ! -e {release} ]; do sleep 0.02; done", root, timeout_s=30, on_output=lines.append
    )
    _wait_until(lambda: "\n" in "".join(lines), "the second command's daemon")
    second_daemon = int("".join(lines))
    # Both daemons are the guard host's children (their parents exited): only their markers tell them apart.
    _wait_until(lambda: _parent(second_daemon) == _guard_host(), "the second command's daemon to be orphaned")
    for _ in range(2):
        first = execute(daemon, root, timeout_s=20)
        assert first.exit_code == 0 and not process_running(int(first.output))
        assert process_running(second_daemon), "the daemon of a command still running was stopped"
    release.touch()
    second.join(30)
    assert done["result"].exit_code == 0
    assert not process_running(second_daemon)


def test_no_descriptor_of_the_guard_host_leaks_into_a_command(root: Path) -> None:
    release = root / "release"
    lines: list[str] = []
    # Commands running meanwhile: the host holds their status pipes.
    waiting = f"echo started; while [ ! -e {release} ]; do sleep 0.02; done"
    others = [_in_thread(execute, waiting, root, on_output=lines.append) for _ in range(2)]
    _wait_until(lambda: len(lines) == 2, "the other commands to start")
    try:
        links = execute("for fd in /proc/$$/fd/*; do readlink $fd; done", root).output.split()
        assert links[0] == "/dev/null" and links[1] == links[2] and links[1].startswith("pipe:") and len(links) == 3
    finally:
        release.touch()
        for thread, _ in others:
            thread.join(10)
    assert [done["result"].exit_code for _, done in others] == [0, 0]


def test_a_command_whose_leftovers_are_being_stopped_delays_no_other(root: Path) -> None:
    stubborn = "trap '' TERM; touch trapped; sleep 60"  # the shell and its sleep ignore SIGTERM: SIGKILL it takes
    lines: list[str] = []
    daemon = f"setsid sh -c {shlex.quote(stubborn)} >/dev/null 2>&1 &"
    command = f"{daemon} while [ ! -e trapped ]; do sleep 0.01; done; echo $!"
    first, done = _in_thread(execute, command, root, timeout_s=20, kill_grace_s=2.0, on_output=lines.append)
    _wait_until(lambda: lines, "the first command to start its daemon")
    time.sleep(0.3)  # it has exited: the host is waiting out the grace period of its daemon
    started = time.monotonic()
    assert execute("echo other", root).output == "other\n"
    assert time.monotonic() - started < 1.0
    first.join(20)
    assert done["result"].exit_code == 0 and done["result"].duration_s >= 2.0
    assert not process_running(int(lines[0]))


def test_the_guard_host_outlives_the_thread_that_started_it(root: Path) -> None:
    execute("true", root)
    old = _guard_host()
    os.kill(old, signal.SIGKILL)
    while process_running(old):
        time.sleep(0.01)
    starter = threading.Thread(target=execute, args=("true", root))  # starts a new host, then exits
    starter.start()
    starter.join()
    host = _guard_host()
    time.sleep(0.2)  # the host got its parent-death signal: a thread, not the server, exited
    assert execute("echo still here", root).output == "still here\n"
    assert _guard_host() == host
