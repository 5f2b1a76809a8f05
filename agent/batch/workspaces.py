"""Each job's throwaway copy of its repository, never the user's checkout.

A git repository gets a detached `git worktree` of the job's base under the batch's workdirs folder (created and
removed one at a time, across the processes of a Ray batch too: parallel `worktree add` collides on git's lock
files); a plain directory is copied, with a
git directory of its own kept beside the copy (not in it) so that its patch is a `git diff` too. Only the
repository's worktree registry (`.git/worktrees/`) is touched: its working tree, index, branches and HEAD never.
A re-run removes what a killed run left under the same workdirs folder (`clean_stale`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

from warpcode.agent.batch.ids import name_for

_GIT_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop
_IDENTITY = ["-c", "user.name=warpcode batch", "-c", "user.email=batch@warpcode.invalid", "-c", "commit.gpgsign=false"]


class WorkspaceError(RuntimeError):
    """The job's copy could not be made (a bad base revision, a git failure): the job's `error`."""


def _git_lock() -> asyncio.Lock:
    """One worktree add/remove at a time in this process (a lock of the running event loop)."""
    return _GIT_LOCKS.setdefault(asyncio.get_running_loop(), asyncio.Lock())


@contextlib.contextmanager
def _across_processes(workdirs: Path):
    """One worktree add/remove at a time among every process of the batch (the Ray workers share the workdirs
    folder): an exclusive lock on a file in it, held by the calling thread."""
    workdirs.mkdir(parents=True, exist_ok=True)
    with open(workdirs / ".git-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


async def _git_serialised(workdirs: Path, *args: str, cwd: Path, check: bool = True) -> str:
    def locked() -> str:
        with _across_processes(workdirs):
            return git(*args, cwd=cwd, check=check)

    async with _git_lock():
        return await asyncio.to_thread(locked)


def git(*args: str, cwd: Path | None = None, git_dir: Path | None = None, check: bool = True) -> str:
    prefix = ["git", *_IDENTITY] + ([f"--git-dir={git_dir}", f"--work-tree={cwd}"] if git_dir else [])
    done = subprocess.run([*prefix, *args], cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def is_git_repository(path: Path) -> bool:
    """True when `path` is the top of a git working tree (a folder inside one counts as a plain directory)."""
    done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    return done.returncode == 0 and Path(done.stdout.strip()).resolve() == path.resolve()


@dataclass
class JobWorkspace:
    repo: Path
    folder: Path  # the job's own folder under the workdirs folder: the copy, its state
    root: Path  # where the agent works
    base_commit: str | None  # None for a plain directory
    git_dir: Path | None = None  # the plain directory's git directory, beside the copy
    is_worktree: bool = False

    @property
    def state_dir(self) -> Path:
        return self.folder / "state"

    def _git(self, *args: str) -> str:
        return git(*args, cwd=self.root, git_dir=self.git_dir)

    def changes(self) -> tuple[str, list[str]]:
        """(the binary-safe patch of the copy against the base, new files included; the paths it changes)."""
        self._git("add", "-A")
        base = self.base_commit or "HEAD"
        patch = self._git("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", base)
        names = self._git("diff", "--cached", "--name-only", "-z", "--no-renames", base)
        return patch, [name for name in names.split("\0") if name]


async def create(repo: Path, base: str | None, workdirs: Path, job_id: str) -> JobWorkspace:
    workdirs.mkdir(parents=True, exist_ok=True)
    folder = workdirs / f"{name_for(job_id)}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    root = folder / "ws"
    try:
        if is_git_repository(repo):
            commit = await asyncio.to_thread(_resolve, repo, base or "HEAD")
            await _git_serialised(workdirs, "worktree", "add", "--detach", str(root), commit, cwd=repo)
            return JobWorkspace(repo, folder, root, commit, is_worktree=True)
        if base:
            raise WorkspaceError(f"base {base!r} given, but {repo} is not a git repository")
        await asyncio.to_thread(_copy_plain, repo, root, folder / "base.git")
        return JobWorkspace(repo, folder, root, None, git_dir=folder / "base.git")
    except BaseException:
        await remove(JobWorkspace(repo, folder, root, None, is_worktree=True))
        raise


def _resolve(repo: Path, revision: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", cwd=repo).strip()
    except WorkspaceError:
        raise WorkspaceError(f"base {revision!r} is not a commit of {repo}") from None


def _copy_plain(source: Path, root: Path, git_dir: Path) -> None:
    shutil.copytree(source, root, symlinks=True)
    git("init", "-q", cwd=root, git_dir=git_dir)
    git("add", "-A", cwd=root, git_dir=git_dir)
    git("commit", "-q", "--allow-empty", "--no-verify", "-m", "base", cwd=root, git_dir=git_dir)


async def remove(workspace: JobWorkspace) -> None:
    """Unregister the worktree (if it is one) and delete the job's folder; a cancelled job still waits for it, so
    it leaves nothing behind when it ends."""
    removal = asyncio.ensure_future(_remove(workspace))
    try:
        await asyncio.shield(removal)
    except asyncio.CancelledError:
        await removal
        raise


async def _remove(workspace: JobWorkspace) -> None:
    workdirs = workspace.folder.parent
    if workspace.is_worktree:
        unregister = ("worktree", "remove", "--force", "--force", str(workspace.root))
        await _git_serialised(workdirs, *unregister, cwd=workspace.repo, check=False)
    await asyncio.to_thread(shutil.rmtree, workspace.folder, True)
    if workspace.is_worktree:
        await _git_serialised(workdirs, "worktree", "prune", cwd=workspace.repo, check=False)


def remove_orphans(repo: Path, workdirs: Path, job_id: str) -> None:
    """Remove the copies a job left when its process died under it (a killed Ray worker): its folders under
    `workdirs`, and their worktrees registered in `repo`."""
    own = re.compile(re.escape(name_for(job_id)) + r"-[0-9a-f]{8}")
    folders = [child for child in workdirs.iterdir() if own.fullmatch(child.name)] if workdirs.is_dir() else []
    git_repo = is_git_repository(repo)
    for folder in folders:
        with _across_processes(workdirs):
            if git_repo:
                git("worktree", "remove", "--force", "--force", str(folder / "ws"), cwd=repo, check=False)
            shutil.rmtree(folder, ignore_errors=True)
            if git_repo:
                git("worktree", "prune", cwd=repo, check=False)


def clean_stale(repos: set[Path], workdirs: Path) -> int:
    """Remove what an earlier (killed) run with the same workdirs folder left: its worktrees registered in
    `repos`, then the folder's contents. The number of stale worktrees removed."""
    removed = 0
    prefix = os.fspath(workdirs.resolve()) + os.sep
    for repo in repos:
        if not is_git_repository(repo):
            continue
        listing = git("worktree", "list", "--porcelain", cwd=repo, check=False)
        for line in listing.splitlines():
            path = line.removeprefix("worktree ")
            if line.startswith("worktree ") and os.fspath(Path(path).resolve()).startswith(prefix):
                git("worktree", "remove", "--force", "--force", path, cwd=repo, check=False)
                removed += 1
        git("worktree", "prune", cwd=repo, check=False)
    if workdirs.is_dir():
        for child in workdirs.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
    return removed


def tidy(workdirs: Path) -> None:
    """At the end of a batch: the lock file goes, and the workdirs folder too when no kept copy is in it."""
    (workdirs / ".git-lock").unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        workdirs.rmdir()
