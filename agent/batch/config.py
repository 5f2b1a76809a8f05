"""How a batch runs: its workers, where they run (this process, or Ray), its replicas, what stops it. The per-job
settings are runner.Options."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BatchConfig:
    """How the batch runs (the per-job settings are `Options`)."""

    workers: int = 1
    redo: bool = False
    retry_errors: bool = False
    fail_fast: bool = False
    allow_errors: bool = False  # exit 0 even when a row is `error` (every job still needs a row)
    ray: str | None = None  # local | auto | a cluster address; None: in this process
    replicas: int = 0  # `local:` model replicas as Ray actors (0: each worker process loads its own)
    worker_cpus: float = 1.0  # CPUs Ray reserves for each job worker
    replica_gpus: float = 1.0  # GPUs each replica takes (0.5: two share one)
    replica_kv_cache_gb: float | None = None  # each replica's KV cache; None: half the free GPU memory at its start
    replica_warm_up: tuple[int, int] = (8, 4096)  # decode graphs each GPU replica captures first: (streams, tokens)
    json_events: bool = False

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("--workers must be at least 1")
        if self.replicas < 0:
            raise ValueError("--replicas must be at least 1")
        if self.replicas and self.ray is None:
            raise ValueError("--replicas needs --ray (local, auto or a cluster address): replicas are Ray actors")
        if self.worker_cpus <= 0:
            raise ValueError("--worker-cpus must be positive")
        if self.replica_gpus <= 0 or (self.replica_gpus > 1 and not self.replica_gpus.is_integer()):
            raise ValueError("--replica-gpus is a share of one GPU (0.5: two replicas on each) or a whole number")
        if self.replica_kv_cache_gb is not None and self.replica_kv_cache_gb <= 0:
            raise ValueError("--replica-kv-cache-gb must be positive")
        if min(self.replica_warm_up) < 0:
            raise ValueError("--replica-warm-up takes non-negative numbers")
