"""The ACP agent served in-process over the SDK's in-memory transports (the seam `warpcode serve` uses), with a
transport that can stop reading like a slow client."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import acp
from acp._transport import memory_transport_pair

from tests.agent.acp_clients import AcpTestClient
from warpcode.agent.service.agent import AcpService, ServiceConfig


class GatedTransport:
    """The agent's end of a connection whose client stops reading while `gate` is clear: a slow client."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.gate = inner, asyncio.Event()
        self.gate.set()

    async def send(self, message: dict[str, Any]) -> None:
        await self.gate.wait()
        await self.inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        return await self.inner.receive()

    async def close(self) -> None:
        await self.inner.close()


@contextlib.asynccontextmanager
async def served(config: ServiceConfig, client: AcpTestClient):
    """(client connection, agent, agent-side transport) over in-memory transports, initialized."""
    agent_end, client_end = memory_transport_pair()
    transport = GatedTransport(agent_end)
    agent = AcpService(config).new_connection_agent()
    server = asyncio.create_task(acp.run_agent(agent, transport))
    conn = acp.connect_to_agent(client, client_end)
    try:
        yield conn, agent, transport
    finally:
        await agent.close()
        await conn.close()
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
