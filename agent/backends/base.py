"""The model backend interface: what a backend streams, and the errors that end a turn.

A backend streams one model response: text deltas, thought deltas, complete tool calls (and notices for the user,
which are not the model's), then one Finish with the token usage. It never runs tools and keeps no history: the
loop owns the trajectory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from warpcode.model_runtime.chat.deltas import TextDelta, ThoughtDelta
from warpcode.model_runtime.chat.messages import Message, ToolCall

NO_MODEL_MESSAGE = (
    'No model is configured. Pass --model SPEC, set WARPCODE_MODEL=SPEC, or put model = "SPEC" in '
    "~/.config/warpcode/config.toml. SPEC is openai:URL[#MODEL] (an OpenAI-compatible server such as vLLM, "
    "SGLang, llama.cpp or Ollama), local:DIR (a Hugging Face checkpoint run in-process), builtin (warpcode's small "
    "model, which needs the runtime: pip install 'warpcode[runtime]') or scripted:PATH."
)


class BackendError(Exception):
    """The model could not answer (server error, bad configuration, missing model): ends the turn with a message."""


class ModelUnavailable(BackendError):
    """The model's server could not be reached or kept failing (refused, timed out, 5xx): trying again later may
    work, unlike a bad request or a missing key. A batch retries such a job."""


@dataclass
class ToolCallReady:
    call: ToolCall


@dataclass
class Notice:
    """Words for the user that are not the model's: shown with the answer, never part of the conversation the
    model is sent again (the built-in model's first answer starts with one)."""

    text: str


@dataclass
class Finish:
    reason: Literal["stop", "tool_calls", "length"]
    input_tokens: int = 0
    output_tokens: int = 0


ModelEvent = TextDelta | ThoughtDelta | ToolCallReady | Notice | Finish


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
