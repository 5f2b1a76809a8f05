"""The commit of apply_patch through a journal, so a multi-file patch lands whole even if the process dies midway.

One journal per state directory (`patch-journal.json`), written under an exclusive lock (`patch.lock`, flock:
the kernel releases it when its holder dies) that also serialises the patches of a workspace:
1. phase "staging": the journal lists each temp file (`.<name>.<token>-<n>.warpcode-tmp`, beside its target),
   the files to delete and the directories the patch creates; then the temps are written.
2. phase "committing": the journal is rewritten; then the deleted files are unlinked (and the directories they
   leave empty removed), then the temps renamed onto their targets; then the journal is removed.
Deletions go first, as in git, so a file can replace a directory the patch empties, and a directory a file the
patch deletes: such a target's temp is staged in the nearest directory that exists, and the directories the
target needs ("late" ones, where the deleted file was) are made after the deletions.
A patch that writes one file and nothing else needs none of this: one rename is atomic by itself, so it is
committed like write_file (`write_one`: a temp beside the target, renamed onto it, no journal and no fsync).
`recover_interrupted_patch` (run when a toolbox starts and at the start of every apply_patch) picks up a journal
a killed process left: a staging one is rolled back (its temps and new directories removed; no file had been
changed), a committing one rolled forward (the remaining renames and deletions). Either way no temp stays.

Durability: the journal is fsynced with its directory each time it is written, so it is on the disk before the
first temp (staging) and before the first rename (committing). Before the committing journal, the temps' data
is made durable (fdatasync each, or one sync() past SYNC_EACH_LIMIT files: thousands of fsyncs take seconds),
so a roll-forward after a power cut never installs a file whose data never reached the disk; after the renames,
the touched directories are fsynced the same way before the journal is removed. The removal is not fsynced: a
journal that survives a power cut rolls forward to the same files again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from warpcode.tools import errors, fdwalk
from warpcode.tools.atomic import (
    DEFAULT_FILE_MODE,
    TEMP_SUFFIX,
    atomic_write,
    atomic_write_at,
    temp_name,
    write_temp_at,
)
from warpcode.tools.workspace import Workspace

JOURNAL_NAME = "patch-journal.json"
LOCK_NAME = "patch.lock"
JOURNAL_VERSION = 1
SYNC_EACH_LIMIT = 64
_T = TypeVar("_T")


@dataclass
class FileWrite:
    rel: str  # workspace-relative POSIX path of the target
    data: bytes
    keep_mode: int | None = None  # exact permission bits (a renamed file's); None: the target's own, if any
    new_mode: int | None = None  # bits the patch asks for (the umask applies); None: keep the target's, or 0o644
    staged_in: str | None = None  # where the temp goes when it cannot go beside the target (see above)

    def exact_mode(self, existing: int | None) -> int | None:
        """Bits to set exactly on the temp given the target's `existing` bits; None: new_mode minus the umask."""
        if self.new_mode is not None:
            return None
        return self.keep_mode if self.keep_mode is not None else existing


