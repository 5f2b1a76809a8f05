"""What a caller holds for one submitted request: its handle (outputs as they come, cancel), outputs and stats.

The engine thread pushes token ids into the handle; the consumer, on any thread or an event loop, turns them into
text deltas (detokenising on the consumer's side keeps that work off the engine's step loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from warpcode.model_runtime.detokenize import IncrementalDetokenizer, StopStringFilter
from warpcode.model_runtime.serving.token_logprobs import TokenLogprob

FinishReason = Literal["stop", "length", "abort"]


class RequestRefused(ValueError):
    """A request the engine can never serve (longer than the context or the whole cache), or one after shutdown."""


def tokens_per_verify_step(accepted: int, steps: int) -> float:
    """Tokens each verify step committed on average: the accepted drafted ones and the one after them (0: none)."""
    return (accepted + steps) / steps if steps else 0.0


@dataclass
class RequestStats:
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache (of the last prefill, after a preemption)
    completion_tokens: int = 0
    preemptions: int = 0
    # speculative decoding: verify steps run, tokens they drafted, and of those, tokens accepted
    verify_steps: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    submitted_at: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    finished_at: float | None = None

    @property
    def tokens_per_verify_step(self) -> float:
        return tokens_per_verify_step(self.accepted_tokens, self.verify_steps)

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.submitted_at


@dataclass
class RequestOutput:
    token_ids: list[int]  # new since the previous output
    text: str  # their final text (stop strings cut); "" without a tokenizer
    finish_reason: FinishReason | None = None  # None while the request runs
    logprobs: list[TokenLogprob] | None = None  # one per id, when the request asked for logprobs


@dataclass
class _Delivery:  # what the engine thread hands over: ids in order, then a finish reason (or an error) once
    token_ids: list[int]
    finish_reason: FinishReason | None
    error: str | None = None
    logprobs: list[TokenLogprob] | None = None


class RequestHandle:
    """Iterate (blocking, any thread) or `async for` (an event loop) to get outputs; `cancel` ends the request."""

    def __init__(
        self,
        request_id: int,
        prompt_tokens: int,
        decode: Callable[[list[int]], str] | None,
        stop_strings: tuple[str, ...],
        stop_token_ids: frozenset[int],
        cancel: Callable[[RequestHandle], None],
    ) -> None:
        self.request_id = request_id
        self.stats = RequestStats(prompt_tokens=prompt_tokens)
        self.token_ids: list[int] = []  # every id delivered so far
        # the prompt's tokens' logprobs, when asked: set by the engine thread before it delivers the first token
        self.prompt_logprobs: list[TokenLogprob | None] | None = None
        self.finish_reason: FinishReason | None = None
        self._decode, self._stop_strings, self._stop_ids, self._cancel = decode, stop_strings, stop_token_ids, cancel
        self._queue: queue.SimpleQueue[_Delivery] = queue.SimpleQueue()
        self._finished = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._waiters_lock = threading.Lock()

    # The engine thread's side.
    def deliver(
        self,
        token_ids: list[int],
        finish_reason: FinishReason | None,
        error: str | None = None,
        logprobs: list[TokenLogprob] | None = None,
    ) -> None:
        self._queue.put(_Delivery(token_ids, finish_reason, error, logprobs))
        if finish_reason is not None:
            self._finished.set()
        with self._waiters_lock:
            for loop, event in self._waiters:
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there any more
                    loop.call_soon_threadsafe(event.set)

    def fail(self, message: str) -> None:
        """Ends the request with an error its consumer raises (RuntimeError)."""
        self.deliver([], "abort", message)

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def cancel(self) -> None:
        """Ends the request within one engine step (its rows and cache blocks are freed); outputs then end with
        finish_reason "abort". Nothing happens once it finished."""
        if not self._finished.is_set():
            self._cancel(self)

    def __iter__(self) -> Iterator[RequestOutput]:
        texts = self._text_stream()
        while True:
            delivery = self._queue.get()
            yield from self._output(delivery, texts)
            if delivery.finish_reason is not None:
                return

    async def __aiter__(self) -> AsyncIterator[RequestOutput]:
        loop, event = asyncio.get_running_loop(), asyncio.Event()
        with self._waiters_lock:
            self._waiters.append((loop, event))
        texts = self._text_stream()
        try:
            while True:
                try:
                    delivery = self._queue.get_nowait()
                except queue.Empty:
                    await event.wait()
                    event.clear()
                    continue
                for output in self._output(delivery, texts):
                    yield output
                if delivery.finish_reason is not None:
                    return
        finally:
            with self._waiters_lock:
                self._waiters.remove((loop, event))

    def result(self) -> list[int]:
        """Blocks until the request ends; every generated id."""
        for _ in self:
            pass
        return self.token_ids

    def _output(self, delivery: _Delivery, texts: Callable[[list[int], bool], str]) -> Iterator[RequestOutput]:
        if delivery.error is not None:
            self.finish_reason = "abort"
            raise RuntimeError(delivery.error)
        self.token_ids += delivery.token_ids
        final = delivery.finish_reason is not None
        if final:
            self.finish_reason = delivery.finish_reason
        text = texts(delivery.token_ids, final)
        if delivery.token_ids or text or final:
            yield RequestOutput(delivery.token_ids, text, delivery.finish_reason, delivery.logprobs)

    def _text_stream(self) -> Callable[[list[int], bool], str]:
        """(new ids, last?) -> their final text: held back while it may still change (an incomplete character, a
        possible stop string), stop strings and stop tokens cut, special tokens skipped."""
        if self._decode is None:
            return lambda ids, final: ""
        detokenizer, stops = IncrementalDetokenizer(self._decode), StopStringFilter(self._stop_strings)

        def texts(ids: list[int], final: bool) -> str:
            text = "".join(
                stops.feed(detokenizer.push(token))
                for token in ids
                if token not in self._stop_ids and not stops.stopped
            )
            if final:
                text += stops.feed(detokenizer.flush()) + stops.flush()
            return text

        return texts
