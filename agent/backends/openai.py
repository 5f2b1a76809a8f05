"""`openai:URL[#MODEL]`: any OpenAI-compatible /chat/completions endpoint, streamed over SSE with native tools.

URL is the API base (`http://host:8000/v1`) or the full `.../chat/completions` address. The API key comes from
WARPCODE_API_KEY, else OPENAI_API_KEY (sent as a bearer token when set). Rate limits (429), server errors (5xx),
timeouts and broken connections are retried with exponential backoff before any output has streamed; a refused
connection (nothing listens there) fails at once; other failures raise BackendError with the server's own message.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from warpcode.agent.backends.base import (
    BackendError,
    Finish,
    ModelEvent,
    ModelUnavailable,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    approximate_tokens,
)
from warpcode.agent.messages import Message, ToolCall

FINISH_REASONS = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}


@dataclass
class RetryPolicy:
    attempts: int = 5
    first_delay_s: float = 1.0  # doubled after each failed attempt
    max_delay_s: float = 30.0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIBackend:
    def __init__(
        self,
        url: str,
        model: str | None = None,
        context_window: int = 32_768,
        max_tokens: int | None = None,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        base = url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model, self.context_window, self.max_tokens = model, context_window, max_tokens
        self.retry = retry or RetryPolicy()
        # Reads may pause while the server prefills a long prompt; connecting should not.
        self.timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        key = os.environ.get("WARPCODE_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def count_tokens(self, text: str) -> int:
        return approximate_tokens(text)

    def request_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [m.to_openai() for m in messages],
            "tools": tools,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.model:
            body["model"] = self.model
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        return body

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        body = self.request_body(messages, tools)
        delay, streamed = self.retry.first_delay_s, False
        async with httpx.AsyncClient(timeout=self.timeout, headers=self.headers) as client:
            for attempt in range(1, self.retry.attempts + 1):
                try:
                    async with client.stream("POST", self.url, json=body) as response:
                        await self._check_status(response)
                        async for event in _parse_stream(response):
                            streamed = True
                            yield event
                        return
                except httpx.ConnectError as exc:  # refused or unresolvable: final, retrying only delays the news
                    raise ModelUnavailable(
                        f"nothing answers at {self.url} ({_describe(exc)}): start the model server, or check the URL "
                        f"given with --model"
                    ) from exc
                except (_Retryable, httpx.TransportError) as exc:
                    if streamed:  # a retry would repeat what the user already saw
                        raise ModelUnavailable(f"{self.url}: the stream broke off: {_describe(exc)}") from exc
                    if attempt == self.retry.attempts:
                        gave_up = f"{self.url}: {_describe(exc)} (gave up after {attempt} attempts)"
                        raise ModelUnavailable(gave_up) from exc
                    retry_after = exc.retry_after if isinstance(exc, _Retryable) else None
                    await asyncio.sleep(min(delay if retry_after is None else retry_after, self.retry.max_delay_s))
                    delay *= 2

    async def _check_status(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        detail = _error_message((await response.aread()).decode(errors="replace"))
        status = f"HTTP {response.status_code} {response.reason_phrase}: {detail}"
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(status, _seconds(response.headers.get("retry-after")))
        hint = " (set WARPCODE_API_KEY or OPENAI_API_KEY)" if response.status_code in (401, 403) else ""
        raise BackendError(f"{self.url} answered {status}{hint}")


async def _parse_stream(response: httpx.Response) -> AsyncIterator[ModelEvent]:
    """Server-sent `data:` chunks -> events; tool calls are assembled by index and released at the end."""
    calls: dict[int, dict[str, str]] = {}
    finish, usage = "stop", {}
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise BackendError(f"the server sent a chunk that is not JSON: {data[:200]!r}") from exc
        if "error" in chunk:
            raise BackendError(f"the server reported an error mid-stream: {_error_message(data)}")
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                yield ThoughtDelta(delta["reasoning_content"])
            if delta.get("content"):
                yield TextDelta(delta["content"])
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(piece.get("index", len(calls)), {"id": "", "name": "", "arguments": ""})
                function = piece.get("function") or {}
                call["id"] = piece.get("id") or call["id"]
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                finish = FINISH_REASONS.get(choice["finish_reason"], "stop")
    for index in sorted(calls):
        call = calls[index]
        yield ToolCallReady(ToolCall.from_json(call["id"] or f"call_{index}", call["name"], call["arguments"]))
    if calls and finish == "stop":
        finish = "tool_calls"
    yield Finish(finish, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))


def _error_message(body: str) -> str:
    try:
        error = json.loads(body)
    except json.JSONDecodeError:
        return body.strip()[:500] or "(empty body)"
    error = error.get("error", error) if isinstance(error, dict) else error
    message = error.get("message") if isinstance(error, dict) else None
    return str(message or error)[:500]


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
