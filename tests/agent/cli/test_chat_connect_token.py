"""`warpcode chat --connect` with a token the server refuses: one line saying the token was refused, where it came
from, how to pass the right one, and where `warpcode serve` keeps its token file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.scripted_model import write_script
from tests.agent.service_processes import start_server

pytestmark = pytest.mark.slow  # real `warpcode` subprocesses

WARPCODE = str(Path(sys.executable).with_name("warpcode"))


def chat_error(url: str, *options: str, cwd: Path) -> str:
    env = {name: value for name, value in os.environ.items() if name != "WARPCODE_TOKEN"}
    result = subprocess.run(
        [WARPCODE, "chat", "--connect", url, *options],
        capture_output=True, text=True, timeout=60, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_a_refused_token_says_where_tokens_come_from(tmp_path: Path) -> None:
    server, url = start_server(tmp_path, write_script(tmp_path / "model.json", [{"text": "hi"}]))
    try:
        token_file = tmp_path / "state" / "serve-token"  # the server made its own token there
        said = chat_error(url, "--token", "wrong", "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
        assert "refused the token given with --token (HTTP 401)" in said
        assert "--token or $WARPCODE_TOKEN" in said and str(token_file) in said
        stale = tmp_path / "elsewhere"
        stale.mkdir(mode=0o700)
        (stale / "serve-token").write_text("an old token\n")
        said = chat_error(url, "--state-dir", str(stale), cwd=tmp_path)
        assert f"refused the token read from {stale / 'serve-token'}" in said
    finally:
        server.terminate()
        server.wait(timeout=10)
