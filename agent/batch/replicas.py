"""`--replicas R` on Ray: the model as R replica actors, each holding the serving engine on one GPU (or a share of
one; on the CPU when the cluster has none) and serving it over the OpenAI API (`serve-model`'s app) on its node,
with a key made for the batch. The model is a checkpoint (`local:DIR`) or random weights at a preset's shape built
on each replica's device (`random:PRESET`: no tokenizer, so it serves the `generate_tokens` turns of scripted jobs,
not an agent's chat). The job workers reach a replica as an `openai:` model (or their scripted model's server); each
job's session stays on the replica it was given (the one running the fewest jobs then), so every model request of
the session finds its prefix cached there."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import ray

from warpcode.agent.backends.base import BackendError


@dataclasses.dataclass(frozen=True)
class ReplicaModel:
    """What every replica serves: a checkpoint directory, or random weights at a preset's shape."""

    checkpoint: Path | None = None
    preset: str | None = None
    weights: str = "bf16"  # or "mxfp8": `local:DIR#mxfp8`, `random:PRESET#mxfp8`
    context: int | None = None  # tokens per sequence (`#context=N`); None: the model's own
    speculative: str | None = None  # `#speculative=off|ngram|suffix`; None: the device's default
    kv_cache_gb: float | None = None  # None: the engine's default (half the free GPU memory)
    warm_up: tuple[int, int] = (8, 4096)  # decode graphs captured before serving: (streams, tokens)

    @property
    def name(self) -> str:
        options = [] if self.weights == "bf16" else [self.weights]
        options += [f"context={self.context}"] if self.context else []
        options += [f"speculative={self.speculative}"] if self.speculative else []
        suffix = f"#{','.join(options)}" if options else ""
        return (f"random:{self.preset}" if self.preset else self.checkpoint.name) + suffix


def replica_model(model: str | None) -> ReplicaModel:
    """The replicas' model from `--model`: `local:DIR` (or a bare DIR) or `random:PRESET`, each with an optional
    `#mxfp8`, `#context=N` and/or `#speculative=MODE`; anything else is a clear error."""
    from warpcode.agent.backends.local import split_local_spec

    if model and model.startswith("random:") and model.removeprefix("random:"):
        spec = split_local_spec(model.removeprefix("random:"))
        # the replicas check the name as they build it
        return ReplicaModel(preset=spec.directory, weights=spec.weights, context=spec.context,
                            speculative=spec.speculative)  # fmt: skip
    spec = split_local_spec(model.removeprefix("local:")) if model else None
    path = spec.directory if spec else None
    if not path or not (model.startswith("local:") or Path(path).is_dir()):
        raise ValueError(f"--replicas serves a local:DIR or random:PRESET model; --model is {model!r} (an openai: "
                         "endpoint serves itself: give the workers its URL instead)")  # fmt: skip
    checkpoint = Path(path).expanduser().resolve()
    if not (checkpoint / "config.json").is_file():
        raise ValueError(f"--replicas: {checkpoint} is not a checkpoint directory (no config.json)")
    return ReplicaModel(checkpoint=checkpoint, weights=spec.weights, context=spec.context, speculative=spec.speculative)


def replica_resources(cluster_gpus: float, count: int, gpus_per_replica: float) -> tuple[dict, str]:
    """(the replica actors' Ray resources, where they run, in words). Without GPUs they run on the CPU; too few for
    `count` replicas is an error now rather than replicas waiting for GPUs that never come."""
    if not cluster_gpus:
        return {"num_gpus": 0, "num_cpus": 0}, "on the CPU: the cluster has no GPU"
    if cluster_gpus < count * gpus_per_replica:
        raise ValueError(
            f"--replicas {count} with --replica-gpus {gpus_per_replica:g} needs {count * gpus_per_replica:g} GPUs and "
            f"the cluster has {cluster_gpus:g}: lower --replicas, or share GPUs with --replica-gpus 0.5"
        )
    share = "one GPU" if gpus_per_replica == 1 else f"{gpus_per_replica:g} GPU"
    return {"num_gpus": gpus_per_replica, "num_cpus": 1}, f"{share} each ({cluster_gpus:g} in the cluster)"


