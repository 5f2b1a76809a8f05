"""`--max-tokens`: one answer's token limit, from the command line to the model server's request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from warpcode.agent.cli.main import main

WARPCODE = str(Path(sys.executable).with_name("warpcode"))


class _Server(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict] = []


class _Handler(BaseHTTPRequestHandler):
    """An OpenAI-compatible server with no model list that answers every chat request with "Hi."."""

    server: _Server

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta, finish in (({"content": "Hi."}, None), ({}, "stop")):
            chunk = {"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    server = _Server()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_run_asks_the_model_for_at_most_max_tokens(tmp_path: Path, server: _Server) -> None:
    model = f"openai:http://127.0.0.1:{server.server_address[1]}/v1#m"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "WARPCODE_STATE_DIR": str(tmp_path / "state")}
    command = [WARPCODE, "run", "--cwd", str(tmp_path), "--model", model, "--max-tokens", "77", "hi"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Hi." in done.stdout and [body["max_tokens"] for body in server.bodies] == [77]


@pytest.mark.parametrize("command", ["run", "chat", "serve", "acp"])
def test_max_tokens_is_a_positive_number(command: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_code:
        main([command, "--max-tokens", "0"])
    assert exit_code.value.code == 2 and "--max-tokens: a whole number of tokens, at least 1" in capsys.readouterr().err


def test_chat_connect_leaves_max_tokens_to_the_server(capsys: pytest.CaptureFixture) -> None:
    assert main(["chat", "--connect", "ws://127.0.0.1:9/acp", "--max-tokens", "5"]) == 1
    assert "give it to `warpcode serve`" in capsys.readouterr().err
