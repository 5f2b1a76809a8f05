"""Real model servers for the tests: the app on uvicorn in a thread of the test process (so a test can compare
with the same engine directly), and `warpcode serve-model` as a subprocess for the command line; and reading their
server-sent events."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from warpcode.model_runtime.openai_server import ModelServer, base_url, bind, create_app, listening_url

CHAT_MODEL = "tiny-chat"
RANDOM_MODEL = "tiny"
CONTEXT = 1024  # the chat checkpoint's positions: room for a conversation with tools


@contextlib.contextmanager
def serving(engine, model_name: str, api_key: str | None = None, limits=None, **server_limits) -> Iterator[str]:
    """The app on a free port in a background thread; yields its base URL (http://127.0.0.1:PORT/v1).
    `limits`: the app's RequestLimits; `server_limits`: ModelServer's (head_timeout_s, max_connections)."""
    sock = bind("127.0.0.1", 0)
    server = ModelServer(create_app(engine, model_name, api_key, limits), sock, **server_limits)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "the model server did not start"
    try:
        yield base_url(sock)
    finally:
        server.should_exit = True
        thread.join(30)


def start_model_server(*options: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`warpcode serve-model --port 0 OPTIONS` as a subprocess; returns it and its base URL once it listens."""
    command = [sys.executable, "-m", "warpcode.agent", "serve-model", "--port", "0", "--device", "cpu", *options]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    lines, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if not ready:
            continue
        line = process.stderr.readline()
        if url := listening_url(line):
            return process, url
        lines.append(line)
        if not line and process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"serve-model did not start: {''.join(lines)}")


def stop(process: subprocess.Popen) -> int:
    process.terminate()
    return process.wait(timeout=30)


def sse_chunks(lines: Iterator[str]) -> list[dict]:
    """The JSON chunks of a server-sent event stream, checking it ends with `data: [DONE]`."""
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert data and data[-1] == "[DONE]", data[-3:]
    return [json.loads(item) for item in data[:-1]]
