"""The batch in this process: `workers` jobs at once (asyncio), each row written as its job finishes, progress on
stderr. SIGINT/SIGTERM cancel the running jobs: their processes are killed, their copies removed, no row written."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from warpcode.agent.batch import workspaces
from warpcode.agent.batch.jobs import BadRow, Job, read_jobs
from warpcode.agent.batch.results import ResultsFile
from warpcode.agent.batch.runner import Options, run_job

EXIT_INTERRUPTED = 130


@dataclass
class BatchOutcome:
    exit_code: int
    counts: Counter


def side_folders(out: Path) -> tuple[Path, Path]:
    """(the workdirs folder, the trajectories folder) of a results file: beside it, named after it."""
    return out.with_name(f"{out.name}.workdirs"), out.with_name(f"{out.name}.trajectories")


async def run_batch(
    jobs_path: Path,
    out: Path,
    options: Options,
    workers: int = 1,
    redo: bool = False,
    retry_errors: bool = False,
    fail_fast: bool = False,
    log: TextIO | None = None,
) -> BatchOutcome:
    log = log or sys.stderr
    jobs = read_jobs(jobs_path)
    results = ResultsFile(out)
    options.workdirs, options.trajectories = side_folders(out)
    pending = [job for job in jobs if not results.done(job.id, retry_errors, redo)]
    results.forget({job.id for job in pending})
    skipped = len(jobs) - len(pending)
    repos = {job.repo for job in jobs if isinstance(job, Job)}
    stale = await asyncio.to_thread(workspaces.clean_stale, repos, options.workdirs)
    print(
        f"batch: {len(jobs)} jobs, {skipped} already in {out}, {len(pending)} to run, {workers} at once"
        + (f" (removed {stale} stale worktrees of an earlier run)" if stale else ""),
        file=log,
        flush=True,
    )
    counts: Counter = Counter()
    queue: asyncio.Queue[Job | BadRow] = asyncio.Queue()
    for job in pending:
        queue.put_nowait(job)
    stop = asyncio.Event()
    interrupted = False
    started = time.monotonic()

    async def worker(slot: int) -> None:
        name = f"local:{socket.gethostname()}:{os.getpid()}/{slot}"
        while not stop.is_set():
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            row = await run_job(job, options, name)
            results.append(row)
            counts[row["status"]] += 1
            done = sum(counts.values())
            print(f"[{done}/{len(pending)}] {row['id']}: {row['status']} in {row['duration_s']:.1f}s"
                  + (f" ({row['error']})" if row["status"] == "error" else ""), file=log, flush=True)  # fmt: skip
            if fail_fast and row["status"] != "succeeded":
                stop.set()

    tasks = [asyncio.ensure_future(worker(slot)) for slot in range(max(1, min(workers, len(pending) or 1)))]

    def cancel_all() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()
        for task in tasks:
            task.cancel()

    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, cancel_all)
    try:
        runner = asyncio.ensure_future(_until_stopped(tasks, stop))
        await asyncio.gather(runner, return_exceptions=True)
        for task in tasks:
            if not task.done():
                task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    missing = [job.id for job in jobs if job.id not in results.rows]
    summary = ", ".join(f"{counts[status]} {status}" for status in ("succeeded", "failed", "timeout", "error"))
    print(f"batch: {summary} in {time.monotonic() - started:.1f}s; {skipped} skipped (already recorded)",
          file=log, flush=True)  # fmt: skip
    if interrupted:
        print(f"batch: interrupted; {len(missing)} jobs have no row yet: run again to finish them", file=log)
        return BatchOutcome(EXIT_INTERRUPTED, counts)
    if missing:
        print(f"batch: {len(missing)} jobs have no row (--fail-fast stopped the batch)", file=log)
    return BatchOutcome(1 if missing else 0, counts)


async def _until_stopped(tasks: list[asyncio.Future], stop: asyncio.Event) -> None:
    """Wait for every worker to finish, or for `stop` (the first failure with --fail-fast, an interrupt)."""
    waiter = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set() and not all(task.done() for task in tasks):
            await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
