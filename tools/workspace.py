"""The workspace: a root directory that every tool stays inside."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from warpcode.tools import errors
from warpcode.tools.atomic import atomic_write
from warpcode.tools.ignore import IgnoreRules
from warpcode.tools.textcodec import SNIFF_BYTES, TextFile, decode, looks_binary
from warpcode.tools.walk import WalkedFile, walk_files

MAX_TEXT_BYTES = 64 * 1024 * 1024
PROTECTED_DIRS = (".git", ".warpcode")


class Workspace:
    """Resolves paths, refusing any that leave the root, and reads/writes text files without corrupting them.

    `state_dir` is where warpcode keeps its own data (checkpoints, caches); default `<root>/.warpcode`.
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
        self.state_dir = Path(state_dir).resolve() if state_dir else self.root / ".warpcode"
        self._extra_ignores = tuple(extra_ignores)
        self._ignore: IgnoreRules | None = None

    # -- paths ---------------------------------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """Absolute real path of `path` (relative to the root, or absolute), refused when it leaves the root.

        Checked twice: lexically (`..`, absolute paths) and after resolving symlinks, so neither a symlinked
        file nor a symlinked parent directory can lead outside.
        """
        raw = os.fspath(path)
        if "\0" in raw:
            raise errors.InvalidArgument(f"Path {raw!r} contains a NUL byte.")
        joined = os.path.normpath(os.path.join(self.root, raw))
        if not self._inside(joined):
            how = "absolute path" if os.path.isabs(raw) else "'..' leads out"
            raise errors.PathOutsideWorkspace(raw, str(self.root), how)
        real = os.path.realpath(joined)
        if not self._inside(real):
            raise errors.PathOutsideWorkspace(raw, str(self.root), f"a symlink points to {real}")
        return Path(real)

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
        """Create the state directory; its `.gitignore` of `*` keeps it out of the user's `git status`."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        marker = self.state_dir / ".gitignore"
        if not marker.exists():
            marker.write_text("*\n", encoding="utf-8")
        return self.state_dir

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

    # -- text I/O ------------------------------------------------------------------------------------------

    def read_text(self, path: str | os.PathLike[str], max_bytes: int = MAX_TEXT_BYTES) -> TextFile:
        target = self.resolve(path)
        shown = os.fspath(path)
        if target.is_dir():
            raise errors.NotAFile(shown)
        try:
            size = target.stat().st_size
            if size > max_bytes:
                raise errors.FileTooLarge(shown, size, max_bytes)
            data = target.read_bytes()
        except FileNotFoundError:
            raise errors.FileNotFound(shown) from None
        if looks_binary(data[:SNIFF_BYTES]):
            raise errors.BinaryFile(shown)
        return decode(data)

    def write_text(self, path: str | os.PathLike[str], text: str, like: TextFile | None = None) -> Path:
        """Write atomically, in the encoding/newline style of `like` (the file's previous content)."""
        target = self.resolve_for_write(path)
        if target.is_dir():
            raise errors.NotAFile(os.fspath(path))
        style = like or TextFile(text="")
        atomic_write(target, style.encode(text))
        return target
