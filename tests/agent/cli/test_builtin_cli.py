"""The built-in model from the command line, with no model configured and nothing downloaded: `warpcode generate
--model builtin`, `warpcode run` (the default model, its notice first) and `warpcode batch --model builtin` on a
held-out task, the real parser on real generated calls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.model_runtime.builtin_model import BUILTIN_NOTICE
from warpcode.training.tasks import make_task
from warpcode.training.tasks.check import write_repo
from warpcode.training.tasks.jobs import MALFORMED

pytestmark = pytest.mark.slow
pytest.importorskip("torch")


def warpcode(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command with no model configured anywhere (no WARPCODE_MODEL, no config file)."""
    env = {k: v for k, v in os.environ.items() if k not in ("WARPCODE_MODEL", "XDG_CONFIG_HOME")}
    env |= {"HOME": str(home), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "warpcode.agent", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_generate_streams_from_the_built_in_model(tmp_path):
    done = warpcode("generate", "--model", "builtin", "--prompt", "def add(a, b):", "--max-new-tokens", "16",
                    home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()  # the continuation, streamed
    assert re.search(r"decode: \d+ tokens, [\d.]+ tok/s", done.stderr), done.stderr


def test_run_without_a_model_runs_the_built_in_one_and_says_so_first(tmp_path):
    task = make_task("rename", "heldout", 7)
    repo = tmp_path / "repo"
    write_repo(task.files, repo)
    done = warpcode("run", "--cwd", str(repo), "--mode", "auto", "--max-turn-requests", "3", "--json",
                    task.instruction, home=tmp_path)  # fmt: skip
    assert "No model is configured" not in done.stderr and "could not answer" not in done.stderr, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    said = "".join(u["content"]["text"] for u in lines if u.get("sessionUpdate") == "agent_message_chunk")
    assert said.startswith(BUILTIN_NOTICE) and said.count(BUILTIN_NOTICE) == 1
    assert [u for u in lines if u.get("sessionUpdate") == "tool_call"], "the model called no tool"
    assert lines[-1]["stopReason"] in ("end_turn", "max_turn_requests")


def test_batch_runs_a_held_out_job_on_the_built_in_model(tmp_path):
    task = make_task("config_value", "heldout", 11)
    write_repo(task.files, tmp_path / "repo")
    job = {"id": "job-1", "repo": "repo", "instruction": task.instruction, "test_command": task.test_command}
    (tmp_path / "JOBS.jsonl").write_text(json.dumps(job) + "\n")
    done = warpcode("batch", "JOBS.jsonl", "--out", "RESULTS.jsonl", "--model", "builtin", home=tmp_path,
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in (tmp_path / "RESULTS.jsonl").read_text().splitlines()]
    assert row["status"] in ("succeeded", "failed") and row["error"] is None, row
    assert row["usage"]["output_tokens"] > 0 and row["usage"]["model_requests"] >= 1
    trajectory = (tmp_path / row["trajectory"]).read_text()  # a path relative to the batch's folder, or absolute
    assert MALFORMED not in trajectory  # every call the model wrote was read (the tool grammar is on)
