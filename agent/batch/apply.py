"""`warpcode batch apply RESULTS.jsonl`: each selected row's patch becomes a branch of its repository, as a step of
its own after the batch (docs/reference/batch-files.md). The branch has one commit, atop the job's base commit, that
holds exactly the patch. It is made with git plumbing and a temporary index file, so the user's working tree,
index, HEAD and other branches are never touched; an existing branch is never moved. RESULTS.jsonl is only read.
A row that cannot become a branch is reported and the next row goes on; ids and git's words reach the terminal
and the commit message with their control characters escaped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from warpcode.agent.batch.ids import name_for, shown
from warpcode.agent.batch.results import parse_rows
from warpcode.agent.batch.workspaces import is_git_repository
from warpcode.agent.plural import counted

SELECTIONS = ("succeeded", "failed", "timeout", "any")  # a status, or `any`: every row with a patch
OUTCOMES = ("applied", "already_applied", "skipped", "conflict", "does_not_apply")
FALLBACK_IDENTITY = ("warpcode batch", "batch@warpcode.invalid")  # only when git has no identity configured
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256
_CONTEXT_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


class GitFailed(RuntimeError):
    """A git command failed; its message is git's own, on one line."""


@dataclass
class Outcome:
    id: str
    repo: str | None
    outcome: str  # one of OUTCOMES
    branch: str | None = None
    commit: str | None = None  # the branch's commit, when the branch exists
    reason: str | None = None
    wanted: bool = True  # the row was to become a branch (selected, with a patch and a base commit)

    @property
    def ok(self) -> bool:
        return not self.wanted or self.outcome in ("applied", "already_applied")

    def describe(self) -> str:
        short = (self.commit or "")[:10]
        if self.outcome == "applied":
            return f"applied as {self.branch} ({short}) in {self.repo}"
        if self.outcome == "already_applied":
            return f"already applied ({self.branch} at {short})"
        if self.outcome == "conflict":
            return f"conflict: {self.reason} (left as it is)"
        return f"{self.outcome.replace('_', ' ')}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if key != "wanted"}


