"""`warpcode chat`'s slash commands and pickers against the ACP 1.21 spec's own examples (the JSON of its
docs/protocol/v1/slash-commands.mdx and session-config-options.mdx, kept in tests/fixtures/acp/): an agent on the
SDK's in-memory transport answers session/new with the spec's configOptions and advertises the spec's commands,
and the frames chat sends back are compared with the spec's requests. Then, against warpcode's own in-process
agent, what it advertises (run once the server side of issue 47 is merged: skipped, with the reason, before).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema
from acp._transport import memory_transport_pair  # the SDK's own pair, as `chat` uses in-process
from rich.console import Console

from warpcode.agent.cli.chat_client import Chat
from warpcode.agent.cli.chat_commands import SlashCommands, UnknownCommand
from warpcode.agent.cli.session_options import SessionOptions
from warpcode.agent.cli.terminal_view import TerminalView

SPEC = json.loads((Path(__file__).parents[2] / "fixtures" / "acp" / "docs-examples-v1.21.0.json").read_text())
NEW_SESSION = SPEC["sessionNew"]["result"]
COMMANDS = SPEC["availableCommandsUpdate"]["params"]["update"]


class SpecAgent:
    """An ACP agent that says exactly what the spec's examples say, and records what the client asked."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.options = schema.NewSessionResponse.model_validate(NEW_SESSION).config_options

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        asyncio.get_running_loop().call_later(0, self._advertise)  # after the answer, as agents do
        return schema.NewSessionResponse.model_validate(NEW_SESSION)

    def _advertise(self) -> None:
        update = schema.AvailableCommandsUpdate.model_validate(COMMANDS)
        self.sent = asyncio.ensure_future(self.conn.session_update(session_id=NEW_SESSION["sessionId"], update=update))

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        blocks = [block.model_dump(by_alias=True, exclude_none=True) for block in prompt]
        self.requests.append(("session/prompt", {"sessionId": session_id, "prompt": blocks}))
        return schema.PromptResponse(stop_reason="end_turn")

    async def set_config_option(self, config_id: str, session_id: str, value: Any, **kwargs: Any) -> Any:
        self.requests.append(("session/set_config_option", {"sessionId": session_id, "configId": config_id,
                                                             "value": value}))  # fmt: skip
        chosen = next(o for o in self.options if o.id == config_id)
        chosen.current_value = value
        return schema.SetSessionConfigOptionResponse(config_options=self.options)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        pass


class TypedLines:
    """What the user types, one line per read, then end of input (as LineInput reports Ctrl-D)."""

    echo = True

    def __init__(self, lines: list[str]) -> None:
        self.lines = iter(lines)

    async def next(self) -> str | None:
        await asyncio.sleep(0.01)  # lets the agent's notifications in, as a person's typing does
        return next(self.lines, None)


async def chat_with(agent: Any, lines: list[str], tmp_path: Path) -> str:
    return (await chat_session(agent, lines, tmp_path))[1]


async def chat_session(agent: Any, lines: list[str], tmp_path: Path) -> tuple[Chat, str]:
    """Chat typing `lines` to `agent` over the SDK's in-memory transport: the chat, and the screen's text."""
    console = Console(width=200, record=True, file=open(tmp_path / "screen.txt", "w"))  # noqa: SIM115
    chat = Chat(TerminalView(console), TypedLines(lines))
    agent_end, client_end = memory_transport_pair()
    server = asyncio.create_task(acp.run_agent(agent, agent_end))
    conn = acp.connect_to_agent(chat, client_end)
    try:
        await asyncio.wait_for(chat.run(str(tmp_path), None, None), 10)
    finally:
        await conn.close()
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
    return chat, console.export_text()


def test_the_spec_s_commands_are_listed_completed_and_sent_as_the_spec_s_prompt(tmp_path: Path) -> None:
    agent = SpecAgent()
    typed = ["/help", "/we agent client protocol", "/te", "/p", "/nosuch", "/undo"]
    screen = asyncio.run(chat_with(agent, typed[:-1], tmp_path))
    assert "session sess_abc123def456 in" in screen and "mode ask, model model-1." in screen
    agents = [" ".join(line.split()) for line in screen.split("The agent's commands")[1].splitlines()[1:4]]
    assert agents == ["/web <query to search for> Search the web for information",
                      "/test Run tests for the current project",
                      "/plan <description of what to plan> Create a detailed implementation plan"]  # fmt: skip
    assert "/undo" in screen.split("The agent's commands")[0]  # chat's own, listed first
    prompts = [params for method, params in agent.requests if method == "session/prompt"]
    expected = SPEC["commandPrompt"]["params"]
    assert prompts[0] == expected  # `/we` completed to the spec's `/web`, the argument kept
    assert prompts[1]["prompt"][0]["text"] == "/test"
    assert "/p could be /plan: type more" not in screen and prompts[2]["prompt"][0]["text"] == "/plan"
    assert "unknown command '/nosuch': /help lists the commands" in screen


