"""`openai:URL[#MODEL]`: any OpenAI-compatible /chat/completions endpoint, streamed over SSE with native tools.

URL is the API base (`http://host:8000/v1`) or the full `.../chat/completions` address. Before the first request the
server's model list (GET .../models) names the model when the spec does not (OpenAI's API requires one; a server
listing several wants `#MODEL`) and gives the context: vLLM and serve-model list `max_model_len`; without it, or
without a list, the context is taken to be 32,768 tokens. The API key comes from
WARPCODE_API_KEY, else OPENAI_API_KEY (sent as a bearer token when set). Rate limits (429), server errors (5xx),
timeouts and broken connections are retried with exponential backoff before any output has streamed; a refused
connection (nothing listens there) fails at once; other failures raise BackendError with the server's own message.

An answer is bounded whatever the server does: it is asked for at most `max_tokens` (the room the loop keeps free
for an answer), and reading stops, failing the turn with a one-line error, when the stream goes on past twice as
many lines as that (a server sends one chunk per token, plus a few), or past MAX_ANSWER_BYTES, or one line passes
MAX_LINE_BYTES (read in pieces: stream_lines.py). A server that refuses `max_tokens` (some OpenAI models want
`max_completion_tokens`; vLLM refuses one that, with the prompt, passes its context) is asked again without it, as
every later request is: the bounds on what is read still hold.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
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
from warpcode.agent.backends.stream_lines import StreamTooLong, bounded_lines
from warpcode.model_runtime.chat.messages import Message, ToolCall

FINISH_REASONS = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}
DEFAULT_MAX_TOKENS = 4_096  # the room loop.Limits keeps free for an answer; `local:` asks the same
MAX_ANSWER_BYTES = 16 * 2**20  # read for one answer: 4,096 tokens stream as about 1 MB of chunks, 32,768 as 8
MAX_LINE_BYTES = 4 * 2**20  # one line of the stream (one chunk): a whole tool call in one chunk is far smaller
STREAM_OVERHEAD_LINES = 16  # besides a line per token: the role, finish, usage and [DONE] chunks, keep-alives
ERROR_BODY_BYTES = 64 * 1024  # read of an error answer: its message is all we show
MODEL_LIST_BYTES = 2**20  # read of GET /models: thousands of entries
DEFAULT_CONTEXT_WINDOW = 32_768  # when the server does not say
# A 400 naming the answer's token limit, or the context it would not fit in (vLLM counts max_tokens in it).
_TOKEN_LIMIT_REFUSED = re.compile(r"max_tokens|max_completion_tokens|maximum context length", re.IGNORECASE)


@dataclass
class RetryPolicy:
    attempts: int = 5
    first_delay_s: float = 1.0  # doubled after each failed attempt
    max_delay_s: float = 30.0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _TokenLimitRefused(Exception):
    """The server refused the request because of its `max_tokens`."""


class OpenAIBackend:
    def __init__(
        self,
        url: str,
        model: str | None = None,
        context_window: int | None = None,  # None: the server's max_model_len, else DEFAULT_CONTEXT_WINDOW
        max_tokens: int | None = DEFAULT_MAX_TOKENS,  # None: not asked (the stream is bounded by the context)
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        base = url.rstrip("/")
        if not base.startswith(("http://", "https://")):  # httpx would refuse it only when sending, retries and all
            raise BackendError(
                f"openai:{url} has no http:// or https:// before the host: use openai:http://{base.split('://')[-1]}"
            )
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model, self.max_tokens = model, max_tokens
        self.context_window = context_window or DEFAULT_CONTEXT_WINDOW
        self._learn_context = context_window is None
        self._prepared = False
        self.retry = retry or RetryPolicy()
        self.max_answer_bytes, self.max_line_bytes = max_answer_bytes, max_line_bytes
        # Reads may pause while the server prefills a long prompt; connecting should not.
        self.timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        key = os.environ.get("WARPCODE_API_KEY") or os.environ.get("OPENAI_API_KEY")
        # Uncompressed: what is read is what is bounded (a small gzip body can inflate to gigabytes).
        self.headers = {"Accept-Encoding": "identity", **({"Authorization": f"Bearer {key}"} if key else {})}

    async def prepare(self) -> None:
        """The model's name (when the spec gave none) and context, from the server's model list, once. A server
        that lists none, or that cannot be reached yet (the request then says why), is asked without a name."""
        if self._prepared:
            return
        models_url = self.url.removesuffix("/chat/completions") + "/models"
        try:
            # a listing is quick: a server that hangs on it should not hold the turn for a whole answer's time
            timeout = httpx.Timeout(min(self.timeout.read or 30.0, 30.0), connect=self.timeout.connect)
            async with (
                httpx.AsyncClient(timeout=timeout, headers=self.headers) as client,
                client.stream("GET", models_url) as response,
            ):
                listing = await _head(response, MODEL_LIST_BYTES) if response.status_code == 200 else ""
        except httpx.TransportError:
            return  # not there yet: the request reports it, and the next turn asks again
        entries = _model_entries(listing)
        if self.model is None and len(entries) > 1:
            names = ", ".join(sorted(entries)[:8]) + (", ..." if len(entries) > 8 else "")
            raise BackendError(
                f"{models_url} serves {len(entries)} models ({names}): name one in the model spec, "
                f"openai:{self.url.removesuffix('/chat/completions')}#MODEL"
            )
        self._prepared = True
        if self.model is None and entries:
            self.model = next(iter(entries))
        context = entries.get(self.model or "", {}).get("max_model_len")
        if self._learn_context and isinstance(context, int) and not isinstance(context, bool) and context > 0:
            self.context_window = context

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
        try:
            async for event in self._stream(body):
                yield event
        except _TokenLimitRefused:
            self.max_tokens = None  # this server's choice: its own limit, bounded here by what is read
            del body["max_tokens"]
            async for event in self._stream(body):
                yield event

    async def _stream(self, body: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        delay, streamed = self.retry.first_delay_s, False
        async with httpx.AsyncClient(timeout=self.timeout, headers=self.headers) as client:
            for attempt in range(1, self.retry.attempts + 1):
                try:
                    async with client.stream("POST", self.url, json=body) as response:
                        await self._check_status(response, body)
                        async for event in self._answer(response, body.get("max_tokens")):
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

    async def _answer(self, response: httpx.Response, asked: int | None) -> AsyncIterator[ModelEvent]:
        """The answer's events, read within the bounds (`asked`: the max_tokens sent, if any)."""
        max_lines = 2 * (asked or self.context_window) + STREAM_OVERHEAD_LINES
        try:
            lines = bounded_lines(response.aiter_raw(), self.max_line_bytes, self.max_answer_bytes)
            async for event in _parse_stream(lines, max_lines):
                yield event
        except StreamTooLong as exc:
            raise BackendError(f"{self.url}: {exc}: stopped reading (is it an OpenAI-compatible server?)") from None
        except _EndlessStream:
            bound = (
                f"the {asked:,} tokens asked for" if asked else f"the model's context of {self.context_window:,} tokens"
            )
            raise BackendError(
                f"{self.url} sent more than {max_lines:,} lines for one answer, over twice {bound}: stopped reading "
                "(does the server honour max_tokens?)"
            ) from None

    async def _check_status(self, response: httpx.Response, body: dict[str, Any]) -> None:
        encoding = response.headers.get("content-encoding", "identity").lower()
        if encoding not in ("identity", ""):
            raise BackendError(
                f"{self.url} answered compressed ({encoding}) although asked not to: connect to the model server "
                "directly, not through a proxy that compresses"
            )
        if response.status_code < 400:
            return
        detail = _error_message(await _head(response, ERROR_BODY_BYTES))
        status = f"HTTP {response.status_code} {response.reason_phrase}: {detail}"
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(status, _seconds(response.headers.get("retry-after")))
        if response.status_code == 400 and "max_tokens" in body and _TOKEN_LIMIT_REFUSED.search(detail):
            raise _TokenLimitRefused(status)
        hint = " (set WARPCODE_API_KEY or OPENAI_API_KEY)" if response.status_code in (401, 403) else ""
        raise BackendError(f"{self.url} answered {status}{hint}")


