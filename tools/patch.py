"""apply_patch: all or nothing. Every file is patched in memory first; only then is anything written.

On a workspace whose text is kept elsewhere (`Workspace.text_kept_elsewhere`: an editor's buffers), the files the
patch modifies are read and written through the workspace's text methods, one by one after validation; files it
creates, deletes or renames are always written on the disk.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from warpcode.tools import errors
from warpcode.tools.atomic import write_temp
from warpcode.tools.hunks import apply_hunks
from warpcode.tools.patch_parse import FilePatch, parse_patch
from warpcode.tools.textcodec import SNIFF_BYTES, TextFile, looks_binary
from warpcode.tools.workspace import Workspace


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
    mode: int | None


class _Plan:
    """The workspace as the patch leaves it, kept in memory until every file has been validated."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.files: dict[Path, _Planned] = {}
        self.kept_elsewhere: dict[Path, TextFile] = {}  # files read through the workspace's text methods

    def exists(self, target: Path) -> bool:
        if target in self.files:
            return self.files[target].data is not None
        return target.is_file()

    def read(self, target: Path, shown: str) -> str:
        if self.ws.text_kept_elsewhere and target not in self.files:
            try:
                self.kept_elsewhere[target] = self.ws.read_text(target)
            except errors.ToolError as exc:
                raise errors.PatchError(str(exc), shown) from None
            return self.kept_elsewhere[target].text
        if target in self.files and self.files[target].data is not None:
            data = self.files[target].data
        elif self.exists(target):
            try:
                data = self.ws.read_bytes(target)
            except errors.ToolError as exc:
                raise errors.PatchError(str(exc), shown) from None
        else:
            raise errors.PatchError("the file does not exist.", shown)
        if looks_binary(data[:SNIFF_BYTES]):
            raise errors.PatchError("the file is binary; patches can only change text files.", shown)
        return data.decode("utf-8", "surrogateescape")

    def mode_of(self, target: Path) -> int | None:
        if target in self.files and self.files[target].mode is not None:
            return self.files[target].mode
        with contextlib.suppress(FileNotFoundError):
            return os.stat(target).st_mode & 0o7777
        return None


def apply_patch(ws: Workspace, patch: str) -> PatchResult:
    file_patches = parse_patch(patch)
    if not file_patches:
        raise errors.PatchError("no unified diff found: expected '--- a/path', '+++ b/path' and '@@' hunk lines.")
    plan = _Plan(ws)
    changes = [_plan_file(ws, plan, file_patch) for file_patch in file_patches]
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
    if fp.binary:
        raise errors.PatchError("binary patches are not supported; change binary files another way.", shown)
    old_target = _target(ws, old_rel, shown) if old_rel else None
    new_target = _target(ws, new_rel, shown) if new_rel else None
    if old_target is None:
        assert new_target is not None
        if plan.exists(new_target):
            raise errors.PatchError("the patch creates this file, but it already exists.", shown)
        new_text, notes = apply_hunks("", fp.hunks, shown)
        plan.files[new_target] = _Planned(new_target, _encode(new_text), fp.new_mode and fp.new_mode & 0o7777)
        return FileChange(shown, "created", None, "", new_text, notes)
    old_text = plan.read(old_target, old_rel or shown)
    new_text, notes = apply_hunks(old_text, fp.hunks, old_rel or shown)
    mode = fp.new_mode & 0o7777 if fp.new_mode else plan.mode_of(old_target)
    if new_target is None:
        if new_text.strip():
            raise errors.PatchError("the patch deletes this file, but its content differs from the '-' lines.", shown)
        plan.files[old_target] = _Planned(old_target, None, None)
        return FileChange(old_rel or shown, "deleted", None, old_text, "", notes)
    if new_target != old_target:
        if plan.exists(new_target):
            raise errors.PatchError(f"cannot rename {old_rel} to {new_rel}: the target already exists.", shown)
        if not fp.copy:
            plan.files[old_target] = _Planned(old_target, None, None)
        plan.files[new_target] = _Planned(new_target, _encode(new_text), mode)
        return FileChange(shown, "copied" if fp.copy else "renamed", old_rel, old_text, new_text, notes)
    plan.files[old_target] = _Planned(old_target, _encode(new_text), mode)
    return FileChange(shown, "modified", None, old_text, new_text, notes)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _commit(plan: _Plan) -> None:
    """Write every temp file first; rename them into place only when all were written (and, for text kept
    elsewhere, only when every write through the workspace succeeded)."""
    temps: list[tuple[Path, Path]] = []
    try:
        for planned in plan.files.values():
            if planned.data is not None and planned.target not in plan.kept_elsewhere:
                temps.append((write_temp(planned.target, planned.data, planned.mode), planned.target))
        for target, original in plan.kept_elsewhere.items():
            planned = plan.files[target]
            if planned.data is not None:
                plan.ws.write_text(target, planned.data.decode("utf-8", "surrogateescape"), like=original)
    except (OSError, errors.ToolError) as exc:
        for tmp, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        if isinstance(exc, errors.ToolError):
            raise
        raise errors.PatchError(f"writing failed ({exc}); no file was changed.") from exc
    for tmp, target in temps:
        os.replace(tmp, target)
    for planned in plan.files.values():
        if planned.data is None and planned.target.exists():
            planned.target.unlink()
            _remove_empty_parents(planned.target.parent, plan.ws.root)


def _remove_empty_parents(directory: Path, root: Path) -> None:
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
