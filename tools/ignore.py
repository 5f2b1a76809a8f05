"""Which paths list/search/code map skip: git's ignore rules plus a default list, via pathspec's GitIgnoreSpec.

Precedence follows git: default list, then .git/info/exclude, then each .gitignore from the root down to the
file's directory; the last rule that matches decides, and a path under an ignored directory is ignored. These
files come with the workspace, so they are read like git reads an in-tree .gitignore: never through a symlink,
only when regular files (a FIFO or a device would hang or flood the reader), and only their first megabyte.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from pathspec import GitIgnoreSpec

# The default list matches by name only, so it is checked with set lookups instead of pattern matching:
# a walk over a large tree asks about every file. Only names that a tool owns are on it: version control's,
# ours, Node's package folder (its module resolution gives the name that meaning), Python's bytecode cache and
# the test and lint tools' own folders. `venv` is not: CPython's Lib/venv is source. A Python environment is
# skipped by what it is, whatever its name: a folder holding one of ENVIRONMENT_MARKERS.
DEFAULT_IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".warpcode", "node_modules", "__pycache__", ".tox", ".nox",
     ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)  # fmt: skip
DEFAULT_IGNORED_FILES = frozenset({".DS_Store"})
DEFAULT_IGNORED_SUFFIXES = (".pyc", ".pyo")
# The shadow repository of checkpoints gets these as git exclude lines (and its environments one line each).
DEFAULT_IGNORES = (
    *(f"{name}/" for name in sorted(DEFAULT_IGNORED_DIRS)),
    *sorted(DEFAULT_IGNORED_FILES),
    *(f"*{suffix}" for suffix in DEFAULT_IGNORED_SUFFIXES),
)
# pyvenv.cfg is written by `python -m venv`, virtualenv, uv, poetry and pipenv at the top of every environment they
# make; conda-meta/ by conda, mamba and pixi. (conda's own repository keeps fake environments as test data, with a
# conda-meta/ each: those are skipped too, the price of knowing a 100,000-file environment without a name.)
ENVIRONMENT_MARKERS = frozenset({"pyvenv.cfg", "conda-meta"})
MAX_RULES_BYTES = 1024 * 1024


def holds_environment(folder: Path) -> bool:
    return any(os.path.lexists(folder / marker) for marker in ENVIRONMENT_MARKERS)


def read_rules_file(path: Path) -> str | None:
    """The text of an ignore file of the workspace, None when it is missing, not a regular file or a symlink.

    Past MAX_RULES_BYTES the rest is left out, from the last whole line on.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # NONBLOCK: opening a FIFO waits
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        data = handle.read(MAX_RULES_BYTES + 1)
    if len(data) > MAX_RULES_BYTES:
        data = data[: data.rfind(b"\n", 0, MAX_RULES_BYTES) + 1]
    return data.decode("utf-8", errors="replace")


def _read_spec(path: Path) -> GitIgnoreSpec | None:
    text = read_rules_file(path)
    if not text:
        return None
    spec = GitIgnoreSpec.from_lines(text.splitlines())
    return spec if len(spec) else None


class IgnoreRules:
    def __init__(self, root: Path, extra: Iterable[str] = ()) -> None:
        self.root = root
        self._base: list[GitIgnoreSpec] = []
        extra = list(extra)
        if extra:
            self._base.append(GitIgnoreSpec.from_lines(extra))
        exclude = _read_spec(root / ".git" / "info" / "exclude")
        if exclude is not None:
            self._base.append(exclude)
        self._dir_specs: dict[str, GitIgnoreSpec | None] = {}

    def spec_of_dir(self, rel_dir: str) -> GitIgnoreSpec | None:
        """The .gitignore of directory `rel_dir` ('' for the root), read once."""
        if rel_dir not in self._dir_specs:
            self._dir_specs[rel_dir] = _read_spec(self.root / rel_dir / ".gitignore")
        return self._dir_specs[rel_dir]

    def decide(self, rel: str, is_dir: bool, parent_dirs: list[str]) -> bool:
        """Is `rel` ignored by the base rules or the .gitignore files of `parent_dirs` (root first)?

        The caller has already checked that no ancestor directory is ignored (walkers prune them).
        """
        name = rel.rsplit("/", 1)[-1]
        if (
            name in DEFAULT_IGNORED_DIRS
            if is_dir
            else name in DEFAULT_IGNORED_FILES or name.endswith(DEFAULT_IGNORED_SUFFIXES)
        ):
            return True
        probe = rel + "/" if is_dir else rel
        ignored = False
        for spec in self._base:
            verdict = spec.check_file(probe).include
            if verdict is not None:
                ignored = verdict
        for rel_dir in parent_dirs:
            spec = self.spec_of_dir(rel_dir)
            if spec is None:
                continue
            sub = probe[len(rel_dir) + 1 :] if rel_dir else probe
            verdict = spec.check_file(sub).include
            if verdict is not None:
                ignored = verdict
        return ignored

    def is_ignored(self, rel: str, is_dir: bool = False) -> bool:
        """Check one workspace-relative POSIX path, including whether any ancestor directory is ignored."""
        parts = rel.split("/")
        parents = [""]
        for depth in range(1, len(parts)):
            ancestor = "/".join(parts[:depth])
            if self.decide(ancestor, True, parents) or holds_environment(self.root / ancestor):
                return True
            parents.append(ancestor)
        return self.decide(rel, is_dir, parents)
