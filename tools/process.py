"""Running commands so that nothing they start outlives them, not even when warpcode dies.

Every command is spawned by the server's guard host (command_guard.py, one process per server), in a session of
its own; the host is the child subreaper of all of them. When a command exits, whatever it left running
(background jobs, daemons that called setsid or forked twice: reparented to the host, and known as the
command's by the COMMAND_MARKER in their environment) is stopped and reaped by the host; a timeout or cancel has
the host send the command and all it started SIGTERM, then SIGKILL after a grace period; the host does that to
every command when the server dies, kill -9 included (its parent-death signal). `execute` returns once nothing of
the command is left. Every command's environment names its server (COMMAND_MARKER), so that what a crashed
server left running anyway (its guard host killed along with it) can be stopped on the next start-up
(`reap_leftover_commands`). With a `Sandbox`, the command runs inside it (bubblewrap), spawned by the host, without
the variables the sandbox keeps from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from warpcode.tools.output_capture import OutputCapture
from warpcode.tools.sandbox import Sandbox

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_OUTPUT_BYTES = 30_000
KILL_GRACE_S = 2.0
POLL_S = 0.02
GUARD_SLACK_S = 10.0  # how long past the grace period the host may take to stop a command before it is told to kill it
COMMAND_MARKER = "WARPCODE_COMMAND"  # "<server pid>:<server start time>:<number>" in every command's environment
# -I: no PYTHONPATH, no user site; -S: no site-packages. The guard host needs nothing but the standard library.
GUARD_HOST = [sys.executable, "-I", "-S", str(Path(__file__).with_name("command_guard.py"))]
T = TypeVar("T")

_command_numbers = itertools.count(1)

# What runs a tool's command: `execute` here, or another place with its signature and guarantees (the editor's
# terminal: agent/service/client_terminal.py): a shell string or argv, cwd, timeout_s, on_output, cancel, env
# (the variables to add), max_output_bytes, sandbox -> CommandResult, never raising on timeout or cancel.
Executor = Callable[..., "CommandResult"]


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


# One command start at a time in this process (the guard host spawns one command at a time anyway). Measured when
# this process created the commands itself: from several threads at once they started slower for everyone (GIL
# and fork-path contention, most likely); serialised, a burst of 200 commands started by 200 agent sessions at
# once delivered their output to the clients with half the tail latency (BENCHMARKS.md, agent service). A
# long-running command holds the lock only while it is being started.
_SPAWN_LOCK = threading.Lock()


class _GuardHost:
    """The process that spawns and guards every command (command_guard.serve), over a Unix socket. One per server
    process: spawning from a small single-threaded process is safe and fast, starting a Python per command is not
    (12 ms each, measured), and neither was forking a guard per command (2.3 ms of CPU each)."""

    def __init__(self) -> None:
        ours, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with its:
            self.process = subprocess.Popen(
                [*GUARD_HOST, str(os.getpid())],
                stdin=its,
                stdout=subprocess.DEVNULL,
                env={**os.environ, COMMAND_MARKER: _marker()},
                start_new_session=True,  # the terminal's Ctrl-C is the server's to handle, not its commands'
            )
        self.channel, self.server = ours, os.getpid()

    @property
    def usable(self) -> bool:
        return self.server == os.getpid() and self.process.poll() is None  # a forked child needs its own

    def run(self, number: int, request: dict[str, object], output: int, status: int) -> None:
        with tempfile.TemporaryFile() as file:  # any size: a socket message is not
            file.write(json.dumps(request).encode())
            file.seek(0)
            socket.send_fds(self.channel, [b"run %d" % number], [file.fileno(), output, status])

    def send(self, verb: str, number: int) -> None:
        """`stop` (SIGTERM, SIGKILL after the grace period) or `kill` (SIGKILL) that command and all it started."""
        with contextlib.suppress(OSError):  # the host died: exit_code() stops what is left of the command
            self.channel.send(b"%s %d" % (verb.encode(), number))


_host: _GuardHost | None = None


def _start(argv: list[str], cwd: str | os.PathLike[str], env: Mapping[str, str], grace_s: float) -> _Command:
    """Have the guard host start `argv` with the environment `env`; call with _SPAWN_LOCK held."""
    number, marker = next(_command_numbers), _marker()
    request = {"argv": argv, "cwd": os.fspath(cwd), "env": {**env, COMMAND_MARKER: marker}, "grace_s": grace_s}
    output_r, output_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        host = _send_run(number, request, output_w, status_w)
    except BaseException:
        os.close(output_r)
        os.close(status_r)
        raise
    finally:
        os.close(output_w)
        os.close(status_w)
    return _Command(host, number, marker, output_r, status_r)


def _send_run(number: int, request: dict[str, object], output: int, status: int) -> _GuardHost:
    """Send the request to the guard host, started first if there is none or it died."""
    global _host
    if _host is None or not _host.usable:
        _host = _GuardHost()
    try:
        _host.run(number, request, output, status)
    except OSError:  # it died since it was checked: replaced, once
        _host = _GuardHost()
        _host.run(number, request, output, status)
    return _host


@dataclass
class _Command:
    host: _GuardHost
    number: int
    marker: str  # its COMMAND_MARKER
    output: int  # the read end of its output pipe
    status: int  # the read end of its status pipe: its exit code, written once nothing of it is left

    def finished_within(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.status], [], [], timeout_s)
        return bool(ready)

    def exit_code(self) -> int | None:
        """Its exit code (negative: killed by that signal). None if the guard host was killed, and then whatever
        is left of the command (the processes carrying its marker) is killed here."""
        with os.fdopen(self.status, "rb") as status:
            line = status.read().strip() if self.finished_within(0) else b""
        if line:
            return int(line)
        # Rounds until one finds nothing, two at least: a process forking or in the middle of an exec when the
        # first looked (its environment unreadable for that moment) is found by the next.
        deadline = time.monotonic() + 1.0
        for round_number in itertools.count(1):
            left = [pid for pid, marker in _marked_processes() if marker == self.marker]
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if (not left and round_number >= 2) or time.monotonic() > deadline:
                return None
            time.sleep(POLL_S)
        return None

    def stop(self, grace_s: float) -> None:
        """SIGTERM, SIGKILL after `grace_s` (the host does both); SIGKILL at once should that not have done."""
        self.host.send("stop", self.number)
        if not self.finished_within(grace_s + GUARD_SLACK_S):
            self.host.send("kill", self.number)  # past that, exit_code() stops what is left of the command
            self.finished_within(GUARD_SLACK_S)


def execute(
    command: str | list[str],
    cwd: str | os.PathLike[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = DEFAULT_OUTPUT_BYTES,
    kill_grace_s: float = KILL_GRACE_S,
    sandbox: Sandbox | None = None,
) -> CommandResult:
    """Run `command` (a shell string, or an argv list) and return its result; never raises on timeout/cancel.

    Output (stdout and stderr merged) streams to `on_output` as it comes, from a reader thread.
    Setting `cancel` stops the command as a timeout would. A program that cannot be started exits with 127.
    """
    shown = command if isinstance(command, str) else subprocess.list2cmdline(command)
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    environment = {**os.environ, **(env or {})}
    if sandbox is not None:
        argv, environment = sandbox.wrap(argv, cwd), sandbox.environment(environment)
    capture = OutputCapture(max_output_bytes, on_output)
    started = time.monotonic()
    with _SPAWN_LOCK:
        running = _start(argv, cwd, environment, kill_grace_s)
    reader = threading.Thread(target=_pump, args=(running.output, capture), daemon=True)
    reader.start()
    timed_out = cancelled = False
    deadline = started + timeout_s
    while not running.finished_within(POLL_S * 5):
        if cancel is not None and cancel.is_set():
            cancelled = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if cancelled or timed_out:
            running.stop(kill_grace_s)
            break
    exit_code = running.exit_code()
    reader.join(5.0)  # at once, unless something that escaped the host still holds the pipe open
    os.close(running.output)
    return CommandResult(
        shown,
        exit_code if not (timed_out or cancelled) else None,
        capture.text(),
        time.monotonic() - started,
        timeout_s,
        timed_out,
        cancelled,
        capture.truncated,
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


def reap_leftover_commands(grace_s: float = KILL_GRACE_S) -> list[int]:
    """Stop the processes of commands that a crashed warpcode left running; return their pids, sorted.

    The guard host stops its commands when its server dies, so this finds something only when the host was
    killed too (by the OOM killer, say, or a kill -9 of every warpcode process): processes of this user whose
    COMMAND_MARKER names a server that is no longer running get SIGTERM, and SIGKILL after `grace_s`. Meant for
    the service's start-up, before it accepts sessions, reporting what it found, e.g. "stopped 2 commands left
    running by a crashed warpcode (pids 4242, 4243)". Linux only (it reads /proc); elsewhere it finds nothing.
    """
    leftovers = sorted(pid for pid, marker in _marked_processes() if _server_gone(marker))
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        deadline = time.monotonic() + wait_s
        while any(_running(pid) for pid in leftovers) and time.monotonic() < deadline:
            time.sleep(POLL_S)
    return leftovers


def _marker() -> str:
    return f"{_identity(os.getpid())}:{next(_command_numbers)}"


@functools.cache  # per pid: a forked child has an identity of its own
def _identity(pid: int) -> str:
    """'<pid>:<start time>' of a process, its start time read from /proc once."""
    return f"{pid}:{_start_time(pid)}"


def _marked_processes() -> Iterator[tuple[int, str]]:
    """(pid, marker) of this user's processes whose environment holds COMMAND_MARKER."""
    try:
        entries = [entry for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return  # no /proc
    prefix = f"{COMMAND_MARKER}=".encode()
    for entry in entries:
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        for variable in environ.split(b"\0"):
            if variable.startswith(prefix):
                yield int(entry.name), variable[len(prefix) :].decode(errors="replace")


def _server_gone(marker: str) -> bool:
    """Whether the server a marker names has exited (False for a marker not written by `_marker`)."""
    server, _, rest = marker.partition(":")
    started, _, number = rest.partition(":")
    return server.isdigit() and started.isdigit() and number.isdigit() and _start_time(int(server)) != started


def _stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat from its third field (the state) on; None once the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()  # the command name in parentheses may hold anything


def _running(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != b"Z"


def _start_time(pid: int) -> str:
    """When the process started (clock ticks after boot): with the pid, it names the process even after pid reuse.
    Empty for a process that is gone (or a zombie)."""
    fields = _stat_fields(pid)
    return fields[19].decode() if fields is not None and fields[0] != b"Z" else ""
