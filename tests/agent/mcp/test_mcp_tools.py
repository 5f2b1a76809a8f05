"""The MCP tool adapter, names and specs, and a session's servers (McpTools) in the agent loop against a real stdio
server written with the `mcp` SDK (mcp_fixture_server.py): schemas reach the model as the server wrote them, results
become observations, failures and stopped servers are told once and the session goes on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from warpcode.agent.backends.scripted import ScriptedBackend
from warpcode.agent.config import ConfigError, load_settings
from warpcode.agent.loop import Agent
from warpcode.agent.mcp import adapter
from warpcode.agent.mcp.naming import MAX_NAME_CHARS, display_name, tool_name
from warpcode.agent.mcp.session_tools import McpTools
from warpcode.agent.mcp.specs import McpServerSpec, Skipped, from_acp, session_servers
from warpcode.agent.toolbox import TOOLS

FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))


def test_names_are_prefixed_sanitized_capped_and_unique():
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert display_name("mcp__github__create_issue") == "github: create_issue"
    dotted, underscored = tool_name("my.server", "a b"), tool_name("my_server", "a_b")
    assert dotted != underscored and dotted.startswith("mcp__my_server__a_b_")
    long_a, long_b = tool_name("s", "x" * 100 + "a"), tool_name("s", "x" * 100 + "b")
    assert len(long_a) == len(long_b) == MAX_NAME_CHARS and long_a != long_b
    assert tool_name("a__b", "t").startswith("mcp__a_b__t_")  # the server part never holds "__"
    assert not any(name.startswith("mcp__") for name in TOOLS) and display_name("read_file") is None


def test_results_become_text_observations():
    text = SimpleNamespace(type="text", text="hello")
    image = SimpleNamespace(type="image", mime_type="image/png", data="iVBORw0KGgo=")
    resource = SimpleNamespace(type="resource", resource=SimpleNamespace(uri="file:///a.txt", text="A"))
    blob = SimpleNamespace(type="resource", resource=SimpleNamespace(uri="file:///b", text=None, mime_type="x/y"))
    result = SimpleNamespace(content=[text, image, resource, blob], structured_content=None, is_error=False)
    assert adapter.observation(result) == (
        True,
        'hello\n[image: image/png, 8 bytes, not shown]\n<resource uri="file:///a.txt">\nA\n</resource>\n'
        "[binary resource file:///b, x/y, not shown]",
    )
    failed = SimpleNamespace(content=[], structured_content={"n": 1}, is_error=True)
    assert adapter.observation(failed) == (False, '{"n": 1}')


def test_long_descriptions_and_schemas_are_bounded():
    huge = SimpleNamespace(
        name="t",
        title=None,
        description="d" * 5000,
        input_schema={"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(3000)}},
    )
    spec = adapter.tool_spec("mcp__s__t", "s", huge)["function"]
    assert spec["parameters"] == {"type": "object"}
    assert len(spec["description"]) < adapter.MAX_DESCRIPTION_CHARS + 200 and "(MCP server s)" in spec["description"]


def test_acp_servers_and_config_servers_merge(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text(
        '[mcp_servers.files]\ncommand = "files-mcp"\nargs = ["--root", "."]\nenv = { TOKEN = "t" }\n'
        '[mcp_servers.web]\nurl = "http://127.0.0.1:1/mcp"\nheaders = { Authorization = "Bearer x" }\n'
        "tool_timeout_s = 5\n"
    )
    configured = load_settings(path=config, env={}).mcp_servers
    assert configured == (
        McpServerSpec("files", "files-mcp", ("--root", "."), (("TOKEN", "t"),)),
        McpServerSpec("web", url="http://127.0.0.1:1/mcp", headers=(("Authorization", "Bearer x"),), tool_timeout_s=5),
    )
    from acp import schema

    given = from_acp(
        [
            schema.McpServerStdio(name="web", command="/bin/web", args=[], env=[]),
            schema.SseMcpServer(type="sse", name="old", url="http://x", headers=[]),
        ]
    )
    merged = session_servers(configured, given)
    assert [getattr(s, "command", None) or getattr(s, "reason", None) for s in merged] == [
        "files-mcp",
        "/bin/web",  # the client's server of the same name replaces the configured one
        "its transport (sse) is not supported: use stdio or http",
    ]
    assert isinstance(merged[2], Skipped)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[mcp_servers.x]\nargs = ["a"]\n', "mcp_servers.x needs exactly one of command"),
        ('[mcp_servers.x]\ncommand = "a"\nport = 1\n', "mcp_servers.x: unknown key 'port'"),
        ('[mcp_servers.x]\ncommand = "a"\ntool_timeout_s = 0\n', "tool_timeout_s must be a positive number"),
        ('[mcp_servers.x]\nurl = "http://a"\nenv = { A = "b" }\n', "env goes with command, headers with url"),
        ("mcp_servers = 3\n", "mcp_servers must be a table"),
    ],
)
def test_a_wrong_config_entry_is_named(tmp_path: Path, text: str, error: str):
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=error):
        load_settings(path=config, env={})


class RecordingBackend(ScriptedBackend):
    """The scripted model, keeping the tools each request offered."""

    def __init__(self, turns: list[dict]) -> None:
        super().__init__(turns)
        self.offered: list[list[dict]] = []

    async def stream(self, messages, tools):
        self.offered.append(tools)
        async for event in super().stream(messages, tools):
            yield event


def _call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_mcp_tools_in_the_loop(tmp_path: Path, events):
    issue = {"title": "Crash", "labels": [{"name": "bug", "color": "#f00"}], "assignee": {"name": "Ada"}}
    turns = [
        _call("mcp__fixture__create_issue", issue=issue, repository="acme/app"),
        _call("mcp__fixture__explode", reason="on purpose"),
        _call("mcp__fixture__hang"),
        _call("mcp__fixture__die"),
        _call("mcp__fixture__add", a=1, b=2),
        {"text": "done"},
    ]
    backend = RecordingBackend(turns)
    servers = [
        McpServerSpec("fixture", sys.executable, (FIXTURE,), tool_timeout_s=1.0),
        McpServerSpec("broken", sys.executable, ("-c", "import sys; sys.exit('no config found')")),
    ]
    mcp = McpTools(servers, str(tmp_path))
    agent = Agent(tmp_path, backend, events, "auto", mcp=mcp)
    try:
        result = await agent.prompt("file the crash")
    finally:
        await mcp.close()
    assert result.stop_reason == "end_turn"

    offered = {spec["function"]["name"]: spec["function"] for spec in backend.offered[0]}
    assert set(TOOLS) < set(offered)
    issue_tool = offered["mcp__fixture__create_issue"]
    assert issue_tool["description"] == "File an issue in the tracker. (MCP server fixture)"
    schema = issue_tool["parameters"]  # as the server wrote it: nested models under $defs
    assert schema["required"] == ["issue", "repository"]
    assert schema["$defs"]["Issue"]["properties"]["labels"]["items"] == {"$ref": "#/$defs/Label"}
    assert "mcp__fixture__add" not in {s["function"]["name"] for s in backend.offered[-1]}  # the server died

    starts = {u.tool_call_id: u for u in events.of("tool_call")}
    assert [u.title for u in starts.values()][:2] == ["fixture: create_issue", "fixture: explode"]
    finals = [u for u in events.of("tool_call_update") if u.status in ("completed", "failed")]
    outcomes = [(u.status, u.content[0].content.text) for u in finals]
    assert outcomes[0] == ("completed", "filed 'Crash' in acme/app with bug (#f00), assigned to Ada")
    assert (
        outcomes[1][0] == "failed"
        and "reported an error: Error executing tool explode: exploded: on purpose" in (outcomes[1][1])
    )
    assert outcomes[2] == ("failed", "The MCP tool hang was not answered: server 'fixture' did not answer within 1 s.")
    assert outcomes[3][0] == "failed" and "server 'fixture' stopped" in outcomes[3][1]
    assert outcomes[4] == (
        "failed",
        "The MCP server 'fixture' has stopped: its tools cannot be used in this session any more.",
    )
    said = events.text()
    assert "MCP server 'broken' could not start" in said and "no config found" in said  # its stderr, its words
    assert said.count("MCP server 'fixture' has stopped. Its tools are no longer available") == 1


async def test_an_http_server_that_refuses_says_how(tmp_path: Path):
    web = subprocess.Popen([sys.executable, FIXTURE, "--http"], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{web.stdout.readline().split()[-1]}/mcp"
        mcp = McpTools([McpServerSpec("web", url=url), McpServerSpec("down", url="http://127.0.0.1:9/mcp")], "/")
        await mcp.ready()
        notices = mcp.take_notices()
        await mcp.close()
    finally:
        web.kill()
        web.wait()
    assert notices[0].startswith("MCP server 'web' could not start:")
    assert notices[0].endswith(
        "(HTTP 401: check its headers (Authorization)). Its tools are not available in this session."
    )
    assert notices[1].startswith("MCP server 'down' could not start: ConnectError")
