"""session/resume, session/close and session/delete as the stable methods ACP 1.21 made them.

The SDK we use (agent-client-protocol 0.12.1, schema 1.19) still routes session/resume and session/close as
unstable (answered "method not found" unless a connection enables the whole unstable protocol) and has no route
for session/delete, though its schema has the request types. Each connection's router gets these three as plain
routes, built with the router's own public `route_request` (params validated against the schema's request type,
-32602 on a mismatch), so nothing else of the unstable protocol is switched on.
"""

from __future__ import annotations

from typing import Any

from acp import schema
from acp.meta import AGENT_METHODS
from acp.router import MessageRouter
from acp.utils import normalize_result

STABLE_SESSION_METHODS = (
    (AGENT_METHODS["session_resume"], schema.ResumeSessionRequest, "resume_session"),
    (AGENT_METHODS["session_close"], schema.CloseSessionRequest, "close_session"),
    (AGENT_METHODS["session_delete"], schema.DeleteSessionRequest, "delete_session"),
)


def route_stable_session_methods(conn: Any, agent: Any) -> None:
    """Route the three methods to `agent` on the SDK connection `conn` (an AgentSideConnection); anything else
    (a test's fake connection) is left alone."""
    router = getattr(getattr(conn, "_conn", None), "_handler", None)  # the SDK keeps the router it built there
    if not isinstance(router, MessageRouter):
        return
    stable = MessageRouter(use_unstable_protocol=True)  # routes built here are never marked unstable
    for method, request, handler in STABLE_SESSION_METHODS:
        router.add_route(stable.route_request(method, request, agent, handler, adapt_result=normalize_result))
