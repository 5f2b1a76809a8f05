"""An MCP server for the tests, written with the official `mcp` SDK (MCPServer, FastMCP's name since mcp 2).

    python mcp_fixture_server.py [--garbage] [--http]

stdio by default. --garbage prints lines that are not MCP messages on stdout before serving (a server that
logs to the wrong stream). --http serves streamable HTTP on a free loopback port instead, to requests with
the header `Authorization: Bearer fixture-token`, and prints `listening on PORT` on stdout.
"""

from __future__ import annotations

import os
import socket
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent
from pydantic import BaseModel, Field


class Person(BaseModel):
    name: str
    email: str | None = None


class Label(BaseModel):
    name: str
    color: str = Field(description="a hex colour such as #ff0000")


class Issue(BaseModel):
    title: str
    labels: list[Label] = []
    assignee: Person | None = None


server = MCPServer("fixture")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="File an issue in the tracker.")
def create_issue(issue: Issue, repository: str) -> str:
    labels = ", ".join(f"{label.name} ({label.color})" for label in issue.labels) or "no labels"
    who = issue.assignee.name if issue.assignee else "nobody"
    return f"filed {issue.title!r} in {repository} with {labels}, assigned to {who}"


@server.tool(description="Always fails.")
def explode(reason: str) -> str:
    raise ToolError(f"exploded: {reason}")


@server.tool(description="Never answers.")
async def hang() -> str:
    await anyio.sleep(3600)
    return "woke up"


@server.tool(description="A tiny picture and some text.")
def picture() -> list:
    return ["a red pixel:", ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]


@server.tool(description="The server process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="An environment variable of the server process.")
def getenv(name: str) -> str:
    return os.environ.get(name, "(unset)")


@server.tool(description="Ends the server process at once.")
def die() -> str:
    os._exit(3)


HTTP_TOKEN = "fixture-token"  # --http: requests without `Authorization: Bearer fixture-token` get 401


def require_token(app):
    async def guarded(scope, receive, send):
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {HTTP_TOKEN}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing token"})
            return
        await app(scope, receive, send)

    return guarded


def serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until uvicorn accepts them
    config = uvicorn.Config(require_token(server.streamable_http_app()), log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    http.run(sockets=[sock])


if __name__ == "__main__":
    if "--garbage" in sys.argv:
        print("starting the fixture server... (this line is not JSON-RPC)", flush=True)
        print('{"not": "a message"}', flush=True)
    if "--slow-start" in sys.argv:
        time.sleep(3600)
    if "--http" in sys.argv:
        serve_http()
    else:
        server.run()
