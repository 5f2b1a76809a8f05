"""Tasks as a `warpcode batch` job file, and the score of the batch's results per family.

`write` makes tasks numbered seed..seed+count-1 (the families take turns), checks that each can be done (its test
command fails on the repository as made and passes once the plan's edits are applied), writes each repository as a
plain folder under REPOS, one JOBS.jsonl row per task (docs/reference/batch-files.md: id, repo, instruction,
test_command) and, beside it, one EXPECTED.jsonl line per task: its family and the files a solution changes (a job
row may hold no other field).

`score` reads the batch's RESULTS.jsonl with EXPECTED.jsonl: a job succeeded when the batch says so (the turn ended
and the test command passed) and the files it changed are exactly the expected ones. From each job's trajectory it
also counts the tool calls the agent could not read (malformed: not run, the model told why) and the tool-call
markup left in the answer's text (a call the parser did not recognise at all).

    python -m warpcode.training.tasks.jobs write --split heldout --count 100 --jobs JOBS.jsonl \\
        --expected EXPECTED.jsonl --repos REPOS
    warpcode batch JOBS.jsonl --out RESULTS.jsonl --model MODEL
    python -m warpcode.training.tasks.jobs score RESULTS.jsonl --expected EXPECTED.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from warpcode.training.tasks import FAMILIES, SPLITS, Task, family_of, make_task
from warpcode.training.tasks.check import check, run_test_command, write_repo

MALFORMED = "Error: the call to "  # how the agent loop answers a call it could not read (agent/loop.py)
CALL_MARKUP = ("<function=", "<tool_call>")  # a Qwen3-Coder call holds both: the larger count is the calls


def job_id(task: Task) -> str:
    """Neutral: the id names the job's folder, which the agent's system prompt shows, so it must not give away the
    family."""
    return f"{task.split}-{task.seed:04d}"


def verify(task: Task) -> str:
    """Why `task` cannot serve as a job ("" when it can): its test command must fail as made, pass once solved."""
    with tempfile.TemporaryDirectory(prefix="warpcode-task-") as folder:
        root = Path(folder)
        write_repo(task.files, root)
        if run_test_command(task, root).ok:
            return "its test command passes on the repository as made"
        write_repo(task.solved_files(), root)
        solved = check(task, root)
        return "" if solved.ok else f"the plan's edits do not solve it: {solved.reason}"


def write(split: str, count: int, seed: int, jobs: Path, expected: Path, repos: Path) -> list[Task]:
    tasks = [make_task(family_of(s), split, s) for s in range(seed, seed + count)]
    for task in tasks:
        if problem := verify(task):
            raise RuntimeError(f"{task.family} task {task.seed}: {problem}")
    repos.mkdir(parents=True, exist_ok=True)
    with open(jobs, "w") as job_file, open(expected, "w") as expected_file:
        for task in tasks:
            folder = repos / job_id(task)
            shutil.rmtree(folder, ignore_errors=True)
            write_repo(task.files, folder)
            repo = os.path.relpath(folder.resolve(), jobs.parent.resolve())
            row = {"id": job_id(task), "repo": repo, "instruction": task.instruction, "test_command": task.test_command}
            job_file.write(json.dumps(row) + "\n")
            expected_file.write(json.dumps({"id": job_id(task), "family": task.family, "layout": task.layout,
                                            "expected_files": list(task.expected_files)}) + "\n")  # fmt: skip
    return tasks


def score(results: Path, expected: Path) -> dict[str, dict[str, int]]:
    """Per family: jobs, succeeded, malformed calls, call markup left in text; a job without a result row counts as
    not succeeded."""
    rows = {}
    for line in results.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.setdefault(row["id"], row)
    table: dict[str, Counter] = {family: Counter() for family in FAMILIES}
    for line in expected.read_text().splitlines():
        job = json.loads(line)
        counts = table[job["family"]]
        counts["jobs"] += 1
        row = rows.get(job["id"])
        if row is None:
            continue
        if row["status"] == "succeeded" and sorted(row["files_changed"]) == sorted(job["expected_files"]):
            counts["succeeded"] += 1
        malformed, markup = _trajectory_problems(row.get("trajectory"), results.parent)
        counts["malformed_calls"] += malformed
        counts["call_markup_in_text"] += markup
    return {family: dict(counts) for family, counts in table.items() if counts["jobs"]}


def _trajectory_problems(path: str | None, results_folder: Path) -> tuple[int, int]:
    """(calls the loop could not read, tool-call markup left in the agent's text) in one job's trajectory."""
    if not path:
        return 0, 0
    file = Path(path) if Path(path).is_file() else results_folder / path
    malformed, text = 0, []
    for line in file.read_text().splitlines():
        update = json.loads(line)
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            text.append(update.get("content", {}).get("text", ""))
        elif kind == "tool_call_update" and update.get("status") == "failed":
            malformed += any(t.startswith(MALFORMED) for t in _texts(update.get("content")))
    joined = "".join(text)
    return malformed, max(joined.count(mark) for mark in CALL_MARKUP)


def _texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [value["text"]] if isinstance(value.get("text"), str) else [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warpcode.training.tasks.jobs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    writing = commands.add_parser("write", help="write tasks as batch jobs, with their repositories")
    writing.add_argument("--split", choices=SPLITS, default="heldout")
    writing.add_argument("--count", type=int, required=True, help="tasks (the families take turns)")
    writing.add_argument("--seed", type=int, default=0, help="the first task's seed (default 0)")
    writing.add_argument("--jobs", type=Path, required=True, help="the JOBS.jsonl to write")
    writing.add_argument("--expected", type=Path, required=True, help="the family and expected files of each job")
    writing.add_argument("--repos", type=Path, required=True, help="the folder the repositories are written to")
    scoring = commands.add_parser("score", help="score a batch's RESULTS.jsonl per family")
    scoring.add_argument("results", type=Path)
    scoring.add_argument("--expected", type=Path, required=True, help="the file `write` wrote beside the jobs")
    args = parser.parse_args(argv)
    if args.command == "write":
        tasks = write(args.split, args.count, args.seed, args.jobs, args.expected, args.repos)
        families = Counter(task.family for task in tasks)
        print(f"wrote {len(tasks)} jobs to {args.jobs} ({', '.join(f'{f} {n}' for f, n in families.items())}), "
              f"their repositories under {args.repos}")  # fmt: skip
        return 0
    table = score(args.results, args.expected)
    print(f"{'family':<16}{'jobs':>6}{'succeeded':>11}{'rate':>7}{'malformed':>11}{'markup':>8}")
    for family, counts in table.items():
        jobs, succeeded = counts["jobs"], counts.get("succeeded", 0)
        print(f"{family:<16}{jobs:>6}{succeeded:>11}{succeeded / jobs:>7.0%}{counts.get('malformed_calls', 0):>11}"
              f"{counts.get('call_markup_in_text', 0):>8}")  # fmt: skip
    jobs = sum(c["jobs"] for c in table.values())
    succeeded = sum(c.get("succeeded", 0) for c in table.values())
    print(f"{'all':<16}{jobs:>6}{succeeded:>11}{succeeded / max(jobs, 1):>7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
