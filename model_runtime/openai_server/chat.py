"""Chat requests to prompt text through the checkpoint's chat template, and generated text back to OpenAI's
`content` and `tool_calls` as it streams.

Tool calls are found by the project's own parsers (the format the template teaches: Hermes / Qwen3 JSON or
Qwen3-Coder XML). A block that does not parse, or that calls a function the request did not define, is returned as
the text the model wrote, as vLLM does, so the client sees what went wrong instead of a call it cannot run. With
parallel_tool_calls false only the first call is returned (as vLLM); a forced call (tool_choice) is a single call by
its grammar already.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from warpcode.model_runtime.chat.deltas import TextDelta
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.model_runtime.chat.toolcall_parsers import parser_for_template
from warpcode.model_runtime.openai_server.errors import bad_request
from warpcode.model_runtime.openai_server.schemas import ChatCompletionRequest, ChatMessage


def chat_prompt_ids(tokenizer: Any, request: ChatCompletionRequest) -> list[int]:
    if tokenizer is None:
        raise bad_request(
            "this model has no tokenizer (random weights?), so it cannot render chat messages: use /v1/completions "
            "with the prompt as a list of token ids",
            "messages",
            "no_tokenizer",
        )
    if not tokenizer.chat_template:
        raise bad_request("this checkpoint has no chat template: use /v1/completions", "messages", "no_chat_template")
    tool_names = {c.id: c.function.name for m in request.messages for c in m.tool_calls or [] if c.id}
    messages = [_message(m, tool_names) for m in request.messages]
    tools = [tool.model_dump(exclude_none=True) for tool in request.tools or []]
    options = request.chat_template_kwargs or {}
    try:  # control tokens only from the template's markup: the client's messages, tools and options are text
        return conversation_prompt_ids(tokenizer, messages, tools, **options)
    except ValueError as exc:  # the template's raise_exception (e.g. roles out of order), or one that fails
        raise bad_request(str(exc), "messages", "chat_template_error") from None


def _message(message: ChatMessage, tool_names: dict[str, str]) -> Message:
    role = "system" if message.role == "developer" else message.role  # OpenAI's newer name for system
    calls = [
        ToolCall(call.id or f"call_{i}", call.function.name, call.function.arguments_object())
        for i, call in enumerate(message.tool_calls or [])
    ]
    # OpenAI's tool messages name only the call; templates that show the tool's name find it from the call
    name = message.name
    if role == "tool" and not name:
        name = tool_names.get(message.tool_call_id or "")
    return Message(role, message.text(), calls, message.tool_call_id, name, message.thought())


def parses_tool_calls(request: ChatCompletionRequest) -> bool:
    """tool_choice "none": the tools stay in the prompt, but nothing the model writes is taken as a call."""
    return bool(request.tools) and request.tool_choice != "none"


def chat_finish_reason(engine_reason: str, calls: ToolCallStream | None) -> str:
    """OpenAI's "tool_calls" when the answer ended by itself after calling tools; "length" stays "length"."""
    return "tool_calls" if calls and calls.calls and engine_reason == "stop" else engine_reason


@dataclass
class ChatDelta:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI delta form, with "index"
    reasoning_content: str = ""  # what the model thought (answer.py splits it off first)


class ToolCallStream:
    """Generated text pieces -> content and complete tool calls, in order. Each call is released whole, in one
    delta (id, name and all its arguments), once where it ends is decided: at its closing `</tool_call>` for
    Hermes / Qwen3 JSON calls, at the end of the generation for Qwen3-Coder's (see toolcall_parsers.py)."""

    def __init__(self, template: str, tools: list[dict[str, Any]], single: bool = False) -> None:
        # the coder parser reads each tool's parameter types; a tool may omit "properties"
        tools = [
            {"function": {**tool["function"], "parameters": {"properties": {}, **tool["function"]["parameters"]}}}
            for tool in tools
        ]
        self._parser = parser_for_template(template, tools)
        self._defined = {tool["function"]["name"] for tool in tools}
        self._single = single  # parallel_tool_calls false: calls after the first are dropped
        self.calls: list[dict[str, Any]] = []

    def feed(self, text: str) -> ChatDelta:
        return self._deltas(self._parser.feed(text))

    def finish(self) -> ChatDelta:
        return self._deltas(self._parser.finish())

    def _deltas(self, parsed: list[TextDelta | ToolCall]) -> ChatDelta:
        delta = ChatDelta()
        for item in parsed:
            if isinstance(item, TextDelta):
                delta.content += item.text
            elif item.error or item.name not in self._defined:
                # the model's own text, as vLLM returns a call it cannot parse or to a function the request did not
                # define: the client could not run it
                delta.content += self._parser.source(item.id)
            elif self._single and self.calls:
                continue
            else:
                function = {"name": item.name, "arguments": json.dumps(item.arguments)}
                call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": function}
                delta.tool_calls.append({"index": len(self.calls), **call})
                self.calls.append(call)
        return delta
