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
from warpcode.model_runtime.openai_server.echo import Echo
from warpcode.model_runtime.openai_server.errors import ApiError, internal_error
from warpcode.model_runtime.openai_server.logprobs import TokenText, chat_logprobs, completion_logprobs
from warpcode.model_runtime.serving.token_logprobs import TokenLogprob

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


async def completion_chunks(
    choices: Choices, reply: Reply, usage: bool, token_ids: bool, echoes: list[Echo], logprobs: bool
):
    """`echoes`: what each prompt's choices start with; `logprobs`: whether the request asked for them."""
    extra = {"usage": None} if usage else {}
    offsets = [0] * choices.count  # where each choice's next token's text starts in its text
    echoed = [False] * choices.count
    async for index, out in choices.outputs():
        echo = echoes[index // choices.n]
        ids, entries, text = out.token_ids, out.logprobs or [], out.text
        if not echoed[index]:  # the prompt comes with the choice's first output: the engine has its logprobs by then
            echoed[index] = True
            text = echo.text + text
            if logprobs and echo.prompt_ids:
                ids, entries = echo.prompt_ids + ids, choices.prompt_logprobs(index) + entries
        shown = None
        if logprobs:
            shown = completion_logprobs(echo.token_text, entries, ids, offsets[index])
            offsets[index] += sum(map(len, shown["tokens"]))
        choice = {"index": index, "text": text, "logprobs": shown, "finish_reason": out.finish_reason}
        if token_ids:
            choice["token_ids"] = out.token_ids
        if text or out.finish_reason or (token_ids and out.token_ids) or entries:
            yield reply.wrap([choice], **extra)
    if usage:
        yield reply.wrap([], usage=choices.usage())


async def chat_chunks(
    choices: Choices,
    reply: Reply,
    usage: bool,
    token_ids: bool,
    answers: list[AnswerStream],
    token_text: TokenText | None,
):
    """Each choice opens with its role, then its deltas as they come, then its finish reason once it ends.
    `token_text`: how logprobs show a token, when the request asked for them."""
    extra = {"usage": None} if usage else {}
    # a choice's logprobs of tokens whose text is held back (an incomplete character, a possible stop string or tool
    # call) wait for its next chunk that goes out, so every token's logprob is sent once, in order
    pending: list[list[TokenLogprob]] = [[] for _ in range(choices.count)]

    def chunk(index: int, delta: dict[str, Any], finish_reason: str | None = None, ids: list[int] | None = None):
        logprobs = None
        if token_text is not None and delta.get("role") is None:
            logprobs = chat_logprobs(token_text, pending[index][:])
            pending[index].clear()
        choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        if token_ids and ids is not None:
            choice["token_ids"] = ids
        return reply.wrap([choice], **extra)

    for index in range(choices.count):
        yield chunk(index, {"role": "assistant", "content": ""})
    async for index, out in choices.outputs():
        answer = answers[index]
        pending[index].extend(out.logprobs or [])
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
