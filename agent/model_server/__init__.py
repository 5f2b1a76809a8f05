"""warpcode.agent.model_server: `warpcode serve-model`, an OpenAI-compatible HTTP API over the in-process engine
(docs/reference/model-server.md). app.py: the routes; schemas, chat rendering and tool-call parsing, the engine bridge,
SSE streaming and errors live in one module each; guard.py checks Host, Origin, key and body before the routes;
server.py binds the socket and runs uvicorn with connections.py's deadlines and cap.

The engine is built by the caller (`warpcode.model_runtime.load`) and handed to `create_app`.
"""

from warpcode.agent.model_server.app import create_app
from warpcode.agent.model_server.guard import RequestLimits
from warpcode.agent.model_server.server import LISTENING, ModelServer, base_url, bind, listening_url

__all__ = ["LISTENING", "ModelServer", "RequestLimits", "base_url", "bind", "create_app", "listening_url"]
