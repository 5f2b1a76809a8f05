"""Qwen3-style reasoning (`<think>...</think>`) split from the answer as the model writes it, before tool calls are
looked for: a `<tool_call>` the model mentions while it thinks is thinking, not a call.

Where the model starts is read off the end of its prompt, which the chat template wrote:
- the prompt ends inside `<think>` (Qwen3-2507 Thinking, Qwen3.5): everything is reasoning until `</think>`;
- the prompt ends after `</think>` (Qwen3's `enable_thinking: false` writes `<think>\\n\\n</think>\\n\\n`): everything
  is answer;
- otherwise (Qwen3's template with thinking on): the model decides; an answer that opens with `<think>` reasons
  until `</think>`, any other is all answer.
This follows vLLM's qwen3 reasoning parser (its published cases are tests/fixtures/reasoning/), which cannot see
the prompt and so assumes the first case: a `<think>` the model writes anyway is dropped, `</think>` ends the
reasoning and everything after it is answer, output cut off before `</think>` is all reasoning, and a `<tool_call>`
followed by `<function` (the XML call format) ends the reasoning too, since Qwen3.5 models call tools without
closing their thinking first. A bare `<tool_call>`, or one followed by JSON, stays reasoning.

The text streams through as it arrives, except a tail that could still become a marker, held back until the next
piece decides it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from warpcode.model_runtime.chat.deltas import TextDelta, ThoughtDelta
from warpcode.model_runtime.chat.markers import partial_marker

THINK_START, THINK_END = "<think>", "</think>"
TOOL_CALL = "<tool_call>"
_FUNCTION = "<function"
_FUNCTION_OPEN = re.compile(r"<function[\s=]")
Start = Literal["thinking", "undecided", "answer"]
PROMPT_TAIL_TOKENS = 32  # enough of the prompt's end to read `<think>\n\n</think>\n\n` off, whatever the tokenizer


def template_reasons(template: object) -> bool:
    """Whether a chat template (or a dict of named templates) writes `<think>` reasoning."""
    return THINK_START in str(template)


def splitter_for(tokenizer: Any, prompt_ids: list[int]) -> ReasoningSplitter | None:
    """The splitter for an answer to `prompt_ids` (rendered by the tokenizer's chat template), starting where the
    prompt's end leaves the model; None when the template writes no reasoning."""
    if not template_reasons(tokenizer.chat_template):
        return None
    return ReasoningSplitter(start_after(tokenizer.decode(prompt_ids[-PROMPT_TAIL_TOKENS:])))


def start_after(prompt_tail: str) -> Start:
    """Where a model starts, from the last characters of its prompt (see the module docstring)."""
    tail = prompt_tail.rstrip()
    if tail.endswith(THINK_START):
        return "thinking"
    if tail.endswith(THINK_END):
        return "answer"
    return "undecided"


class ReasoningSplitter:
    """Generated text -> ThoughtDelta (reasoning, without its markers) and TextDelta (the answer, tool calls
    included), in order."""

    def __init__(self, start: Start) -> None:
        self.state: Start = start
        self._opening = start != "answer"  # a leading `<think>` may still come, and is dropped
        self._buffer = ""

    def feed(self, text: str) -> list[TextDelta | ThoughtDelta]:
        self._buffer += text
        out: list[TextDelta | ThoughtDelta] = []
        if self._opening and not self._open():
            return out
        if self.state == "thinking":
            self._think(out)
        if self.state == "answer" and self._buffer:
            out.append(TextDelta(self._buffer))
            self._buffer = ""
        return out

    def finish(self) -> list[TextDelta | ThoughtDelta]:
        """The held-back rest: reasoning while still thinking (the answer was cut off), else answer."""
        rest, self._buffer = self._buffer, ""
        if not rest:
            return []
        return [ThoughtDelta(rest)] if self.state == "thinking" else [TextDelta(rest)]

    def _open(self) -> bool:
        """Reads a leading `<think>` off the buffer; False while the start could still become one."""
        head = self._buffer.lstrip()
        if len(head) < len(THINK_START) and THINK_START.startswith(head):
            return False
        self._opening = False
        if head.startswith(THINK_START):
            self.state, self._buffer = "thinking", head[len(THINK_START) :]
        elif self.state == "undecided":
            self.state = "answer"
        return True

    def _think(self, out: list[TextDelta | ThoughtDelta]) -> None:
        end = self._buffer.find(THINK_END)
        limit = len(self._buffer) if end < 0 else end
        call, held = self._tool_call_before(limit)
        if call >= 0:  # the answer starts at the call, which the tool-call parser reads
            self._emit_thought(out, self._buffer[:call])
            self.state, self._buffer = "answer", self._buffer[call:]
        elif held >= 0:  # a `<tool_call>` that the next piece may show to be a call
            self._emit_thought(out, self._buffer[:held])
            self._buffer = self._buffer[held:]
        elif end >= 0:
            self._emit_thought(out, self._buffer[:end])
            self.state, self._buffer = "answer", self._buffer[end + len(THINK_END) :]
        else:
            keep = partial_marker(self._buffer, (THINK_END, TOOL_CALL))
            self._emit_thought(out, self._buffer[: len(self._buffer) - keep])
            self._buffer = self._buffer[len(self._buffer) - keep :]

    def _tool_call_before(self, limit: int) -> tuple[int, int]:
        """(index of the first `<tool_call>` before `limit` that opens an XML call, or -1; index of the first one
        not yet decided, or -1), looking no further than the first of either."""
        index = self._buffer.find(TOOL_CALL)
        while 0 <= index < limit:
            after = self._buffer[index + len(TOOL_CALL) :].lstrip()
            if _FUNCTION_OPEN.match(after):
                return index, -1
            if len(after) <= len(_FUNCTION) and _FUNCTION.startswith(after):
                return -1, index
            index = self._buffer.find(TOOL_CALL, index + 1)
        return -1, -1

    @staticmethod
    def _emit_thought(out: list[TextDelta | ThoughtDelta], text: str) -> None:
        if text:
            out.append(ThoughtDelta(text))
