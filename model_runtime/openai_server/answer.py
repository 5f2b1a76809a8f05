"""A chat answer as it streams: reasoning first (vLLM's `reasoning_content`, when the template writes `<think>`),
then the rest as content and tool calls (chat.py's ToolCallStream, when the request's tools are parsed), as vLLM
runs its reasoning parser before its tool parser. The model's start (thinking or not) is read off the prompt's end,
which the template wrote with the request's chat_template_kwargs (model_runtime/chat/reasoning.py)."""

from __future__ import annotations

from typing import Any

from warpcode.model_runtime.chat.deltas import ThoughtDelta
from warpcode.model_runtime.chat.reasoning import ReasoningSplitter, splitter_for
from warpcode.model_runtime.openai_server.chat import ChatDelta, ToolCallStream, chat_finish_reason, parses_tool_calls
from warpcode.model_runtime.openai_server.choices import Collected
from warpcode.model_runtime.openai_server.logprobs import TokenText, chat_logprobs
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


def chat_choice(
    index: int, result: Collected, answer: AnswerStream, request: ChatCompletionRequest, token_text: TokenText | None
) -> dict[str, Any]:
    """A non-streamed choice: the whole answer as one message; `token_text`: how logprobs show a token, when the
    request asked for them."""
    whole, rest = answer.feed(result.text), answer.finish()
    content: str | None = whole.content + rest.content
    message: dict[str, Any] = {"role": "assistant"}
    if answer.reasons:  # as vLLM: null when the model did not reason, and then content null if it is empty
        message["reasoning_content"] = (whole.reasoning_content + rest.reasoning_content) or None
        content = content or None
    if answer.calls:  # as OpenAI: content null beside the calls when the model wrote nothing else
        message["tool_calls"] = answer.calls
        content = content or None
    message["content"] = content
    message["refusal"] = None  # required by OpenAI's schema; this server never refuses (vLLM sends null too)
    finish_reason = chat_finish_reason(result.finish_reason, answer.tools)
    logprobs = chat_logprobs(token_text, result.logprobs) if token_text is not None else None
    choice = {"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish_reason}
    if request.return_token_ids:
        choice["token_ids"] = result.token_ids
    return choice
