"""The batch driver's own cost: N trivial scripted jobs (one edit each, no test command) over R fresh git
repositories, timed end to end as `warpcode batch` processes (Ray's start included), in this process and on Ray.

python3 -m warpcode.bench.batch [--jobs 100] [--repos 10] [--workers 8] [--modes here,ray]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EDIT = {"name": "edit_file", "arguments": {"path": "app.py", "old_text": "VALUE = 1", "new_text": "VALUE = 2"}}


def make_repositories(folder: Path, count: int) -> list[Path]:
    repos = []
    for number in range(count):
        repo = folder / f"service-{number}"
        repo.mkdir()
        (repo / "app.py").write_text("VALUE = 1\n")
        for command in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"],
        ):
            subprocess.run(["git", *command], cwd=repo, check=True)
        repos.append(repo)
    return repos


def run(folder: Path, jobs: Path, model: str, workers: int, ray: bool) -> tuple[float, dict[str, int]]:
    out = folder / ("ray" if ray else "here") / "RESULTS.jsonl"
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(out), "--model", model,
               "--workers", str(workers), *(["--ray", "local"] if ray else [])]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"warpcode batch failed ({done.returncode}):\n{done.stderr[-2000:]}")
    statuses: dict[str, int] = {}
    for line in out.read_text().splitlines():
        status = json.loads(line)["status"]
        statuses[status] = statuses.get(status, 0) + 1
    return elapsed, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--repos", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--modes", default="here,ray", help="here (in this process), ray (--ray local), or both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        repos = make_repositories(folder, args.repos)
        script = folder / "edit.json"
        script.write_text(json.dumps({"turns": [{"tool_calls": [EDIT]}, {"text": "done"}]}))
        jobs = folder / "jobs.jsonl"
        rows = [{"id": f"job-{n}", "repo": str(repos[n % len(repos)]), "instruction": "bump VALUE"}
                for n in range(args.jobs)]  # fmt: skip
        jobs.write_text("".join(json.dumps(row) + "\n" for row in rows))
        for mode in args.modes.split(","):
            elapsed, statuses = run(folder, jobs, f"scripted:{script}", args.workers, ray=mode == "ray")
            where = "--ray local" if mode == "ray" else "in one process"
            print(f"{args.jobs} jobs over {args.repos} repositories, --workers {args.workers} {where}: "
                  f"{elapsed:.1f} s wall ({args.jobs / elapsed:.1f} jobs/s), rows {statuses}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
