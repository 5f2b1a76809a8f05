"""The guard host: it runs every command of a server, and nothing a command starts outlives the command, even
when warpcode dies.

    python -I -S command_guard.py SERVER_PID        (stdin: a Unix socket to the server)

tools/process.py starts one guard host per server process, standard library only. For each command the server
sends `run N` with three descriptors: a file holding the request (argv, cwd, environment, grace period), the
output pipe and a status pipe. The host, a single-threaded event loop, spawns the command itself (posix_spawn, a
vfork: no fork of the host, no process per command besides the command) in a new session, with stdin /dev/null,
stdout and stderr the output pipe, no other descriptor of the host (all of them are close-on-exec, the received
ones too) and the signal state of a fresh process. A command that cannot be started exits with 127 and says why
in its output, as in the shell.

The host is the child subreaper of all its commands: whatever a command leaves running (background jobs, daemons
that called setsid or forked twice) is reparented to the host, not to init. So when a leader exits, the host's
children other than the running leaders are orphans; usually there are none (one read of
/proc/self/task/PID/children says so) and the exit code is reported at once. Otherwise each orphan's
COMMAND_MARKER (read once from /proc/PID/environ) names its command: those of the command that ended get SIGTERM
with all their descendants, then SIGKILL after the grace period, and are reaped; those of commands still running
are left alone; those no running command claims (a daemon that cleared or hides its environment, say) go with
the first command to end, so never outlive their own. `stop N` (a timeout, a cancel) does the same to command
N's process group, its leader's descendants and its orphans; `kill N` skips the grace period. A command's exit
code (or minus the signal that killed it) goes to its status pipe once nothing of it is left (but processes of
another user, which the host may not signal). Grace periods are timers of the event loop: a command being stopped
delays no other.

When the server goes away (its end of the socket closes, or its death signals the host, the parent-death
signal, and the host's parent is no longer the server: a thread of the server exiting signals it too), the host
stops everything below it the same way and exits. Should the host be killed itself, the server
stops what carries its commands' markers. Linux gives the host its parent-death signal, subreaper and /proc;
elsewhere it only stops each command's process group.
"""

import array
import contextlib
import ctypes
import errno
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable

LINUX = sys.platform.startswith("linux")
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
KILL_ROUND_S = 0.05  # between SIGKILL rounds, while processes are still being forked or reparented to us
CANNOT_RUN = 127
RESET = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them, and ignored signals stay ignored across exec
MESSAGE_BYTES = 64
COMMAND_MARKER = "WARPCODE_COMMAND"  # process.COMMAND_MARKER, in every command's environment
MARKER = f"{COMMAND_MARKER}=".encode()
# Descriptors are received close-on-exec, so that no command inherits another's (elsewhere: set one by one).
CMSG_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
# Linux lists each thread's children in /proc (CONFIG_PROC_CHILDREN); without that, a scan of /proc finds them.
CHILDREN_FILES = LINUX and os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _prctl(option: int, value: int) -> None:
    if LINUX:
        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)


def _ignore(signum: int, frame: object) -> None:
    """A handler, so that the signal reaches the wakeup pipe; the loop reads it there."""


class Command:
    def __init__(self, number: bytes, marker: bytes, status: int, grace_s: float) -> None:
        self.number, self.marker, self.status, self.grace_s = number, marker, status, grace_s
        self.leader = 0  # its pid, until reaped
        self.exit_code = CANNOT_RUN  # the leader's, once reaped (minus the signal that killed it)
        self.stopping = False  # sent SIGTERM: SIGKILL rounds start at `deadline`
        self.deadline = float("inf")


