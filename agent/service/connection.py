"""One client connection served, whatever carries its messages (stdio lines, WebSocket frames).

The transport decodes each message and checks it (jsonrpc_guard.py); on top of it, in order, the bound on
requests in flight (request_limit.py), then `$/cancel_request` (request_cancel.py), then the SDK's own
connection, which dispatches to the agent.
"""

from __future__ import annotations

from typing import Any

import acp

from warpcode.agent.service.request_cancel import RequestCancellation
from warpcode.agent.service.request_limit import RequestLimiter


async def serve_connection(agent: Any, transport: Any, max_in_flight: int, peer: str) -> None:
    cancellation = RequestCancellation(RequestLimiter(transport, max_in_flight, peer))
    await acp.run_agent(cancellation.track(agent), cancellation)
