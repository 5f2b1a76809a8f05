"""Server-sent events for `"stream": true`: one `data: {chunk}` event per engine output, `data: [DONE]` last.

Starlette cancels the response when the client disconnects (or its socket write fails); the response then
cancels the engine request, which frees its sequence within one engine step. An error once the stream has
started (the engine stopping) goes out as a `data: {"error": ...}` event before `[DONE]`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import StreamingResponse

from warpcode.model_runtime.openai_server.answer import AnswerStream
from warpcode.model_runtime.openai_server.chat import ChatDelta, chat_finish_reason
from warpcode.model_runtime.openai_server.echo import Echo
from warpcode.model_runtime.openai_server.errors import ApiError, internal_error
from warpcode.model_runtime.openai_server.generation import Generation
from warpcode.model_runtime.openai_server.logprobs import TokenText, chat_logprobs, completion_logprobs
from warpcode.model_runtime.serving.token_logprobs import TokenLogprob

logger = logging.getLogger(__name__)


@dataclass
class Reply:
    """What every response and chunk of one request carries."""

    object: str  # "text_completion", "chat.completion", ...
    model: str
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        prefix = "chatcmpl" if self.object.startswith("chat") else "cmpl"
        self.id = self.id or f"{prefix}-{uuid.uuid4().hex}"

    def wrap(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        head = {"id": self.id, "object": self.object, "created": self.created, "model": self.model}
        return {**head, "choices": choices, **extra}


class EventStream(StreamingResponse):
    """The SSE response of one request; however it ends (done, client gone before or during the stream, server
    stopping), the engine request ends with it."""

    def __init__(self, generation: Generation, chunks: AsyncIterator[dict[str, Any]]) -> None:
        super().__init__(_events(chunks), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self.generation = generation

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.generation.cancel()  # a no-op once the engine finished it


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


async def completion_chunks(generation: Generation, reply: Reply, usage: bool, token_ids: bool, echo: Echo):
    extra = {"usage": None} if usage else {}
    wants_logprobs = generation.request_logprobs is not None
    offset, echoed = 0, False
    async for out in generation.outputs():
        ids, entries, text = out.token_ids, out.logprobs or [], out.text
        if not echoed:  # the prompt comes with the first output: the engine has its logprobs by then
            echoed = True
            text = echo.text + text
            if wants_logprobs and echo.prompt_ids:
                ids, entries = echo.prompt_ids + ids, generation.handle.prompt_logprobs + entries
        logprobs = None
        if wants_logprobs:
            logprobs = completion_logprobs(echo.token_text, entries, ids, offset)
            offset += sum(map(len, logprobs["tokens"]))
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": out.finish_reason}
        if token_ids:
            choice["token_ids"] = out.token_ids
        if text or out.finish_reason or (token_ids and out.token_ids) or entries:
            yield reply.wrap([choice], **extra)
    if usage:
        yield reply.wrap([], usage=generation.usage())


async def chat_chunks(
    generation: Generation,
    reply: Reply,
    usage: bool,
    token_ids: bool,
    answer: AnswerStream,
    token_text: TokenText | None,
):
    extra = {"usage": None} if usage else {}
    # logprobs of tokens whose text is held back (an incomplete character, a possible stop string or tool call)
    # wait for the next chunk that goes out, so every token's logprob is sent once, in order
    pending: list[TokenLogprob] = []

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, ids: list[int] | None = None) -> dict:
        logprobs = None
        if token_text is not None and delta.get("role") is None:
            logprobs = chat_logprobs(token_text, pending[:])
            pending.clear()
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        if token_ids and ids is not None:
            choice["token_ids"] = ids
        return reply.wrap([choice], **extra)

    yield chunk({"role": "assistant", "content": ""})
    finish_reason = "stop"
    async for out in generation.outputs():
        pending.extend(out.logprobs or [])
        delta = answer.feed(out.text)
        if delta.reasoning_content or delta.content or delta.tool_calls or (token_ids and out.token_ids):
            yield chunk(_delta(delta), ids=out.token_ids)
        finish_reason = out.finish_reason or finish_reason
    if (rest := answer.finish()).reasoning_content or rest.content or rest.tool_calls:
        yield chunk(_delta(rest))
    yield chunk({}, chat_finish_reason(finish_reason, answer.tools))
    if usage:
        yield reply.wrap([], usage=generation.usage())


def _delta(delta: ChatDelta) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if delta.reasoning_content:
        out["reasoning_content"] = delta.reasoning_content
    if delta.content:
        out["content"] = delta.content
    if delta.tool_calls:
        out["tool_calls"] = delta.tool_calls
    return out
