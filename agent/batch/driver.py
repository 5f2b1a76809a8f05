"""The batch driver: which jobs still need a row, where they run (`workers` at once in this process, or on a pool of
Ray actors with --ray), each row written as its job finishes, progress on stderr. SIGINT/SIGTERM and --fail-fast
cancel the running jobs: their processes are killed, their copies removed, no row written for them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from warpcode.agent.batch import workspaces
from warpcode.agent.batch.config import BatchConfig
from warpcode.agent.batch.jobs import BadRow, Job, read_jobs
from warpcode.agent.batch.progress import BatchProgress
from warpcode.agent.batch.recorder import Recorder
from warpcode.agent.batch.results import ResultsFile
from warpcode.agent.batch.runner import Options, error_row, run_job
from warpcode.agent.plural import counted

EXIT_FAILED = 1  # a job has no row, or (without --allow-errors) a row is `error`
EXIT_INTERRUPTED = 130


@dataclass
class BatchOutcome:
    exit_code: int
    counts: Counter


def side_folders(out: Path) -> tuple[Path, Path]:
    """(the workdirs folder, the trajectories folder) of a results file: beside it, named after it."""
    return out.with_name(f"{out.name}.workdirs"), out.with_name(f"{out.name}.trajectories")


async def run_batch(
    jobs_path: Path, out: Path, options: Options, config: BatchConfig | None = None, log: TextIO | None = None
) -> BatchOutcome:
    config = config or BatchConfig()
    log = log or sys.stderr
    jobs = read_jobs(jobs_path)
    results = ResultsFile(out)
    options.results = out
    options.workdirs, options.trajectories = side_folders(out)
    pending = [job for job in jobs if not results.done(job.id, config.retry_errors, config.redo)]
    results.forget({job.id for job in pending})
    stale = await asyncio.to_thread(workspaces.clean_stale, options.workdirs)
    runnable = [job for job in pending if isinstance(job, Job)]
    where = f"{config.workers} at once" + (f" on Ray ({config.ray})" if config.ray else " in this process")
    stale_note = f" (removed {stale} stale copies of an earlier run)" if stale else ""
    interrupted = False
    with contextlib.ExitStack() as scope:
        cluster = _ray_pool(config, options, log, scope) if config.ray is not None and runnable else None
        stdout = scope.enter_context(_stdout_for_events_only()) if cluster else sys.stdout
        events = stdout if config.json_events else None
        progress = scope.enter_context(BatchProgress(len(pending), len(jobs) - len(pending), log, events))
        recorder = Recorder(results, progress, config.fail_fast)
        progress.header(len(jobs), where, stale_note)
        for bad in [job for job in pending if isinstance(job, BadRow)]:  # nothing to run: recorded at once
            recorder.finished(error_row(bad.id, bad.repo, bad.error, worker="driver"))

        def interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            recorder.stop.set()

        loop = asyncio.get_running_loop()
        notes: list[str] = []
        try:
            if cluster is not None:
                cluster.start(len(runnable))  # on this thread: ray.init wants the main thread
            runner = asyncio.ensure_future(
                cluster.run(runnable, recorder) if cluster else _run_here(runnable, options, config.workers, recorder)
            )
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(number, interrupt)
            stopper = asyncio.ensure_future(recorder.stop.wait())
            await asyncio.wait([runner, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            runner.cancel()  # a finished runner ignores it; a running one cancels its jobs and cleans up
            outcome = (await asyncio.gather(runner, return_exceptions=True))[0]
        finally:
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(number)
            if cluster is not None:
                notes = await asyncio.to_thread(cluster.summary_notes)
                await asyncio.to_thread(cluster.close)
            workspaces.tidy(options.workdirs, options.keep_workdirs)
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
        missing = [job.id for job in jobs if job.id not in results.rows]
        progress.summary(len(missing), interrupted, notes)
    no_row = f"{counted(len(missing), 'job')} {'has' if len(missing) == 1 else 'have'} no row"
    if interrupted:
        print(f"batch: interrupted; {no_row} yet: run again to finish them", file=log)
        return BatchOutcome(EXIT_INTERRUPTED, progress.counts)
    if missing:
        print(f"batch: {no_row} (--fail-fast stopped the batch)", file=log)
    errors = [job.id for job in jobs if results.rows.get(job.id, {}).get("status") == "error"]
    if errors and not config.allow_errors:
        # A batch in CI fails when a job could not run, as `make` does, unless the caller says errors are expected.
        print(f"batch: {counted(len(errors), 'job')} ended in error, so the exit code is {EXIT_FAILED} "
              "(--allow-errors: 0 when every job has a row, errors or not; --retry-errors runs them again)",
              file=log)  # fmt: skip
    return BatchOutcome(EXIT_FAILED if missing or (errors and not config.allow_errors) else 0, progress.counts)


def _ray_pool(config: BatchConfig, options: Options, log: TextIO, scope: contextlib.ExitStack):
    """The batch's RayPool (Ray only when asked for: it is an optional extra). For `--ray local`, the settings that
    keep the instance private come first: Ray reads them as it loads, and they stay until `scope` ends, after the
    instance has stopped."""
    local = None
    if config.ray == "local":
        from warpcode.agent.batch.local_ray import private_settings

        local = scope.enter_context(private_settings())
    from warpcode.agent.batch.ray_pool import RayPool

    return RayPool(config, options, log, local)


async def _run_here(pending: list[Job], options: Options, workers: int, recorder: Recorder) -> None:
    """`workers` asyncio tasks taking jobs from one queue; cancelled, each cancels its job (which cleans up)."""
    queue: asyncio.Queue[Job] = asyncio.Queue()
    for job in pending:
        queue.put_nowait(job)

    async def worker(slot: int) -> None:
        name = f"local:{socket.gethostname()}:{os.getpid()}/{slot}"
        while not queue.empty():
            job = queue.get_nowait()
            recorder.started(job.id, name)
            recorder.finished(await run_job(job, options, name))

    tasks = [asyncio.ensure_future(worker(slot)) for slot in range(max(1, min(workers, len(pending))))]
    try:
        await asyncio.gather(*tasks)  # cancelled, it cancels the workers once
    except BaseException:
        for task in tasks:
            if not task.done() and not task.cancelling():
                task.cancel()
        await asyncio.wait(tasks)  # their jobs' clean-up: commands killed, copies removed
        raise


@contextlib.contextmanager
def _stdout_for_events_only():
    """Ray's driver prints what its raylets report (a worker's death, say) to file descriptor 1: while Ray runs,
    that descriptor goes to stderr, and the --json events get the real stdout through a copy of it."""
    sys.stdout.flush()
    saved = os.dup(1)
    events = os.fdopen(os.dup(saved), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        yield events
    finally:
        events.close()
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
