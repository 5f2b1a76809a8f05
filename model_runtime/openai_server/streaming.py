"""Server-sent events for `"stream": true`: one `data: {chunk}` event per engine output, `data: [DONE]` last.

Starlette cancels the response when the client disconnects (or its socket write fails); the response then
cancels the engine request, which frees its sequence within one engine step. An error once the stream has
started (the engine stopping) goes out as a `data: {"error": ...}` event before `[DONE]`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from fastapi.responses import StreamingResponse

from warpcode.model_runtime.openai_server.answer import AnswerStream
from warpcode.model_runtime.openai_server.chat import ChatDelta, chat_finish_reason
from warpcode.model_runtime.openai_server.choices import Choices
from warpcode.model_runtime.openai_server.errors import ApiError, internal_error

logger = logging.getLogger(__name__)


def system_fingerprint(model_name: str, context_length: int) -> str:
    """OpenAI's `system_fingerprint`: changes when what answers changes (the model served, its context, the
    server's version), so a client comparing seeded answers can tell why they differ."""
    identity = f"{model_name}|{context_length}|warpcode {metadata.version('warpcode')}"
    return "fp_" + hashlib.sha256(identity.encode()).hexdigest()[:12]


@dataclass
class Reply:
    """What every response and chunk of one request carries."""

    object: str  # "text_completion", "chat.completion", ...
    model: str
    fingerprint: str  # OpenAI's system_fingerprint: which model and server build answered
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        prefix = "chatcmpl" if self.object.startswith("chat") else "cmpl"
        self.id = self.id or f"{prefix}-{uuid.uuid4().hex}"

    def wrap(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        head = {"id": self.id, "object": self.object, "created": self.created, "model": self.model}
        head["system_fingerprint"] = self.fingerprint
        return {**head, "choices": choices, **extra}


class EventStream(StreamingResponse):
    """The SSE response of one request; however it ends (done, client gone before or during the stream, server
    stopping), the engine requests of its choices end with it."""

    def __init__(self, choices: Choices, chunks: AsyncIterator[dict[str, Any]]) -> None:
        super().__init__(_events(chunks), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self.choices = choices

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.choices.cancel()  # a no-op for those the engine finished


async def _events(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    try:
        async for chunk in chunks:
            yield _event(chunk)
    except ApiError as error:
        yield _event(error.body())
    except Exception as error:  # a bug or a dead engine: the client hears of it, the log keeps the traceback
        logger.exception("a streamed request failed")
        yield _event(internal_error(error).body())
    yield "data: [DONE]\n\n"


def _event(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


async def completion_chunks(choices: Choices, reply: Reply, usage: bool, token_ids: bool):
    extra = {"usage": None} if usage else {}
    async for index, out in choices.outputs():
        choice = {"index": index, "text": out.text, "logprobs": None, "finish_reason": out.finish_reason}
        if token_ids:
            choice["token_ids"] = out.token_ids
        if out.text or out.finish_reason or (token_ids and out.token_ids):
            yield reply.wrap([choice], **extra)
    if usage:
        yield reply.wrap([], usage=choices.usage())


async def chat_chunks(choices: Choices, reply: Reply, usage: bool, token_ids: bool, answers: list[AnswerStream]):
    """Each choice opens with its role, then its deltas as they come, then its finish reason once it ends."""
    extra = {"usage": None} if usage else {}

    def chunk(index: int, delta: dict[str, Any], finish_reason: str | None = None, ids: list[int] | None = None):
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        if token_ids and ids is not None:
            choice["token_ids"] = ids
        return reply.wrap([choice], **extra)

    for index in range(choices.count):
        yield chunk(index, {"role": "assistant", "content": ""})
    async for index, out in choices.outputs():
        answer = answers[index]
        delta = answer.feed(out.text)
        if delta.reasoning_content or delta.content or delta.tool_calls or (token_ids and out.token_ids):
            yield chunk(index, _delta(delta), ids=out.token_ids)
        if out.finish_reason is not None:
            if (rest := answer.finish()).reasoning_content or rest.content or rest.tool_calls:
                yield chunk(index, _delta(rest))
            yield chunk(index, {}, chat_finish_reason(out.finish_reason, answer.tools))
    if usage:
        yield reply.wrap([], usage=choices.usage())


def _delta(delta: ChatDelta) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if delta.reasoning_content:
        out["reasoning_content"] = delta.reasoning_content
    if delta.content:
        out["content"] = delta.content
    if delta.tool_calls:
        out["tool_calls"] = delta.tool_calls
    return out
