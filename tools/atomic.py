"""Atomic file replacement: readers see the old file or the new one, never a half-written one.

No fsync, like editors' default save: the rename is what makes the swap atomic, and ext4 (auto_da_alloc) and
other journaling filesystems flush a file's data before a rename that replaces another file is committed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

DEFAULT_FILE_MODE = 0o644


def write_temp(path: Path, data: bytes, mode: int | None = None) -> Path:
    """Write `data` to a temp file beside `path` (same filesystem, so os.replace is atomic) and return it.

    The mode is the existing file's when there is one, so executables stay executable.
    """
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = DEFAULT_FILE_MODE & ~umask
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".warpcode-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    tmp = write_temp(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
