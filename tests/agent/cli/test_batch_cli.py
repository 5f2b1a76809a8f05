"""`warpcode batch` as a user runs it, the real program in a subprocess: where a row's paths are taken from, the
exit code when a job could not run, and what its summary looks like in a pipe (a CI log)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.agent.backends import spec_relative_to
from warpcode.agent.cli.main import build_parser

pytestmark = pytest.mark.slow  # real `warpcode` subprocesses

WARPCODE = str(Path(sys.executable).with_name("warpcode"))
BOX_DRAWING = "─│┃━┏┓┗┛┡┩└┘╇"


def batch(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CONFIG_HOME": str(cwd / "config"), "WARPCODE_STATE_DIR": str(cwd / "state")}
    env.pop("WARPCODE_MODEL", None)
    return subprocess.run([WARPCODE, "batch", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def write_jobs(path: Path, *rows: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_every_path_of_a_row_is_taken_from_the_jobs_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "jobs"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "a.txt").write_text("a\n")
    (folder / "model.json").write_text('{"turns": [{"text": "Done."}]}')
    row = {"id": "one", "repo": "repo", "instruction": "look", "model": "scripted:model.json"}
    jobs = write_jobs(folder / "jobs.jsonl", row)
    done = batch(str(jobs.relative_to(tmp_path)), "--out", "results.jsonl", cwd=tmp_path)  # run from elsewhere
    [result] = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "succeeded", result["error"]
    assert done.returncode == 0, done.stderr
    # What a CI log shows: counts in the singular when there is one, the summary table as plain columns.
    assert "batch: 1 job, 0 already recorded, 1 to run" in done.stderr
    assert not any(mark in done.stderr for mark in BOX_DRAWING), done.stderr
    table = {line.split()[0]: line.split() for line in done.stderr.splitlines() if line.strip()}
    assert table["succeeded"][1] == "1" and table["error"][:3] == ["error", "0", "-"]


def test_model_specs_take_their_paths_from_a_folder(tmp_path: Path) -> None:
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "odd#name").mkdir()
    assert spec_relative_to("scripted:s.json", tmp_path) == f"scripted:{tmp_path / 's.json'}"
    assert spec_relative_to("scripted:/abs/s.json", tmp_path) == "scripted:/abs/s.json"
    assert spec_relative_to("local:checkpoint#mxfp8", tmp_path) == f"local:{tmp_path / 'checkpoint'}#mxfp8"
    assert spec_relative_to("checkpoint#context=8192", tmp_path) == f"{tmp_path / 'checkpoint'}#context=8192"
    assert spec_relative_to("local:odd#name", tmp_path) == f"local:{tmp_path / 'odd#name'}"
    assert spec_relative_to("openai:http://127.0.0.1:8000/v1#m", tmp_path) == "openai:http://127.0.0.1:8000/v1#m"
    assert spec_relative_to("random:tiny", tmp_path) == "random:tiny"


def test_a_job_that_could_not_run_fails_the_batch_unless_errors_are_allowed(tmp_path: Path) -> None:
    jobs = write_jobs(tmp_path / "jobs.jsonl", {"id": "lost", "repo": "no-such-repo", "instruction": "fix"})
    model = "scripted:" + str(Path(__file__).with_name("hello_script.json"))
    failed = batch(str(jobs), "--out", "results.jsonl", "--model", model, cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr
    assert "1 job ended in error" in failed.stderr and "--allow-errors" in failed.stderr
    allowed = batch(str(jobs), "--out", "results.jsonl", "--model", model, "--allow-errors", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["batch"].format_help().split())
    assert "none is `error`" in help_text and "--allow-errors" in help_text