def apply_results(
    path: Path,
    prefix: str = "warpcode/",
    only: str = "succeeded",
    as_json: bool = False,
    log: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Apply every row of the results file; a line per row on `log` (and a JSON object per row on `out` when
    `as_json`), then a summary. Exit code 0 when every row to apply was applied or already applied, else 1."""
    log, out = log or sys.stderr, out or sys.stdout
    if only not in SELECTIONS:
        raise ValueError(f"--only must be one of {', '.join(SELECTIONS)}, got {only!r}")
    check_prefix(prefix)
    rows = read_results(path)
    outcomes = []
    for number, row in enumerate(rows, start=1):
        outcome = apply_row(row, prefix, only, path.parent)
        outcomes.append(outcome)
        print(shown(f"[{number}/{len(rows)}] {outcome.id}: {outcome.describe()}"), file=log, flush=True)
        if as_json:
            print(json.dumps(outcome.to_json(), ensure_ascii=False), file=out, flush=True)
    print(f"apply: {summary(outcomes)}", file=log, flush=True)
    return 0 if all(outcome.ok for outcome in outcomes) else 1


def read_results(path: Path) -> list[dict[str, Any]]:
    """The rows of RESULTS.jsonl (lines that are no row skipped, as the batch does); the file is left as it is."""
    if not path.is_file():
        raise ValueError(f"{path} is not a file: give the RESULTS.jsonl that `warpcode batch ... --out` wrote")
    rows, _ = parse_rows(path.read_bytes())
    if not rows:
        raise ValueError(f"{path} has no result rows: run `warpcode batch JOBS.jsonl --out {path}` first")
    return list(rows.values())


def summary(outcomes: list[Outcome]) -> str:
    counts = Counter(outcome.outcome for outcome in outcomes)
    each = ", ".join(f"{counts[name]} {name.replace('_', ' ')}" for name in OUTCOMES)
    return f"{each} ({counted(len(outcomes), 'row')})"


def apply_row(row: dict[str, Any], prefix: str, only: str, folder: Path) -> Outcome:
    """The row's branch, made unless the row is not to be applied, its branch exists, or its patch does not apply."""
    job_id, repo_text = row["id"], row.get("repo") if isinstance(row.get("repo"), str) else None
    reason = why_not_wanted(row, only)
    if reason:
        return Outcome(job_id, repo_text, "skipped", reason=reason, wanted=False)
    repo = Path(repo_text).expanduser()
    repo = repo if repo.is_absolute() else folder / repo
    if not repo.is_dir():
        return Outcome(job_id, repo_text, "skipped", reason=f"repository missing: {repo} is not a directory")
    if not is_git_repository(repo):
        return Outcome(job_id, repo_text, "skipped", reason=f"{repo} is not (any longer) a git repository")
    if "\0" in job_id:
        return Outcome(job_id, repo_text, "skipped", reason="the id holds a NUL byte, which git cannot keep in a "
                       "commit message: give the job another id")  # fmt: skip
    branch = prefix + name_for(job_id)
    if not is_valid_branch(repo, branch):
        return Outcome(job_id, repo_text, "skipped", branch, reason=f"{branch!r} is not a valid branch name")
    try:
        tree = patched_tree(repo, row["base_commit"], row["patch"])
    except GitFailed as exc:
        return Outcome(job_id, repo_text, "does_not_apply", branch, reason=str(exc))
    existing = branch_commit(repo, branch)
    if existing:
        if git(repo, "rev-parse", f"{existing}^{{tree}}") == tree:
            return Outcome(job_id, repo_text, "already_applied", branch, existing)
        return Outcome(job_id, repo_text, "conflict", branch, existing, f"{branch} exists with other content")
    try:
        commit = commit_tree(repo, tree, row["base_commit"], commit_message(row))
    except GitFailed as exc:
        return Outcome(job_id, repo_text, "skipped", branch, reason=f"git could not make the commit: {exc}")
    try:
        git(repo, "update-ref", "-m", f"warpcode batch apply: {shown(job_id)}", f"refs/heads/{branch}", commit, "")
    except GitFailed as exc:  # made meanwhile, or a branch in the way (`warpcode` when the prefix is `warpcode/`)
        return Outcome(job_id, repo_text, "conflict", branch, reason=f"could not create {branch}: {exc}")
    return Outcome(job_id, repo_text, "applied", branch, commit)


def why_not_wanted(row: dict[str, Any], only: str) -> str | None:
    """Why the row is not to become a branch (not selected, nothing to apply, nowhere to put it), or None."""
    status = row.get("status")
    if only != "any" and status != only:
        return f"status {status}, not selected (--only {only})"
    if not isinstance(row.get("patch"), str) or not row["patch"].strip():
        return "no patch"
    if row.get("base_commit") is None:
        return "plain directory: no git repository to branch"
    if not (isinstance(row["base_commit"], str) and _COMMIT_ID.fullmatch(row["base_commit"])):
        return f"base_commit {shown(repr(row['base_commit']))[:80]} is not a commit id"
    if not isinstance(row.get("repo"), str):
        return "the row names no repository"
    return None


def check_prefix(prefix: str) -> None:
    with tempfile.TemporaryDirectory() as nowhere:  # outside any repository: the name alone is checked
        if not is_valid_branch(Path(nowhere), f"{prefix}x"):
            raise ValueError(f"--branch-prefix {prefix!r} does not make valid branch names (git check-ref-format)")


def is_valid_branch(repo: Path, branch: str) -> bool:
    done = run_git(repo, "check-ref-format", "--branch", branch)
    return done.returncode == 0 and done.stdout.decode().strip() == branch  # not `@{-1}` read as another branch


def patched_tree(repo: Path, base: str, patch: str) -> str:
    """The tree of the base commit with the patch applied, made in a temporary index file."""
    if run_git(repo, "cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
        raise GitFailed(f"base commit {base[:10]} is not in {repo}")
    with tempfile.TemporaryDirectory(prefix="warpcode-apply-") as folder:
        index = {"GIT_INDEX_FILE": os.path.join(folder, "index")}
        git(repo, "read-tree", base, env=index)
        git(repo, "apply", "--cached", "--binary", "--whitespace=nowarn", "-", stdin=patch.encode(), env=index)
        return git(repo, "write-tree", env=index)


def branch_commit(repo: Path, branch: str) -> str | None:
    done = run_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


def commit_message(row: dict[str, Any]) -> str:
    """`warpcode batch: ID`, then the instruction and the job's status; escaped as a terminal shows them (`git log`
    prints a message's bytes as they are), the instruction's own lines kept."""
    body = []
    if isinstance(row.get("instruction"), str) and row["instruction"].strip():
        lines = row["instruction"].strip().splitlines()
        body.append("Instruction: " + "\n".join(shown(line) for line in lines))
    body.append(f"Job status: {shown(str(row.get('status')))}")
    return f"warpcode batch: {shown(row['id'])}\n\n" + "\n".join(body) + "\n"


def commit_tree(repo: Path, tree: str, parent: str, message: str) -> str:
    return git(repo, "commit-tree", tree, "-p", parent, "-F", "-", stdin=message.encode(), env=identity(repo))


def identity(repo: Path) -> dict[str, str]:
    """The repository's configured author and committer (config or GIT_* variables, as git finds them); for one
    that git has none configured for (it would have to guess one), FALLBACK_IDENTITY."""
    variables = {}
    for role in ("AUTHOR", "COMMITTER"):
        if run_git(repo, "-c", "user.useConfigOnly=true", "var", f"GIT_{role}_IDENT").returncode != 0:
            variables[f"GIT_{role}_NAME"], variables[f"GIT_{role}_EMAIL"] = FALLBACK_IDENTITY
    return variables


def git(repo: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
    done = run_git(repo, *args, stdin=stdin, env=env)
    if done.returncode != 0:
        raise GitFailed(one_line(done.stderr.decode(errors="replace")) or f"git {args[0]} failed")
    return done.stdout.decode().strip()


def run_git(
    repo: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """git in `repo`, whatever repository the environment names (a hook's GIT_DIR, GIT_INDEX_FILE)."""
    environment = {key: value for key, value in os.environ.items() if key not in _CONTEXT_VARIABLES}
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, env={**environment, **(env or {})}
    )


def one_line(message: str) -> str:
    """git's error lines (`error:`/`fatal:` dropped), joined with `; `."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    errors = [line.split(": ", 1)[1] for line in lines if line.startswith(("error: ", "fatal: "))]
    return "; ".join(errors or lines)[:500]