class Host:
    def __init__(self, server: int) -> None:
        self.server = server
        self.channel = socket.socket(fileno=0)
        self.commands: dict[bytes, Command] = {}  # by number, until reported
        self.leaders: dict[int, Command] = {}  # by the leader's pid, until reaped (so never a reused pid)
        self.markers: dict[int, bytes] = {}  # an orphan's pid -> the marker in its environment, until reaped
        self.unkillable: set[int] = set()  # orphans we may not signal (they run as another user), until reaped
        self.null = os.open(os.devnull, os.O_RDONLY)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)  # SIGCHLD (and the stop signals) wake the select of the loop
        for signum in (signal.SIGCHLD, *STOP_SIGNALS):
            signal.signal(signum, _ignore)
        self.own_children = f"/proc/self/task/{os.getpid()}/children"  # one thread: all our children are its

    def serve(self) -> None:
        while True:
            deadline = min((command.deadline for command in self.commands.values()), default=float("inf"))
            timeout = None if deadline == float("inf") else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.channel, self.wake_r], [], [], timeout)
            if self.wake_r in ready:
                signals = os.read(self.wake_r, 4096)
                if STOP_SIGNALS.intersection(signals) and os.getppid() != self.server:
                    self.shut_down()  # the server died (its death signal); a thread of it exiting is no reason
            reaped = self._reap()
            if self.channel in ready and not self._receive():
                self.shut_down()  # the server is gone
            if reaped or deadline <= time.monotonic():
                self._settle()

    def _receive(self) -> bool:
        """Handle every message waiting; False once the server has closed its end."""
        while True:
            try:
                message, fds = _receive(self.channel)
            except BlockingIOError:
                return True
            except ConnectionError:
                return False
            if not message:
                return False
            if not CMSG_CLOEXEC:
                for fd in fds:
                    os.set_inheritable(fd, False)
            verb, number = message.split()
            if verb == b"run" and len(fds) == 3:
                self._run(number, *fds)
            elif (command := self.commands.get(number)) is not None:
                self._stop(command, kill=verb == b"kill")

    def _run(self, number: bytes, request: int, output: int, status: int) -> None:
        command = Command(number, b"", status, 0.0)
        try:
            spec = json.loads(_read_all(request))
            env: dict[str, str] = spec["env"]
            command.marker, command.grace_s = env.get(COMMAND_MARKER, "").encode(), spec["grace_s"]
            try:
                os.chdir(spec["cwd"])  # posix_spawn has no cwd: the host goes there for the spawn
            except OSError as error:
                return self._cannot_run(command, output, f"cannot run the command in {spec['cwd']}: {error.strerror}")
            try:
                command.leader = self._spawn(spec["argv"], env, output)
            except OSError as error:
                return self._cannot_run(command, output, f"cannot run {spec['argv'][0]}: {error.strerror}")
            finally:
                os.chdir("/")  # the host holds no workspace
        except Exception as error:  # a bad request fails its command, never the host
            return self._cannot_run(command, output, f"the command guard failed: {error!r}")
        finally:
            os.close(request)
            os.close(output)  # the command's now: the server reads to its end of file
        self.commands[number] = command
        self.leaders[command.leader] = command

    def _spawn(self, argv: list[str], env: dict[str, str], output: int) -> int:
        """Start the command in a new session, with the signal state of a fresh process, searching the PATH of
        its environment as execvpe does (a folder without the program costs a stat, not a spawn)."""
        program = argv[0]
        names = [program] if "/" in program else [f"{folder}/{program}" for folder in os.get_exec_path(env)]
        layout = [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in ((self.null, 0), (output, 1), (output, 2))]
        errors: list[OSError] = []
        for name in names:
            if len(names) > 1 and not os.path.exists(name):
                continue
            try:
                return os.posix_spawn(name, argv, env, file_actions=layout, setsid=True, setsigmask=(), setsigdef=RESET)
            except OSError as error:
                errors.append(error)
        for error in errors:
            if not isinstance(error, FileNotFoundError):
                raise error
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))

    def _cannot_run(self, command: Command, output: int, reason: str) -> None:
        with contextlib.suppress(OSError):  # nobody reads it any more
            os.write(output, f"warpcode: {reason}\n".encode())
        self._report(command)

    def _report(self, command: Command) -> None:
        self.commands.pop(command.number, None)
        with contextlib.suppress(OSError):  # the server stopped waiting for it
            os.write(command.status, b"%d\n" % command.exit_code)
        os.close(command.status)

    def _reap(self) -> bool:
        """Collect exited children; True if a leader was among them or a command is being stopped."""
        relevant = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            command = self.leaders.pop(pid, None)
            if command is not None:
                command.leader, command.exit_code = 0, os.waitstatus_to_exitcode(status)
                relevant = True
            else:
                self.markers.pop(pid, None)
                self.unkillable.discard(pid)
        return relevant or any(command.stopping for command in self.commands.values())

    def _settle(self) -> None:
        """Report each command whose leader has exited and of which nothing is left; stop what is left of the
        others (SIGTERM, SIGKILL rounds once their grace period is over)."""
        ended = [command for command in self.commands.values() if command.leader == 0]
        if not ended and not any(command.stopping for command in self.commands.values()):
            return
        orphans = self._orphans()
        now = time.monotonic()
        for command in ended:
            left = orphans.get(command.marker, []) + orphans.get(b"", [])
            if not left:
                self._report(command)
            elif not command.stopping:
                command.stopping, command.deadline = True, now + command.grace_s
                self._signal(command, signal.SIGTERM, left)
        for command in list(self.commands.values()):
            if command.stopping and command.deadline <= now:
                self._signal(command, signal.SIGKILL, orphans.get(command.marker, []) + orphans.get(b"", []))
                command.deadline = now + KILL_ROUND_S

    def _stop(self, command: Command, kill: bool) -> None:
        """`stop`: SIGTERM now, SIGKILL rounds after the grace period; `kill`: SIGKILL rounds now."""
        if kill:
            command.stopping, command.deadline = True, time.monotonic()
            self._settle()
        elif not command.stopping:
            command.stopping, command.deadline = True, time.monotonic() + command.grace_s
            orphans = self._orphans()
            self._signal(command, signal.SIGTERM, orphans.get(command.marker, []) + orphans.get(b"", []))

    def _orphans(self) -> dict[bytes, list[int]]:
        """The host's children that lead no running command, by the marker of the command they belong to; b"" for
        those that no running command claims."""
        if not LINUX:
            return {}  # no subreaper: orphans went to init
        if CHILDREN_FILES:
            with open(self.own_children, "rb") as file:
                pids = [int(pid) for pid in file.read().split()]
        else:
            pids = _children_by_parent().get(os.getpid(), [])
        running = {command.marker for command in self.commands.values()}
        orphans: dict[bytes, list[int]] = {}
        for pid in pids:
            if pid in self.leaders or pid in self.unkillable:
                continue  # no orphan, or none that anything here could stop: no command waits for it
            if pid not in self.markers:
                self.markers[pid] = _marker_of(pid)
            marker = self.markers[pid]
            orphans.setdefault(marker if marker in running else b"", []).append(pid)
        return orphans

    def _signal(self, command: Command, signum: int, orphans: list[int]) -> None:
        """Signal the command's process group, its leader, the orphans given and all their descendants."""
        roots = [command.leader, *orphans] if command.leader else orphans
        if command.leader:
            _send(os.killpg, command.leader, signum)  # only while the leader is unreaped: its pid is still ours
        for pid in roots + _descendants(roots):
            if not _send(os.kill, pid, signum) and pid in orphans:
                self.unkillable.add(pid)

    def shut_down(self) -> None:
        """Stop everything below the host (SIGTERM, SIGKILL after the longest grace period asked for), then exit."""
        deadline = time.monotonic() + max((command.grace_s for command in self.commands.values()), default=0.0)
        self._signal_everything(signal.SIGTERM)
        while self._children_left() and (left_s := deadline - time.monotonic()) > 0:
            self._wait_for_signal(left_s)
        while self._children_left():
            self._signal_everything(signal.SIGKILL)
            self._wait_for_signal(KILL_ROUND_S)
        os._exit(0)

    def _wait_for_signal(self, timeout_s: float) -> None:
        if select.select([self.wake_r], [], [], timeout_s)[0]:
            os.read(self.wake_r, 4096)

    def _signal_everything(self, signum: int) -> None:
        for command in self.commands.values():
            if command.leader:
                _send(os.killpg, command.leader, signum)
        if LINUX:
            for pid in _descendants([os.getpid()]):
                _send(os.kill, pid, signum)

    def _children_left(self) -> bool:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            self.leaders.pop(pid, None)


