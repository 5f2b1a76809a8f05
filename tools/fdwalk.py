"""Opening paths inside a root one component at a time from the root's directory fd, following no symlink.

A path checked by name and opened later by name can be swapped in between (a directory replaced by a symlink
to elsewhere). Walking the already-resolved real path with O_NOFOLLOW on every component turns such a swap into
a PathChanged error instead of an open outside the root. Files are opened with O_NONBLOCK and checked with
lstat before and fstat after the open, so a FIFO, socket or device is refused without ever blocking.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence

from warpcode.tools import errors

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SWAPPED = (errno.ENOTDIR, errno.ELOOP)
_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device"}


def open_dir(root: str, parts: Sequence[str], shown: str, create: bool = False) -> int:
    """fd of the directory root/parts[0]/.../parts[-1]; with `create`, missing directories are made on the way."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in parts:
        try:
            child = _open_child_dir(fd, part, shown, create)
        finally:
            os.close(fd)
        fd = child
    return fd


def _open_child_dir(parent: int, name: str, shown: str, create: bool) -> int:
    if name in ("", ".", ".."):
        raise errors.InvalidArgument(f"{shown!r}: the path component {name!r} is not allowed here.")
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise errors.FileNotFound(shown) from None
    except OSError as exc:
        if exc.errno in _SWAPPED:
            raise _not_a_directory(parent, name, shown) from None
        raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)
    return _open_child_dir(parent, name, shown, create=False)


def _not_a_directory(parent: int, name: str, shown: str) -> errors.ToolError:
    """The real path has no symlink in it (it was resolved), so a symlink found now was swapped in meanwhile."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            return errors.PathChanged(shown)
    return errors.InvalidArgument(f"{shown!r} cannot be reached: {name!r} on its path is a file, not a directory.")


def open_regular(dir_fd: int, name: str, shown: str) -> int:
    """A read-only fd of the regular file `name` in `dir_fd`; anything else is refused without blocking."""
    check_regular(_lstat(dir_fd, name, shown), shown)  # a device is refused before it is even opened
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise errors.FileNotFound(shown) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink or a socket swapped in after the lstat
            raise errors.PathChanged(shown) from None
        raise
    try:
        check_regular(os.fstat(fd), shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def existing_mode(dir_fd: int, name: str, shown: str) -> int | None:
    """Permission bits of the regular file `name` in `dir_fd`, None when nothing is there; refuses anything else."""
    try:
        found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    check_regular(found, shown)
    return stat.S_IMODE(found.st_mode) & 0o777  # setuid/setgid/sticky are never carried onto a rewritten file


def check_regular(found: os.stat_result, shown: str) -> None:
    mode = found.st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        raise errors.PathChanged(shown)
    if stat.S_ISDIR(mode):
        raise errors.NotAFile(shown)
    raise errors.SpecialFile(shown, _KINDS.get(stat.S_IFMT(mode), "a device"))


def _lstat(dir_fd: int, name: str, shown: str) -> os.stat_result:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise errors.FileNotFound(shown) from None
