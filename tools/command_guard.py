"""The guard host and its guards: nothing a command starts outlives the command, even when warpcode dies.

    python -I -S command_guard.py SERVER_PID        (stdin: a Unix socket to the server)

tools/process.py starts one guard host per server process, standard library only. For each command the server
sends `run N` with three descriptors: a file holding the request (argv, cwd, environment, grace period), the
output pipe and a status pipe. The host, single-threaded, forks a guard for it: safe, and about 3 ms of CPU in
all per command where starting a Python for each took 12 ms. `stop N` and `kill N` send that guard SIGTERM or
SIGKILL. When the server goes away (its end of the socket closes, or its death signals the host), the host exits.

A guard asks for SIGTERM when the host dies, becomes a child subreaper (orphaned descendants of the command, such
as daemons that called setsid or forked twice, are reparented to it rather than to init) and starts the command
in a new session. When the command exits, or the guard gets SIGTERM, every process left in the guard's subtree
gets SIGTERM, then SIGKILL after the grace period; the guard reaps them all, writes the command's exit code (or
minus the signal that killed it) to the status pipe and exits. A command that cannot be started exits with 127
and says why in its output, as in the shell. Should a guard be killed itself, the server stops what carries its
command's marker. Linux gives the guard its parent-death signal, subreaper and /proc; elsewhere it only stops
the command's process group.
"""

import ctypes
import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys
import time

LINUX = sys.platform.startswith("linux")
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
WATCHED = {signal.SIGCHLD, *STOP_SIGNALS}
KILL_ROUND_S = 0.05  # between SIGKILL rounds, while processes are still being forked or reparented to us
CANNOT_RUN = 127
RESET = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them, and ignored signals stay ignored across exec
STATUS_FD = 3  # the guard's status pipe, once its descriptors are laid out
MESSAGE_BYTES = 64


_PRCTL = ctypes.CDLL(None).prctl if LINUX else None  # looked up once, in the host


def _prctl(option: int, value: int) -> None:
    if _PRCTL is not None:
        _PRCTL(option, value, 0, 0, 0)


def _die_with_parent(parent: int) -> None:
    """SIGTERM when `parent` dies; exit now if it already has (then this process was reparented)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(128 + signal.SIGTERM)


def serve(server: int) -> None:
    _die_with_parent(server)
    # A collection in a guard would touch, and so copy, every page it shares with the host: guards never collect.
    gc.disable()
    channel = socket.socket(fileno=0)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)  # a guard's exit wakes the select below, to reap it
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    guards: dict[bytes, int] = {}  # command number -> its guard's pid, until reaped (so never a reused pid)
    while True:
        ready, _, _ = select.select([channel, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _reap_guards(guards)
        if channel not in ready:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(channel, MESSAGE_BYTES, 3)
        except ConnectionError:
            message = b""
        if not message:
            return  # the server is gone; our exit tells the guards (their parent-death signal)
        verb, number = message.split()
        if verb == b"run":
            guards[number] = _fork_guard(fds, closing=(channel.fileno(), wake_r, wake_w))
        elif number in guards:
            os.kill(guards[number], signal.SIGKILL if verb == b"kill" else signal.SIGTERM)


def _reap_guards(guards: dict[bytes, int]) -> None:
    numbers = {pid: number for number, pid in guards.items()}
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        guards.pop(numbers.get(pid, b""), None)


def _fork_guard(fds: list[int], closing: tuple[int, ...]) -> int:
    host = os.getpid()
    pid = os.fork()
    if pid != 0:
        for fd in fds:
            os.close(fd)
        return pid
    try:
        request, output, status = fds
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        with os.fdopen(request, "rb") as file:
            spec = json.loads(file.read())
        _lay_out_descriptors(output, status)
        Guard(spec["argv"], spec["cwd"], spec["env"], spec["grace_s"]).run(host)
    except BaseException as error:  # a guard that fails must still never return into the host
        os.write(2, f"warpcode: the command guard failed: {error!r}\n".encode())
    os._exit(CANNOT_RUN)


def _lay_out_descriptors(output: int, status: int) -> None:
    """stdin /dev/null, stdout and stderr the output pipe, the status pipe at STATUS_FD, nothing else open."""
    null = os.open(os.devnull, os.O_RDONLY)
    # Out of the way first: the descriptors received may have any number, 0 to STATUS_FD included.
    output, status, null = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, STATUS_FD + 1) for fd in (output, status, null))
    for source, target in ((null, 0), (output, 1), (output, 2)):
        os.dup2(source, target)  # inheritable, unlike the rest
    os.dup2(status, STATUS_FD, inheritable=False)
    os.closerange(STATUS_FD + 1, os.sysconf("SC_OPEN_MAX"))


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


def _signal_subtree(leader: int, signum: int) -> None:
    """Signal every process below this one; without /proc, the leader's process group."""
    if not LINUX:
        targets = [(os.killpg, leader)]
    else:
        children, targets, stack = _children_by_parent(), [], [os.getpid()]
        while stack:
            below = children.get(stack.pop(), [])
            targets += ((os.kill, pid) for pid in below)
            stack += below
    for send, target in targets:
        try:
            send(target, signum)
        except OSError:
            continue  # gone already


