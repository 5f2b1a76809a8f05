"""`--ray`: the batch's jobs on a pool of long-lived Ray actors (`--workers` of them, one job at a time each), rows
streaming back to the driver as jobs finish (`ray.wait`). A worker that dies under a job is replaced and the job
tried again from a fresh copy, up to the attempts limit. With `--replicas R` and a `local:` or `random:` model, R
model replica actors (one GPU each) serve every worker's sessions, each job's session kept on one replica (its
prefix cache): a job without a model of its own talks to it, a scripted one generates its `generate_tokens` there.

Every node must see the repositories and --out's folder at the same paths (a shared filesystem), as on one
machine. Ray's own logs stay out of stdout (`log_to_driver=False`). `--ray local` starts an instance that listens on
loopback only and takes requests only with a token of its own (local_ray.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import secrets
import socket
import time
from typing import TextIO

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, TaskCancelledError
except ImportError:  # pragma: no cover - exercised only where the extra is missing
    ray = None


from warpcode.agent.batch import workspaces
from warpcode.agent.batch.config import BatchConfig
from warpcode.agent.batch.jobs import Job
from warpcode.agent.batch.local_ray import INSTALL_RAY, LocalSettings
from warpcode.agent.batch.recorder import Recorder
from warpcode.agent.batch.runner import Options, error_row, run_job

START_TIMEOUT_S = 120  # for the workers to start; replicas get REPLICA_TIMEOUT_S to load their model
REPLICA_TIMEOUT_S = 1800
CANCEL_GRACE_S = 30  # for cancelled jobs to kill their processes and remove their copies
POLL_S = 0.25
NO_CHAT_MODEL = (
    "random:PRESET replicas have no tokenizer, so an agent cannot talk to them: give the job a scripted: model whose "
    'turns ask for "generate_tokens" (they are generated on the job\'s replica)'
)


def connect(address: str, workers: int, worker_cpus: float, local: LocalSettings | None = None) -> bool:
    """Joins (or starts, for `local`, with the settings of local_ray.private_settings) the Ray instance; True when
    this process started it."""
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING, "include_dashboard": False}
    if address == "local":
        if local is None or not local.before_ray_loaded:
            raise ValueError(
                "--ray local configures Ray before it loads, but Ray was loaded already in this process: run "
                "`warpcode batch` in a process of its own"
            )
        # a fresh instance with room for every worker, whatever the core count (the workers mostly wait on the
        # model and on subprocesses); a small object store, as only rows travel through it
        cpus = max(os.cpu_count() or 1, int(workers * worker_cpus + 0.999))
        ray.init(address="local", num_cpus=cpus, object_store_memory=256 * 2**20, **quiet)
        node = ray.util.get_node_ip_address()
        if not ipaddress.ip_address(node).is_loopback:
            ray.shutdown()
            raise ValueError(f"--ray local: Ray chose {node} as this node's address, not loopback; not started")
        return True
    try:
        ray.init(address=address, **quiet)
    except ConnectionError as exc:
        hint = "start one with `ray start --head`, or use --ray local" if address == "auto" else str(exc)
        raise ValueError(f"--ray {address}: no Ray cluster answers ({hint})") from None
    return False


if ray is not None:

    @ray.remote(max_restarts=0, max_task_retries=0)
    class JobWorker:
        """Runs one job at a time in its own process, with the same code as the in-process batch."""

        def __init__(self, environment: dict[str, str]) -> None:
            os.environ.update(environment)

        def where(self) -> tuple[str, int]:
            return socket.gethostname(), os.getpid()

        async def run(self, job: Job, options: Options, worker: str, attempts_before: int) -> dict:
            return await run_job(job, options, worker, attempts_before)


@dataclasses.dataclass
class _Worker:
    actor: object
    name: str
    host: str
    pid: int


@dataclasses.dataclass
class _Running:
    job: Job
    worker: _Worker
    attempt: int
    replica: int | None


class RayPool:
    def __init__(self, config: BatchConfig, options: Options, log: TextIO, local: LocalSettings | None = None) -> None:
        if ray is None:
            raise ValueError(INSTALL_RAY)
        self.config, self.options, self.log, self.local = config, options, log, local
        self.idle: list[_Worker] = []
        self.workers: list[_Worker] = []  # every live one, idle or not
        self.started_here = False
        self.replicas = None
        self._environment: dict[str, str] = {}
        self._serial = 0
        self.replica_model = None
        if config.replicas:
            from warpcode.agent.batch.replicas import replica_model

            model = replica_model(options.model)  # a bad --model fails before Ray starts
            self.replica_model = dataclasses.replace(
                model, kv_cache_gb=config.replica_kv_cache_gb, warm_up=config.replica_warm_up
            )

    def start(self, jobs: int) -> None:
        """Connects, loads the replicas (if any), then starts min(--workers, jobs) workers."""
        self.started_here = connect(self.config.ray, self.config.workers, self.config.worker_cpus, self.local)
        if self.replica_model is not None:
            from warpcode.agent.batch.replicas import ReplicaSet

            key = secrets.token_urlsafe(24)  # the replicas listen beyond loopback on a cluster
            self._environment = {"WARPCODE_API_KEY": key}
            replicas = self.config.replicas
            gpus = self.config.replica_gpus
            self.replicas = ReplicaSet(self.replica_model, replicas, gpus, key, self.started_here, self.log)
            self.replicas.start(REPLICA_TIMEOUT_S)
        count = max(1, min(self.config.workers, jobs))
        self.idle = self._spawn(count)

    def _spawn(self, count: int) -> list[_Worker]:
        actors = [JobWorker.options(num_cpus=self.config.worker_cpus).remote(self._environment) for _ in range(count)]
        try:
            places = ray.get([actor.where.remote() for actor in actors], timeout=START_TIMEOUT_S)
        except GetTimeoutError:
            total = ray.cluster_resources().get("CPU", 0)
            raise ValueError(
                f"Ray did not start {count} workers of {self.config.worker_cpus:g} CPUs in {START_TIMEOUT_S}s (the "
                f"cluster has {total:g} CPUs): lower --workers or --worker-cpus"
            ) from None
        workers = []
        for actor, (host, pid) in zip(actors, places, strict=True):
            self._serial += 1
            workers.append(_Worker(actor, f"ray:{host}:{pid}/{self._serial}", host, pid))
        self.workers.extend(workers)
        return workers

    async def run(self, pending: list[Job], recorder: Recorder) -> None:
        queue: list[tuple[Job, int]] = [(job, 0) for job in reversed(pending)]  # (job, attempts spent)
        running: dict[object, _Running] = {}
        try:
            while queue or running:
                while queue and self.idle:
                    job, spent = queue.pop()
                    if self.replicas and job.model is None and self.replica_model.preset:
                        recorder.finished(error_row(job.id, str(job.repo), NO_CHAT_MODEL, spent, "driver"))
                        continue
                    worker = self.idle.pop()
                    replica = self.replicas.assign() if self.replicas and _uses_replica(job) else None
                    options = self.options
                    if replica is not None:
                        spec = self.replicas.spec(replica)
                        model = spec if job.model is None else options.model
                        options = dataclasses.replace(options, model=model, model_server=spec)
                    ref = worker.actor.run.remote(job, options, _worker_field(worker, replica), spent)
                    running[ref] = _Running(job, worker, spent + 1, replica)
                    place = {"host": worker.host, "pid": worker.pid, "replica": replica}
                    recorder.started(job.id, worker.name, spent + 1, **place)
                ready, _ = await asyncio.to_thread(ray.wait, list(running), num_returns=1, timeout=POLL_S)
                for ref in ready:
                    entry = running.pop(ref)
                    if entry.replica is not None:
                        self.replicas.release(entry.replica)
                    try:
                        row = ray.get(ref)
                    except RayActorError:
                        await asyncio.to_thread(self._replace, entry.worker)
                        orphans = (self.options.workdirs, entry.job.id)
                        await asyncio.to_thread(workspaces.remove_orphans, *orphans)
                        if entry.attempt < self.options.max_attempts:
                            recorder.retrying(entry.job.id, entry.attempt + 1, f"worker {entry.worker.name} died")
                            queue.append((entry.job, entry.attempt))
                            continue
                        row = error_row(
                            entry.job.id, str(entry.job.repo),
                            f"the worker process died under the job {entry.attempt} times",
                            entry.attempt, entry.worker.name,
                        )  # fmt: skip
                    else:
                        self.idle.append(entry.worker)
                        if entry.replica is not None:
                            self.replicas.record(entry.replica, row)
                    recorder.finished(row)
        except asyncio.CancelledError:
            await asyncio.to_thread(self._cancel, list(running))
            raise

    def _replace(self, dead: _Worker) -> None:
        ray.kill(dead.actor, no_restart=True)
        self.workers.remove(dead)
        self.idle.extend(self._spawn(1))

    def _cancel(self, refs: list) -> None:
        """Cancels the running jobs (each kills its processes and removes its copy) and waits for them to end."""
        for ref in refs:
            ray.cancel(ref)
        deadline = time.monotonic() + CANCEL_GRACE_S
        while refs and time.monotonic() < deadline:
            _, refs = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
        for ref in refs:
            with contextlib.suppress(TaskCancelledError, RayActorError, GetTimeoutError):
                ray.get(ref, timeout=0)

    def summary_notes(self) -> list[str]:
        return self.replicas.summary() if self.replicas else []

    def close(self) -> None:
        """Stops the workers and replicas; a local instance stops with them, a cluster keeps running."""
        for worker in self.workers:
            ray.kill(worker.actor, no_restart=True)
        self.workers, self.idle = [], []
        if self.replicas:
            self.replicas.stop()
        if ray.is_initialized():
            ray.shutdown()


def _uses_replica(job: Job) -> bool:
    """Whether the job's session talks to a replica: with no model of its own, or a scripted one (whose
    `generate_tokens` turns generate there)."""
    return job.model is None or job.model.startswith("scripted:")


def _worker_field(worker: _Worker, replica: int | None) -> str:
    return worker.name if replica is None else f"{worker.name} -> replica {replica}"
