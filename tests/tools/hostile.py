"""Helpers of the hostile-filesystem tests: a process swapping a directory for a symlink to outside, patches of
many files, and killing a process at a chosen moment."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# Swaps two names atomically (renameat2 RENAME_EXCHANGE), as fast as it can: the directory and the symlink to
# outside trade places, so the name is always one of the two, never missing.
SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
first, second, seconds = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + seconds
while time.monotonic() < end:
    if libc.renameat2(-100, first, -100, second, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


@contextlib.contextmanager
def swapping(directory: Path, outside: Path, seconds: float) -> Iterator[subprocess.Popen]:
    """A process flipping `directory` with a symlink to `outside` (and back) for `seconds`; at the end
    `directory` is the directory again."""
    link = directory.with_name(directory.name + ".link")
    link.symlink_to(outside, target_is_directory=True)
    process = subprocess.Popen([sys.executable, "-c", SWAPPER, str(directory), str(link), str(seconds)])
    try:
        while not directory.is_symlink():  # started swapping
            assert process.poll() is None, "the swapper failed"
        yield process
    finally:
        process.kill()
        process.wait()
        if directory.is_symlink():
            directory.rename(link.with_name("swap"))
            link.rename(directory)
            link.with_name("swap").rename(link)
        link.unlink()


def many_files(root: Path, count: int, dirs: int = 20) -> list[str]:
    """`count` files d<k>/f<n>.txt holding "old <n>"; their relative paths in order."""
    rels = [f"d{n % dirs}/f{n}.txt" for n in range(count)]
    for n, rel in enumerate(rels):
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_text(f"old {n}\n")
    return rels


def patch_of(rels: list[str]) -> str:
    """A git diff turning every "old <n>" into "new <n>"."""
    return "".join(
        f"diff --git a/{rel} b/{rel}\n--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-old {n}\n+new {n}\n"
        for n, rel in enumerate(rels)
    )


def patched(root: Path, rels: list[str]) -> int:
    return sum((root / rel).read_text() == f"new {n}\n" for n, rel in enumerate(rels))


def temp_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.name.endswith(".warpcode-tmp")]


def kill_when(process: subprocess.Popen, ready: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """SIGKILL `process` the moment `ready()` holds (polled without pause). False when it ended first."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None:
            return False
        assert time.monotonic() < deadline, "the process never reached the moment to kill it"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return True
