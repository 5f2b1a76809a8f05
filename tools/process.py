"""Running commands so that nothing outlives them.

Each command gets its own session (so its own process group). On timeout or cancel the whole group gets
SIGTERM, then SIGKILL after a grace period, and we wait until no process of the group is left. Children
orphaned inside the group are reparented to us (we become a child subreaper), so we can reap them too;
otherwise, under an init that never reaps, they would linger as zombies that still belong to the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from warpcode.tools.output_capture import OutputCapture

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_OUTPUT_BYTES = 30_000
KILL_GRACE_S = 2.0
POLL_S = 0.02
PR_SET_CHILD_SUBREAPER = 36
T = TypeVar("T")

_subreaper_set = False


@dataclass
class CommandResult:
    command: str
    exit_code: int | None  # None when killed before it exited on its own
    output: str
    duration_s: float
    timeout_s: float
    timed_out: bool = False
    cancelled: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.cancelled

    def render(self) -> str:
        status = f"exit code {self.exit_code}"
        if self.timed_out:
            status = f"timed out after {self.timeout_s:g} s; process group killed"
        elif self.cancelled:
            status = "cancelled; process group killed"
        return f"$ {self.command}\n{self.output}\n[{status}, {self.duration_s:.1f} s]"


def _become_subreaper() -> None:
    global _subreaper_set
    if _subreaper_set or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _subreaper_set = True


def _reap_group(pgid: int) -> None:
    """Collect exited members of the group that were reparented to us. Call only once Popen has reaped the
    leader, or this could take the leader's exit status away from it."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def group_alive(pgid: int) -> bool:
    _reap_group(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the group, SIGKILL it after `grace_s`, return once no member is left."""
    pgid = proc.pid
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            proc.poll()
            if proc.returncode is not None and not group_alive(pgid):
                return
            time.sleep(POLL_S)


# One process creation at a time in this process. Created from several threads at once, processes start slower
# for everyone (GIL and fork-path contention, most likely); serialised, a burst of 200 commands started by 200
# agent sessions at once delivers their output to the clients with half the tail latency (BENCHMARKS.md, agent
# service), and a long-running command holds the lock only while it is being created.
_SPAWN_LOCK = threading.Lock()


def execute(
    command: str | list[str],
    cwd: str | os.PathLike[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = DEFAULT_OUTPUT_BYTES,
    kill_grace_s: float = KILL_GRACE_S,
) -> CommandResult:
    """Run `command` (a shell string, or an argv list) and return its result; never raises on timeout/cancel.

    Output (stdout and stderr merged) streams to `on_output` as it comes, from a reader thread.
    Setting `cancel` stops the command as a timeout would.
    """
    _become_subreaper()
    shown = command if isinstance(command, str) else subprocess.list2cmdline(command)
    capture = OutputCapture(max_output_bytes, on_output)
    started = time.monotonic()
    with _SPAWN_LOCK:
        proc = subprocess.Popen(
            command,
            shell=isinstance(command, str),
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    assert proc.stdout is not None
    reader = threading.Thread(target=_pump, args=(proc.stdout.fileno(), capture), daemon=True)
    reader.start()
    timed_out = cancelled = False
    deadline = started + timeout_s
    while proc.poll() is None:
        if cancel is not None and cancel.is_set():
            cancelled = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if cancelled or timed_out:
            kill_group(proc, kill_grace_s)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(POLL_S * 5)
    exit_code = proc.returncode if not (timed_out or cancelled) else None
    # Whatever the leader left behind in its group (background jobs, daemons) does not outlive the command.
    reader.join(0.2)
    if group_alive(proc.pid):
        kill_group(proc, kill_grace_s)
    reader.join(5.0)
    proc.stdout.close()
    return CommandResult(
        shown, exit_code, capture.text(), time.monotonic() - started, timeout_s, timed_out, cancelled, capture.truncated
    )


def _pump(fd: int, capture: OutputCapture) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        capture.feed(chunk)


async def in_thread_cancellable(function: Callable[[threading.Event], T]) -> T:
    """Run `function(cancel)` in a worker thread. Cancelling the awaiting task sets `cancel`, waits until the
    function has stopped what it started (a command's process group is killed), then re-raises."""
    cancel = threading.Event()
    future = asyncio.get_running_loop().run_in_executor(None, function, cancel)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.set()
        await asyncio.wait([future])
        raise


async def execute_async(command: str | list[str], cwd: str | os.PathLike[str], **options: object) -> CommandResult:
    """`execute` for asyncio callers: cancelling the awaiting task kills the process group, then re-raises."""
    return await in_thread_cancellable(lambda cancel: execute(command, cwd, cancel=cancel, **options))  # type: ignore[arg-type]
