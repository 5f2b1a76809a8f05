"""`builtin[#OPTIONS]`: warpcode's own small model (warpcode.model_runtime.builtin_model), run in-process as a
`local:` checkpoint is, with the same options (`builtin#mxfp8`). Its first answer in a session starts with a notice
that says what it is and how to configure a real model; the notice is the user's, never sent back to the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from warpcode.agent.backends.base import BackendError, ModelEvent, Notice
from warpcode.agent.backends.local import LocalBackend, split_local_spec
from warpcode.model_runtime.builtin_model import BUILTIN_NOTICE, builtin_model_dir
from warpcode.model_runtime.chat.messages import Message

# One answer's token limit unless the user sets one: the model's answers in its training are a few hundred tokens at
# most, so past this it is repeating itself, and on a CPU each token costs tens of milliseconds.
ANSWER_TOKENS = 1024


class BuiltinBackend(LocalBackend):
    def __init__(self, spec: str = "builtin", max_new_tokens: int | None = None) -> None:
        try:
            directory = builtin_model_dir()
        except FileNotFoundError as exc:
            raise BackendError(str(exc)) from None
        local = split_local_spec(spec)  # `builtin#OPTIONS`: a local checkpoint's options
        super().__init__(directory, max_new_tokens or ANSWER_TOKENS, weights=local.weights, context=local.context,
                         tool_grammar=local.tool_grammar, speculative=local.speculative)  # fmt: skip

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        # The session's first answer is the one whose conversation has none yet: a backend serves many sessions.
        if not any(message.role == "assistant" for message in messages):
            yield Notice(BUILTIN_NOTICE)
        async for event in super().stream(messages, tools):
            yield event
