"""`warpcode batch apply`: the rows of a real batch (scripted model, real git repositories) become branches."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agent.batch.calc_project import FIXED, PYTEST, fix_turns, git, make_project, repo_state, run_command
from tests.agent.batch.job_files import read_rows, write_jobs
from tests.agent.scripted_model import write_script
from warpcode.agent.batch.apply import commit_message
from warpcode.agent.batch.ids import name_for
from warpcode.agent.cli.main import main

LOGO = bytes(range(256))  # a binary file of the base commit
LOGO_AFTER = bytes(reversed(range(256))) * 2
NEW_BIN = bytes([0, 159, 146, 150, 255, 0, 10])
WRITE_BYTES = (
    "import pathlib; p = pathlib.Path; p('logo.bin').write_bytes(bytes(reversed(range(256))) * 2); "
    "p('data').mkdir(); p('data/new.bin').write_bytes(bytes([0, 159, 146, 150, 255, 0, 10]))"
)
OWNER = "Repo Owner <owner@example.invalid>"
OUTCOME_FIELDS = {"id", "repo", "outcome", "branch", "commit", "reason"}


@dataclass
class Batch:
    repo: Path
    out: Path
    rows: dict[str, dict]

    @property
    def base(self) -> str:
        return self.rows["fix"]["base_commit"]


def run_batch(tmp_path: Path, capsys, *, identity: bool = True) -> Batch:
    """A repository with a binary file committed (and the user's untracked file), a plain directory, and four jobs:
    `fix` (succeeded: text, binary and new files), `look` (succeeded, no patch), `half done` (failed, a patch) and
    `plain` (succeeded, a plain directory)."""
    repo = make_project(tmp_path / "repo", git_repo=True)
    (repo / "logo.bin").write_bytes(LOGO)
    git("add", "logo.bin", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "logo", cwd=repo)
    if identity:
        git("config", "user.name", "Repo Owner", cwd=repo)
        git("config", "user.email", "owner@example.invalid", cwd=repo)
    make_project(tmp_path / "plain", git_repo=False)
    fixes = write_script(
        tmp_path / "fix.json", fix_turns([run_command(f"{sys.executable} -c {shlex.quote(WRITE_BYTES)}")])
    )
    looks = write_script(tmp_path / "look.json", [{"text": "nothing to do"}])
    half = write_script(tmp_path / "half.json", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "TODO.md", "content": "fix add\n"}}]},
        {"text": "Left a note."},
    ])  # fmt: skip
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "fix", "repo": "repo", "instruction": "fix add", "test_command": PYTEST},
        {"id": "look", "repo": "repo", "instruction": "look", "model": f"scripted:{looks}"},
        {"id": "half done", "repo": "repo", "instruction": "fix", "model": f"scripted:{half}", "test_command": PYTEST},
        {"id": "plain", "repo": "plain", "instruction": "fix add"},
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    assert main(["batch", str(jobs), "--out", str(out), "--model", f"scripted:{fixes}", "--workers", "2"]) == 0
    capsys.readouterr()
    rows = {row["id"]: row for row in read_rows(out)}
    assert {key: row["status"] for key, row in rows.items()} == {
        "fix": "succeeded", "look": "succeeded", "half done": "failed", "plain": "succeeded"}  # fmt: skip
    assert "GIT binary patch" in rows["fix"]["patch"] and rows["look"]["patch"] == ""
    return Batch(repo, out, rows)


def apply(out: Path, *options: str) -> int:
    return main(["batch", "apply", str(out), *options])


def files(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(folder).parts
    }


def checkout_state(repo: Path) -> tuple:
    """Everything of the user's checkout: status (the untracked file too), HEAD, worktrees, the HEAD file's bytes,
    every ref but the warpcode/ branches, and the working tree's files."""
    status, head, _, worktrees = repo_state(repo)
    refs = git("for-each-ref", "--format=%(refname) %(objectname)", cwd=repo)
    others = [line for line in refs.splitlines() if not line.startswith("refs/heads/warpcode/")]
    return status, head, worktrees, (repo / ".git" / "HEAD").read_bytes(), others, files(repo)


def warpcode_branches(repo: Path) -> list[str]:
    return git("for-each-ref", "--format=%(refname:short)", "refs/heads/warpcode/", cwd=repo).split()


@pytest.mark.slow
def test_a_succeeded_row_becomes_one_commit_on_its_base_and_the_checkout_is_untouched(tmp_path: Path, capsys):
    batch = run_batch(tmp_path, capsys)
    before, index_before = checkout_state(batch.repo), (batch.repo / ".git" / "index").read_bytes()

    assert apply(batch.out) == 0

    assert (batch.repo / ".git" / "index").read_bytes() == index_before
    assert checkout_state(batch.repo) == before
    assert repo_state(batch.repo)[2] == "* main\n  warpcode/fix\n"  # the new branch, and nothing else
    commit = git("rev-parse", "warpcode/fix", cwd=batch.repo).strip()
    assert git("rev-list", "--parents", "-n", "1", commit, cwd=batch.repo).split() == [commit, batch.base]
    assert (
        git("log", "-1", "--format=%B", commit, cwd=batch.repo).strip()
        == "warpcode batch: fix\n\nJob status: succeeded"
    )
    assert git("log", "-1", "--format=%an <%ae>|%cn <%ce>", commit, cwd=batch.repo).strip() == f"{OWNER}|{OWNER}"

    # An independent reference: the patch applied with `git apply` to a clone's checkout of the base.
    reference = tmp_path / "reference"
    git("clone", "-q", str(batch.repo), str(reference), cwd=tmp_path)
    git("checkout", "-q", batch.base, cwd=reference)
    subprocess.run(["git", "apply", "--binary", "-"], input=batch.rows["fix"]["patch"].encode(), cwd=reference,
                   check=True)  # fmt: skip
    branch = tmp_path / "branch"
    git("clone", "-q", "-b", "warpcode/fix", str(batch.repo), str(branch), cwd=tmp_path)
    assert files(branch) == files(reference)
    produced = files(branch)
    assert produced["logo.bin"] == LOGO_AFTER and produced["data/new.bin"] == NEW_BIN
    assert produced["calc.py"] == FIXED.encode() and produced["NOTES.md"] == b"fixed add\n"
    assert git("status", "--porcelain", cwd=reference) != "" and git("status", "--porcelain", cwd=branch) == ""

    err = capsys.readouterr().err.splitlines()
    assert any(f"] fix: applied as warpcode/fix ({commit[:10]}) in {batch.repo}" in line for line in err)
    assert "look: skipped: no patch" in "\n".join(err)
    assert "half done: skipped: status failed, not selected (--only succeeded)" in "\n".join(err)
    assert "plain: skipped: plain directory: no git repository to branch" in "\n".join(err)
    assert err[-1] == "apply: 1 applied, 0 already applied, 3 skipped, 0 conflict, 0 does not apply (4 rows)"


def test_a_rerun_is_already_applied_and_a_branch_with_other_content_is_a_conflict(tmp_path: Path, capsys):
    batch = run_batch(tmp_path, capsys)
    assert apply(batch.out) == 0
    commit = git("rev-parse", "warpcode/fix", cwd=batch.repo).strip()
    capsys.readouterr()

    assert apply(batch.out) == 0
    assert git("rev-parse", "warpcode/fix", cwd=batch.repo).strip() == commit
    assert f"fix: already applied (warpcode/fix at {commit[:10]})" in capsys.readouterr().err

    git("update-ref", "refs/heads/warpcode/fix", batch.base, cwd=batch.repo)  # someone's own branch of that name
    assert apply(batch.out) == 1
    assert git("rev-parse", "warpcode/fix", cwd=batch.repo).strip() == batch.base
    err = capsys.readouterr().err
    assert "fix: conflict: warpcode/fix exists with other content (left as it is)" in err
    assert "0 applied, 0 already applied, 3 skipped, 1 conflict" in err

    assert apply(batch.out, "--branch-prefix", "main/") == 1  # the branch `main` is in the way of `main/fix`
    assert "fix: conflict: could not create main/fix: " in capsys.readouterr().err
    assert git("branch", "--list", "main/*", cwd=batch.repo) == ""


@pytest.mark.slow
def test_only_picks_the_rows_of_a_status_or_any_row_with_a_patch(tmp_path: Path, capsys):
    batch = run_batch(tmp_path, capsys)
    half = f"warpcode/{name_for('half done')}"
    assert half.startswith("warpcode/half-done+")

    assert apply(batch.out, "--only", "failed") == 0
    assert warpcode_branches(batch.repo) == [half]
    shown = git("show", "--format=%B", "--stat", half, cwd=batch.repo)
    assert "warpcode batch: half done\n\nJob status: failed" in shown and "TODO.md" in shown
    assert "fix: skipped: status succeeded, not selected (--only failed)" in capsys.readouterr().err

    assert apply(batch.out, "--only", "any", "--branch-prefix", "batch-2/") == 0
    assert git("for-each-ref", "--format=%(refname:short)", "refs/heads/batch-2/", cwd=batch.repo).split() == [
        "batch-2/fix", f"batch-2/{name_for('half done')}"]  # fmt: skip
    assert git("diff", "--name-only", batch.base, "batch-2/fix", cwd=batch.repo).split() == [
        "NOTES.md", "calc.py", "data/new.bin", "logo.bin"]  # fmt: skip


@pytest.mark.slow
def test_rows_that_cannot_become_branches_are_reported_and_nothing_is_forced(tmp_path: Path, capsys):
    batch = run_batch(tmp_path, capsys)
    # A commit where calc.py differs: the patch's context no longer matches there.
    other = tmp_path / "other"
    git("clone", "-q", str(batch.repo), str(other), cwd=tmp_path)
    (other / "calc.py").write_text("def add(a, b):\n    return b - a\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "moved", cwd=other)
    git("push", "-q", "origin", "HEAD:refs/heads/moved", cwd=other)
    moved = git("rev-parse", "HEAD", cwd=other).strip()
    fix = batch.rows["fix"]
    lines = fix["patch"].splitlines(keepends=True)
    cut = lines.index("+++ b/calc.py\n") + 3  # inside calc.py's hunk: its header and one line of context
    rows = [
        {**fix, "id": "moved", "base_commit": moved},
        {**fix, "id": "corrupt", "patch": "".join(lines[:cut])},
        {**fix, "id": "unknown-base", "base_commit": "0123456789" * 4},
        {**fix, "id": "gone", "repo": str(tmp_path / "gone")},
        batch.rows["plain"],
        {**fix, "id": "fine", "instruction": "fix add()"},
    ]
    results = write_jobs(tmp_path / "crafted.jsonl", [*rows, "{not json"])
    before = checkout_state(batch.repo)

    assert apply(results, "--only", "any", "--json") == 1

    captured = capsys.readouterr()
    outcomes = [json.loads(line) for line in captured.out.splitlines()]
    assert [outcome["id"] for outcome in outcomes] == [row["id"] for row in rows]
    assert all(set(outcome) == OUTCOME_FIELDS for outcome in outcomes)
    by_id = {outcome["id"]: outcome for outcome in outcomes}
    assert by_id["moved"]["outcome"] == by_id["corrupt"]["outcome"] == "does_not_apply"
    assert by_id["moved"]["reason"] == "patch failed: calc.py:1; calc.py: patch does not apply"
    assert by_id["corrupt"]["reason"].startswith("corrupt patch at line ")
    assert by_id["unknown-base"] == {"id": "unknown-base", "repo": fix["repo"], "outcome": "does_not_apply",
                                     "branch": "warpcode/unknown-base", "commit": None,
                                     "reason": f"base commit 0123456789 is not in {batch.repo}"}  # fmt: skip
    assert by_id["gone"]["outcome"] == "skipped" and "repository missing" in by_id["gone"]["reason"]
    assert by_id["plain"] == {"id": "plain", "repo": batch.rows["plain"]["repo"], "outcome": "skipped",
                              "branch": None, "commit": None,
                              "reason": "plain directory: no git repository to branch"}  # fmt: skip
    fine = by_id["fine"]
    assert fine["outcome"] == "applied" and fine["branch"] == "warpcode/fine" and fine["reason"] is None
    assert git("rev-parse", "warpcode/fine", cwd=batch.repo).strip() == fine["commit"]
    message = git("log", "-1", "--format=%B", "warpcode/fine", cwd=batch.repo).strip()
    assert message == "warpcode batch: fine\n\nInstruction: fix add()\nJob status: succeeded"
    assert warpcode_branches(batch.repo) == ["warpcode/fine"]  # nothing made for the others
    assert checkout_state(batch.repo) == before
    err = captured.err.splitlines()
    assert "moved: does not apply: patch failed: calc.py:1; calc.py: patch does not apply" in err[0]
    assert err[-1] == "apply: 1 applied, 0 already applied, 2 skipped, 0 conflict, 3 does not apply (6 rows)"


def test_a_missing_or_empty_results_file_is_a_one_line_error(tmp_path: Path, capsys):
    assert apply(tmp_path / "nowhere.jsonl") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere.jsonl is not a file: give the RESULTS.jsonl" in err
    (tmp_path / "empty.jsonl").write_text("{not json\n\n")
    assert apply(tmp_path / "empty.jsonl", "--json") == 1
    captured = capsys.readouterr()
    assert (
        captured.out == ""
        and captured.err.count("\n") == 1
        and "has no result rows: run `warpcode batch" in captured.err
    )


@pytest.mark.slow
def test_without_a_configured_identity_the_commit_is_warpcode_batchs(tmp_path: Path, capsys, monkeypatch):
    batch = run_batch(tmp_path, capsys, identity=False)
    (tmp_path / "gitconfig").write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)

    assert apply(batch.out) == 0

    identities = git("log", "-1", "--format=%an <%ae>|%cn <%ce>", "warpcode/fix", cwd=batch.repo).strip()
    assert identities == "warpcode batch <batch@warpcode.invalid>|warpcode batch <batch@warpcode.invalid>"


@pytest.mark.parametrize("job_id", ["fix", "half done", "a/b", "a..b", "x.lock", "x.", ".hidden", "-x", "@{-1}",
                                    "naïve", "a" * 200, "/", "HEAD", "", "+", "a+b", "\x00"])  # fmt: skip
def test_job_names_make_valid_distinct_branch_names(tmp_path: Path, job_id: str):
    name = name_for(job_id)
    assert name == name_for(job_id)
    checked = subprocess.run(["git", "check-ref-format", "--branch", f"warpcode/{name}"], capture_output=True,
                             text=True, cwd=tmp_path)  # fmt: skip
    assert checked.returncode == 0 and checked.stdout.strip() == f"warpcode/{name}"
    assert (name == job_id) == (job_id == "fix")
    assert name_for("a b") != name_for("a-b") != name_for("a/b")


def test_commit_message_names_the_instruction_when_the_row_has_one():
    assert commit_message({"id": "x", "status": "failed"}) == "warpcode batch: x\n\nJob status: failed\n"
    assert commit_message({"id": "x", "status": "succeeded", "instruction": " fix it\n"}) == (
        "warpcode batch: x\n\nInstruction: fix it\nJob status: succeeded\n"
    )


def test_help_names_apply_and_batch_jobs_still_parse(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["batch", "--help"])
    assert exited.value.code == 0 and "warpcode batch apply RESULTS.jsonl" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        main(["batch", "apply", "--help"])
    shown = capsys.readouterr().out
    assert exited.value.code == 0 and shown.startswith("usage: warpcode batch apply")
    assert all(option in shown for option in ("--branch-prefix", "--only", "--json", "RESULTS.jsonl"))
    with pytest.raises(SystemExit) as exited:
        main(["batch", "jobs.jsonl"])  # still the batch's own parser: --out is required
    assert exited.value.code == 2 and "--out" in capsys.readouterr().err


def test_ids_that_sanitise_alike_keep_their_own_trajectories_and_branches(tmp_path: Path, capsys):
    make_project(tmp_path / "repo", git_repo=True)
    old_hash = {text: hashlib.sha256(text.encode()).hexdigest()[:10] for text in ("x/y", "a/b")}  # the old names'
    ids = ["x/y", f"x_y-{old_hash['x/y']}", "a/b", f"a-b-{old_hash['a/b']}", "Fix", "fix"]
    rows = []
    for number, job_id in enumerate(ids):
        note = write_script(tmp_path / f"note-{number}.json", [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "NOTE.md", "content": f"{number}\n"}}]},
            {"text": "noted"},
        ])  # fmt: skip
        rows.append({"id": job_id, "repo": "repo", "instruction": "note", "model": f"scripted:{note}"})
    out = tmp_path / "RESULTS.jsonl"
    assert main(["batch", str(write_jobs(tmp_path / "jobs.jsonl", rows)), "--out", str(out)]) == 0
    results = {row["id"]: row for row in read_rows(out)}

    trajectories = [results[job_id]["trajectory"] for job_id in ids]
    assert len({path.lower() for path in trajectories}) == len(ids)  # apart even where case is folded
    for number, path in enumerate(trajectories):
        assert f'"rawInput": {{"path": "NOTE.md", "content": "{number}\\n"}}' in Path(path).read_text()

    assert apply(out, "--json") == 0
    outcomes = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [outcome["outcome"] for outcome in outcomes] == ["applied"] * len(ids)
    assert len({outcome["branch"].lower() for outcome in outcomes}) == len(ids)
    for outcome in outcomes:
        number = ids.index(outcome["id"])
        assert git("show", f"{outcome['branch']}:NOTE.md", cwd=tmp_path / "repo") == f"{number}\n"


