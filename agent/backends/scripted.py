"""`scripted:PATH`: deterministic replay of model turns (docs/reference/scripted-model.md), for tests and demos.

PATH holds `{"turns": [{"text": "...", "tool_calls": [{"name": ..., "arguments": {...}}]}, ...]}`. Each model call
consumes one turn; when the turns run out the model ends the turn. Extensions for tests: `arguments` given as a
string is sent as raw JSON text (so invalid JSON can be replayed), `"thought"` streams a thought, and
`"finish": "length"` replays a response cut by the token limit.

Generation-driven turns (`warpcode batch --replicas`, whose replicas may hold random weights): a turn with
`"generate_tokens": N` first asks the model server it was given (`model_server`, an `openai:URL[#MODEL]` spec: the
session's replica) for N greedy tokens (`/v1/completions`, token ids in and out, end-of-sequence ignored), then
replays its scripted text and calls. The prompt is the session's own context, grown each turn like a chat's: a
random tag (so only the session's own turns share its prefix), then each request's new messages as UTF-8 byte ids
(at most `"prompt_tokens"` of them, default 256), then the tokens generated, so the server's prefix cache serves
everything but the new part of every later turn. `generation` records each such request (prompt, cached and
generated tokens, the serving model's name, wall-clock start and end).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from warpcode.agent.backends.base import (
    BackendError,
    Finish,
    ModelEvent,
    ModelUnavailable,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    approximate_tokens,
)
from warpcode.model_runtime.chat.messages import Message, ToolCall

DELTAS_PER_TEXT = 3  # a turn's text arrives in a few pieces, like a real stream
SESSION_TAG_TOKENS = 16
PROMPT_TOKENS = 256  # new prompt tokens per generating turn, unless the turn says "prompt_tokens"
GENERATE_TIMEOUT_S = 600.0


class ScriptedBackend:
    context_window = 32_768

    def __init__(
        self, turns: list[dict[str, Any]], context_window: int | None = None, model_server: str | None = None
    ) -> None:
        self.turns = list(turns)
        self.calls = 0
        if context_window:
            self.context_window = context_window
        self.model_server = model_server
        self.generation: list[dict[str, Any]] = []
        self._context_ids: list[int] = []
        self._messages_sent = 0

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedBackend:
        try:
            script = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BackendError(f"cannot read the scripted model {path}: {exc}") from exc
        if not isinstance(script, dict) or not isinstance(script.get("turns"), list):
            raise BackendError(f'{path}: a scripted model is a JSON object {{"turns": [...]}}')
        return cls(script["turns"], script.get("context_window"))

    async def prepare(self) -> None:
        """Nothing to learn: the script is the model."""

    def count_tokens(self, text: str) -> int:
        return approximate_tokens(text)

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        prompt_tokens = sum(self.count_tokens(m.content) for m in messages)
        turn = self.turns[self.calls] if self.calls < len(self.turns) else {}
        self.calls += 1
        if "generate_tokens" in turn:
            await self._generate(messages, turn)
        if thought := turn.get("thought", ""):
            yield ThoughtDelta(thought)
        text = turn.get("text", "")
        step = max(1, -(-len(text) // DELTAS_PER_TEXT))
        for start in range(0, len(text), step):
            yield TextDelta(text[start : start + step])
        calls = [self._tool_call(spec, i) for i, spec in enumerate(turn.get("tool_calls") or [])]
        for call in calls:
            yield ToolCallReady(call)
        reason = "length" if turn.get("finish") == "length" else "tool_calls" if calls else "stop"
        output = approximate_tokens(text + "".join(c.arguments_json() for c in calls))
        yield Finish(reason, prompt_tokens, output)

    def _tool_call(self, spec: Any, index: int) -> ToolCall:
        call_id = f"call_{self.calls}_{index}"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            return ToolCall(call_id, "", error=f"a tool call needs a 'name': got {json.dumps(spec)}")
        arguments = spec.get("arguments", {})
        if isinstance(arguments, str):
            return ToolCall.from_json(call_id, spec["name"], arguments)
        if not isinstance(arguments, dict):
            return ToolCall(
                call_id, spec["name"], error="arguments must be a JSON object", raw_arguments=json.dumps(arguments)
            )
        return ToolCall(call_id, spec["name"], arguments)

    async def _generate(self, messages: list[Message], turn: dict[str, Any]) -> None:
        """N greedy tokens from the model server over the session's grown context (see the module docstring)."""
        count, new_tokens = turn["generate_tokens"], turn.get("prompt_tokens", PROMPT_TOKENS)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (count, new_tokens)):
            raise BackendError(f"turn {self.calls}: generate_tokens and prompt_tokens are positive integers")
        if not self.model_server or not self.model_server.startswith("openai:"):
            raise BackendError(
                f"turn {self.calls} of the scripted model asks for generate_tokens, and no model server was given "
                "to generate them: run its jobs under `warpcode batch --ray ... --replicas R`"
            )
        url, _, model = self.model_server.removeprefix("openai:").partition("#")
        if not self._context_ids:
            self._context_ids = list(secrets.token_bytes(SESSION_TAG_TOKENS))
        added = "".join(message.content for message in messages[self._messages_sent :])
        self._messages_sent = len(messages)
        self._context_ids += list(added.encode()[:new_tokens])
        body = {"prompt": self._context_ids, "max_tokens": count, "temperature": 0, "ignore_eos": True,
                "return_token_ids": True, **({"model": model} if model else {})}  # fmt: skip
        started = time.time()
        reply = await _post(url.rstrip("/") + "/completions", body)
        ended = time.time()
        try:
            generated = [int(token) for token in reply["choices"][0]["token_ids"]]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError(
                f"the model server at {url} answered without the generated token ids (it must support "
                '"return_token_ids", as `warpcode serve-model` does)'
            ) from exc
        self._context_ids += generated
        usage = reply.get("usage") or {}
        self.generation.append({
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
            "generated_tokens": len(generated),
            "model": reply.get("model"),
            "started": round(started, 4),
            "ended": round(ended, 4),
        })  # fmt: skip


async def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The server's JSON answer; unreachable or failing (5xx) is ModelUnavailable (a batch tries the job again)."""
    key = os.environ.get("WARPCODE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = httpx.Timeout(GENERATE_TIMEOUT_S, connect=10.0)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(url, json=body, headers=headers)
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        raise ModelUnavailable(f"the model server at {url} cannot be reached: {reason}") from exc
    if response.status_code >= 500:
        raise ModelUnavailable(f"the model server at {url} failed ({response.status_code}): {response.text[:300]}")
    if response.status_code != 200:
        raise BackendError(f"the model server at {url} refused the request ({response.status_code}): "
                           f"{response.text[:300]}")  # fmt: skip
    try:
        return response.json()
    except ValueError as exc:
        raise BackendError(f"the model server at {url} answered with something other than JSON") from exc
