"""The one place finished jobs go, from the workers of this process and from Ray's alike (driver.py, ray_pool.py)."""

from __future__ import annotations

import asyncio

from warpcode.agent.batch.progress import BatchProgress
from warpcode.agent.batch.results import ResultsFile


class Recorder:
    """Where every finished job goes: its row into RESULTS.jsonl, then the progress view; --fail-fast stops the
    batch at the first row that is not `succeeded`."""

    def __init__(self, results: ResultsFile, progress: BatchProgress, fail_fast: bool) -> None:
        self.results, self.progress, self.fail_fast = results, progress, fail_fast
        self.stop = asyncio.Event()

    def started(self, job_id: str, worker: str, attempt: int = 1, **where) -> None:
        self.progress.started(job_id, worker, attempt, **where)

    def retrying(self, job_id: str, attempt: int, error: str) -> None:
        self.progress.retrying(job_id, attempt, error)

    def finished(self, row: dict) -> None:
        self.results.append(row)
        self.progress.finished(row)
        if self.fail_fast and row["status"] != "succeeded":
            self.stop.set()
