"""A chat answer as it streams: reasoning first (vLLM's `reasoning_content`, when the template writes `<think>`),
then the rest as content and tool calls (chat.py's ToolCallStream, when the request's tools are parsed), as vLLM
runs its reasoning parser before its tool parser. The model's start (thinking or not) is read off the prompt's end,
which the template wrote with the request's chat_template_kwargs (model_runtime/chat/reasoning.py)."""

from __future__ import annotations

from typing import Any

from warpcode.model_runtime.chat.deltas import ThoughtDelta
from warpcode.model_runtime.chat.reasoning import ReasoningSplitter, splitter_for
from warpcode.model_runtime.openai_server.chat import ChatDelta, ToolCallStream, parses_tool_calls
from warpcode.model_runtime.openai_server.schemas import ChatCompletionRequest


class AnswerStream:
    def __init__(self, reasoning: ReasoningSplitter | None, tools: ToolCallStream | None) -> None:
        self.reasoning, self.tools = reasoning, tools

    @property
    def reasons(self) -> bool:
        """Whether the answer has a `reasoning_content` (null when the model did not reason)."""
        return self.reasoning is not None

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self.tools.calls if self.tools else []

    def feed(self, text: str) -> ChatDelta:
        return self._delta(self.reasoning.feed(text) if self.reasoning else None, text, last=False)

    def finish(self) -> ChatDelta:
        return self._delta(self.reasoning.finish() if self.reasoning else None, "", last=True)

    def _delta(self, split: list[Any] | None, text: str, last: bool) -> ChatDelta:
        delta = ChatDelta()
        pieces = [(False, text)] if split is None else [(isinstance(p, ThoughtDelta), p.text) for p in split]
        for thought, piece in pieces:
            if thought:
                delta.reasoning_content += piece
            elif self.tools:
                _add(delta, self.tools.feed(piece))
            else:
                delta.content += piece
        if last and self.tools:
            _add(delta, self.tools.finish())
        return delta


def answer_stream(tokenizer: Any, prompt_ids: list[int], request: ChatCompletionRequest) -> AnswerStream:
    """The stream for a chat request whose prompt (as rendered with its chat_template_kwargs) is `prompt_ids`."""
    tools = None
    if parses_tool_calls(request):
        tools = ToolCallStream(
            str(tokenizer.chat_template),
            [tool.model_dump() for tool in request.tools or []],
            single=request.parallel_tool_calls is False,
        )
    return AnswerStream(splitter_for(tokenizer, prompt_ids), tools)


def _add(delta: ChatDelta, more: ChatDelta) -> None:
    delta.content += more.content
    delta.tool_calls += more.tool_calls
