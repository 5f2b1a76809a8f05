"""Atomic file replacement: readers see the old file or the new one, never a half-written one.

The temp file is created and renamed inside an already opened directory fd (tools/fdwalk.py), so a directory
swapped for a symlink meanwhile cannot redirect the write. Temp names end in TEMP_SUFFIX, so a leftover is
recognisable. Single-file writes skip fsync, like editors' default save: the rename is what makes the swap
atomic, and ext4 (auto_da_alloc) and other journaling filesystems flush a file's data before a rename that
replaces another file is committed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

DEFAULT_FILE_MODE = 0o644
TEMP_SUFFIX = ".warpcode-tmp"
NAME_HINT_CHARS = 32  # of the target's name in its temp's name: enough to recognise, short of NAME_MAX


def temp_name(name: str, token: str) -> str:
    return f".{name[:NAME_HINT_CHARS]}.{token}{TEMP_SUFFIX}"


def write_temp_at(
    dir_fd: int,
    tmp: str,
    data: bytes,
    keep_mode: int | None = None,
    new_mode: int = DEFAULT_FILE_MODE,
) -> None:
    """Create `tmp` in `dir_fd` holding `data`, with exactly `keep_mode` (an existing file's bits) or else
    `new_mode` minus the umask (the kernel applies it, as for any new file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600 if keep_mode is not None else new_mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
        if keep_mode is not None:
            os.fchmod(fd, keep_mode)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def atomic_write_at(dir_fd: int, name: str, data: bytes, keep_mode: int | None = None) -> None:
    tmp = temp_name(name, secrets.token_hex(6))
    write_temp_at(dir_fd, tmp, data, keep_mode)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` (in a directory of warpcode's own, not the workspace) atomically, keeping its mode."""
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            keep_mode = os.stat(path.name, dir_fd=dir_fd).st_mode & 0o777
        except FileNotFoundError:
            keep_mode = None
        atomic_write_at(dir_fd, path.name, data, keep_mode)
    finally:
        os.close(dir_fd)
