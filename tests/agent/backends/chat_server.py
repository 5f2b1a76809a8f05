"""A real HTTP server on 127.0.0.1 speaking OpenAI's chat-completions streaming format, with scripted replies, and
the chunk builders its replies are written with."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer(ThreadingHTTPServer):
    """Answers each POST with the next scripted reply: (status, list of SSE chunks | JSON error body)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: list[tuple[int, list[dict] | dict]] = []
        self.requests: list[tuple[str, dict[str, str], dict]] = []
        self.models: list[dict] | None = None  # GET /v1/models lists these; None: 404, as servers without a list
        self.gets: list[str] = []  # the paths asked for with GET

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def do_GET(self) -> None:
        self.server.gets.append(self.path)
        found = self.path == "/v1/models" and self.server.models is not None
        data = json.dumps({"object": "list", "data": self.server.models} if found else {"detail": "Not Found"})
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, dict(self.headers), body))
        status, payload = self.server.replies.pop(0)
        if isinstance(payload, dict):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in payload:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args) -> None:
        pass


def delta(**delta) -> dict:
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def finish(reason: str, usage: dict | None = None) -> dict:
    chunk = {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    return {**chunk, "usage": usage} if usage else chunk


def tool_delta(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict:
    piece: dict = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        piece.update(id=call_id, type="function")
        piece["function"]["name"] = name
    return delta(tool_calls=[piece])
