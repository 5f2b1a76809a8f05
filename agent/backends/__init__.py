"""warpcode.agent.backends: the model backends: the interface (base.py), one module per backend (scripted, openai,
local, builtin) and `backend_from_spec` (spec.py), exported here. The reasoning splitter and tool-call parsers that
read what local models write are the runtime's (warpcode.model_runtime.chat), shared with serve-model."""

from warpcode.agent.backends.base import (
    NO_MODEL_MESSAGE,
    BackendError,
    Finish,
    MissingModel,
    ModelBackend,
    ModelEvent,
    ModelUnavailable,
    Notice,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    approximate_tokens,
)
from warpcode.agent.backends.spec import backend_from_spec, spec_relative_to

__all__ = [
    "NO_MODEL_MESSAGE",
    "BackendError",
    "Finish",
    "MissingModel",
    "ModelBackend",
    "ModelEvent",
    "ModelUnavailable",
    "Notice",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallReady",
    "approximate_tokens",
    "backend_from_spec",
    "spec_relative_to",
]