@dataclass
class Journal:
    path: Path
    root: str
    renames: list[tuple[str, str, str]]  # (target rel, temp name, rel of the temp's directory)
    deletes: list[str]
    new_dirs: list[str]
    late_dirs: list[str]  # directories made after the deletions

    def save(self, phase: str) -> None:
        body = {"version": JOURNAL_VERSION, "phase": phase, "root": self.root, "renames": self.renames}
        body |= {"deletes": self.deletes, "new_dirs": self.new_dirs, "late_dirs": self.late_dirs}
        atomic_write(self.path, json.dumps(body).encode("utf-8"), durable=True)

    def roll_back(self, ws: Workspace) -> None:
        """Remove every temp and every directory the patch created; no target was touched yet."""
        by_directory: dict[str, list[str]] = {}
        for _, tmp, directory in self.renames:
            by_directory.setdefault(directory, []).append(tmp)
        for parent, temps in by_directory.items():
            with contextlib.suppress(OSError, errors.ToolError), _directory(ws, parent) as dir_fd:
                for tmp in temps:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp, dir_fd=dir_fd)
        for rel in sorted(self.new_dirs, key=lambda rel: rel.count("/"), reverse=True):
            parent, _, name = rel.rpartition("/")
            with contextlib.suppress(OSError, errors.ToolError), _directory(ws, parent) as dir_fd:
                os.rmdir(name, dir_fd=dir_fd)
        self.path.unlink(missing_ok=True)

    def roll_forward(self, ws: Workspace) -> list[str]:
        """Finish the renames and deletions, skipping those already done; what could not be done is returned."""
        problems: list[str] = []
        sync_each = len(self.renames) + len(self.deletes) <= SYNC_EACH_LIMIT
        for parent, entries in _grouped([(rel, "") for rel in self.deletes]).items():
            if _is_directory(ws, parent):  # else a file replaced it before an interruption: deleted already
                problems += _in_directory(ws, parent, entries, _unlink, sync_each)
                _remove_empty_dirs(ws, parent)
        for rel in self.late_dirs:
            try:
                os.close(fdwalk.open_dir(str(ws.root), rel.split("/"), rel, create=True))
            except (OSError, errors.ToolError) as exc:
                problems.append(f"{rel}: {exc}")
        by_directories: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for target, tmp, directory in self.renames:
            parent, _, name = target.rpartition("/")
            by_directories.setdefault((directory, parent), []).append((name, tmp))
        for (directory, parent), entries in by_directories.items():
            problems += _renames_between(ws, directory, parent, entries, sync_each)
        if not sync_each:
            os.sync()
        self.path.unlink(missing_ok=True)
        return problems

    @classmethod
    def load(cls, ws: Workspace) -> tuple[Journal, str] | None:
        """The journal left in the state directory and its phase; None without one (or one of another root)."""
        path = ws.state_dir / JOURNAL_NAME
        try:
            body = json.loads(path.read_bytes())
            renames = [(entry[0], entry[1], entry[2] if len(entry) > 2 else entry[0].rpartition("/")[0])
                       for entry in body["renames"]]  # fmt: skip
            journal = cls(path, body["root"], renames, body["deletes"], body["new_dirs"], body.get("late_dirs", []))
            phase = body["phase"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return (journal, phase) if journal.root == str(ws.root) else None


def commit(
    ws: Workspace,
    writes: list[FileWrite],
    deletes: list[str],
    new_dirs: list[str],
    before_renames: Callable[[], None],
    late_dirs: list[str] = (),
) -> None:
    """Write every temp and run `before_renames` (writes kept elsewhere); only when all of that succeeded delete
    `deletes`, make `late_dirs` and rename the temps into place. A failure before that leaves every file as it
    was."""
    try:
        ws.ensure_state_dir()
    except OSError as exc:
        reason = f"the state directory {ws.state_dir} for the patch journal cannot be made ({exc})."
        raise errors.PatchError(reason) from None
    with patch_lock(ws):
        recover_locked(ws)  # one left by a process killed since this patch's own check
        _commit_locked(ws, writes, deletes, new_dirs, list(late_dirs), before_renames)


def write_one(ws: Workspace, write: FileWrite) -> None:
    """Commit a patch whose only change is `write`, into a directory that exists: one atomic rename."""
    parent, _, name = write.rel.rpartition("/")
    with as_patch_error(write.rel) as shown, _directory(ws, parent) as dir_fd:
        mode = write.exact_mode(fdwalk.existing_mode(dir_fd, name, shown))  # a directory or FIFO there: refused
        atomic_write_at(dir_fd, name, write.data, mode, new_mode=write.new_mode or DEFAULT_FILE_MODE)


def _commit_locked(
    ws: Workspace,
    writes: list[FileWrite],
    deletes: list[str],
    new_dirs: list[str],
    late_dirs: list[str],
    before_renames: Callable[[], None],
) -> None:
    token = secrets.token_hex(4)
    renames = [
        (write.rel, temp_name(write.rel.rpartition("/")[2], f"{token}-{n}"), _temp_directory(write))
        for n, write in enumerate(writes)
    ]
    journal = Journal(ws.state_dir / JOURNAL_NAME, str(ws.root), renames, deletes, new_dirs, late_dirs)
    journal.save("staging")
    try:
        _stage(ws, renames, writes)
        before_renames()
    except (OSError, errors.ToolError) as exc:
        journal.roll_back(ws)
        if isinstance(exc, errors.ToolError):
            raise
        raise errors.PatchError(f"writing failed ({exc}); no file was changed.") from exc
    journal.save("committing")
    problems = journal.roll_forward(ws)
    if problems:
        raise errors.ToolError(
            f"Patch partly applied: {len(problems)} file(s) changed while it was applied and were left as they are "
            f"({'; '.join(problems[:5])}); every other file was changed. Read those files and redo their part."
        )


def _temp_directory(write: FileWrite) -> str:
    return write.rel.rpartition("/")[0] if write.staged_in is None else write.staged_in


def _stage(ws: Workspace, renames: list[tuple[str, str, str]], writes: list[FileWrite]) -> None:
    sync_each = len(writes) <= SYNC_EACH_LIMIT
    pending = [(_join(directory, tmp), write) for (_, tmp, directory), write in zip(renames, writes, strict=True)]
    for parent, entries in _grouped(pending).items():
        with as_patch_error(parent or "."), _directory(ws, parent, create=True) as dir_fd:
            for tmp, write in entries:
                existing = None  # a target replacing what the patch deletes: nothing of its own to keep
                if write.staged_in is None:
                    name = write.rel.rpartition("/")[2]
                    with as_patch_error(write.rel) as shown:
                        existing = fdwalk.existing_mode(dir_fd, name, shown)  # a directory or FIFO in the way
                mode = write.exact_mode(existing)
                write_temp_at(dir_fd, tmp, write.data, mode, write.new_mode or DEFAULT_FILE_MODE, sync=sync_each)
    if not sync_each:
        os.sync()


@contextlib.contextmanager
def patch_lock(ws: Workspace, wait: bool = True) -> Iterator[bool]:
    """Hold the workspace's patch lock; yields False when `wait` is off and another process holds it.
    The state directory must exist."""
    fd = os.open(ws.state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def recover_interrupted_patch(ws: Workspace, wait: bool = False) -> str | None:
    """Finish (or undo) a patch whose process was killed midway; says what it did, None when there was nothing.
    Without `wait`, a patch that another process is applying right now is left to it."""
    if not (ws.state_dir / JOURNAL_NAME).exists():
        return None
    with patch_lock(ws, wait) as locked:
        return recover_locked(ws) if locked else None


def recover_locked(ws: Workspace) -> str | None:
    """recover_interrupted_patch for a caller already holding the patch lock."""
    for torn in ws.state_dir.glob(f".{JOURNAL_NAME}.*{TEMP_SUFFIX}"):  # a journal killed while it was written
        torn.unlink(missing_ok=True)
    found = Journal.load(ws)
    if found is None:
        return None
    journal, phase = found
    if phase != "committing":
        journal.roll_back(ws)
        return "Undid an interrupted patch that had not changed any file yet."
    problems = journal.roll_forward(ws)
    done = f"Finished an interrupted patch: {len(journal.renames)} file(s) written, {len(journal.deletes)} deleted."
    return done + (f" Left as they are: {'; '.join(problems)}." if problems else "")


def _grouped(items: list[tuple[str, _T]]) -> dict[str, list[tuple[str, _T]]]:
    """(rel, value) pairs by directory: {directory rel: [(name, value), ...]}, in first-seen order."""
    groups: dict[str, list[tuple[str, _T]]] = {}
    for rel, value in items:
        parent, _, name = rel.rpartition("/")
        groups.setdefault(parent, []).append((name, value))
    return groups


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


@contextlib.contextmanager
def _directory(ws: Workspace, rel: str, create: bool = False) -> Iterator[int]:
    dir_fd = fdwalk.open_dir(str(ws.root), rel.split("/") if rel else [], rel or ".", create)
    try:
        yield dir_fd
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def as_patch_error(shown: str) -> Iterator[str]:
    """A tool failure inside becomes a PatchError about `shown` (nothing was changed yet)."""
    try:
        yield shown
    except errors.PatchError:
        raise
    except errors.ToolError as exc:
        raise errors.PatchError(str(exc), shown) from None


def _renames_between(
    ws: Workspace, directory: str, parent: str, entries: list[tuple[str, str]], sync: bool
) -> list[str]:
    """Rename the temps (name, tmp) of `directory` onto their targets in `parent` (most often the same one)."""
    problems: list[str] = []
    try:
        with _directory(ws, directory) as temp_fd, _directory(ws, parent) as dir_fd:
            for name, tmp in entries:
                try:
                    os.rename(tmp, name, src_dir_fd=temp_fd, dst_dir_fd=dir_fd)
                except FileNotFoundError:
                    continue  # renamed before an interruption
                except OSError as exc:  # a directory appeared at a target since it was checked, say
                    with contextlib.suppress(OSError):
                        os.unlink(tmp, dir_fd=temp_fd)
                    problems.append(f"{_join(parent, name)}: {exc.strerror}")
            if sync:
                os.fsync(dir_fd)
    except (OSError, errors.ToolError) as exc:
        problems.append(f"{parent or '.'}: {exc}")
    return problems


def _is_directory(ws: Workspace, rel: str) -> bool:
    try:
        os.close(fdwalk.open_dir(str(ws.root), rel.split("/") if rel else [], rel or "."))
    except (OSError, errors.ToolError):
        return False
    return True


def _unlink(dir_fd: int, name: str, _: str) -> None:
    with contextlib.suppress(FileNotFoundError):  # deleted before an interruption
        os.unlink(name, dir_fd=dir_fd)


def _in_directory(
    ws: Workspace, parent: str, entries: list[tuple[str, str]], step: Callable[[int, str, str], None], sync: bool
) -> list[str]:
    problems: list[str] = []
    try:
        with _directory(ws, parent) as dir_fd:
            for name, value in entries:
                try:
                    step(dir_fd, name, value)
                except OSError as exc:  # a directory appeared at a target since it was checked, say
                    problems.append(f"{_join(parent, name)}: {exc.strerror}")
            if sync:
                os.fsync(dir_fd)
    except errors.FileNotFound:
        pass  # a deleted file's directory, already removed before an interruption
    except (OSError, errors.ToolError) as exc:
        problems.append(f"{parent or '.'}: {exc}")
    return problems


def _remove_empty_dirs(ws: Workspace, rel: str) -> None:
    """rmdir `rel` and its parents up to the root while they are empty, like git after deleting a file."""
    parts = rel.split("/") if rel else []
    while parts:
        try:
            with _directory(ws, "/".join(parts[:-1])) as dir_fd:
                os.rmdir(parts[-1], dir_fd=dir_fd)
        except (OSError, errors.ToolError):
            return
        parts.pop()
