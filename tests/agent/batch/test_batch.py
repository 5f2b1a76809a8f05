"""`warpcode batch` in this process: real git repositories and plain directories, the scripted model."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent.batch.calc_project import (
    BUGGY,
    FIXED,
    PYTEST,
    fix_turns,
    git,
    git_dir_files,
    make_project,
    repo_state,
    run_command,
)
from tests.agent.batch.job_files import read_rows, write_jobs
from tests.agent.scripted_model import write_script
from warpcode.agent.cli.main import main

FIELDS = {"id", "status", "stop_reason", "repo", "base_commit", "patch", "files_changed", "tests", "usage",
          "duration_s", "attempts", "error", "trajectory", "worker"}  # fmt: skip


def batch(jobs: Path, out: Path, *options: str) -> int:
    return main(["batch", str(jobs), "--out", str(out), *options])


def by_id(out: Path) -> dict[str, dict]:
    rows = read_rows(out)
    assert len(rows) == len({row["id"] for row in rows}), "an id appears twice"
    return {row["id"]: row for row in rows}


@pytest.mark.slow
def test_git_repo_and_plain_directory_jobs_leave_the_sources_unchanged(tmp_path: Path, capsys):
    repo = make_project(tmp_path / "repo", git_repo=True)
    plain = make_project(tmp_path / "plain", git_repo=False)
    before, plain_before = repo_state(repo), sorted(p.name for p in plain.iterdir())
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    looks = f"scripted:{write_script(tmp_path / 'look.json', [{'text': 'ok'}])}"
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "git-fix", "repo": "repo", "instruction": "fix add", "test_command": PYTEST},
        {"id": "plain-fix", "repo": str(plain), "instruction": "fix add", "test_command": PYTEST},
        {"id": "no-edit", "repo": "repo", "instruction": "look", "model": looks},
    ])  # fmt: skip
    out = tmp_path / "out" / "RESULTS.jsonl"

    assert batch(jobs, out, "--model", model, "--workers", "3") == 0

    rows = by_id(out)
    assert set(rows) == {"git-fix", "plain-fix", "no-edit"}
    for row in rows.values():
        assert set(row) == FIELDS
        assert row["attempts"] == 1 and row["error"] is None and row["stop_reason"] == "end_turn"
        assert row["worker"].startswith("local:")
        assert Path(row["trajectory"]).parent == out.parent / "RESULTS.jsonl.trajectories"
        assert all(json.loads(line) for line in Path(row["trajectory"]).read_text().splitlines())
    fixed, copied, untouched = rows["git-fix"], rows["plain-fix"], rows["no-edit"]
    assert fixed["status"] == copied["status"] == untouched["status"] == "succeeded"
    assert fixed["base_commit"] == git("rev-parse", "HEAD", cwd=repo).strip() and copied["base_commit"] is None
    assert fixed["files_changed"] == copied["files_changed"] == ["NOTES.md", "calc.py"]
    assert fixed["tests"] == {"command": PYTEST, "exit_code": 0, "passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert fixed["usage"]["model_requests"] == 4 and fixed["usage"]["output_tokens"] > 0
    assert untouched["patch"] == "" and untouched["files_changed"] == [] and untouched["tests"] is None

    # Each patch reproduces the job's files on a fresh copy of its base.
    for row, source in ((fixed, repo), (copied, plain)):
        fresh = tmp_path / f"fresh-{row['id']}"
        if row["base_commit"]:
            git("clone", "-q", str(source), str(fresh), cwd=tmp_path)
            git("checkout", "-q", row["base_commit"], cwd=fresh)
        else:
            make_project(fresh, git_repo=False)
        subprocess.run(["git", "apply", "-"], input=row["patch"], text=True, cwd=fresh, check=True)
        assert (fresh / "calc.py").read_text() == FIXED and (fresh / "NOTES.md").read_text() == "fixed add\n"

    # The sources are as they were; no copy stays on disk.
    assert repo_state(repo) == before
    assert git("worktree", "list", cwd=repo).count("\n") == 1
    assert (repo / "calc.py").read_text() == (plain / "calc.py").read_text() == BUGGY
    assert sorted(p.name for p in plain.iterdir()) == plain_before
    assert not (out.parent / "RESULTS.jsonl.workdirs").exists()  # no copy stays, nor the folder
    err = capsys.readouterr().err
    assert "git-fix: succeeded in" in err and "3 succeeded, 0 failed, 0 timeout, 0 error" in err


def test_bad_rows_become_error_rows_and_the_rest_runs(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "good", "repo": "repo", "instruction": "fix"},
        "{not json",
        {"id": "no-instruction", "repo": "repo"},
        {"id": "wrong-type", "repo": "repo", "instruction": "fix", "timeout_s": "soon"},
        {"id": "good", "repo": "repo", "instruction": "again"},
        {"id": "missing-repo", "repo": "nowhere", "instruction": "fix"},
        {"id": "bad-base", "repo": "repo", "instruction": "fix", "base": "no-such-branch"},
        '{"id": "half\\ud800", "repo": "repo", "instruction": "fix"}',
        '{"id": "half-repo", "repo": "re\\udfffpo", "instruction": "fix"}',
    ])  # fmt: skip
    with jobs.open("ab") as file:
        file.write(b'{"id": "latin-1", "repo": "repo", "instruction": "caf\xe9"}\n')
        file.write('{"id": "line\u2028separator", "repo": "repo", "instruction": "fix"}\n'.encode())
    out = tmp_path / "RESULTS.jsonl"

    assert batch(jobs, out, "--model", model, "--workers", "2") == 1  # rows that could not run: `error`

    rows = by_id(out)
    assert rows["good"]["status"] == rows["line\u2028separator"]["status"] == "succeeded"
    errors = {key: row["error"] for key, row in rows.items() if row["status"] == "error"}
    assert set(errors) == {"line:2", "no-instruction", "wrong-type", "line:5", "missing-repo", "bad-base", "line:8",
                           "line:9", "line:10"}  # fmt: skip
    assert (
        errors["line:8"]
        == errors["line:9"].replace("9", "8")
        == ("line 8: a \\ud800-\\udfff escape without its pair is no character")
    )
    assert errors["line:10"] == "line 10: not UTF-8 text (byte 54)"
    recorded = out.read_bytes()
    assert batch(jobs, out, "--model", model, "--allow-errors") == 0
    assert out.read_bytes() == recorded  # every row read back: nothing dropped, nothing run again
    assert "not valid JSON" in errors["line:2"]
    assert "missing required field 'instruction'" in errors["no-instruction"]
    assert "'timeout_s' has the wrong type" in errors["wrong-type"]
    assert "duplicate id 'good'" in errors["line:5"]
    assert "repository not found" in errors["missing-repo"]
    assert "no-such-branch" in errors["bad-base"] and rows["bad-base"]["attempts"] == 1
    assert git("worktree", "list", cwd=repo).count("\n") == 1


def test_failing_tests_fail_and_a_timeout_times_out(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    looks = f"scripted:{write_script(tmp_path / 'look.json', [{'text': 'nothing to do'}])}"
    sleeps = write_script(tmp_path / "sleep.json", [run_command("sleep 30")])
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "still-failing", "repo": "repo", "instruction": "x", "model": looks, "test_command": PYTEST},
        {"id": "slow", "repo": "repo", "instruction": "x", "model": f"scripted:{sleeps}", "timeout_s": 1},
        {"id": "turn-limit", "repo": "repo", "instruction": "x", "max_turn_requests": 1},
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    started = time.monotonic()

    assert (
        batch(jobs, out, "--model", f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}", "--workers", "3")
        == 0
    )

    assert time.monotonic() - started < 15
    rows = by_id(out)
    failing = rows["still-failing"]
    assert failing["status"] == "failed" and failing["stop_reason"] == "end_turn"
    assert failing["tests"] == {"command": PYTEST, "exit_code": 1, "passed": 1, "failed": 1, "errors": 0, "skipped": 0}
    assert rows["slow"]["status"] == "timeout" and rows["slow"]["duration_s"] < 10
    assert rows["turn-limit"]["status"] == "failed" and rows["turn-limit"]["stop_reason"] == "max_turn_requests"
    assert git("worktree", "list", cwd=repo).count("\n") == 1


def test_a_test_command_cut_off_by_the_timeout_leaves_nothing_running(tmp_path: Path):
    """The test command runs as the agent's commands do: what it started is stopped with it, even a process that
    left its process group (setsid), which killing the group alone would miss."""
    make_project(tmp_path / "repo", git_repo=True)
    looks = f"scripted:{write_script(tmp_path / 'look.json', [{'text': 'nothing to do'}])}"
    pid_file = tmp_path / "escaped.pid"
    hangs = f"setsid sleep 60 & echo $! > {pid_file}; sleep 60"
    job = {"id": "hangs", "repo": "repo", "instruction": "x", "test_command": hangs, "timeout_s": 1}
    jobs = write_jobs(tmp_path / "jobs.jsonl", [job])
    out = tmp_path / "RESULTS.jsonl"
    started = time.monotonic()
    assert batch(jobs, out, "--model", looks) == 0
    assert time.monotonic() - started < 15
    row = by_id(out)["hangs"]
    assert (row["status"], row["tests"]) == ("timeout", None)
    escaped = int(pid_file.read_text())
    try:
        assert not Path(f"/proc/{escaped}").exists(), "the test command's setsid child outlived it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


def test_rerun_skips_recorded_ids_and_retry_errors_reruns_errors(tmp_path: Path, capsys):
    repo = make_project(tmp_path / "repo", git_repo=True)
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "a", "repo": "repo", "instruction": "fix"},
        {"id": "b", "repo": "later", "instruction": "fix"},
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    assert batch(jobs, out, "--model", model) == 1
    assert {key: row["status"] for key, row in by_id(out).items()} == {"a": "succeeded", "b": "error"}
    first_a = by_id(out)["a"]

    make_project(tmp_path / "later", git_repo=True)
    assert batch(jobs, out, "--model", model) == 1  # everything recorded: nothing runs, and `b` is still error
    assert by_id(out)["b"]["status"] == "error"

    assert batch(jobs, out, "--model", model, "--retry-errors") == 0
    rows = by_id(out)
    assert rows["a"] == first_a and rows["b"]["status"] == "succeeded"

    capsys.readouterr()
    assert batch(jobs, out, "--model", model, "--redo") == 0
    rows = by_id(out)
    assert rows["a"]["status"] == rows["b"]["status"] == "succeeded"
    progress = capsys.readouterr()
    assert "a: succeeded" in progress.err + progress.out and "b: succeeded" in progress.err + progress.out
    assert git("worktree", "list", cwd=repo).count("\n") == 1


@pytest.mark.slow
def test_a_driver_killed_mid_batch_resumes_with_every_id_once(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    before = repo_state(repo)
    slow = write_script(tmp_path / "slow.json", fix_turns([run_command("sleep 0.4")]))
    ids = [f"job-{n}" for n in range(6)]
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": i, "repo": "repo", "instruction": "fix"} for i in ids])
    out = tmp_path / "RESULTS.jsonl"
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(out),
               "--model", f"scripted:{slow}", "--workers", "2"]  # fmt: skip
    driver = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 2):
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    recorded = len(read_rows(out))
    assert 2 <= recorded < len(ids)
    # The killed run (almost always) left its running jobs' copies: the re-run removes them.

    assert batch(jobs, out, "--model", f"scripted:{slow}", "--workers", "3") == 0

    rows = by_id(out)
    assert sorted(rows) == ids and all(row["status"] == "succeeded" for row in rows.values())
    assert repo_state(repo) == before
    assert not (tmp_path / "RESULTS.jsonl.workdirs").exists()  # the stale copies were removed


def test_what_a_killed_runs_orphan_writes_during_the_rerun_is_gone_at_its_end(tmp_path: Path):
    # A process of a killed run (a `git clone` that outlived its driver) can write its copy after the re-run
    # cleaned the workdirs folder: here a job's command plays that orphan, writing beside the job's own copy.
    make_project(tmp_path / "repo", git_repo=True)
    orphan = run_command("mkdir -p ../../job-0-0badc0de/ws/.git && touch ../../job-0-0badc0de/ws/.git/HEAD")
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": "job-1", "repo": "repo", "instruction": "fix"}])
    out = tmp_path / "RESULTS.jsonl"
    model = f"scripted:{write_script(tmp_path / 'orphan.json', fix_turns([orphan]))}"
    assert batch(jobs, out, "--model", model, "--keep-workdirs") == 0
    kept = list((tmp_path / "RESULTS.jsonl.workdirs").iterdir())
    assert len(kept) == 2  # with --keep-workdirs nothing is removed at the end: the next run does it

    assert batch(jobs, out, "--model", model, "--redo") == 0
    assert by_id(out)["job-1"]["status"] == "succeeded"
    assert not (tmp_path / "RESULTS.jsonl.workdirs").exists()


@pytest.mark.slow
def test_sigterm_cancels_running_jobs_cleanly(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    before = repo_state(repo)
    sleeps = write_script(tmp_path / "sleep.json", [run_command("sleep 30")])
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": f"j{n}", "repo": "repo", "instruction": "x"} for n in range(2)])
    out = tmp_path / "RESULTS.jsonl"
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(out),
               "--model", f"scripted:{sleeps}", "--workers", "2"]  # fmt: skip
    driver = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    copies = tmp_path / "RESULTS.jsonl.workdirs"
    while time.monotonic() < deadline and len(list(copies.glob("*/ws/calc.py"))) < 2:
        time.sleep(0.05)
    time.sleep(0.5)  # the turns are in their commands
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=20) == 130
    assert "interrupted" in driver.stderr.read()
    assert not out.exists() or out.read_text() == ""
    assert repo_state(repo) == before
    assert not (tmp_path / "RESULTS.jsonl.workdirs").exists()


def test_workers_run_jobs_at_once(tmp_path: Path):
    make_project(tmp_path / "repo", git_repo=True)
    slow = write_script(tmp_path / "slow.json", fix_turns([run_command("sleep 1.5")]))
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": f"j{n}", "repo": "repo", "instruction": "x"} for n in range(4)])
    out = tmp_path / "RESULTS.jsonl"
    started = time.monotonic()
    assert batch(jobs, out, "--model", f"scripted:{slow}", "--workers", "4") == 0
    wall = time.monotonic() - started
    rows = by_id(out)
    assert all(row["status"] == "succeeded" for row in rows.values())
    assert wall < 0.6 * sum(row["duration_s"] for row in rows.values())  # one at a time would take the sum
    assert len({row["worker"] for row in rows.values()}) == 4


def test_fail_fast_stops_at_the_first_job_that_does_not_succeed(tmp_path: Path, capsys):
    make_project(tmp_path / "repo", git_repo=True)
    looks = write_script(tmp_path / "look.json", [{"text": "ok"}])
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "fails", "repo": "repo", "instruction": "look", "test_command": PYTEST},
        *({"id": f"later-{n}", "repo": "repo", "instruction": "x"} for n in range(3)),
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    assert batch(jobs, out, "--model", f"scripted:{looks}", "--fail-fast") == 1
    assert list(by_id(out)) == ["fails"] and by_id(out)["fails"]["status"] == "failed"
    assert "3 jobs have no row (--fail-fast stopped the batch)" in capsys.readouterr().err
    assert batch(jobs, out, "--model", f"scripted:{looks}") == 0  # the re-run finishes the rest
    assert sorted(by_id(out)) == ["fails", "later-0", "later-1", "later-2"]


def test_an_unreachable_model_is_retried_then_an_error_row(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    before = repo_state(repo)
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    fine = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "down", "repo": "repo", "instruction": "fix", "model": f"openai:http://127.0.0.1:{port}/v1"},
        {"id": "up", "repo": "repo", "instruction": "fix"},
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    assert batch(jobs, out, "--model", fine, "--max-attempts", "2") == 1  # an error row
    rows = by_id(out)
    down = rows["down"]
    assert (down["status"], down["attempts"]) == ("error", 2)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    assert down["error"].startswith(f"The model could not answer: nothing answers at {url}")  # as `run` says it
    assert "nothing answers" not in (out.with_name("RESULTS.jsonl.trajectories") / "down.jsonl").read_text()
    assert (rows["up"]["status"], rows["up"]["attempts"]) == ("succeeded", 1)
    assert repo_state(repo) == before  # each attempt's copy removed


def test_a_model_that_cannot_answer_is_the_row_s_error_and_not_in_its_trajectory(tmp_path: Path):
    make_project(tmp_path / "repo", git_repo=True)
    generating = f"scripted:{write_script(tmp_path / 'generate.json', [{'generate_tokens': 4}])}"  # no server for it
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": "j", "repo": "repo", "instruction": "fix", "model": generating}])
    out = tmp_path / "RESULTS.jsonl"
    assert batch(jobs, out) == 0  # the job failed: no error row, nothing to try again
    row = by_id(out)["j"]
    assert (row["status"], row["stop_reason"], row["attempts"]) == ("failed", "refusal", 1)
    assert row["error"] == (
        "The model could not answer: turn 1 of the scripted model asks for generate_tokens, and no model server was "
        "given to generate them: run its jobs under `warpcode batch --ray ... --replicas R`."
    )
    assert "could not answer" not in Path(row["trajectory"]).read_text()  # the row's error is its one report


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_with_the_sandbox_configured_a_jobs_test_command_runs_in_it_too(tmp_path: Path) -> None:
    """The test command runs what the agent left in the workspace (a conftest.py, a script): outside the sandbox
    it would do what the agent's own commands could not."""
    make_project(tmp_path / "repo", git_repo=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    config = tmp_path / "config" / "warpcode" / "config.toml"  # XDG_CONFIG_HOME is tmp_path/config
    config.parent.mkdir(parents=True)
    config.write_text("sandbox = 'bwrap'\n")
    script = f"touch {outside}/escaped.txt; echo '1 passed in 0.01s'\n"
    turns = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "check.sh", "content": script}}]}]
    model = f"scripted:{write_script(tmp_path / 'plant.json', [*turns, {'text': 'done'}])}"
    jobs = write_jobs(
        tmp_path / "jobs.jsonl", [{"id": "plant", "repo": "repo", "instruction": "x", "test_command": "sh check.sh"}]
    )
    out = tmp_path / "out" / "RESULTS.jsonl"
    assert batch(jobs, out, "--model", model) == 0
    assert by_id(out)["plant"]["tests"]["passed"] == 1  # it ran
    assert not (outside / "escaped.txt").exists()


