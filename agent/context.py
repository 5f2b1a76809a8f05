"""Keeping the trajectory inside the model's context window.

Three steps, cheapest first: every tool output is cut to its budget (head + tail, also of one long line) when
it is recorded; when the conversation no longer fits, older tool outputs are elided; if it still does not fit,
older turns are replaced by an extractive summary (compaction). The summary is built from the messages
themselves, not by the model: it is deterministic, costs no model call, and cannot fail when the context is
already full.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from warpcode.model_runtime.chat.messages import Message

MESSAGE_OVERHEAD_TOKENS = 4  # role markers and separators of a chat template
KEEP_RECENT_TOOL_OUTPUTS = 2
KEEP_RECENT_ROUNDS = 2
SUMMARY_LINE_CHARS = 160
MARKER_TOKENS = 24  # room for the cut marker itself
LINE_SNAP_KEEP = 0.5  # a cut moves to a line end only if that keeps at least this share of the head (or tail)

TokenCounter = Callable[[str], int]


@dataclass
class ContextBudget:
    window: int  # tokens the prompt and the answer share
    reserve: int  # tokens kept free for the answer
    tool_output: int  # tokens one tool output may take

    @property
    def prompt_limit(self) -> int:
        return max(self.window - self.reserve, 1)


def cut_to_budget(text: str, max_tokens: int, count: TokenCounter) -> str:
    """`text` if it fits, else its head and tail around a marker saying what was cut. The cuts fall on line ends
    where that gives up little of what is kept; inside a long line otherwise, which so keeps its own head and tail
    (rather than disappearing for want of a line end near the cut)."""
    if count(text) <= max_tokens:
        return text
    keep = max((max_tokens - MARKER_TOKENS) * len(text) // count(text), 2)  # characters at this text's chars/token
    head, tail = _head_to_line_end(text[: keep // 2]), _tail_from_line_start(text[len(text) - keep // 2 :])
    cut = text[len(head) : len(text) - len(tail)]
    what = f"{cut.count(chr(10)) + 1} lines ({len(cut)} characters)" if "\n" in cut else f"{len(cut)} characters"
    return f"{head}\n[... {what} cut to fit the output budget ...]\n{tail}"


def _head_to_line_end(head: str) -> str:
    end = head.rfind("\n") + 1
    return head[:end] if end >= len(head) * LINE_SNAP_KEEP else head


def _tail_from_line_start(tail: str) -> str:
    start = tail.find("\n", 0, len(tail) - 1) + 1  # a line end at the very end starts nothing
    return tail[start:] if len(tail) - start >= len(tail) * LINE_SNAP_KEEP else tail


def conversation_tokens(messages: list[Message], count: TokenCounter) -> int:
    return sum(message_tokens(m, count) for m in messages)


def message_tokens(message: Message, count: TokenCounter) -> int:
    calls = "".join(c.name + c.arguments_json() for c in message.tool_calls)
    # reasoning counts too: templates that read it (Qwen3's) give it back for the current request's steps
    thought = count(message.reasoning) if message.reasoning else 0
    return count(message.content) + thought + (count(calls) if calls else 0) + MESSAGE_OVERHEAD_TOKENS


def fit(messages: list[Message], budget: ContextBudget, count: TokenCounter) -> bool:
    """Shrink `messages` in place until they fit the prompt budget; True when anything was changed.

    messages[0] is the system prompt and is always kept; so is the latest user request and what followed it.
    """
    limit = budget.prompt_limit
    if conversation_tokens(messages, count) <= limit:
        return False
    _elide_tool_outputs(messages, limit, count)
    if conversation_tokens(messages, count) > limit:
        _compact(messages, count)
    if conversation_tokens(messages, count) > limit:
        _squeeze(messages, limit, count)
    return True


def _elide_tool_outputs(messages: list[Message], limit: int, count: TokenCounter) -> None:
    outputs = [m for m in messages if m.role == "tool" and not m.content.startswith("[elided")]
    for message in outputs[:-KEEP_RECENT_TOOL_OUTPUTS]:
        if conversation_tokens(messages, count) <= limit:
            return
        lines = message.content.count("\n") + 1
        message.content = f"[elided to save context: {message.name} output of {lines} lines; run it again if needed]"


def _compact(messages: list[Message], count: TokenCounter) -> None:
    """Summarize older turns, and the older steps of the current one, keeping the latest user request and the last
    KEEP_RECENT_ROUNDS model rounds (each assistant message with its tool results) verbatim."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        return
    request = users[-1]
    rounds = [i for i in range(request + 1, len(messages)) if messages[i].role == "assistant"]
    recent = rounds[-KEEP_RECENT_ROUNDS] if len(rounds) >= KEEP_RECENT_ROUNDS else request + 1
    before, during = messages[1:request], messages[request + 1 : recent]
    compacted = [messages[0]]
    if before:
        compacted.append(Message("user", "Summary of the earlier conversation (compacted):\n" + summarize(before)))
    compacted.append(messages[request])
    if during:
        compacted.append(Message("user", "Your earlier steps on this request (compacted):\n" + summarize(during)))
    messages[:] = compacted + messages[recent:]


def summarize(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        if message.role == "user":
            lines.append(f"- user asked: {_one_line(message.content)}")
        elif message.role == "assistant":
            if message.content.strip():
                lines.append(f"- assistant said: {_one_line(message.content)}")
            lines += [f"- assistant called {c.name} {_one_line(c.arguments_json())}" for c in message.tool_calls]
        elif message.role == "tool":
            lines.append(f"  -> {_one_line(message.content)}")
    return "\n".join(lines)


def _squeeze(messages: list[Message], limit: int, count: TokenCounter) -> None:
    """Last resort (one huge message): cut every message but the system prompt to an equal share."""
    share = max(
        (limit - message_tokens(messages[0], count)) // max(len(messages) - 1, 1) - 2 * MESSAGE_OVERHEAD_TOKENS, 8
    )
    for message in messages[1:]:
        message.content = cut_to_budget(message.content, share, count)
        message.reasoning = None  # what the model thought matters least: templates drop it from older turns too


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_LINE_CHARS else text[: SUMMARY_LINE_CHARS - 1] + "…"
