"""The model backend interface and `backend_from_spec` (the spec strings of `--model`, a fixed interface).

A backend streams one model response: text deltas, thought deltas, complete tool calls, then one Finish with
the token usage. It never runs tools and keeps no history: the loop owns the trajectory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from warpcode.agent.extras import require_runtime
from warpcode.agent.messages import Message, ToolCall

NO_MODEL_MESSAGE = (
    'No model is configured. Pass --model SPEC, set WARPCODE_MODEL=SPEC, or put model = "SPEC" in '
    "~/.config/warpcode/config.toml. SPEC is openai:URL[#MODEL] (an OpenAI-compatible server such as vLLM, "
    "SGLang, llama.cpp or Ollama), local:DIR (a Hugging Face checkpoint run in-process) or scripted:PATH."
)


class BackendError(Exception):
    """The model could not answer (server error, bad configuration, missing model): ends the turn with a message."""


class ModelUnavailable(BackendError):
    """The model's server could not be reached or kept failing (refused, timed out, 5xx): trying again later may
    work, unlike a bad request or a missing key. A batch retries such a job."""


@dataclass
class TextDelta:
    text: str


@dataclass
class ThoughtDelta:
    text: str


@dataclass
class ToolCallReady:
    call: ToolCall


@dataclass
class Finish:
    reason: Literal["stop", "tool_calls", "length"]
    input_tokens: int = 0
    output_tokens: int = 0


ModelEvent = TextDelta | ThoughtDelta | ToolCallReady | Finish


class ModelBackend(Protocol):
    context_window: int  # tokens the prompt and the answer share (known once prepare() has run)

    async def prepare(self) -> None:
        """Learns what the first request needs to know (the openai: backend asks its server for the model's name
        and context); the loop calls it before every model request, so it is cheap once done."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]: ...


def approximate_tokens(text: str) -> int:
    """Four characters per token: close enough for budgets when no tokenizer is at hand."""
    return (len(text) + 3) // 4


class MissingModel:
    """Stands in when nothing is configured, so services still start and a prompt explains how to configure."""

    context_window = 32_768

    async def prepare(self) -> None:
        """Nothing to learn: the request itself explains how to configure a model."""

    def count_tokens(self, text: str) -> int:
        return approximate_tokens(text)

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        raise BackendError(NO_MODEL_MESSAGE)
        yield  # an async generator, like every backend


def spec_relative_to(spec: str, folder: Path) -> str:
    """`spec` with its path made absolute, a relative one taken from `folder` (`~` is the home folder): how a
    JOBS.jsonl row names its model, relative to the JOBS file as its `repo` is, and how `warpcode batch --model`
    stays valid in workers that run elsewhere (Ray). `openai:` and `random:` specs hold no path."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "scripted":
        return f"scripted:{_from(folder, rest)}"
    if sep and kind == "local":
        return f"local:{_local_from(folder, rest)}"
    if sep and kind in ("openai", "random"):
        return spec
    return _local_from(folder, spec)  # a bare checkpoint directory, as backend_from_spec takes it


def _local_from(folder: Path, spec: str) -> str:
    """A `DIR[#OPTIONS]` spec with DIR taken from `folder`; a directory whose name holds '#' stays whole, as
    split_local_spec reads it."""
    if (whole := _from(folder, spec)).is_dir():
        return str(whole)
    directory, sep, options = spec.rpartition("#")
    return f"{_from(folder, directory)}#{options}" if sep else str(whole)


def _from(folder: Path, path: str) -> Path:
    return Path(folder).absolute() / Path(path).expanduser()


def backend_from_spec(spec: str | None, max_tokens: int | None = None) -> ModelBackend:
    """`scripted:PATH`, `openai:URL[#MODEL]`, `local:DIR[#OPTIONS]` or a bare checkpoint DIR[#OPTIONS] (OPTIONS:
    `mxfp8` and/or `context=N`, local.py); None -> MissingModel. `max_tokens`: one answer's token limit (None: the
    backend's own; a script has none)."""
    if not spec:
        return MissingModel()
    kind, sep, rest = spec.partition(":")
    if sep and kind == "scripted":
        from warpcode.agent.backends.scripted import ScriptedBackend

        return ScriptedBackend.from_file(rest)
    if sep and kind == "openai":
        from warpcode.agent.backends.openai import OpenAIBackend

        url, _, model = rest.partition("#")
        return OpenAIBackend(url, model or None, **({"max_tokens": max_tokens} if max_tokens else {}))
    if sep and kind == "local":
        require_runtime(f"the model {spec}")
        return _local_backend(rest, max_tokens)
    if sep and kind == "random":
        raise BackendError(
            f"{spec!r} (random weights at a preset's shape) has no tokenizer, so an agent cannot talk to it: it is "
            "the model of `warpcode batch --ray ... --replicas R` (or `warpcode serve-model --model`) for scripted "
            'jobs whose turns ask it for tokens ("generate_tokens")'
        )
    directory, sep, _ = spec.rpartition("#")
    if Path(spec).is_dir() or (sep and Path(directory).is_dir()):
        require_runtime(f"the local model {spec}")
        return _local_backend(spec, max_tokens)
    raise BackendError(
        f"Unknown model spec {spec!r}: use openai:URL[#MODEL], local:DIR[#mxfp8,context=N], a checkpoint directory or "
        "scripted:PATH."
    )


def _local_backend(spec: str, max_tokens: int | None) -> ModelBackend:
    from warpcode.agent.backends.local import LocalBackend, split_local_spec

    directory, weights, context = split_local_spec(spec)
    answer_limit = {"max_new_tokens": max_tokens} if max_tokens else {}
    return LocalBackend(directory, weights=weights, context=context, **answer_limit)
