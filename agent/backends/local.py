"""`local:DIR[#mxfp8]`: a Hugging Face checkpoint run in-process by warpcode.model_runtime (`#mxfp8`: its projections
and experts in MXFP8, quantised as they load; `#bf16`, the default: as stored, in the model dtype).

The checkpoint's chat template renders the conversation with the tools; generated text is parsed for tool calls
as it streams (Hermes or Qwen3-Coder format, picked from the template). Every session of the process shares one
engine per checkpoint and weight format (its serving engine batches their requests and keeps their prefixes
cached), and text arrives on the event loop as the engine produces it; closing the stream cancels the request.
torch is imported only when the model is first used.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from warpcode.agent.backends.base import BackendError, Finish, ModelEvent, ToolCallReady, approximate_tokens
from warpcode.agent.backends.toolcall_parsers import parser_for_template
from warpcode.agent.messages import Message, ToolCall

DEFAULT_CONTEXT_WINDOW = 32_768
WEIGHT_FORMATS = ("bf16", "mxfp8")  # kernels.mx's, named here so that parsing a spec or arguments imports no torch
_ENGINES: dict[tuple[Path, str], Any] = {}
_ENGINES_LOCK = threading.Lock()


def split_local_spec(spec: str) -> tuple[str, str]:
    """`DIR` or `DIR#FORMAT` -> (DIR, weight format); a directory whose name holds '#' stays whole."""
    directory, sep, weights = spec.rpartition("#")
    if not sep or Path(spec).is_dir():
        return spec, "bf16"
    if weights not in WEIGHT_FORMATS:
        known = ", ".join(WEIGHT_FORMATS)
        raise BackendError(f"unknown weight format #{weights} in model spec {spec!r} (known: {known})")
    return directory, weights


class LocalBackend:
    """Loads the checkpoint in `path` at first use (`weights`: "bf16" or "mxfp8"), or serves an `engine` already
    loaded in this process."""

    def __init__(
        self, path: str | Path | None = None, max_new_tokens: int = 4096, engine: Any = None, weights: str = "bf16"
    ) -> None:
        self.path, self.max_new_tokens, self._engine = Path(path or "."), max_new_tokens, engine
        self.weights = weights
        self.context_window = DEFAULT_CONTEXT_WINDOW
        if engine is None:
            if not (self.path / "config.json").is_file():
                raise BackendError(f"{self.path} is not a checkpoint directory (no config.json)")
            config = json.loads((self.path / "config.json").read_text())
            self.context_window = min(config.get("max_position_embeddings") or DEFAULT_CONTEXT_WINDOW, 131_072)
        self._lock = asyncio.Lock()

    def count_tokens(self, text: str) -> int:
        tokenizer = self._engine.tokenizer if self._engine is not None else None
        if tokenizer is None:
            return approximate_tokens(text)
        return len(tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))  # text, as prompted

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        engine = await self._load()
        try:
            prompt_ids = conversation_prompt_ids(engine.tokenizer, messages, tools)
        except ValueError as exc:  # the template's raise_exception, or a conversation holding a stand-in's secret
            raise BackendError(f"cannot write the conversation as this model's prompt: {exc}") from None
        parser = parser_for_template(str(engine.tokenizer.chat_template), tools)
        room = engine.context_length - len(prompt_ids)
        if room < 1:
            raise BackendError(
                f"the conversation ({len(prompt_ids)} tokens) fills the model's context of {engine.context_length} "
                "tokens; start a new session or compact this one"
            )
        try:
            handle = engine.submit(prompt_ids, min(self.max_new_tokens, room))
        except ValueError as exc:
            raise BackendError(str(exc)) from exc
        called = False
        try:
            async for output in handle:
                for parsed in parser.feed(output.text):
                    called |= isinstance(parsed, ToolCall)
                    yield ToolCallReady(parsed) if isinstance(parsed, ToolCall) else parsed
            for parsed in parser.finish():
                called |= isinstance(parsed, ToolCall)
                yield ToolCallReady(parsed) if isinstance(parsed, ToolCall) else parsed
        except RuntimeError as exc:  # the engine failed under this request
            raise BackendError(str(exc)) from exc
        finally:
            handle.cancel()  # a closed stream (a cancelled turn) frees the sequence at once
        reason = "length" if handle.finish_reason == "length" else "tool_calls" if called else "stop"
        yield Finish(reason, handle.stats.prompt_tokens, handle.stats.completion_tokens)

    async def _load(self) -> Any:
        async with self._lock:
            if self._engine is None:
                self._engine = await asyncio.to_thread(_load_engine, self.path, self.weights)
        return self._engine


def _load_engine(path: Path, weights: str) -> Any:
    """The process's one engine for the checkpoint in `path` in `weights`: every session's backend shares it (and
    its cache); the bf16 and mxfp8 engines of one checkpoint are two engines."""
    key = (path.resolve(), weights)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = load_agent_engine(path, weights)
        return _ENGINES[key]


def load_agent_engine(path: Path, weights: str = "bf16") -> Any:
    """A new engine for the checkpoint in `path` (on the GPU when there is one) with `weights` ("bf16" or
    "mxfp8"), checked to serve an agent."""
    import torch

    from warpcode.model_runtime import CheckpointError, UnsupportedConfigError, load

    try:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        engine = load(path, device=device, weights=weights, show_progress=False)
    except (CheckpointError, UnsupportedConfigError, OSError, ValueError) as exc:
        raise BackendError(f"cannot load the model in {path}: {exc}") from exc
    if engine.tokenizer is None or not engine.tokenizer.chat_template:
        raise BackendError(f"{path} needs tokenizer.json and a chat template to serve as an agent model")
    return engine


def conversation_prompt_ids(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
    """The conversation as the checkpoint's chat template writes it (tools included), as token ids: control tokens
    only where the template's markup puts them, every message, tool result and tool schema as plain text (a file
    that holds `<|im_start|>system` opens no system turn)."""
    return tokenizer.chat_prompt_ids([template_message(m) for m in messages], tools=tools)


def template_message(message: Message) -> dict[str, Any]:
    """Hugging Face templates read tool-call arguments as objects, not as JSON text."""
    rendered: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        rendered["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        rendered.update(tool_call_id=message.tool_call_id, name=message.name)
    return rendered