def test_a_job_cannot_write_the_source_repository(tmp_path: Path, capsys):
    """A job's commands plant a hook, change the config and make refs through every path git gives them; the
    source's .git stays byte for byte as it was (apply only adds its branch), and no hook runs on a later checkout."""
    repo = make_project(tmp_path / "repo", git_repo=True)
    ran = tmp_path / "hook-ran"
    hook = f"#!/bin/sh\ntouch {shlex.quote(str(ran))}\n"
    plant = "; ".join([
        'common="$(git rev-parse --path-format=absolute --git-common-dir)"',
        'mkdir -p "$common/hooks" .git/hooks',
        f'for dir in "$common/hooks" .git/hooks; do printf {shlex.quote(hook)} > "$dir/post-checkout"; '
        'chmod +x "$dir/post-checkout"; done',
        'git config core.hooksPath "$common/hooks"',
        "git config user.name planted",
        "git branch -f planted",
        "git tag -f planted",
        "git push -q origin HEAD:refs/heads/pushed",
        "git push -q --all",
        "true",
    ])  # fmt: skip
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns([run_command(plant)]))}"
    jobs = write_jobs(
        tmp_path / "jobs.jsonl", [{"id": "plants", "repo": "repo", "instruction": "fix", "test_command": plant}]
    )
    out = tmp_path / "RESULTS.jsonl"
    before = git_dir_files(repo)

    assert batch(jobs, out, "--model", model) == 0
    assert by_id(out)["plants"]["status"] == "succeeded"
    assert git_dir_files(repo) == before
    assert main(["batch", "apply", str(out)]) == 0

    after = git_dir_files(repo)
    assert {name: digest for name, digest in after.items() if name in before} == before  # nothing changed or gone
    added = set(after) - set(before)
    assert {"refs/heads/warpcode/plants", "logs/refs/heads/warpcode/plants"} <= added
    assert all(name.startswith(("objects/", "refs/heads/warpcode/", "logs/refs/heads/warpcode/")) for name in added)
    git("checkout", "-q", "-b", "later", cwd=repo)  # the user's next checkout
    assert not ran.exists()
    assert "planted" not in git("config", "--local", "--list", cwd=repo)
    capsys.readouterr()