class Guard:
    def __init__(self, argv: list[str], cwd: str, env: dict[str, str], grace_s: float) -> None:
        self.argv, self.cwd, self.env, self.grace_s = argv, cwd, env, grace_s
        self.leader = 0
        self.status: int | None = None  # the leader's wait status, once reaped

    def run(self, host: int) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)  # from here on they wait for sigwaitinfo, none is lost
        _die_with_parent(host)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        try:
            os.chdir(self.cwd)  # the command's working directory is the guard's
        except OSError as error:
            self._cannot_run(f"cannot run the command in {self.cwd}: {error.strerror}")
        try:
            self.leader = self._spawn()
        except OSError as error:
            self._cannot_run(f"cannot run {self.argv[0]}: {error.strerror}")
        self._wait()
        self._stop_everything()
        assert self.status is not None  # every child was reaped, the leader too
        self._report(os.waitstatus_to_exitcode(self.status))

    def _spawn(self) -> int:
        """Start the command in a new session, with the signal state of a fresh process, searching the PATH of
        its environment as execvpe does. posix_spawn (a vfork) takes a third of a fork's time; the price is no
        parent-death signal for the leader, which the server's sweep of the command's marker makes up for."""
        program = self.argv[0]
        names = [program] if "/" in program else [f"{folder}/{program}" for folder in os.get_exec_path(self.env)]
        errors: list[OSError] = []
        for name in names:
            try:
                return os.posix_spawn(name, self.argv, self.env, setsid=True, setsigmask=(), setsigdef=RESET)
            except OSError as error:
                errors.append(error)
        raise next((error for error in errors if not isinstance(error, FileNotFoundError)), errors[-1])

    def _cannot_run(self, reason: str) -> None:
        os.write(2, f"warpcode: {reason}\n".encode())
        self._report(CANNOT_RUN)

    def _report(self, exit_code: int) -> None:
        os.write(STATUS_FD, b"%d\n" % exit_code)
        os._exit(0)

    def _wait(self) -> None:
        """Until the leader has exited or the guard is asked to stop."""
        while self.status is None:
            signum = signal.sigwaitinfo(WATCHED).si_signo
            self._reap()
            if signum in STOP_SIGNALS:
                return

    def _reap(self) -> bool:
        """Collect exited children; True while any is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.leader:
                self.status = status

    def _stop_everything(self) -> None:
        if not self._reap():
            return  # nothing was left behind: the common case costs no scan of /proc
        _signal_subtree(self.leader, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while self._reap() and (left_s := deadline - time.monotonic()) > 0:
            signal.sigtimedwait({signal.SIGCHLD}, left_s)
        while self._reap():
            _signal_subtree(self.leader, signal.SIGKILL)
            signal.sigtimedwait({signal.SIGCHLD}, KILL_ROUND_S)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
