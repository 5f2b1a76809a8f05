"""`warpcode run` connects to the config file's MCP servers too, and stops them when the run ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.scripted_model import write_script
from tests.processes import process_running

FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))


@pytest.mark.slow
def test_run_uses_the_config_files_servers(tmp_path: Path):
    config = tmp_path / "config" / "warpcode" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"[mcp_servers.fixture]\ncommand = {sys.executable!r}\nargs = [{FIXTURE!r}]\n")
    turns = [
        {"tool_calls": [{"name": "mcp__fixture__add", "arguments": {"a": 40, "b": 2}}]},
        {"tool_calls": [{"name": "mcp__fixture__pid", "arguments": {}}]},
        {"text": "42"},
    ]
    script = write_script(tmp_path / "model.json", turns)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    command = [sys.executable, "-m", "warpcode.agent", "run", "--json", "--mode", "auto", "--model",
               f"scripted:{script}", "--cwd", str(workspace), "--state-dir", str(tmp_path / "s"), "add"]  # fmt: skip
    environment = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    updates = [json.loads(line) for line in done.stdout.splitlines()]
    finished = [u for u in updates if u.get("status") in ("completed", "failed")]
    outcomes = [(u["status"], u["content"][0]["content"]["text"]) for u in finished]
    assert outcomes[0] == ("completed", "42")
    assert not process_running(int(outcomes[1][1]))  # stopped with the run
