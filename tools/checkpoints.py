"""Checkpoints: snapshots of the workspace in a shadow git repository in warpcode's state directory for it.

The shadow repository has its own GIT_DIR and index and only borrows the workspace as its work tree, so the
user's repository (branch, index, stash, status) is never touched, and a directory that is not a git
repository at all gets checkpoints too. Snapshots follow .gitignore like git would, plus the default ignore
list and the Python environments search skips, so dependencies and build output are not copied.

Nothing but warpcode decides what these git calls do: the repository lives outside the workspace, in a
private state directory checked before each open (workspace.py); its config and info/exclude are written
anew on every open instead of trusted; inherited GIT_* variables and the system and global config are kept
away; and `-c` options switch off, over any config, every hook and helper program these commands could start.
GIT_DIR is given, so git does no repository discovery and no ownership check: safe.directory is not needed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

import git

from warpcode.tools.atomic import atomic_write
from warpcode.tools.errors import CheckpointError
from warpcode.tools.ignore import DEFAULT_IGNORES, read_rules_file
from warpcode.tools.walk import environment_dirs
from warpcode.tools.workspace import Workspace

REF = "refs/warpcode/checkpoints"
IDENTITY = {"GIT_AUTHOR_NAME": "warpcode", "GIT_AUTHOR_EMAIL": "warpcode@localhost"}
SHADOW_CONFIG = {
    "core": {
        "repositoryformatversion": "0",
        "bare": "false",
        "autocrlf": "false",
        "safecrlf": "false",
        "quotepath": "false",
    },
    "gc": {"auto": "0"},  # no detached background gc outliving our git calls
    "commit": {"gpgsign": "false"},
}
# Before every command, over any config: none of our git calls may start another program or trust a cache.
SAFETY_OPTIONS = {
    "core.fsmonitor": "false",  # a fsmonitor hook runs on every index refresh (git add)
    "core.hooksPath": "/dev/null",  # no hooks (update-ref runs reference-transaction)
    "core.untrackedCache": "false",  # an index extension caching the work tree's state: not trusted
    "core.pager": "cat",
    "commit.gpgSign": "false",  # commit-tree would run gpg.program
    "protocol.allow": "never",  # no transport (file, ext, ssh...): nothing to run ssh, askpass or credential helpers
    "credential.helper": "",  # an empty value empties the list of helpers
}
CONFIG_ENVIRONMENT = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


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
        if self._git is None:
            self._git = self._open()
        return self._git

    def _open(self) -> git.Git:
        """Check the state directory, create the shadow repository if needed, and write its config anew."""
        runner = git.Git(str(self.ws.root))
        runner.update_environment(**self._environment())
        try:
            self.ws.ensure_state_dir()
            if not (self.git_dir / "HEAD").is_file():
                runner.execute(self._command("init", "--quiet", "--template="))  # no template: no hooks, no files
            atomic_write(self.git_dir / "config", _config_text(SHADOW_CONFIG).encode(), mode=0o600)
        except (git.GitCommandError, OSError) as exc:
            raise CheckpointError(f"Could not set up the checkpoint repository in {self.git_dir}: {exc}") from exc
        return runner

    def _environment(self) -> dict[str, str]:
        return {
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.ws.root),
            "GIT_INDEX_FILE": str(self.git_dir / "index"),
            "GIT_COMMITTER_NAME": IDENTITY["GIT_AUTHOR_NAME"],
            "GIT_COMMITTER_EMAIL": IDENTITY["GIT_AUTHOR_EMAIL"],
            **IDENTITY,
            **CONFIG_ENVIRONMENT,
        }

    def _command(self, *args: str) -> list[str]:
        """`git` with the safety options, started through `env -u` for each GIT_* variable we inherited and do not
        set ourselves: GitPython passes its whole environment on and has no way to leave a variable out."""
        ours = self._environment()
        unset = [
            arg for name in sorted(os.environ) if name.startswith("GIT_") and name not in ours for arg in ("-u", name)
        ]
        options = [arg for key, value in SAFETY_OPTIONS.items() for arg in ("-c", f"{key}={value}")]
        return ["env", *unset, "git", *options, *args]

    def _run(self, *args: str) -> str:
        try:
            return self._repo().execute(self._command(*args), strip_newline_in_stdout=True)
        except git.GitCommandError as exc:
            raise CheckpointError(f"git {args[0]} failed in the checkpoint repository: {exc.stderr.strip()}") from exc

    def _answer(self, *args: str) -> str | None:
        """The output of a git command whose failure is itself the answer (no such ref, not an ancestor): None."""
        runner = self._repo()  # a repository that cannot be set up is an error, not an answer
        try:
            return runner.execute(self._command(*args), strip_newline_in_stdout=True)
        except git.GitCommandError:
            return None

    def _write_excludes(self) -> None:
        """The shadow repo's info/exclude: default ignores, our state dir, the Python environments in the
        workspace now (git knows a folder only by its name; search knows an environment by its marker file, so a
        source folder named venv is kept and an environment of any name left out), and the user's own exclude
        file."""
        lines = list(DEFAULT_IGNORES)
        if self.ws.state_dir.is_relative_to(self.ws.root) and self.ws.state_dir != self.ws.root:
            lines.append("/" + self.ws.rel(self.ws.state_dir) + "/")
        environments = environment_dirs(str(self.ws.root), self.ws.ignore_rules)
        lines += [_exclude_line(rel) for rel in environments if not any(char in rel for char in "\r\n")]
        user_exclude = read_rules_file(self.ws.root / ".git" / "info" / "exclude")
        if user_exclude:
            lines.append(user_exclude)
        (self.git_dir / "info").mkdir(mode=0o700, exist_ok=True)  # `init --template=` makes no info/
        text = "\n".join(lines) + "\n"  # a folder name that is not UTF-8 goes back to git as the bytes it is
        atomic_write(self.git_dir / "info" / "exclude", text.encode("utf-8", "surrogateescape"), mode=0o600)

    def _snapshot_tree(self) -> str:
        self._repo()
        self._write_excludes()
        self._run("add", "--all", "--ignore-errors", "--", ".")
        return self._run("write-tree")

    def _head(self) -> str | None:
        return self._answer("rev-parse", "--verify", "-q", REF)

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
        return self._answer("merge-base", "--is-ancestor", commit, head) is not None

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


def _exclude_line(rel: str) -> str:
    """The git exclude line naming the folder `rel` and nothing else: its wildcard characters (and spaces, which
    git trims at a line's end) escaped, anchored at the root. A name holding a line break cannot be written on
    one line, so such an environment is left to the snapshot (the caller skips it): larger, never wrong."""
    return "/" + "".join("\\" + char if char in "\\*?[ " else char for char in rel) + "/"


def _config_text(sections: dict[str, dict[str, str]]) -> str:
    return "".join(
        f"[{section}]\n" + "".join(f"\t{key} = {value}\n" for key, value in keys.items())
        for section, keys in sections.items()
    )


def _checkpoint(fields: str) -> Checkpoint:
    sha, stamp, message = fields.split("\x1f", 2)
    return Checkpoint(sha, message, datetime.fromtimestamp(int(stamp), UTC))
