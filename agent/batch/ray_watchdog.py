"""The watchdog of a `--ray local` instance: once the batch's driver has exited, even killed by SIGKILL (when no
clean-up code of its own runs), it kills every process of the instance and removes the instance's token file.

    python -I -S ray_watchdog.py DRIVER_PID TOKEN_FILE     (stdin: a pipe whose other end only the driver holds)

Ray ties its head processes (GCS, raylet) to the driver with the kernel's parent-death signal, but not what they
start: its dashboard and runtime-env agents noticed that their raylet was gone a minute later, and the commands a
job was running (in sessions of their own, whose guard went with its Ray worker) never did. Two marks find them
in /proc. Ray's processes keep their logs open in the session folder, named after its start time and the
driver's pid (/tmp/ray/session_DATE_TIME_PID/; one started before the watchdog, a `ray start` cluster that once
had the same pid, is not the batch's); their environment is no mark, overwritten by their process titles. The
jobs' commands keep the instance's environment, whose RAY_AUTH_TOKEN_PATH=TOKEN_FILE is unique to it
(local_ray.py). The driver's end of the pipe closes when the driver exits, however it exits: the watchdog reads
end-of-file. Standard library only, started with -I -S: a few milliseconds of CPU.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

PASSES = 5  # what is being killed may start another process meanwhile (a raylet its workers): look again
PAUSE_S = 0.2
SESSION_TIME = "%Y-%m-%d_%H-%M-%S_%f"  # in Ray's session folder names


def instance_processes(driver: int, since: datetime, marker: bytes) -> list[int]:
    """The pids of the processes with a file open in a Ray session folder of `driver` started `since`, or whose
    environment holds `marker` (a whole VARIABLE=VALUE); neither this one nor the driver (alive after a clean
    stop: it keeps its own logs there)."""
    session = re.compile(rf"/session_(\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+)_{driver}/")

    def ours(path: str) -> bool:
        found = session.search(path)
        return found is not None and datetime.strptime(found[1], SESSION_TIME) >= since

    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (os.getpid(), driver):
            continue
        try:
            if marker in Path("/proc", name, "environ").read_bytes().split(b"\0") or any(
                ours(os.readlink(f"/proc/{name}/fd/{fd}")) for fd in os.listdir(f"/proc/{name}/fd")
            ):
                found.append(int(name))
        except OSError:
            continue  # gone, or another user's
    return found


def main(driver: int, token_file: str) -> None:
    since = datetime.now() - timedelta(seconds=1)  # Ray names its session in local time, to the microsecond
    while sys.stdin.buffer.read(4096):  # nothing is sent: this waits for end-of-file, the driver gone
        pass
    marker = f"RAY_AUTH_TOKEN_PATH={token_file}".encode()
    for _ in range(PASSES):
        pids = instance_processes(driver, since, marker)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):  # exited meanwhile
                os.kill(pid, signal.SIGKILL)
        time.sleep(PAUSE_S)
    Path(token_file).unlink(missing_ok=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
