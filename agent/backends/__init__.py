"""warpcode.agent.backends: the model backends: the interface and `backend_from_spec` (base.py), one module per
backend (scripted, openai, local), and the reasoning splitter and tool-call parsers that read what local models
write; the interface is exported here."""

from warpcode.agent.backends.base import (
    NO_MODEL_MESSAGE,
    BackendError,
    Finish,
    MissingModel,
    ModelBackend,
    ModelEvent,
    ModelUnavailable,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    approximate_tokens,
    backend_from_spec,
    spec_relative_to,
)

__all__ = [
    "NO_MODEL_MESSAGE",
    "BackendError",
    "Finish",
    "MissingModel",
    "ModelBackend",
    "ModelEvent",
    "ModelUnavailable",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallReady",
    "approximate_tokens",
    "backend_from_spec",
    "spec_relative_to",
]
