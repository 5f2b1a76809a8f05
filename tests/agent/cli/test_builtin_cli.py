"""The built-in model from the command line, with no model configured and nothing downloaded: `warpcode generate
--model builtin`, `warpcode run` (the default model, its notice first) and `warpcode batch --model builtin` on
held-out tasks, the real parser on real generated calls: a task of each family solved, as the task's own checker
and the held-out scorer (training/tasks) judge it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.model_runtime.builtin_model import BUILTIN_NOTICE
from warpcode.training.tasks import FAMILIES, make_task
from warpcode.training.tasks.check import check, write_repo
from warpcode.training.tasks.jobs import MALFORMED, job_id, score

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

# Held-out tasks (seeds of `python -m warpcode.training.tasks.jobs write --split heldout`) that the shipped weights
# solve, one per family; each was solved in both held-out evaluations of BENCHMARKS.md (before and after speculative
# decoding and the loop's repetition stop), so a small numeric difference between CPUs does not decide them.
SOLVED = {"rename": 44, "failing_test": 41, "missing_import": 14, "config_value": 7}


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


def test_run_solves_a_held_out_task(tmp_path):
    task = make_task("rename", "heldout", SOLVED["rename"])
    repo = tmp_path / "repo"
    write_repo(task.files, repo)
    done = warpcode("run", "--cwd", str(repo), "--mode", "auto", task.instruction, home=tmp_path)
    assert done.returncode == 0, done.stderr
    verdict = check(task, repo)  # the tests pass, the name is gone everywhere, only the expected files changed
    assert verdict.ok, verdict.reason


def test_batch_solves_a_held_out_task_of_each_family(tmp_path):
    jobs, expected = [], []
    for family in FAMILIES:
        task = make_task(family, "heldout", SOLVED[family])
        write_repo(task.files, tmp_path / "repos" / job_id(task))
        jobs.append({"id": job_id(task), "repo": f"repos/{job_id(task)}", "instruction": task.instruction,
                     "test_command": task.test_command})  # fmt: skip
        expected.append({"id": job_id(task), "family": family, "expected_files": list(task.expected_files)})
    (tmp_path / "JOBS.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    (tmp_path / "EXPECTED.jsonl").write_text("".join(json.dumps(row) + "\n" for row in expected))
    done = warpcode("batch", "JOBS.jsonl", "--out", "RESULTS.jsonl", "--model", "builtin", "--workers", "2",
                    home=tmp_path, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "RESULTS.jsonl").read_text().splitlines()]
    assert all(row["error"] is None and row["usage"]["output_tokens"] > 0 for row in rows), rows
    for row in rows:
        assert MALFORMED not in (tmp_path / row["trajectory"]).read_text()  # every call the model wrote was read
        requests, usage = row["usage"]["generation"], row["usage"]
        assert len(requests) == usage["model_requests"] and usage["generated_tokens"] == usage["output_tokens"]
        assert all(r["tool_calls"] for r in requests[:-1]) and not requests[-1]["tool_calls"]  # it ends in text
        assert all(r["started"] <= r["first_token"] <= r["ended"] for r in requests)
    table = score(tmp_path / "RESULTS.jsonl", tmp_path / "EXPECTED.jsonl")
    assert {family: table[family]["succeeded"] for family in FAMILIES} == dict.fromkeys(FAMILIES, 1), rows
