"""`warpcode serve-model` as a process: its start-up line, a port in use, the key from the environment, and the
project's own `openai:` backend completing an agent turn against it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx
import pytest

from tests.model_runtime.openai_server.servers import start_model_server, stop


@pytest.mark.slow
def test_it_prints_its_url_serves_random_weights_and_stops_cleanly():
    options = ["--random-weights", "--preset", "tiny", "--served-model-name", "rnd", "--max-model-len", "512"]
    process, url = start_model_server(*options, "--kv-cache-gb", "0.05")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert httpx.get(url.removesuffix("/v1") + "/health").status_code == 200
        [card] = httpx.get(f"{url}/models").json()["data"]
        assert (card["id"], card["max_model_len"]) == ("rnd", 512)
        reply = httpx.post(f"{url}/completions", json={"model": "rnd", "prompt": [1, 2], "max_tokens": 3}, timeout=60)
        assert reply.json()["usage"]["completion_tokens"] == 3
    finally:
        assert stop(process) == 0


@pytest.mark.slow
def test_a_port_in_use_is_a_one_line_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        command = [sys.executable, "-m", "warpcode.agent", "serve-model", "--random-weights", "--preset", "tiny"]
        result = subprocess.run([*command, "--port", port], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr and "--port 0" in result.stderr


@pytest.mark.slow
def test_the_api_key_may_come_from_the_environment():
    process, url = start_model_server("--random-weights", "--preset", "tiny", env={"WARPCODE_API_KEY": "k3y"})
    try:
        assert httpx.get(f"{url}/models").status_code == 401
        assert httpx.get(f"{url}/models", headers={"Authorization": "Bearer k3y"}).status_code == 200
    finally:
        stop(process)


@pytest.mark.slow
def test_the_openai_backend_completes_an_agent_turn(agent_checkpoint, tmp_path):
    process, url = start_model_server("--model", str(agent_checkpoint), "--served-model-name", "agent")
    try:
        command = [sys.executable, "-m", "warpcode.agent", "run", "--json", "--cwd", str(tmp_path)]
        result = subprocess.run(
            [*command, "--model", f"openai:{url}#agent", "say hello"], capture_output=True, text=True, timeout=300
        )
    finally:
        stop(process)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1] == {"stopReason": "end_turn"}
    usage = [line for line in lines if line.get("sessionUpdate") == "usage_update"]
    assert usage, lines


def test_a_bad_warm_up_size_is_a_one_line_error(capsys):
    from warpcode.agent.cli import main

    argv = ["serve-model", "--random-weights", "--preset", "tiny", "--device", "cpu", "--port", "0"]
    assert main([*argv, "--warm-up", "8"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warpcode serve-model: error: --warm-up takes STREAMS,TOKENS (two integers, 0,0 for none)")


@pytest.mark.slow
def test_the_built_in_model_is_served_by_name_and_calls_a_tool_when_required():
    from openai import OpenAI

    from warpcode.agent.toolbox import tool_schemas

    process, url = start_model_server("--model", "builtin", "--max-model-len", "4096")
    try:
        client = OpenAI(base_url=url, api_key="none")
        assert [card.id for card in client.models.list().data] == ["warpcode-builtin"]
        tools = [t for t in tool_schemas() if t["function"]["name"] in ("read_file", "search")]
        reply = client.chat.completions.create(
            model="warpcode-builtin",
            messages=[{"role": "user", "content": "Where is parse_config defined?"}],
            tools=tools,
            tool_choice="required",
            max_tokens=200,
            temperature=0,  # greedy: the same call every run (sampled, the small model may ramble past max_tokens)
        )
        calls = reply.choices[0].message.tool_calls
        assert calls and reply.choices[0].finish_reason == "tool_calls"
        for call in calls:  # forced: each a call of a function offered, with arguments valid JSON
            assert call.function.name in ("read_file", "search") and isinstance(
                json.loads(call.function.arguments), dict
            )
    finally:
        assert stop(process) == 0
