"""apply_patch: all or nothing. Every file is patched in memory first; only then is anything written, through
the commit journal of tools/patch_journal.py, so even a kill midway ends with every file patched or none.

Binary files: `git diff --binary` hunks (literal and delta) are applied as git applies them
(tools/binary_patch.py); a rename or mode change without hunks moves the bytes as they are, whatever they hold.
Deletions are planned first, as git applies them first, so a file may replace a directory the patch empties
and a directory a file the patch deletes.

On a workspace whose text is kept elsewhere (`Workspace.text_kept_elsewhere`: an editor's buffers), the files the
patch modifies are read and written through the workspace's text methods, one by one after validation; files it
creates, deletes or renames are always written on the disk.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from warpcode.tools import errors, fdwalk
from warpcode.tools.binary_patch import apply_binary
from warpcode.tools.hunks import apply_hunks
from warpcode.tools.patch_journal import FileWrite, as_patch_error, commit, recover_interrupted_patch, write_one
from warpcode.tools.patch_parse import FilePatch, parse_patch
from warpcode.tools.textcodec import SNIFF_BYTES, TextFile, looks_binary
from warpcode.tools.workspace import Workspace, fingerprint_bytes

_UNSUPPORTED_KINDS = {
    stat.S_IFLNK: "symlink entries (mode 120000) are not supported; create the symlink with run_command.",
    0o160000: "submodule entries (mode 160000) are not supported; update submodules with git.",
}


@dataclass
class FileChange:
    path: str
    kind: str  # "created" | "modified" | "deleted" | "renamed" | "copied"
    old_path: str | None
    old_text: str
    new_text: str
    notes: list[str] = field(default_factory=list)


@dataclass
class PatchResult:
    changes: list[FileChange]

    def render(self) -> str:
        marks = {"created": "A", "modified": "M", "deleted": "D", "renamed": "R", "copied": "C"}
        out = []
        for change in self.changes:
            name = f"{change.old_path} -> {change.path}" if change.kind in ("renamed", "copied") else change.path
            out.append(f"{marks[change.kind]} {name}")
            out.extend(f"    {note}" for note in change.notes)
        return "Patch applied:\n" + "\n".join(out)


@dataclass
class _Planned:
    target: Path
    data: bytes | None  # None: delete the file
    keep_mode: int | None = None  # see FileWrite
    new_mode: int | None = None
    staged_in: Path | None = None  # see FileWrite: a target where the patch deletes a file or empties a directory


class _Plan:
    """The workspace as the patch leaves it, kept in memory until every file has been validated."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.files: dict[Path, _Planned] = {}
        self.kept_elsewhere: dict[Path, TextFile] = {}  # files read through the workspace's text methods
        self.new_dirs: dict[Path, None] = {}  # directories the patch creates, in order
        self.late_dirs: dict[Path, None] = {}  # ... where it deletes a file: made after the deletions

    def exists(self, target: Path, shown: str) -> bool:
        """Is there a file at `target` once the patch so far applies? A directory whose every file the patch
        deletes will be gone; anything else but a regular file is refused."""
        if target in self.files:
            return self.files[target].data is not None
        if self._deleted_file_above(target):
            return False
        try:
            found = os.stat(target, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if stat.S_ISDIR(found.st_mode) and self._emptied(target):
            return False
        with as_patch_error(shown):
            fdwalk.check_regular(found, shown)
        return True

    def _deleted_file_above(self, target: Path) -> bool:
        return any(self.files.get(parent, _KEPT).data is None for parent in target.parents)

    def _emptied(self, directory: Path) -> bool:
        """Does the patch delete every file under `directory` (so that git's removal of emptied directories
        takes it away)?"""
        if any(directory in target.parents for target, planned in self.files.items() if planned.data is not None):
            return False  # the patch also writes into it
        for parent, dirs, names in os.walk(directory):
            if not names and not dirs:
                return False  # an empty directory nobody deletes
            for name in names:
                planned = self.files.get(Path(parent, name))
                if planned is None or planned.data is not None:
                    return False
        return True

    def read(self, target: Path, shown: str) -> str:
        """The file's text as the patch so far leaves it; refused when it changed since the agent last saw it."""
        if self.ws.text_kept_elsewhere and target not in self.files:
            with as_patch_error(shown):
                self.kept_elsewhere[target] = self.ws.read_text(target)
                self.ws.check_unchanged(target, self.kept_elsewhere[target].fingerprint)
            return self.kept_elsewhere[target].text
        data = self.read_bytes(target, shown)
        if looks_binary(data[:SNIFF_BYTES]):
            raise errors.PatchError("the file is binary; patches can only change text files.", shown)
        return data.decode("utf-8", "surrogateescape")

    def read_bytes(self, target: Path, shown: str) -> bytes:
        if target in self.files and self.files[target].data is not None:
            return self.files[target].data
        if not self.exists(target, shown):
            raise errors.PatchError("the file does not exist.", shown)
        with as_patch_error(shown):
            data = self.ws.read_bytes(target)
            self.ws.check_unchanged(target, fingerprint_bytes(data))
        return data

    def mode_of(self, target: Path) -> int | None:
        if target in self.files and self.files[target].keep_mode is not None:
            return self.files[target].keep_mode
        with contextlib.suppress(FileNotFoundError):
            return os.stat(target).st_mode & 0o777
        return None

    def write(self, planned: _Planned, shown: str) -> None:
        """Plan writing `planned`, after checking that every directory on its way is one or can be made (where
        the patch deletes a file, after the deletion)."""
        if planned.target not in self.kept_elsewhere:
            directory = planned.target.parent
            missing = []
            while directory != self.ws.root and not self._is_dir(directory, shown):
                missing.append(directory)
                directory = directory.parent
            late = self._deleted_file_above(planned.target)
            (self.late_dirs if late else self.new_dirs).update(dict.fromkeys(reversed(missing)))
            if late or os.path.isdir(planned.target):  # where a directory the patch empties is now
                planned.staged_in = directory
        self.files[planned.target] = planned

    def _is_dir(self, directory: Path, shown: str) -> bool:
        """True for a directory there now, False when there is none yet (or a file the patch deletes); a file
        in the way is refused."""
        planned = self.files.get(directory)
        if planned is not None and planned.data is not None:
            raise errors.PatchError(
                f"{directory.name!r} on the way to this file is not a directory (the patch writes it as a file).", shown
            )
        if planned is not None or directory in self.new_dirs or directory in self.late_dirs:
            return False
        return _is_dir(directory, shown)


_KEPT = _Planned(Path(), b"")  # the default for a path the patch does not touch


def _is_dir(directory: Path, shown: str) -> bool:
    """True for a directory, False when nothing is there; a file in the way is refused."""
    try:
        found = os.stat(directory, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    if not stat.S_ISDIR(found.st_mode):
        raise errors.PatchError(f"{directory.name!r} on the way to this file is not a directory.", shown)
    return True


def apply_patch(ws: Workspace, patch: str, dry_run: bool = False) -> PatchResult:
    """Apply `patch`, all or nothing; with `dry_run`, only check it and say what it would change."""
    file_patches = parse_patch(patch)
    if not file_patches:
        raise errors.PatchError("no unified diff found: expected '--- a/path', '+++ b/path' and '@@' hunk lines.")
    if not dry_run:
        recover_interrupted_patch(ws, wait=True)
    plan = _Plan(ws)
    deletions_first = sorted(range(len(file_patches)), key=lambda n: file_patches[n].new_path is not None)
    planned = {n: _plan_file(ws, plan, file_patches[n]) for n in deletions_first}
    changes = [planned[n] for n in range(len(file_patches))]
    if not dry_run:
        _commit(plan)
    return PatchResult(changes)


def _rel_path(ws: Workspace, raw: str | None, git: bool) -> str | None:
    """The workspace path a diff path names: git paths drop their a/ b/ prefix; plain diffs are tried as
    written, then without their first component (like `patch -p1`)."""
    if raw is None:
        return None
    head, _, tail = raw.partition("/")
    if git:
        return tail if head in ("a", "b") and tail else raw
    if not tail:
        return raw
    if _exists(ws, raw):
        return raw
    if head in ("a", "b") or _exists(ws, tail):
        return tail
    return raw


def _exists(ws: Workspace, rel: str) -> bool:
    try:
        return ws.resolve(rel).exists()
    except errors.ToolError:
        return False


def _target(ws: Workspace, rel: str, shown: str) -> Path:
    try:
        return ws.resolve_for_write(rel)
    except errors.ToolError as exc:
        raise errors.PatchError(str(exc), shown) from None


def _plan_file(ws: Workspace, plan: _Plan, fp: FilePatch) -> FileChange:
    old_rel, new_rel = _rel_path(ws, fp.old_path, fp.git), _rel_path(ws, fp.new_path, fp.git)
    if not fp.git and old_rel and new_rel and old_rel != new_rel:
        # Plain diff of two differently named files (x.orig vs x): patch whichever exists, the new name first.
        old_rel = new_rel = new_rel if _exists(ws, new_rel) else old_rel
    shown = new_rel or old_rel or "?"
    if fp.binary and fp.binary_hunk is None:
        raise errors.PatchError(
            "the diff only says that this binary file differs; regenerate it with `git diff --binary`, "
            "which carries the content.",
            shown,
        )
    new_mode = _requested_mode(fp, shown)
    old_target = _target(ws, old_rel, shown) if old_rel else None
    new_target = _target(ws, new_rel, shown) if new_rel else None
    if old_target is None:
        assert new_target is not None
        if plan.exists(new_target, shown):
            raise errors.PatchError("the patch creates this file, but it already exists.", shown)
        data, old_text, new_text, notes = _patched(plan, fp, None, shown)
        plan.write(_Planned(new_target, data, new_mode=new_mode), shown)
        return FileChange(shown, "created", None, "", new_text, notes)
    data, old_text, new_text, notes = _patched(plan, fp, old_target, old_rel or shown)
    if new_target is None:
        if data.strip():
            raise errors.PatchError("the patch deletes this file, but its content differs from the '-' lines.", shown)
        plan.files[old_target] = _Planned(old_target, None)
        return FileChange(old_rel or shown, "deleted", None, old_text, "", notes)
    if new_target != old_target:
        if plan.exists(new_target, shown):
            raise errors.PatchError(f"cannot rename {old_rel} to {new_rel}: the target already exists.", shown)
        keep_mode = None if new_mode else plan.mode_of(old_target)
        if not fp.copy:
            plan.files[old_target] = _Planned(old_target, None)
        plan.write(_Planned(new_target, data, keep_mode, new_mode), shown)
        return FileChange(shown, "copied" if fp.copy else "renamed", old_rel, old_text, new_text, notes)
    plan.write(_Planned(old_target, data, new_mode=new_mode), shown)
    return FileChange(shown, "modified", None, old_text, new_text, notes)


def _patched(plan: _Plan, fp: FilePatch, old_target: Path | None, shown: str) -> tuple[bytes, str, str, list[str]]:
    """(new content, old text, new text, notes) of one file. Binary hunks work on bytes; a rename or mode change
    without hunks keeps the bytes whatever they are; text hunks need a text file. A binary file's texts are ""."""
    if fp.binary_hunk is not None:
        old = plan.read_bytes(old_target, shown) if old_target is not None else b""
        new = apply_binary(fp.binary_hunk, old, fp.old_oid, fp.new_oid, shown)
        return new, "", "", [f"binary: {len(old)} -> {len(new)} bytes"]
    if not fp.hunks and old_target is not None:
        data = plan.read_bytes(old_target, shown)
        text = "" if looks_binary(data[:SNIFF_BYTES]) else data.decode("utf-8", "surrogateescape")
        return data, text, text, []
    old_text = plan.read(old_target, shown) if old_target is not None else ""
    new_text, notes = apply_hunks(old_text, fp.hunks, shown)
    return _encode(new_text), old_text, new_text, notes


def _requested_mode(fp: FilePatch, shown: str) -> int | None:
    """The permission bits a mode line asks for: only its executable bit counts (0o755 or 0o644, minus the
    umask), as git does; symlink and submodule entries are refused."""
    for mode in (fp.old_mode, fp.new_mode):
        kind = stat.S_IFMT(mode or 0)
        if kind in _UNSUPPORTED_KINDS:
            raise errors.PatchError(_UNSUPPORTED_KINDS[kind], shown)
        if kind not in (0, stat.S_IFREG):
            raise errors.PatchError(f"mode {mode:o} is not a regular file's; patches only change regular files.", shown)
    if fp.new_mode is None:
        return None
    return 0o755 if fp.new_mode & 0o100 else 0o644


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _commit(plan: _Plan) -> None:
    """Every temp is written first (and every write kept elsewhere done); only then are they renamed into
    place, through the journal (tools/patch_journal.py). The workspace then remembers what it wrote."""
    ws = plan.ws
    on_disk = [(p, p.data) for p in plan.files.values() if p.data is not None and p.target not in plan.kept_elsewhere]
    writes = [
        FileWrite(
            ws.rel(p.target), data, p.keep_mode, p.new_mode, None if p.staged_in is None else _rel(ws, p.staged_in)
        )
        for p, data in on_disk
    ]
    deletes = [p.target for p in plan.files.values() if p.data is None]
    new_dirs = [ws.rel(directory) for directory in plan.new_dirs]
    late_dirs = [ws.rel(directory) for directory in plan.late_dirs]
    if len(writes) == 1 and not (deletes or new_dirs or plan.kept_elsewhere):
        write_one(ws, writes[0])
    else:
        deleted = [ws.rel(target) for target in deletes]
        commit(ws, writes, deleted, new_dirs, lambda: _write_kept_elsewhere(plan), late_dirs)
    for planned, data in on_disk:
        ws.remember(planned.target, ws.fingerprint_of(data))
    for target in deletes:
        ws.forget(target)


def _rel(ws: Workspace, directory: Path) -> str:
    rel = ws.rel(directory)
    return "" if rel == "." else rel


def _write_kept_elsewhere(plan: _Plan) -> None:
    for target, original in plan.kept_elsewhere.items():
        planned = plan.files[target]
        if planned.data is not None:
            plan.ws.write_text(target, planned.data.decode("utf-8", "surrogateescape"), like=original)
