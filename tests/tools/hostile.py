"""Helpers of the hostile-filesystem tests: a process swapping a directory for a symlink to outside."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
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