class _EndlessStream(Exception):
    """More lines than a bounded answer takes."""


class _Answer:
    """What the chunks of one answer add up to: usage, finish reason, and the tool calls assembled by index."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}
        self.finish, self.input_tokens, self.output_tokens = "stop", 0, 0

    def read(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        """The events of one chunk; AttributeError, TypeError or ValueError when a field has the wrong type."""
        events: list[ModelEvent] = []
        if usage := chunk.get("usage"):
            self.input_tokens = int(usage.get("prompt_tokens") or 0)
            self.output_tokens = int(usage.get("completion_tokens") or 0)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            # vLLM's field; its newer versions (and OpenRouter) call it `reasoning`
            if reasoning := delta.get("reasoning_content") or delta.get("reasoning"):
                events.append(ThoughtDelta(str(reasoning)))
            if delta.get("content"):
                events.append(TextDelta(str(delta["content"])))
            for piece in delta.get("tool_calls") or []:
                index = piece.get("index", len(self.calls))
                call = self.calls.setdefault(int(index), {"id": "", "name": "", "arguments": ""})
                function = piece.get("function") or {}
                call["id"] = str(piece.get("id") or call["id"])
                call["name"] += str(function.get("name") or "")
                call["arguments"] += str(function.get("arguments") or "")
            if choice.get("finish_reason"):
                self.finish = FINISH_REASONS.get(choice["finish_reason"], "stop")
        return events


async def _parse_stream(lines: AsyncIterator[bytes], max_lines: int) -> AsyncIterator[ModelEvent]:
    """Server-sent `data:` chunks -> events; tool calls are released at the end. Past `max_lines` lines that are
    not blank, _EndlessStream."""
    answer, count = _Answer(), 0
    async for line in lines:
        if not line.strip():
            continue
        count += 1
        if count > max_lines:
            raise _EndlessStream
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip().decode(errors="replace")
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except (json.JSONDecodeError, RecursionError):
            raise BackendError(f"the server sent a chunk that is not JSON: {data[:200]!r}") from None
        if isinstance(chunk, dict) and "error" in chunk:
            raise BackendError(f"the server reported an error mid-stream: {_error_message(data)}")
        try:
            events = answer.read(chunk)
        except (AttributeError, TypeError, ValueError):
            raise BackendError(f"the server sent a chunk that is not a chat completion chunk: {data[:200]!r}") from None
        for event in events:
            yield event
    calls, finish = answer.calls, answer.finish
    for index in sorted(calls):
        call = calls[index]
        yield ToolCallReady(ToolCall.from_json(call["id"] or f"call_{index}", call["name"], call["arguments"]))
    if calls and finish == "stop":
        finish = "tool_calls"
    yield Finish(finish, answer.input_tokens, answer.output_tokens)


async def _head(response: httpx.Response, limit: int) -> str:
    """The first `limit` bytes of the body, as text; the rest is left unread."""
    head = bytearray()
    async for chunk in response.aiter_raw():
        head += chunk[: limit - len(head)]
        if len(head) >= limit:
            break
    return head.decode(errors="replace")


def _model_entries(listing: str) -> dict[str, dict[str, Any]]:
    """id -> entry of an OpenAI model list `{"data": [{"id": ...}, ...]}`; {} for anything else."""
    try:
        data = json.loads(listing).get("data")
    except (json.JSONDecodeError, RecursionError, AttributeError):
        return {}
    if not isinstance(data, list):
        return {}
    return {entry["id"]: entry for entry in data if isinstance(entry, dict) and isinstance(entry.get("id"), str)}


def _error_message(body: str) -> str:
    try:
        error = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
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
