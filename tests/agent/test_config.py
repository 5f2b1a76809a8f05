from __future__ import annotations

from pathlib import Path

import pytest

from warpcode.agent.config import ConfigError, Settings, config_path, load_settings
from warpcode.agent.permissions import mode_policy, needs_permission


def test_model_comes_from_the_flag_then_the_environment_then_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "openai:http://gpu:8000/v1"\nmode = "accept-edits"\nmax_turn_requests = 7\n')
    from_file = load_settings(None, {}, path)
    assert (from_file.model, from_file.mode, from_file.max_turn_requests) == (
        "openai:http://gpu:8000/v1",
        "accept-edits",
        7,
    )
    assert load_settings(None, {"WARPCODE_MODEL": "local:/m"}, path).model == "local:/m"
    assert load_settings("scripted:s.json", {"WARPCODE_MODEL": "local:/m"}, path).model == "scripted:s.json"
    assert load_settings(None, {}, tmp_path / "missing.toml").model is None


def test_config_file_location_follows_xdg(tmp_path: Path) -> None:
    assert config_path({"HOME": "/home/u"}) == Path("/home/u/.config/warpcode/config.toml")
    assert config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/home/u"}) == Path("/x/warpcode/config.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model = ", "config.toml: Invalid value"),
        ("modle = 'x'", "unknown setting 'modle'"),
        ("port = '80'", "port must be an integer"),
        ("mode = 'yolo'", "mode must be one of ask, accept-edits, auto"),
        ("sandbox = 'docker'", "sandbox must be one of none, bwrap"),
        ("sandbox_network = 'yes'", "sandbox_network must be true or false"),
        ("sandbox = true", "sandbox must be a string"),
        ("models = 'openai:http://h/v1'", "models must be a list of model specs"),
        ("models = ['openai:http://h/v1', 3]", "models must be a list of model specs"),
    ],
)
def test_an_invalid_config_file_is_named_in_the_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(None, {}, path)


def test_which_kinds_ask_in_each_mode() -> None:
    table = {
        mode: [kind for kind in ("read", "search", "think", "edit", "execute") if needs_permission(mode, kind)]
        for mode in ("ask", "accept-edits", "auto")
    }
    assert table == {"ask": ["edit", "execute"], "accept-edits": ["execute"], "auto": []}
    with pytest.raises(ValueError, match="unknown mode 'yolo'"):
        mode_policy("yolo")


async def test_policy_delegates_questions_and_rejects_when_nobody_answers() -> None:
    asked = []

    async def ask(tool_name: str, kind: str, arguments: dict) -> str:
        asked.append(tool_name)
        return "allow"

    assert await mode_policy("ask")("edit_file", "edit", {}) == "reject"
    assert await mode_policy("ask")("read_file", "read", {}) == "allow"
    assert await mode_policy("ask", ask)("run_command", "execute", {}) == "allow" and asked == ["run_command"]


def test_warpcode_state_dir_moves_the_services_whole_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from warpcode.agent.service.agent import ServiceConfig

    monkeypatch.setenv("WARPCODE_STATE_DIR", str(tmp_path / "elsewhere"))
    assert ServiceConfig.from_settings(Settings(), None, None).state_dir == tmp_path / "elsewhere"
    assert ServiceConfig.from_settings(Settings(), tmp_path / "given", None).state_dir == tmp_path / "given"


def test_the_sandbox_setting_reaches_the_prompt_the_model_reads(tmp_path: Path) -> None:
    from warpcode.agent.backends import backend_from_spec
    from warpcode.agent.loop import Agent
    from warpcode.tools.sandbox import Sandbox

    path = tmp_path / "config.toml"
    path.write_text("sandbox = 'bwrap'")
    assert load_settings(None, {}, path).sandbox == "bwrap"
    plain = Agent(tmp_path, backend_from_spec(None), lambda update: None)
    boxed = Agent(tmp_path, backend_from_spec(None), lambda update: None, sandbox=Sandbox("/usr/bin/bwrap"))
    online = Agent(tmp_path, backend_from_spec(None), lambda update: None, sandbox=Sandbox("/usr/bin/bwrap", True))
    assert "without a sandbox" in plain.messages[0].content and "nothing outside" not in plain.messages[0].content
    assert "run in a sandbox" in boxed.messages[0].content and "there is no network" in boxed.messages[0].content
    assert "they have the network" in online.messages[0].content


@pytest.mark.parametrize("command", ["run", "acp", "serve", "chat"])
def test_sandbox_network_comes_from_the_option_then_the_config(command: str, tmp_path: Path) -> None:
    from warpcode.agent.cli.main import build_parser
    from warpcode.agent.service.agent import ServiceConfig

    path = tmp_path / "config.toml"
    path.write_text("sandbox = 'bwrap'\nsandbox_network = true\n")
    settings = load_settings(None, {}, path)
    extra = ["go"] if command == "run" else []
    for option, network in ([], True), (["--no-sandbox-network"], False), (["--sandbox-network"], True):
        args = build_parser().parse_args([command, *extra, *option])
        config = ServiceConfig.from_settings(settings, tmp_path, None, args.sandbox, args.sandbox_network)
        assert (config.sandbox, config.sandbox_network) == ("bwrap", network)
    assert load_settings(None, {}, tmp_path / "missing.toml").sandbox_network is False
