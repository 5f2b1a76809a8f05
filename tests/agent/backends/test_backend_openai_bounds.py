"""The openai backend against hostile servers on 127.0.0.1 (real sockets): an answer that never ends, one line of
many megabytes, an endless run of long lines, a huge error body, chunks of the wrong shape. Each ends the turn with
a one-line error, at once and with little memory, instead of running or growing without end. The bounds are
passed small here; the defaults users get are the module's constants (measured in BENCHMARKS.md)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from warpcode.agent.backends import BackendError, TextDelta
from warpcode.agent.backends.openai import OpenAIBackend, RetryPolicy
from warpcode.agent.loop import Agent
from warpcode.model_runtime.chat.messages import Message

WORD = b'data: {"choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": null}]}\n\n'
BLOCK = b"a" * 65536
Behaviour = Callable[[BaseHTTPRequestHandler, dict], None]


class HostileServer(ThreadingHTTPServer):
    """Answers each POST with `behaviour(handler, request body)`; keeps the request bodies."""

    daemon_threads = True

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour, self.requests = behaviour, []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: HostileServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((dict(self.headers), body))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading, as it should
            self.server.behaviour(self, body)

    def log_message(self, *args) -> None:
        pass


def stream_headers(handler: BaseHTTPRequestHandler, **extra: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    for name, value in extra.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], HostileServer]]:
    servers = []

    def start(behaviour: Behaviour) -> HostileServer:
        server = HostileServer(behaviour)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def backend(server: HostileServer, **bounds) -> OpenAIBackend:
    return OpenAIBackend(server.url, retry=RetryPolicy(attempts=2, first_delay_s=0.01), **bounds)


async def answer(backend: OpenAIBackend, timeout_s: float = 10.0) -> list:
    async def collect() -> list:
        return [event async for event in backend.stream([Message("user", "hi")], [])]

    return await asyncio.wait_for(collect(), timeout_s)


def forever(handler: BaseHTTPRequestHandler, body: dict) -> None:
    stream_headers(handler)
    while True:
        handler.wfile.write(WORD * 16)


async def test_an_answer_that_never_ends_fails_the_turn_at_twice_the_tokens_asked(
    serve, tmp_path: Path, events
) -> None:
    server = serve(forever)
    started = time.monotonic()
    result = await asyncio.wait_for(Agent(tmp_path, backend(server, max_tokens=50), events, "auto").prompt("hi"), 10)
    assert time.monotonic() - started < 5
    assert result.stop_reason == "refusal"
    assert result.failure.reason == (
        f"{server.url}/chat/completions sent more than 116 lines for one answer, over twice the 50 tokens asked "
        "for: stopped reading (does the server honour max_tokens?)"
    )
    assert server.requests[0][1]["max_tokens"] == 50
    streamed = events.text()  # what streamed before the bound, and only that: the failure is no assistant text
    assert streamed == "word " * streamed.count("word") and streamed.count("word") <= 116


async def test_one_huge_line_is_never_held_whole(serve) -> None:
    def one_line(handler: BaseHTTPRequestHandler, body: dict) -> None:
        stream_headers(handler)
        handler.wfile.write(WORD + b'data: {"choices": [{"delta": {"content": "')
        for _ in range(256):  # 16 MiB before the line ends
            handler.wfile.write(BLOCK)
        handler.wfile.write(b'"}}]}\n\ndata: [DONE]\n\n')

    server = serve(one_line)
    events: list = []
    tracemalloc.start()
    try:
        with pytest.raises(BackendError) as failed:
            events += await answer(backend(server, max_line_bytes=256 * 1024))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(failed.value).endswith(
        "/chat/completions: one line of the stream passed 262,144 bytes: stopped reading (is it an OpenAI-compatible "
        "server?)"
    )
    assert peak < 2 * 2**20, f"{peak} bytes"  # the whole line, read first, took 16 MiB and more


async def test_an_endless_run_of_long_lines_stops_at_the_answer_bound(serve) -> None:
    line = b'data: {"choices": [{"delta": {"content": "' + b"x" * 60_000 + b'"}}]}\n\n'

    def long_lines(handler: BaseHTTPRequestHandler, body: dict) -> None:
        stream_headers(handler)
        while True:
            handler.wfile.write(line)

    server = serve(long_lines)
    received = []

    async def collect() -> None:
        async for event in backend(server, max_answer_bytes=2**20).stream([Message("user", "hi")], []):
            received.append(event)

    with pytest.raises(BackendError, match=r"/chat/completions: the answer passed 1 MiB: stopped reading"):
        await asyncio.wait_for(collect(), 10)
    assert 10 <= len(received) <= 18 and all(isinstance(e, TextDelta) for e in received)


async def test_a_huge_error_body_is_read_only_as_far_as_its_message(serve) -> None:
    def huge_error(handler: BaseHTTPRequestHandler, body: dict) -> None:
        handler.send_response(400)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(256 * len(BLOCK)))
        handler.end_headers()
        for _ in range(256):
            handler.wfile.write(BLOCK)

    server = serve(huge_error)
    tracemalloc.start()
    try:
        with pytest.raises(BackendError, match=r"answered HTTP 400 Bad Request: aaaa") as failed:
            await answer(backend(server))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(str(failed.value)) < 700
    assert peak < 2 * 2**20, f"{peak} bytes"  # the whole body took 16 MiB


@pytest.mark.parametrize(
    "chunk",
    [b"5", b'{"choices": ["x"]}', b'{"choices": [{"delta": {"tool_calls": [{"index": "first"}]}}]}',
     b'{"usage": {"prompt_tokens": "many"}}', b"[" * 100_000],
    ids=["a number", "a choice that is a string", "a tool call index that is not a number", "usage not counted",
         "nested past Python's stack"],
)  # fmt: skip
async def test_a_chunk_of_the_wrong_shape_fails_with_a_message(serve, chunk: bytes) -> None:
    def wrong(handler: BaseHTTPRequestHandler, body: dict) -> None:
        stream_headers(handler)
        handler.wfile.write(b"data: " + chunk + b"\n\ndata: [DONE]\n\n")

    with pytest.raises(BackendError, match=r"the server sent a chunk that is not (JSON|a chat completion chunk)"):
        await answer(backend(serve(wrong)))


async def test_a_server_that_refuses_max_tokens_is_asked_again_without_it(serve, tmp_path: Path, events) -> None:
    refusal = "'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."

    def picky(handler: BaseHTTPRequestHandler, body: dict) -> None:
        if "max_tokens" in body:
            data = json.dumps({"error": {"message": refusal, "param": "max_tokens"}}).encode()
            handler.send_response(400)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        stream_headers(handler)
        handler.wfile.write(b'data: {"choices": [{"delta": {"content": "fine"}, "finish_reason": "stop"}]}\n\n')
        handler.wfile.write(b"data: [DONE]\n\n")

    server = serve(picky)
    agent = Agent(tmp_path, backend(server), events, "auto")
    assert (await agent.prompt("hi")).stop_reason == "end_turn"
    assert (await agent.prompt("again")).stop_reason == "end_turn"
    assert ["max_tokens" in body for _, body in server.requests] == [True, False, False]  # then never again
    assert events.text() == "finefine"


async def test_a_compressed_stream_is_refused(serve) -> None:
    def compressed(handler: BaseHTTPRequestHandler, body: dict) -> None:
        stream_headers(handler, Content_Encoding="gzip")
        handler.wfile.write(gzip.compress(WORD + b"data: [DONE]\n\n"))

    server = serve(compressed)
    with pytest.raises(
        BackendError, match=r"answered compressed \(gzip\) although asked not to: connect to the model server directly"
    ):
        await answer(backend(server))
    assert server.requests[0][0]["Accept-Encoding"] == "identity"


async def test_tool_call_arguments_nested_past_pythons_stack_reach_the_model_as_an_error(serve) -> None:
    def nested(handler: BaseHTTPRequestHandler, body: dict) -> None:
        call = {"index": 0, "id": "call_1", "function": {"name": "read_file", "arguments": "[" * 100_000}}
        stream_headers(handler)
        handler.wfile.write(b"data: " + json.dumps({"choices": [{"delta": {"tool_calls": [call]}}]}).encode() + b"\n\n")
        handler.wfile.write(b"data: [DONE]\n\n")

    (ready, finish) = await answer(backend(serve(nested)))
    assert ready.call.name == "read_file" and ready.call.error.startswith("arguments are nested too deeply to read")
    assert finish.reason == "tool_calls"
