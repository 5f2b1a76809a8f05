"""Atomic file replacement: readers see the old file or the new one, never a half-written one.

The temp file is created and renamed inside an already opened directory fd (tools/fdwalk.py), so a directory
swapped for a symlink meanwhile cannot redirect the write. Temp names end in TEMP_SUFFIX, so a leftover is
recognisable. Single-file writes skip fsync, like editors' default save: the rename is what makes the swap
atomic, and ext4 (auto_da_alloc) and other journaling filesystems flush a file's data before a rename that
replaces another file is committed. `durable=True` (the patch journal) fsyncs the file and its directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

DEFAULT_FILE_MODE = 0o644
TEMP_SUFFIX = ".warpcode-tmp"
NAME_HINT_CHARS = 32  # of the target's name in its temp's name: enough to recognise, short of NAME_MAX
datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def temp_name(name: str, token: str) -> str:
    return f".{name[:NAME_HINT_CHARS]}.{token}{TEMP_SUFFIX}"


def write_temp_at(
    dir_fd: int,
    tmp: str,
    data: bytes,
    keep_mode: int | None = None,
    new_mode: int = DEFAULT_FILE_MODE,
    sync: bool = False,
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
        if sync:
            datasync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)


def atomic_write_at(
    dir_fd: int,
    name: str,
    data: bytes,
    keep_mode: int | None = None,
    durable: bool = False,
    new_mode: int = DEFAULT_FILE_MODE,
) -> None:
    """Replace `name` in `dir_fd` by a file holding `data`, its mode as `write_temp_at` sets it."""
    tmp = temp_name(name, secrets.token_hex(6))
    write_temp_at(dir_fd, tmp, data, keep_mode, new_mode, sync=durable)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        os.fsync(dir_fd)


def atomic_write(path: Path, data: bytes, durable: bool = False, mode: int | None = None) -> None:
    """Replace `path` (in a directory of warpcode's own, not the workspace) atomically, with `mode` when given,
    else keeping the file's mode."""
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        keep_mode = mode
        if keep_mode is None:
            with contextlib.suppress(FileNotFoundError):
                keep_mode = os.stat(path.name, dir_fd=dir_fd).st_mode & 0o777
        atomic_write_at(dir_fd, path.name, data, keep_mode, durable)
    finally:
        os.close(dir_fd)
