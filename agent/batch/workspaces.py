"""Each job's throwaway copy of its repository, never the user's checkout.

A git repository gets a clone of its own under the batch's workdirs folder, checked out detached at the job's base:
its objects are borrowed from the source (`git clone --shared`: the source's object folder is an alternate that
git only reads, so nothing is copied), while its config, hooks, refs (the source's branches and tags, as they
were) and index are the clone's own, and it has no remote. Git run in the clone, by the model's commands or the
test_command, changes the clone alone; the source is only read. (The alternate does name the source's object
folder: a command that set out to write there, as the same user, could; the sandbox is what stops that.) A plain
directory is copied, less the batch's own output when that lies inside it, with a git directory of its own kept
beside the copy (not in it) so that its patch is a `git diff` too. A re-run removes what a killed run left under
the same workdirs folder (`clean_stale`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from warpcode.agent.batch.ids import name_for

_IDENTITY = ["-c", "user.name=warpcode batch", "-c", "user.email=batch@warpcode.invalid", "-c", "commit.gpgsign=false"]


class WorkspaceError(RuntimeError):
    """The job's copy could not be made (a bad base revision, a git failure): the job's `error`."""


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


async def create(
    repo: Path, base: str | None, workdirs: Path, job_id: str, leave_out: Iterable[Path] = ()
) -> JobWorkspace:
    """The job's copy: a clone of a git repository at `base` (default HEAD), or a copy of a plain directory less
    the paths of `leave_out` inside it (the batch's results file and its folders)."""
    workdirs.mkdir(parents=True, exist_ok=True)
    folder = workdirs / f"{name_for(job_id)}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    root = folder / "ws"
    try:
        if is_git_repository(repo):
            commit = await asyncio.to_thread(_resolve, repo, base or "HEAD")
            await asyncio.to_thread(_clone, repo, root, commit)
            return JobWorkspace(repo, folder, root, commit)
        if base:
            raise WorkspaceError(f"base {base!r} given, but {repo} is not a git repository")
        await asyncio.to_thread(_copy_plain, repo, root, folder / "base.git", leave_out)
        return JobWorkspace(repo, folder, root, None, git_dir=folder / "base.git")
    except BaseException:
        await remove(JobWorkspace(repo, folder, root, None))
        raise


def _resolve(repo: Path, revision: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", cwd=repo).strip()
    except WorkspaceError:
        raise WorkspaceError(f"base {revision!r} is not a commit of {repo}") from None


def _clone(repo: Path, root: Path, commit: str) -> None:
    """A clone of `repo` at `root`, detached at `commit`, that shares nothing writable with it. Cloned bare into
    `root/.git` so that the source's branches stay branches (not `origin/...`); then made a checkout, its remote
    dropped (a `git push` in it has nowhere to go), and the commit checked out (from the borrowed objects, even one
    no branch holds)."""
    git_dir = root / ".git"
    git("clone", "--quiet", "--bare", "--shared", "--origin", "origin", "--", str(repo), str(git_dir), cwd=root.parent)
    git("config", "core.bare", "false", cwd=git_dir)
    git("config", "--remove-section", "remote.origin", cwd=git_dir)
    git("checkout", "--quiet", "--detach", commit, cwd=root)


def _copy_plain(source: Path, root: Path, git_dir: Path, leave_out: Iterable[Path]) -> None:
    skipped = {os.path.realpath(path) for path in leave_out}

    def ignore(folder: str, names: list[str]) -> list[str]:
        real = os.path.realpath(folder)
        return [name for name in names if os.path.join(real, name) in skipped]

    shutil.copytree(source, root, symlinks=True, ignore=ignore)
    git("init", "-q", cwd=root, git_dir=git_dir)
    git("add", "-A", cwd=root, git_dir=git_dir)
    git("commit", "-q", "--allow-empty", "--no-verify", "-m", "base", cwd=root, git_dir=git_dir)


async def remove(workspace: JobWorkspace) -> None:
    """Delete the job's folder; a cancelled job still waits for it, so it leaves nothing behind when it ends."""
    removal = asyncio.ensure_future(asyncio.to_thread(shutil.rmtree, workspace.folder, True))
    try:
        await asyncio.shield(removal)
    except asyncio.CancelledError:
        await removal
        raise


def remove_orphans(workdirs: Path, job_id: str) -> None:
    """Remove the copies a job left when its process died under it (a killed Ray worker): its folders under
    `workdirs`."""
    own = re.compile(re.escape(name_for(job_id)) + r"-[0-9a-f]{8}")
    for child in workdirs.iterdir() if workdirs.is_dir() else []:
        if own.fullmatch(child.name):
            shutil.rmtree(child, ignore_errors=True)


def clean_stale(workdirs: Path) -> int:
    """Remove whatever an earlier (killed) run with the same workdirs folder left there (its copies; an older
    warpcode's lock file too); the number of copies."""
    stale = list(workdirs.iterdir()) if workdirs.is_dir() else []
    copies = [child for child in stale if child.is_dir() and not child.is_symlink()]
    for child in stale:
        if child in copies:
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    return len(copies)


def tidy(workdirs: Path, copies_kept: bool) -> None:
    """At the end of a batch: the workdirs folder goes when no copy is kept in it. Whatever is still there then is
    not this run's (each job removed its own copy): it is what a killed run's orphans (a `git clone` that outlived
    its driver) wrote after `clean_stale` had looked, so it goes too."""
    if not copies_kept:
        shutil.rmtree(workdirs, ignore_errors=True)
    with contextlib.suppress(OSError):
        workdirs.rmdir()
