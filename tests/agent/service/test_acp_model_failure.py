"""A model server that fails (a real HTTP server answering 500, through the `openai:` backend of a real `warpcode
acp` over stdio and a real `warpcode serve` over a WebSocket) fails the session/prompt request with a JSON-RPC error
that says so in one line, and that error is the failure's only report: no session update (assistant text) repeats
it, live or replayed. Not the stop reason `refusal`: the schema defines that as the agent refusing, after which the
prompt is not part of the next turn's context. The prompt stays in the conversation: the model is shown it at the
next turn, and a reload replays it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from acp import RequestError
from acp.helpers import text_block

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import TOKEN, Server, acp_process, connect

pytestmark = pytest.mark.asyncio


class FlakyModelServer(ThreadingHTTPServer):
    """An OpenAI-compatible chat server that answers 500 while `failing`, else streams "All good."."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.failing = True
        self.bodies: list[dict] = []  # each chat request, as sent

    @property
    def spec(self) -> str:
        return f"openai:http://127.0.0.1:{self.server_address[1]}/v1#flaky"


class _Handler(BaseHTTPRequestHandler):
    server: FlakyModelServer

    def do_GET(self) -> None:  # no model list: the backend asks by the spec's name
        self._reply(404, b'{"detail": "Not Found"}', "application/json")

    def do_POST(self) -> None:
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        if self.server.failing:  # Retry-After: 0, so the backend's retries take no time
            body = json.dumps({"error": {"message": "CUDA error: an illegal memory access was encountered"}})
            self._reply(500, body.encode(), "application/json", {"Retry-After": "0"})
            return
        chunks = [{"choices": [{"index": 0, "delta": {"content": "All good."}}]}]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._reply(200, stream.encode(), "text/event-stream")

    def _reply(self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": kind, "Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[FlakyModelServer]:
    server = FlakyModelServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@contextlib.asynccontextmanager
async def agent_connection(transport: str, client: AcpTestClient, tmp_path: Path, model: str) -> AsyncIterator:
    """An initialized connection to a real agent service answering with `model`: `warpcode acp` over its stdio, or
    `warpcode serve` over a WebSocket."""
    if transport == "stdio":
        async with acp_process(client, tmp_path / "state", "--model", model) as (conn, _):
            yield conn
        return
    server = await asyncio.to_thread(Server, tmp_path, [], "--token", TOKEN, "--model", model)  # the last --model
    try:
        conn = await connect(server.url, client)
        try:
            yield conn
        finally:
            await conn.close()
    finally:
        await asyncio.to_thread(server.stop)


def reports(client: AcpTestClient) -> list[str]:
    """The session updates that mention the failure (they would show it a second time)."""
    dumped = [update.model_dump_json() for update in client.updates]
    return [text for text in dumped if "could not answer" in text or "illegal memory access" in text]


@pytest.mark.parametrize("transport", ["stdio", "websocket"])
async def test_a_failing_model_server_fails_the_prompt_and_the_prompt_stays_in_the_conversation(
    transport: str, tmp_path: Path, workspace: Path, model_server: FlakyModelServer
) -> None:
    client = AcpTestClient()
    async with agent_connection(transport, client, tmp_path, model_server.spec) as conn:
        session_id = (await conn.new_session(cwd=str(workspace))).session_id
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=session_id, prompt=[text_block("Fix the parser")])
        message = str(failed.value)
        assert failed.value.code == -32603 and "\n" not in message
        assert message.startswith("The model could not answer: ") and message.count("could not answer") == 1
        assert "HTTP 500" in message and "illegal memory access" in message and "send another prompt" in message
        assert reports(client) == []  # the error is the one report

        model_server.failing = False
        answer = await conn.prompt(session_id=session_id, prompt=[text_block("Go on")])
        assert answer.stop_reason == "end_turn"
        asked = [m["content"] for m in model_server.bodies[-1]["messages"] if m["role"] == "user"]
        assert asked == ["Fix the parser", "Go on"]  # the failed turn's prompt is part of the next turn's context

        await conn.close_session(session_id=session_id)
        client.updates.clear()
        await conn.load_session(cwd=str(workspace), session_id=session_id)
    replayed = [u.content.text for u in client.of("user_message_chunk")]
    assert replayed == ["Fix the parser", "Go on"]  # the history shows what the model was shown
    assert reports(client) == []