@ray.remote(max_restarts=0)
class ModelReplica:
    def __init__(self, model: ReplicaModel, name: str, api_key: str, loopback: bool) -> None:
        from warpcode.model_runtime.openai_server import ModelServer, base_url, bind, create_app

        self.engine = _load(model)
        if model.kv_cache_gb:  # read when the serving engine starts, at the warm-up or the first request
            self.engine.serving = dataclasses.replace(self.engine.serving, kv_cache_gb=model.kv_cache_gb)
        if model.context:
            self.engine.serving = dataclasses.replace(self.engine.serving, max_model_len=model.context)
        if self.engine.device.type == "cuda" and all(model.warm_up):
            self.engine.warm_up(*model.warm_up)
        host = "127.0.0.1" if loopback else ray.util.get_node_ip_address()
        sock = bind(host, 0)
        self.url = base_url(sock)
        self.server = ModelServer(create_app(self.engine, name, api_key), sock)
        self.thread = threading.Thread(target=self.server.run, name="model-server", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise BackendError(f"the model server of the replica on {socket.gethostname()} did not start")
            time.sleep(0.05)

    def address(self) -> tuple[str, str]:
        return self.url, f"{self.engine.device}"

    def counters(self) -> dict[str, int]:
        counters = self.engine.core.counters
        return {"prompt_tokens": counters.prompt_tokens, "cached_tokens": counters.cached_tokens,
                "generated_tokens": counters.generated_tokens}  # fmt: skip

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.engine.shutdown()


class ReplicaSet:
    """The driver's side: starts the replicas, gives each new session one, says how the sessions spread and what
    each replica's generation-driven sessions generated and found cached, turn by turn."""

    def __init__(
        self, model: ReplicaModel, count: int, gpus_per_replica: float, api_key: str, local: bool, log: TextIO
    ) -> None:
        self.model, self.count, self.gpus_per_replica = model, count, gpus_per_replica
        self.api_key, self.local, self.log = api_key, local, log
        self.actors: list = []
        self.urls: list[str] = []
        self.running = [0] * count
        self.sessions = [0] * count
        self.generated = [0] * count
        self.cached_by_turn: list[list[list[int]]] = [[] for _ in range(count)]  # [replica][turn] -> each session's

    def start(self, timeout_s: float) -> None:
        options, where = replica_resources(ray.cluster_resources().get("GPU", 0), self.count, self.gpus_per_replica)
        print(f"batch: loading {self.count} replicas of {self.model.name}, {where}...", file=self.log, flush=True)
        self.actors = [
            ModelReplica.options(**options).remote(self.model, served_name(number), self.api_key, self.local)
            for number in range(self.count)
        ]
        try:
            addresses = ray.get([actor.address.remote() for actor in self.actors], timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise ValueError(f"the replicas did not load in {timeout_s:.0f}s (does the cluster have {self.count} "
                             "free GPUs?)") from None  # fmt: skip
        except ray.exceptions.RayActorError as exc:
            raise ValueError(f"a replica could not load the model: {_cause(exc)}") from None
        self.urls = [url for url, _ in addresses]
        for number, (url, device) in enumerate(addresses):
            print(f"batch: replica {number} serves on {url} ({device})", file=self.log, flush=True)

    def spec(self, replica: int) -> str:
        return f"openai:{self.urls[replica]}#{served_name(replica)}"

    def assign(self) -> int:
        replica = min(range(self.count), key=lambda n: (self.running[n], self.sessions[n]))
        self.running[replica] += 1
        self.sessions[replica] += 1
        return replica

    def release(self, replica: int) -> None:
        self.running[replica] -= 1

    def record(self, replica: int, row: dict[str, Any]) -> None:
        """A finished job's generation-driven requests (its row's usage), counted for the replica it was given."""
        requests = row.get("usage", {}).get("generation") or []
        self.generated[replica] += sum(request["generated_tokens"] for request in requests)
        turns = self.cached_by_turn[replica]
        for turn, request in enumerate(requests):
            if turn == len(turns):
                turns.append([])
            turns[turn].append(request["cached_tokens"])

    def summary(self) -> list[str]:
        try:
            counters = ray.get([actor.counters.remote() for actor in self.actors], timeout=30)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            counters = [None] * self.count
        lines = []
        for number, counts in enumerate(counters):
            line = f"replica {number}: {self.sessions[number]} sessions"
            if counts:
                share = counts["cached_tokens"] / max(counts["prompt_tokens"], 1)
                line += (f", {counts['prompt_tokens']} prompt tokens ({share:.0%} from the prefix cache), "
                         f"{counts['generated_tokens']} generated")  # fmt: skip
            if turns := self.cached_by_turn[number]:
                means = ", ".join(f"{sum(cached) / len(cached):.0f}" for cached in turns)
                line += (f"; generate_tokens turns: {self.generated[number]} tokens, cached prompt tokens per turn "
                         f"(mean) {means}")  # fmt: skip
            lines.append(line)
        return lines

    def stop(self) -> None:
        with contextlib.suppress(ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            ray.get([actor.stop.remote() for actor in self.actors], timeout=30)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)


def served_name(replica: int) -> str:
    """The model's id in replica `replica`'s API: a response's `model` says which replica answered it."""
    return f"replica-{replica}"


def _load(model: ReplicaModel) -> Any:
    if model.checkpoint is not None:
        from warpcode.agent.backends.local import load_agent_engine

        return load_agent_engine(model.checkpoint, weights=model.weights, speculative=model.speculative)
    from warpcode.model_runtime import load_random
    from warpcode.model_runtime.devices import resolve_device
    from warpcode.model_runtime.speculative import SpeculativeConfig

    device = resolve_device()
    speculative = SpeculativeConfig.for_device(model.speculative, device)
    return load_random(model.preset, device=device, weights=model.weights, speculative=speculative)


def _cause(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return next((line for line in reversed(text) if line.strip()), type(error).__name__)
