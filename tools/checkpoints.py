"""Checkpoints: snapshots of the workspace in a shadow git repository under `.warpcode/`.

The shadow repository has its own GIT_DIR and index and only borrows the workspace as its work tree, so the
user's repository (branch, index, stash, status) is never touched, and a directory that is not a git
repository at all gets checkpoints too. Snapshots follow .gitignore like git would, plus the default ignore
list, so dependencies and build output are not copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import git

from warpcode.tools.errors import CheckpointError
from warpcode.tools.ignore import DEFAULT_IGNORES
from warpcode.tools.workspace import Workspace

REF = "refs/warpcode/checkpoints"
IDENTITY = {"GIT_AUTHOR_NAME": "warpcode", "GIT_AUTHOR_EMAIL": "warpcode@localhost"}
SHADOW_CONFIG = {
    "core.bare": "false",
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.quotepath": "false",
    "gc.auto": "0",  # no detached background gc outliving our git calls
    "commit.gpgsign": "false",
}


@dataclass(frozen=True)
class Checkpoint:
    id: str
    message: str
    created_at: datetime


@dataclass(frozen=True)
class RestoreResult:
    checkpoint: Checkpoint
    undo_checkpoint: Checkpoint  # the state just before the restore, to undo it
    changed: list[str]  # "M path", "A path" (re-created), "D path" (removed)


class Checkpoints:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.git_dir = ws.state_dir / "checkpoints.git"
        self._git: git.Git | None = None

    def _repo(self) -> git.Git:
        if self._git is not None:
            return self._git
        fresh = not (self.git_dir / "HEAD").exists()
        try:
            if fresh:
                self.ws.ensure_state_dir()
                git.Repo.init(self.git_dir, bare=True)
            runner = git.Git(str(self.ws.root))
            runner.update_environment(
                GIT_DIR=str(self.git_dir),
                GIT_WORK_TREE=str(self.ws.root),
                GIT_INDEX_FILE=str(self.git_dir / "index"),
                GIT_COMMITTER_NAME=IDENTITY["GIT_AUTHOR_NAME"],
                GIT_COMMITTER_EMAIL=IDENTITY["GIT_AUTHOR_EMAIL"],
                **IDENTITY,
            )
            if fresh:
                for key, value in SHADOW_CONFIG.items():
                    runner.config(key, value)
        except (git.GitCommandError, OSError) as exc:
            raise CheckpointError(f"Could not set up the checkpoint repository in {self.git_dir}: {exc}") from exc
        self._git = runner
        return runner

    def _run(self, *args: str) -> str:
        try:
            return self._repo().execute(["git", *args], strip_newline_in_stdout=True)
        except git.GitCommandError as exc:
            raise CheckpointError(f"git {args[0]} failed in the checkpoint repository: {exc.stderr.strip()}") from exc

    def _write_excludes(self) -> None:
        """The shadow repo's info/exclude: default ignores, our state dir, and the user's own exclude file."""
        lines = list(DEFAULT_IGNORES)
        if self.ws.state_dir.is_relative_to(self.ws.root) and self.ws.state_dir != self.ws.root:
            lines.append("/" + self.ws.rel(self.ws.state_dir) + "/")
        user_exclude = self.ws.root / ".git" / "info" / "exclude"
        if user_exclude.is_file():
            lines.append(user_exclude.read_text(encoding="utf-8", errors="replace"))
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        (info / "exclude").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _snapshot_tree(self) -> str:
        self._repo()
        self._write_excludes()
        self._run("add", "--all", "--ignore-errors", "--", ".")
        return self._run("write-tree")

    def _head(self) -> str | None:
        try:
            return self._repo().execute(["git", "rev-parse", "--verify", "-q", REF], strip_newline_in_stdout=True)
        except git.GitCommandError:
            return None

    def create(self, message: str = "checkpoint") -> Checkpoint:
        """Snapshot every non-ignored file (tracked by the user's git or not). An unchanged workspace returns
        the latest checkpoint instead of adding an identical one."""
        tree = self._snapshot_tree()
        head = self._head()
        if head is not None and self._run("rev-parse", f"{head}^{{tree}}") == tree:
            return self.get(head)
        parents = ["-p", head] if head else []
        commit = self._run("commit-tree", tree, *parents, "-m", message or "checkpoint")
        self._run("update-ref", REF, commit)
        return self.get(commit)

    def get(self, checkpoint_id: str) -> Checkpoint:
        """The checkpoint with this id (or unique id prefix); only commits of our own chain are accepted."""
        unknown = CheckpointError(f"Unknown checkpoint {checkpoint_id!r}. Use the ids from the checkpoint list.")
        head = self._head()
        if head is None or not checkpoint_id or checkpoint_id.startswith("-"):
            raise unknown
        try:
            full = self._run("rev-parse", "--verify", "-q", f"{checkpoint_id}^{{commit}}")
        except CheckpointError:
            raise unknown from None
        if full != head and not self._is_ancestor(full, head):
            raise unknown
        return _checkpoint(self._run("show", "-s", "--format=%H%x1f%ct%x1f%s", full))

    def _is_ancestor(self, commit: str, head: str) -> bool:
        try:
            self._repo().execute(["git", "merge-base", "--is-ancestor", commit, head])
        except git.GitCommandError:
            return False
        return True

    def list(self) -> list[Checkpoint]:
        """Newest first."""
        if self._head() is None:
            return []
        output = self._run("log", "--format=%H%x1f%ct%x1f%s", REF)
        return [_checkpoint(line) for line in output.splitlines() if line]

    def diff(self, from_id: str, to_id: str | None = None) -> str:
        """Unified diff from one checkpoint to another, or to the current workspace when `to_id` is None."""
        old = self.get(from_id).id
        new = self.get(to_id).id if to_id else self._snapshot_tree()
        return self._run("diff", "--no-color", "--no-ext-diff", "--no-renames", old, new)

    def restore(self, checkpoint_id: str) -> RestoreResult:
        """Make the workspace's non-ignored files exactly those of the checkpoint: changed files are put back,
        deleted ones re-created, files created since are removed. The state before is saved as a checkpoint
        first, so a restore can itself be undone."""
        target = self.get(checkpoint_id)
        undo = self.create(f"before restoring {target.id[:12]}")
        changes = self._run("diff", "--name-status", "--no-renames", undo.id, target.id)
        # The index now mirrors the workspace, so a one-tree reset moves every tracked file to the target.
        self._run("read-tree", "--reset", "-u", target.id)
        letters = {"A": "A", "D": "D", "M": "M", "T": "M"}
        changed = []
        for line in changes.splitlines():
            status, _, path = line.partition("\t")
            changed.append(f"{letters.get(status[:1], status[:1])} {path}")
        return RestoreResult(target, undo, changed)


def _checkpoint(fields: str) -> Checkpoint:
    sha, stamp, message = fields.split("\x1f", 2)
    return Checkpoint(sha, message, datetime.fromtimestamp(int(stamp), UTC))
