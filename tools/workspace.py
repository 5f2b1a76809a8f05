"""The workspace: a root directory that every tool stays inside, and where warpcode keeps its state for it.

Paths are checked by name (`resolve`), then opened through directory fds along the resolved real path
(tools/fdwalk.py), so a swap between the check and the open fails instead of leading outside. The workspace
also remembers a fingerprint of each file as the agent last saw it (read_file, its own writes), so a write tool
can refuse to overwrite a file changed behind the agent's back.

Warpcode's own state (checkpoints, caches) is never read from a place the repository can plant it (README:
guarantees): it lives under the state home, keyed by the workspace's real path (`workspace_state_dir`), and each
use first checks that the folder is a private directory of our own user (`ensure_private_dir`). The legacy
`<root>/.warpcode/` is never read; it stays a protected path that tools do not write and listings skip.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from warpcode.tools import errors, fdwalk
from warpcode.tools.atomic import atomic_write_at
from warpcode.tools.ignore import IgnoreRules
from warpcode.tools.state_home import STATE_HOME_VARIABLE, default_state_home
from warpcode.tools.textcodec import SNIFF_BYTES, TextFile, decode, looks_binary
from warpcode.tools.walk import WalkedFile, walk_files

MAX_TEXT_BYTES = 64 * 1024 * 1024
PROTECTED_DIRS = (".git", ".warpcode")
PRIVATE_DIR_MODE = 0o700
STATE_DIR_ADVICE = f"or point {STATE_HOME_VARIABLE} (--state-dir) at another folder"


class UnsafeStateDir(PermissionError):
    """A state directory that is not a private directory of ours: refused before anything is read or written."""


def workspace_state_dir(home: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """Where warpcode keeps one workspace's state: `<home>/workspaces/<basename>-<sha256 of the real root, 16 hex>`
    (the basename for people, the hash so that two projects of one name never share checkpoints)."""
    real = Path(root).resolve()
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return Path(home) / "workspaces" / f"{real.name}-{digest}"


def ensure_private_dir(path: Path) -> Path:
    """Make `path` (its missing parents too) with mode 0700, or check the existing one: it must be a real
    directory (not a symlink) owned by our effective user; a wider mode is tightened to 0700. Everything warpcode
    writes below such a directory is then out of other users' reach, whatever the umask gave the files (git's
    objects and index included). Anything else raises UnsafeStateDir, naming the path and what to do."""
    created = []
    missing = path
    while not os.path.lexists(missing):
        created.append(missing)
        missing = missing.parent
    for folder in reversed(created):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile: checked below all the same
            os.mkdir(folder, PRIVATE_DIR_MODE)
    for folder in [*reversed(created[1:]), path]:
        _check_private(folder)
    return path


def _check_private(folder: Path) -> None:
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeStateDir(
            f"{folder} is a symlink; warpcode keeps its state only in a real directory: remove the link, "
            f"{STATE_DIR_ADVICE}."
        )
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeStateDir(
            f"{folder} is not a directory; warpcode keeps its state there: move it away, {STATE_DIR_ADVICE}."
        )
    if info.st_uid != os.geteuid():
        raise UnsafeStateDir(
            f"{folder} belongs to another user (uid {info.st_uid}); warpcode keeps its state only in a directory "
            f"of its own user: remove it, {STATE_DIR_ADVICE}."
        )
    if info.st_mode & 0o077:
        os.chmod(folder, PRIVATE_DIR_MODE)


def fingerprint_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Workspace:
    """Resolves paths, refusing any that leave the root, and reads/writes text files without corrupting them.

    `state_dir` is where warpcode keeps its own data for this workspace (checkpoints, caches); by default
    `workspace_state_dir(default_state_home(), root)`. Its last component is kept as given rather than resolved,
    so that a symlink there is seen, and refused, instead of followed.
    """

    # A subclass whose read_text/write_text reach text kept elsewhere (an editor's unsaved buffers) sets this:
    # apply_patch then reads and writes the files it modifies through them, one file at a time after every hunk
    # of every file has been validated, instead of its all-at-once commit of temporary files on the disk.
    text_kept_elsewhere = False

    def __init__(
        self,
        root: str | os.PathLike[str],
        state_dir: str | os.PathLike[str] | None = None,
        extra_ignores: Iterable[str] = (),
    ) -> None:
        root_path = Path(root)
        if not root_path.is_dir():
            raise errors.InvalidArgument(f"Workspace root {str(root)!r} is not a directory.")
        self.root = root_path.resolve()
        chosen = Path(os.path.abspath(state_dir or workspace_state_dir(default_state_home(), self.root)))
        self.state_dir = chosen.parent.resolve() / chosen.name
        self._extra_ignores = tuple(extra_ignores)
        self._ignore: IgnoreRules | None = None
        self._seen: dict[Path, str] = {}  # real path -> fingerprint of the content the agent last saw

    # -- paths ---------------------------------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """Absolute real path of `path` (relative to the root, or absolute), refused when it leaves the root.

        Checked twice: lexically (`..`, absolute paths) and after resolving symlinks, so neither a symlinked
        file nor a symlinked parent directory can lead outside.
        """
        raw = os.fspath(path)
        joined = self._lexical(raw)
        try:
            real = os.path.realpath(joined)
        except OSError:  # a symlink on the path vanished between realpath's lstat and its readlink
            raise errors.PathChanged(raw) from None
        if not self._inside(real):
            raise errors.PathOutsideWorkspace(raw, str(self.root), f"a symlink points to {real}")
        return Path(real)

    def _lexical(self, raw: str) -> str:
        """The absolute normalised path `raw` names, symlinks not resolved; refused when `..` or an absolute
        path leads out of the root."""
        if "\0" in raw:
            raise errors.InvalidArgument(f"Path {raw!r} contains a NUL byte.")
        joined = os.path.normpath(os.path.join(self.root, raw))
        if not self._inside(joined):
            how = "absolute path" if os.path.isabs(raw) else "'..' leads out"
            raise errors.PathOutsideWorkspace(raw, str(self.root), how)
        return joined

    def _inside(self, absolute: str) -> bool:
        root = str(self.root)
        return absolute == root or absolute.startswith(root.rstrip(os.sep) + os.sep)

    def rel(self, absolute: str | os.PathLike[str]) -> str:
        """Workspace-relative POSIX form of an absolute path inside the root ('.' for the root)."""
        return Path(os.path.relpath(absolute, self.root)).as_posix()

    def resolve_for_write(self, path: str | os.PathLike[str]) -> Path:
        target = self.resolve(path)
        first = self.rel(target).split("/")[0]
        if first in PROTECTED_DIRS or self._inside_state_dir(target):
            raise errors.ProtectedPath(os.fspath(path))
        return target

    def _inside_state_dir(self, target: Path) -> bool:
        return target == self.state_dir or self.state_dir in target.parents

    def ensure_state_dir(self) -> Path:
        """The state directory, created or checked before each use (see `ensure_private_dir`)."""
        return ensure_private_dir(self.state_dir)

    # -- ignore rules and traversal ------------------------------------------------------------------------

    @property
    def ignore_rules(self) -> IgnoreRules:
        if self._ignore is None:
            extra = list(self._extra_ignores)
            if self._inside(str(self.state_dir)) and self.state_dir != self.root:
                extra.append("/" + self.rel(self.state_dir) + "/")
            self._ignore = IgnoreRules(self.root, extra)
        return self._ignore

    def is_ignored(self, path: str | os.PathLike[str]) -> bool:
        target = self.resolve(path)
        if target == self.root:
            return False
        return self.ignore_rules.is_ignored(self.rel(target), target.is_dir())

    def walk(self, start: str | os.PathLike[str] = ".") -> Iterator[WalkedFile]:
        """Non-ignored files under `start` (a directory, or a single file)."""
        target = self.resolve(start)
        rel = "" if target == self.root else self.rel(target)
        if target.is_file():
            yield WalkedFile(rel=rel, path=str(target), size=target.stat().st_size)
            return
        if not target.is_dir():
            raise errors.FileNotFound(os.fspath(start))
        yield from walk_files(str(self.root), self.ignore_rules, rel)

    # -- file I/O through directory fds -----------------------------------------------------------------

    @contextlib.contextmanager
    def open_parent_dir(
        self, target: str | os.PathLike[str], shown: str, create: bool = False
    ) -> Iterator[tuple[int, str]]:
        """(fd of the directory holding `target`, target's name in it), reached from the root following no
        symlink; `target` is an absolute normalised path inside the root (`resolve`'s). With `create`, missing
        directories are made."""
        root = str(self.root)
        absolute = os.fspath(target)
        if absolute == root:
            raise errors.NotAFile(shown)
        *parents, name = absolute[len(root.rstrip(os.sep)) + 1 :].split(os.sep)
        dir_fd = fdwalk.open_dir(root, parents, shown, create)
        try:
            yield dir_fd, name
        finally:
            os.close(dir_fd)

    def open_for_read(self, path: str | os.PathLike[str]) -> BinaryIO:
        """The regular file at `path`, opened for reading; a directory, FIFO, socket or device is refused.

        Opened along the path as written when no symlink is on it (so it cannot lead outside, and no realpath is
        needed: search opens thousands of files); else along the real path, once `resolve` checked it."""
        shown = os.fspath(path)
        try:
            fd = self._open_regular(self._lexical(shown), shown)
        except errors.PathChanged:  # a symlink on the path, legitimate or swapped in: resolve it and check
            fd = self._open_regular(self.resolve(path), shown)
        return os.fdopen(fd, "rb")

    def _open_regular(self, target: str | os.PathLike[str], shown: str) -> int:
        with self.open_parent_dir(target, shown) as (dir_fd, name):
            return fdwalk.open_regular(dir_fd, name, shown)

    def read_bytes(self, path: str | os.PathLike[str], max_bytes: int = MAX_TEXT_BYTES) -> bytes:
        with self.open_for_read(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise errors.FileTooLarge(os.fspath(path), size, max_bytes)
            data = handle.read(max_bytes + 1)  # one byte more catches a file that grew meanwhile
        if len(data) > max_bytes:
            raise errors.FileTooLarge(os.fspath(path), len(data), max_bytes)
        return data

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> Path:
        """Replace or create the file atomically, keeping an existing file's permission bits."""
        target = self.resolve_for_write(path)
        shown = os.fspath(path)
        with self.open_parent_dir(target, shown, create=True) as (dir_fd, name):
            atomic_write_at(dir_fd, name, data, fdwalk.existing_mode(dir_fd, name, shown))
        return target

    # -- what the agent last saw -----------------------------------------------------------------------

    def fingerprint_of(self, data: bytes) -> str:
        """The fingerprint of a file written with `data`, as a later read_text will report it."""
        return fingerprint_bytes(data)

    def remember(self, path: str | os.PathLike[str], fingerprint: str) -> None:
        self._seen[self.resolve(path)] = fingerprint

    def forget(self, path: str | os.PathLike[str]) -> None:
        self._seen.pop(self.resolve(path), None)

    def check_unchanged(self, path: str | os.PathLike[str], current: str) -> None:
        """Refuse (StaleFile) when the file's current fingerprint differs from the one the agent last saw.
        A file the agent never read nor wrote is not refused."""
        seen = self._seen.get(self.resolve(path))
        if seen is not None and seen != current:
            raise errors.StaleFile(os.fspath(path))

    # -- text I/O ------------------------------------------------------------------------------------------

    def read_text(self, path: str | os.PathLike[str], max_bytes: int = MAX_TEXT_BYTES) -> TextFile:
        """The file's text, with its fingerprint; remembering it as seen is the caller's choice (`remember`)."""
        data = self.read_bytes(path, max_bytes)
        if looks_binary(data[:SNIFF_BYTES]):
            raise errors.BinaryFile(os.fspath(path))
        text_file = decode(data)
        text_file.fingerprint = fingerprint_bytes(data)
        return text_file

    def write_text(self, path: str | os.PathLike[str], text: str, like: TextFile | None = None) -> Path:
        """Write atomically, in the encoding/newline style of `like` (the file's previous content), and remember
        what was written as seen."""
        data = (like or TextFile(text="")).encode(text)
        target = self.write_bytes(path, data)
        self._seen[target] = self.fingerprint_of(data)
        return target

    def dry_run(self) -> Workspace:
        """This workspace as it reads (an editor's buffers too), but its text writes only recorded in the copy's
        `written` (path -> text): what edit_file or write_file would do, to show before it is allowed."""
        preview = copy.copy(self)
        preview._seen = dict(self._seen)
        preview.written = {}

        def record(path: str | os.PathLike[str], text: str, like: TextFile | None = None) -> Path:
            target = preview.resolve_for_write(path)
            preview.written[target] = text
            return target

        preview.write_text = record  # type: ignore[method-assign]  # this copy only: writes become records
        return preview