def _receive(channel: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the descriptors it carries, without waiting (socket.recv_fds ignores its flags before
    Python 3.12)."""
    fds = array.array("i")
    flags = socket.MSG_DONTWAIT | CMSG_CLOEXEC
    message, ancillary, _, _ = channel.recvmsg(MESSAGE_BYTES, socket.CMSG_LEN(3 * fds.itemsize), flags)
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _marker_of(pid: int) -> bytes:
    """The COMMAND_MARKER in a process's environment; b"" if it has none (or is gone, or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = b"\0" + file.read()
    except OSError:
        return b""
    start = environ.find(b"\0" + MARKER)
    if start < 0:
        return b""
    start += len(MARKER) + 1
    end = environ.find(b"\0", start)
    return environ[start : end if end >= 0 else len(environ)]


def _descendants(roots: list[int]) -> list[int]:
    """Every process below these; none without /proc."""
    if not LINUX:
        return []
    parents = None if CHILDREN_FILES else _children_by_parent()
    found, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        below = _children_of(pid) if parents is None else parents.get(pid, [])
        found += below
        stack += below
    return found


def _children_of(pid: int) -> list[int]:
    """The children of each of the process's threads."""
    children = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as file:
                children += (int(child) for child in file.read().split())
        except OSError:
            continue  # that thread is gone
    return children


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, the last ")" ends it.
        parent = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(name))
    return children


def _send(send: Callable[[int, int], None], target: int, signum: int) -> bool:
    """Send the signal; False if we may not."""
    try:
        send(target, signum)
    except PermissionError:
        return False
    except OSError:
        pass  # gone already
    return True


def serve(server: int) -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the server's death stops its commands
    if os.getppid() != server:
        return  # it died already: this process was reparented
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    Host(server).serve()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
