"""Fast ignore-aware traversal: os.scandir, pruning ignored directories and Python environments before
descending into them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from warpcode.tools.ignore import ENVIRONMENT_MARKERS, IgnoreRules


@dataclass(frozen=True)
class WalkedFile:
    rel: str  # POSIX path relative to the workspace root
    path: str  # absolute path on disk
    size: int


def walk_files(root: str, rules: IgnoreRules, start_rel: str = "") -> Iterator[WalkedFile]:
    """Non-ignored regular files under `start_rel`, in sorted order per directory.

    Symlinked directories are not followed (loops, escapes); a symlinked file is kept only when it points
    inside the root.
    """
    real_root = os.path.realpath(root)
    parents = [""]
    if start_rel:
        parts = start_rel.split("/")
        parents += ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    yield from _walk_dir(root, real_root, rules, start_rel, parents)


def environment_dirs(root: str, rules: IgnoreRules) -> list[str]:
    """The Python environments that walk_files skips, as sorted workspace-relative folders: what git (which
    cannot test a folder for a marker file) is told to exclude from checkpoints. The walk visits folders only,
    pruned like walk_files's."""
    found: list[str] = []
    pending = [("", [""])]
    while pending:
        rel_dir, parents = pending.pop()
        entries = _entries(root, rel_dir)
        if rel_dir and _is_environment(entries):
            found.append(rel_dir)
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and not rules.decide(rel, True, parents):
                pending.append((rel, [*parents, rel]))
    return sorted(found)


def _entries(root: str, rel_dir: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as scan:
            return sorted(scan, key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def _is_environment(entries: list[os.DirEntry[str]]) -> bool:
    return any(entry.name in ENVIRONMENT_MARKERS for entry in entries)


def _walk_dir(root: str, real_root: str, rules: IgnoreRules, rel_dir: str, parents: list[str]) -> Iterator[WalkedFile]:
    entries = _entries(root, rel_dir)
    if rel_dir and _is_environment(entries):
        return
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if not rules.decide(rel, True, parents):
                yield from _walk_dir(root, real_root, rules, rel, [*parents, rel])
            continue
        if rules.decide(rel, False, parents):
            continue
        try:
            if is_link:
                target = os.path.realpath(entry.path)  # raises when the link is swapped while it is read
                if not target.startswith(real_root + os.sep) or not os.path.isfile(target):
                    continue
            stat = entry.stat()
        except OSError:
            continue
        if is_link or entry.is_file(follow_symlinks=False):
            yield WalkedFile(rel=rel, path=entry.path, size=stat.st_size)
