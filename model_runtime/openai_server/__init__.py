"""warpcode.model_runtime.openai_server: `warpcode serve-model`, an OpenAI-compatible HTTP API over the in-process
engine (docs/reference/model-server.md). app.py: the routes; schemas, the parameters refused (unsupported.py), chat
rendering and tool-call parsing, the engine bridge, a request's choices, logprobs' shapes (logprobs.py), completions'
echo (echo.py), SSE streaming and errors live in one module each; guard.py checks Host, Origin, key and body before the
routes; bound_socket.py binds the port; server.py runs uvicorn on it with connections.py's deadlines and cap.

The engine is built by the caller (`warpcode.model_runtime.load`) and handed to `create_app`. Names load on first
use (PEP 562): the command binds its port (bound_socket.py) before FastAPI, uvicorn and torch are imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "create_app": "app",
    "RequestLimits": "guard",
    "LISTENING": "server",
    "ModelServer": "server",
    "listening_url": "server",
    "base_url": "bound_socket",
    "bind": "bound_socket",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'warpcode.model_runtime.openai_server' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"warpcode.model_runtime.openai_server.{module}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return __all__
