"""Held-out tasks as `warpcode batch` jobs: the rows run as written, and the score counts a job as done only when the
batch's own test command passed and the files it changed are the expected ones. The model of each job replays the
oracle's trajectory of that task (a scripted model), so the jobs are solved through `warpcode batch` itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.agent.scripted_model import write_script
from warpcode.agent.cli.main import main
from warpcode.training.tasks import FAMILIES, family_of, make_task
from warpcode.training.tasks.jobs import score, write
from warpcode.training.trajectories import solve


def replay(row: dict) -> list[dict]:
    """The oracle's turns as a scripted model's (docs/reference/scripted-model.md)."""
    return [{"text": m["content"], "tool_calls": [{"name": c["name"], "arguments": c["arguments"]}
                                                  for c in m["tool_calls"]]}
            for m in row["messages"] if m["role"] == "assistant"]  # fmt: skip


@pytest.mark.slow
def test_jobs_solved_through_batch_score_per_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    jobs, expected = tmp_path / "jobs.jsonl", tmp_path / "expected.jsonl"
    tasks = write("heldout", 5, 0, jobs, expected, tmp_path / "repos")
    assert [t.family for t in tasks] == [family_of(s) for s in range(5)] == [*FAMILIES, "rename"]
    rows = [json.loads(line) for line in jobs.read_text().splitlines()]
    assert [set(row) for row in rows] == [{"id", "repo", "instruction", "test_command"}] * 5
    for number, (row, task) in enumerate(zip(rows, tasks, strict=True)):
        assert make_task(task.family, "heldout", task.seed) == task
        if number < 4:  # the last job's model does nothing
            outcome = asyncio.run(solve(task, tmp_path / f"oracle-{number}"))
            row["model"] = f"scripted:{write_script(tmp_path / f'model-{number}.json', replay(outcome.row))}"
        else:
            row["model"] = f"scripted:{write_script(tmp_path / 'idle.json', [{'text': 'Nothing to do.'}])}"
    jobs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = tmp_path / "results.jsonl"
    assert main(["batch", str(jobs), "--out", str(results), "--workers", "2"]) == 0
    table = score(results, expected)
    assert table["rename"] == {"jobs": 2, "succeeded": 1, "malformed_calls": 0, "call_markup_in_text": 0}
    for family in list(FAMILIES)[1:]:
        assert table[family] == {"jobs": 1, "succeeded": 1, "malformed_calls": 0, "call_markup_in_text": 0}
    statuses = {json.loads(line)["id"]: json.loads(line)["status"] for line in results.read_text().splitlines()}
    assert statuses["heldout-0004"] == "failed"  # its test command caught the untouched repository
