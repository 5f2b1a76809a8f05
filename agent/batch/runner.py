"""One job, start to end: its throwaway copy, the agent turn (the same agent as `warpcode run`, headless), its
test command, its patch, and its result row (docs/reference/batch-files.md)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warpcode.agent.backends import BackendError
from warpcode.agent.backends.scripted import ScriptedBackend
from warpcode.agent.batch import workspaces
from warpcode.agent.batch.ids import name_for
from warpcode.agent.batch.job_tests import run_test_command
from warpcode.agent.batch.jobs import BadRow, Job
from warpcode.agent.config import load_settings
from warpcode.agent.headless import headless_agent, nobody_to_ask

RETRY_PAUSE_S = 1.0  # before trying a job again whose model could not be reached: times the attempts so far


class ModelUnreachable(RuntimeError):
    """The job's model server could not be reached: an infrastructure failure, tried again from a fresh copy."""


@dataclass
class Options:
    model: str | None = None
    mode: str = "auto"
    timeout_s: float | None = None
    results: Path = Path(".")  # RESULTS.jsonl; it and its two folders are left out of a plain directory's copy
    workdirs: Path = Path(".")
    trajectories: Path = Path(".")
    keep_workdirs: bool = False
    max_attempts: int = 3  # tries of a job whose copy or agent could not be set up, or whose worker died
    model_server: str | None = None  # `openai:` spec where a scripted model's generate_tokens turns generate


def error_row(job_id: str, repo: str | None, error: str, attempts: int = 0, worker: str = "") -> dict[str, Any]:
    return {
        "id": job_id,
        "status": "error",
        "stop_reason": None,
        "repo": repo,
        "base_commit": None,
        "patch": "",
        "files_changed": [],
        "tests": None,
        "usage": {"input_tokens": 0, "output_tokens": 0, "model_requests": 0},
        "duration_s": 0.0,
        "attempts": attempts,
        "error": error,
        "trajectory": None,
        "worker": worker,
    }


async def run_job(job: Job | BadRow, options: Options, worker: str, attempts_before: int = 0) -> dict[str, Any]:
    """The job's result row. A job's own failure is its status; an infrastructure failure is retried with a fresh
    copy, then recorded as `error`. Cancellation propagates (no row), the copy removed. `attempts_before`: the
    tries already spent on the job elsewhere (a Ray worker that died under it)."""
    if isinstance(job, BadRow):
        return error_row(job.id, job.repo, job.error, 0, worker)
    started = time.monotonic()
    problem = ""
    attempt = attempts_before
    for attempt in range(attempts_before + 1, options.max_attempts + 1):  # callers leave at least one
        try:
            row = await _attempt(job, options, worker, started)
        except Exception as exc:
            problem = str(exc) or type(exc).__name__
            if isinstance(exc, ValueError | workspaces.WorkspaceError | BackendError):
                break  # a bad base or model spec: trying again gives the same answer
            if isinstance(exc, ModelUnreachable) and attempt < options.max_attempts:
                await asyncio.sleep(RETRY_PAUSE_S * attempt)
            continue
        row["attempts"] = attempt
        return row
    row = error_row(job.id, str(job.repo), problem, attempt, worker)
    row["duration_s"] = round(time.monotonic() - started, 3)
    return row


async def _attempt(job: Job, options: Options, worker: str, started: float) -> dict[str, Any]:
    from warpcode.agent import events

    settings = load_settings(job.model or options.model)
    if not settings.model:
        raise ValueError("no model: give --model (or a job's 'model', or WARPCODE_MODEL)")
    batch_output = (options.results, options.workdirs, options.trajectories)
    workspace = await workspaces.create(job.repo, job.base, options.workdirs, job.id, leave_out=batch_output)
    options.trajectories.mkdir(parents=True, exist_ok=True)
    trajectory_path = options.trajectories / f"{name_for(job.id)}.jsonl"
    trajectory = open(trajectory_path, "w", encoding="utf-8")  # noqa: SIM115 (closed below, after the turn)
    model_requests = 0

    def emit(update) -> None:
        nonlocal model_requests
        model_requests += update.session_update == "usage_update"  # one per model request
        trajectory.write(events.to_json(update) + "\n")

    try:
        mode = job.mode or options.mode
        agent = headless_agent(
            str(workspace.root),
            settings,
            mode,
            emit,
            nobody_to_ask([]),
            max_turn_requests=job.max_turn_requests,
            state_dir=workspace.state_dir,
        )
        if isinstance(agent.backend, ScriptedBackend):
            agent.backend.model_server = options.model_server
        timeout = job.timeout_s or options.timeout_s
        deadline = None if timeout is None else started + timeout
        turn = asyncio.ensure_future(agent.prompt(job.instruction))
        try:
            await asyncio.wait([turn], timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        finally:
            if not turn.done():
                agent.cancel()
                await asyncio.shield(turn)
        result = turn.result()
        if result.failure is not None and result.failure.unavailable:
            raise ModelUnreachable(result.failure.message)
        timed_out = result.stop_reason == "cancelled"
        tests = None
        if job.test_command and not timed_out:
            tests_run = asyncio.ensure_future(run_test_command(job.test_command, workspace.root, agent.toolbox.sandbox))
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, _ = await asyncio.wait([tests_run], timeout=left)
            if done:
                tests = tests_run.result()
            else:
                tests_run.cancel()
                await asyncio.gather(tests_run, return_exceptions=True)
                timed_out = True
        patch, files_changed = await asyncio.to_thread(workspace.changes)
    finally:
        trajectory.close()
        if not options.keep_workdirs:
            await workspaces.remove(workspace)
    usage = {"input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
             "model_requests": model_requests}  # fmt: skip
    if generation := getattr(agent.backend, "generation", None):
        usage["generated_tokens"] = sum(request["generated_tokens"] for request in generation)
        usage["generation"] = list(generation)
    if timed_out:
        status = "timeout"
    elif result.stop_reason == "end_turn" and (tests is None or tests["exit_code"] == 0):
        status = "succeeded"
    else:
        status = "failed"
    return {
        "id": job.id,
        "status": status,
        "stop_reason": result.stop_reason,
        "repo": str(job.repo),
        "base_commit": workspace.base_commit,
        "patch": patch,
        "files_changed": files_changed,
        "tests": tests,
        "usage": usage,
        "duration_s": round(time.monotonic() - started, 3),
        "attempts": 1,
        "error": None if result.failure is None else result.failure.message,  # the failure's one report
        "trajectory": str(trajectory_path),
        "worker": worker,
    }
