"""`$/cancel_request`: the client cancels one of its requests in flight on this connection, by id (ACP 1.21).

ACP's rule (docs/protocol/v1/cancellation.mdx): the receiver may stop the request's work, and must still answer
it, with a valid result or with error -32800 (Request cancelled). Here a cancelled request whose handler has not
started answers -32800 and does nothing. One already running stops if its work is long and safely stoppable: a
prompt's turn stops the way session/cancel stops it (its command killed, its pending questions withdrawn, its
history saved) and a session/load's replay is cancelled (nothing was opened); both then answer -32800. The other
requests are short, and some finish work in a thread that a cancel cannot stop (session/new writes the session
file): they finish and send their real answer, which the spec allows too.

The SDK starts each request's handler in a task of its own and tells nobody which; `RequestCancellation` learns
it through a context variable. Its `receive` marks the request it hands on in the receive loop's context; the
SDK creates the handler task right away, and a task starts with a copy of its creator's context; the agent's
handlers, wrapped by `track`, read the mark in their task and file the task under the request's id.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from acp.exceptions import RequestError

from warpcode.agent.service.jsonrpc_guard import CANCEL_REQUEST

REQUEST_CANCELLED = -32800
log = logging.getLogger(__name__)


@dataclass
class _InFlight:
    task: asyncio.Task[Any] | None = None  # its handler's, once it runs
    stop: Callable[[], Awaitable[None]] | None = None  # how its work stops early; None: it runs to its end
    cancelled: bool = False


def _stop_turn(agent: Any, task: asyncio.Task[Any], kwargs: dict[str, Any]) -> Awaitable[None]:
    return agent.cancel(session_id=kwargs["session_id"])  # the prompt then answers stopReason cancelled


async def _cancel_task(agent: Any, task: asyncio.Task[Any], kwargs: dict[str, Any]) -> None:
    task.cancel()


STOPS = {"prompt": _stop_turn, "load_session": _cancel_task}  # by the agent's handler names


_arriving: contextvars.ContextVar[_InFlight | None] = contextvars.ContextVar("warpcode_request", default=None)


class RequestCancellation:
    """A Transport that honours the client's `$/cancel_request` for the requests it handed to the SDK."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._in_flight: dict[tuple[str, Any], _InFlight] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def track(self, agent: Any) -> Any:
        """`agent` as the SDK should see it: its handlers file their tasks here."""
        return _TrackedAgent(agent)

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # an answer: that request is no longer in flight
            self._in_flight.pop(_id_key(message.get("id")), None)
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        _arriving.set(None)  # the mark is only for the handler task the SDK creates for the request returned
        while (message := await self._inner.receive()) is not None:
            method = message.get("method")
            if method == CANCEL_REQUEST:
                self._cancel(message.get("params"))
                continue
            if method is not None and "id" in message:
                request = self._in_flight[_id_key(message["id"])] = _InFlight()
                _arriving.set(request)
            return message
        return None

    async def close(self) -> None:
        await self._inner.close()

    def _cancel(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        request = self._in_flight.get(_id_key(request_id))
        if request is None or request.cancelled:  # answered already (or never asked): nothing to do
            log.debug("$/cancel_request for %r, which is not in flight", request_id)
            return
        request.cancelled = True
        if request.stop is not None:  # else it has not started (it answers -32800 when it does) or runs to its end
            stopping = asyncio.create_task(request.stop())
            self._stopping.add(stopping)  # held until done: the loop keeps only weak references to tasks
            stopping.add_done_callback(self._stopping.discard)


class _TrackedAgent:
    """The agent with each coroutine method filing the task it runs in under the request that started it."""

    def __init__(self, agent: Any) -> None:
        self._agent = agent

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._agent, name)
        if not inspect.iscoroutinefunction(value):
            return value

        @functools.wraps(value)  # the SDK's router reads the handler's signature
        async def tracked(*args: Any, **kwargs: Any) -> Any:
            request = _arriving.get()
            if request is None or request.task is not None:  # not a request's handler, or a nested call
                return await value(*args, **kwargs)
            request.task = asyncio.current_task()
            if name in STOPS:
                request.stop = functools.partial(STOPS[name], self._agent, request.task, kwargs)
            if request.cancelled:
                raise _cancelled()
            try:
                result = await value(*args, **kwargs)
            except asyncio.CancelledError:
                if not request.cancelled:  # the connection is closing: let it
                    raise
                request.task.uncancel()
                raise _cancelled() from None
            if request.cancelled and getattr(result, "stop_reason", None) == "cancelled":
                raise _cancelled()
            return result

        return tracked


def _cancelled() -> RequestError:
    return RequestError(REQUEST_CANCELLED, "Request cancelled", None)


def _id_key(request_id: Any) -> tuple[str, Any]:
    return type(request_id).__name__, request_id  # 1 and "1" are different ids