def test_a_nul_byte_in_one_id_fails_that_row_alone(tmp_path: Path, capsys):
    repo = make_project(tmp_path / "repo", git_repo=True)
    base = git("rev-parse", "HEAD", cwd=repo).strip()
    (repo / "calc.py").write_text(FIXED)
    patch = git("diff", cwd=repo)
    git("checkout", "--", "calc.py", cwd=repo)
    row = {"repo": str(repo), "status": "succeeded", "base_commit": base, "patch": patch}
    results = write_jobs(tmp_path / "crafted.jsonl", [
        {**row, "id": "nul\x00id"},
        {**row, "id": "bell\x07\x1b[31mred", "instruction": "fix\x1b[2J it\nthen stop"},
        {**row, "id": "base\x00", "base_commit": base + "\x00"},
        {**row, "id": "fine"},
    ])  # fmt: skip

    assert apply(results, "--json") == 1

    captured = capsys.readouterr()
    outcomes = {outcome["id"]: outcome for outcome in map(json.loads, captured.out.splitlines())}
    assert outcomes["nul\x00id"]["outcome"] == "skipped" and "NUL" in outcomes["nul\x00id"]["reason"]
    assert outcomes["base\x00"]["outcome"] == "skipped" and "is not a commit id" in outcomes["base\x00"]["reason"]
    assert outcomes["bell\x07\x1b[31mred"]["outcome"] == outcomes["fine"]["outcome"] == "applied"
    message = git("log", "-1", "--format=%B", outcomes["bell\x07\x1b[31mred"]["branch"], cwd=repo)
    assert (
        message
        == "warpcode batch: bell\\x07\\x1b[31mred\n\nInstruction: fix\\x1b[2J it\nthen stop\nJob status: succeeded\n\n"
    )
    err = captured.err
    assert "\x00" not in err and "\x1b" not in err and "[1/4] nul\\x00id: skipped: " in err
    assert (
        err.splitlines()[-1] == "apply: 2 applied, 0 already applied, 2 skipped, 0 conflict, 0 does not apply (4 rows)"
    )
