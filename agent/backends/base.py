"""The model backend interface and `backend_from_spec` (spec strings fixed by design.md section 5).

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


def backend_from_spec(spec: str | None) -> ModelBackend:
    """`scripted:PATH`, `openai:URL[#MODEL]`, `local:DIR[#OPTIONS]` or a bare checkpoint DIR[#OPTIONS] (OPTIONS:
    `mxfp8` and/or `context=N`, local.py); None -> MissingModel."""
    if not spec:
        return MissingModel()
    kind, sep, rest = spec.partition(":")
    if sep and kind == "scripted":
        from warpcode.agent.backends.scripted import ScriptedBackend

        return ScriptedBackend.from_file(rest)
    if sep and kind == "openai":
        from warpcode.agent.backends.openai import OpenAIBackend

        url, _, model = rest.partition("#")
        return OpenAIBackend(url, model or None)
    if sep and kind == "local":
        from warpcode.agent.backends.local import LocalBackend, split_local_spec

        require_runtime(f"the model {spec}")
        directory, weights, context = split_local_spec(rest)
        return LocalBackend(directory, weights=weights, context=context)
    if sep and kind == "random":
        raise BackendError(
            f"{spec!r} (random weights at a preset's shape) has no tokenizer, so an agent cannot talk to it: it is "
            "the model of `warpcode batch --ray ... --replicas R` (or `warpcode serve-model --model`) for scripted "
            'jobs whose turns ask it for tokens ("generate_tokens")'
        )
    directory, sep, _ = spec.rpartition("#")
    if Path(spec).is_dir() or (sep and Path(directory).is_dir()):
        from warpcode.agent.backends.local import LocalBackend, split_local_spec

        require_runtime(f"the local model {spec}")
        directory, weights, context = split_local_spec(spec)
        return LocalBackend(directory, weights=weights, context=context)
    raise BackendError(
        f"Unknown model spec {spec!r}: use openai:URL[#MODEL], local:DIR[#mxfp8,context=N], a checkpoint directory or "
        "scripted:PATH."
    )