def test_a_plain_directory_holding_its_own_out_folder_is_copied_without_it(tmp_path: Path):
    plain = make_project(tmp_path / "plain", git_repo=False)
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    jobs = write_jobs(
        tmp_path / "jobs.jsonl", [{"id": f"j{n}", "repo": "plain", "instruction": "fix"} for n in range(2)]
    )
    out = plain / "results" / "RESULTS.jsonl"

    for again in ([], ["--redo"]):  # the second time the results file and its trajectories are there too
        assert batch(jobs, out, "--model", model, *again) == 0
        for row in by_id(out).values():
            assert row["status"] == "succeeded", row["error"][:200]
            assert row["files_changed"] == ["NOTES.md", "calc.py"]


def test_ids_reach_the_terminal_with_their_control_characters_escaped(tmp_path: Path, capsys):
    make_project(tmp_path / "repo", git_repo=True)
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    ids = ["title\x1b]0;owned\x07\x1b[2J", "two\nlines", "[bold]markup[/]"]
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        *({"id": job_id, "repo": "repo", "instruction": "fix"} for job_id in ids),
        {"id": "gone\x1b[5m", "repo": "nowhere\x1b[5m", "instruction": "fix"},
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"

    assert batch(jobs, out, "--model", model, "--allow-errors") == 0
    assert main(["batch", "apply", str(out)]) == 0

    err = capsys.readouterr().err
    assert not {"\x1b", "\x07"} & set(err)
    assert "title\\x1b]0;owned\\x07\\x1b[2J: succeeded in" in err and "two\\nlines: succeeded in" in err
    assert "[bold]markup[/]: succeeded in" in err
    assert "gone\\x1b[5m: error in" in err and "'nowhere\\x1b[5m' is not a directory" in err
    assert "two\\nlines: applied as warpcode/two-lines+" in err
    assert sorted(by_id(out)) == sorted([*ids, "gone\x1b[5m"])  # the rows keep the ids as they are