def test_the_model_and_mode_pickers_set_the_spec_s_config_options(tmp_path: Path) -> None:
    agent = SpecAgent()
    screen = asyncio.run(chat_with(agent, ["/model", "/model 2", "/mode code", "/mode turbo", "/model"], tmp_path))
    listing = screen.split("/model NAME or NUMBER switches):")[1]
    assert " * 1. model-1 (Model 1)  The fastest model\n   2. model-2 (Model 2)  The most powerful model" in listing
    sets = [params for method, params in agent.requests if method == "session/set_config_option"]
    assert sets == [{**SPEC["setConfigOption"]["params"], "configId": "model", "value": "model-2"},
                    SPEC["setConfigOption"]["params"]]  # fmt: skip
    assert "no mode 'turbo': choose one of ask, code (or its number)" in screen
    last = screen.split("/model NAME or NUMBER switches):")[-1]
    assert "   1. model-1 (Model 1)  The fastest model\n * 2. model-2 (Model 2)  The most powerful model" in last


class CommandsOnlyAgent(SpecAgent):
    """An agent with a `/model` command of its own and no config options: chat has no picker to show."""

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        asyncio.get_running_loop().call_later(0, self._advertise)
        return schema.NewSessionResponse(session_id=NEW_SESSION["sessionId"])

    def _advertise(self) -> None:
        commands = [schema.AvailableCommand(name="model", description="switch the model")]
        update = schema.AvailableCommandsUpdate(session_update="available_commands_update", available_commands=commands)
        self.sent = asyncio.ensure_future(self.conn.session_update(session_id=NEW_SESSION["sessionId"], update=update))


def test_without_config_options_the_agent_s_own_model_command_runs(tmp_path: Path) -> None:
    agent = CommandsOnlyAgent()
    screen = asyncio.run(chat_with(agent, ["/model big", "/mode"], tmp_path))
    assert [params["prompt"][0]["text"] for _, params in agent.requests] == ["/model big"]
    assert "this agent offers no mode to choose (no `mode` config option)" in screen


def test_commands_resolve_by_unique_beginning_and_chat_s_own_win() -> None:
    commands = SlashCommands()
    commands.advertised(schema.AvailableCommandsUpdate.model_validate(COMMANDS).available_commands)
    assert commands.resolve("/web") == ("web", False)
    assert commands.resolve("/exit") == ("quit", True)
    assert commands.resolve("/mode") == ("mode", True)  # a whole name wins over a longer one
    with pytest.raises(UnknownCommand, match="/mod could be /mode, /model: type more of the name"):
        commands.resolve("/mod")
    commands.advertised([schema.AvailableCommand(name="undo", description="the agent's undo")])
    assert commands.resolve("/undo") == ("undo", True) and "/web" not in commands.help()
    assert "the agent's undo" not in commands.help()  # shadowed by chat's own


def test_grouped_choices_and_an_agent_with_modes_only() -> None:
    options = SessionOptions()
    grouped = {"id": "model", "name": "Model", "type": "select", "currentValue": "b", "options": [
        {"group": "fast", "name": "Fast", "options": [{"value": "a", "name": "A"}]},
        {"group": "big", "name": "Big", "options": [{"value": "b", "name": "B"}, {"value": "c", "name": "c"}]},
    ]}  # fmt: skip
    boolean = {"id": "brave", "name": "Brave", "type": "boolean", "currentValue": True}
    options.opened(schema.NewSessionResponse.model_validate({"sessionId": "s", "configOptions": [grouped, boolean]}))
    assert [v for v, _, _ in options.choices("model")] == ["a", "b", "c"] and options.pick("model", "3") == "c"
    assert options.summary() == "model b" and not options.offers("brave")  # a type it did not advertise: unshown
    modes = {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "auto", "name": "Auto"}]}
    options.opened(schema.NewSessionResponse.model_validate({"sessionId": "s", "modes": modes}))
    options.mode_changed("auto")
    assert options.summary() == "mode auto" and not options.offers("model")


async def _chat_with_warpcode(tmp_path: Path, lines: list[str]) -> tuple[Chat, str]:
    """`lines` typed into chat with warpcode's own agent in-process (as `warpcode chat` runs it), a scripted model."""
    from tests.agent.scripted_model import write_script
    from warpcode.agent.service.agent import AcpService, ServiceConfig

    script = write_script(tmp_path / "model.json", [{"text": "Hello."}])
    agent = AcpService(ServiceConfig(f"scripted:{script}", tmp_path / "state")).new_connection_agent()
    try:
        return await chat_session(agent, lines, tmp_path)
    finally:
        await agent.close()


def test_warpcode_s_own_commands_are_listed(tmp_path: Path) -> None:
    chat, screen = asyncio.run(_chat_with_warpcode(tmp_path, ["/help"]))
    assert chat.commands.agent, "warpcode's agent advertised no slash commands"
    theirs = [name for name in chat.commands.agent if name not in ("undo", "checkpoints", "mode", "model", "help")]
    assert theirs and all(f"/{name}" in screen.split("The agent's commands")[1] for name in theirs)


def test_warpcode_s_own_model_and_mode_pickers(tmp_path: Path) -> None:
    chat, screen = asyncio.run(_chat_with_warpcode(tmp_path, ["/model", "/model 1", "/mode auto", "/mode"]))
    assert "model" in chat.options.selects, "warpcode's agent sent no model config option"
    model = chat.options.current("model")
    assert f"mode ask, model {model}" in screen or f"model {model}, mode ask" in screen
    assert f" * 1. {model}" in screen and f"> /model 1\nmodel {model}\n" in screen and "error" not in screen
    assert chat.options.current("mode") == "auto"
    assert " * 3. auto" in screen.split("/mode NAME or NUMBER switches):")[1]
