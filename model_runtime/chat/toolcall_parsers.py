"""Incremental parsers for tool calls written as text by local models, fed the stream as it is generated.

- Hermes / Qwen3: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`. The JSON object delimits itself, so a
  call ends where its object is complete and followed by `</tool_call>` (a string value holding `</tool_call>` does
  not end it); each call is released as soon as that closing tag arrives.
- Qwen3-Coder: `<tool_call><function=NAME><parameter=P>value</parameter>...</function></tool_call>`, read with the
  tools' schemas (qwen3_coder_calls.py). Nothing in that format escapes a value, so where a call ends is only sure
  once the generation is: its calls are released when it ends (the agent runs a reply's calls after it anyway).

Text outside tool calls streams through as it arrives, except a tail that could still become a call (a marker cut
by the piece boundary, a `<tool_call>` whose next tag has not arrived), held back until the next piece decides.
A `<tool_call>` that does not go on as a call (`<tool_call>example</tool_call>`, prose about the format) is text on
both consumers, as vLLM treats it: it is not a call the model made. A block that starts as a call but cannot be
read becomes a ToolCall with `error` set (the loop answers the model with it; serve-model returns its text); a call
left open at the end of the generation is read when it is complete apart from its closing tags. Nothing here raises
on model output.
"""

from __future__ import annotations

import json
from typing import Any

from warpcode.model_runtime.chat import qwen3_coder_calls as coder
from warpcode.model_runtime.chat.deltas import TextDelta
from warpcode.model_runtime.chat.markers import partial_marker
from warpcode.model_runtime.chat.messages import ToolCall

Parsed = TextDelta | ToolCall
OPEN, CLOSE = "<tool_call>", "</tool_call>"


class ToolCallStreamParser:
    """Generated text pieces -> text and tool calls, in order. `source(call.id)`: the text a call was read from."""

    def __init__(self) -> None:
        self._buffer = ""
        self._sources: dict[str, str] = {}
        self._calls = 0

    def feed(self, text: str) -> list[Parsed]:
        raise NotImplementedError

    def finish(self) -> list[Parsed]:
        raise NotImplementedError

    def source(self, call_id: str) -> str:
        return self._sources[call_id]

    def _next_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"

    def _call(self, call: ToolCall, source: str) -> ToolCall:
        self._sources[call.id] = source
        return call


class HermesParser(ToolCallStreamParser):
    def __init__(self) -> None:
        super().__init__()
        self._json = _JsonObjectScan()  # the call being read, from its "{"
        self._start: int | None = None  # the buffer offset of the call's <tool_call>, while inside one
        self._after_call = False  # whitespace right after a call is not answer text

    def feed(self, text: str) -> list[Parsed]:
        self._buffer += text
        out: list[Parsed] = []
        while True:
            if self._start is None:
                if self._after_call:
                    stripped = self._buffer.lstrip()
                    self._after_call = not stripped
                    self._buffer = stripped
                start, brace = _hermes_start(self._buffer, final=False)
                if start:
                    out.append(TextDelta(self._buffer[:start]))
                    self._buffer = self._buffer[start:]
                if brace is None:
                    return out
                self._start = 0
                self._json = _JsonObjectScan(brace - start)
            end = self._json.scan(self._buffer)
            if end is None:
                return out
            at = coder.skip_space(self._buffer, end)
            if CLOSE.startswith(self._buffer[at : at + len(CLOSE)]) and at + len(CLOSE) > len(self._buffer):
                return out  # the closing tag (or what follows the object) has not arrived
            if self._buffer.startswith(CLOSE, at):
                out.append(self._release(at + len(CLOSE), json_end=end))
                continue
            close = self._buffer.find(CLOSE, end)
            if close < 0:
                return out  # text after the object: the block ends at its </tool_call>
            out.append(self._release(close + len(CLOSE), "has text after its JSON object"))

    def finish(self) -> list[Parsed]:
        if self._start is None:
            rest, self._buffer = ("" if self._after_call and not self._buffer.strip() else self._buffer), ""
            return [TextDelta(rest)] if rest else []
        end = self._json.scan(self._buffer)
        if end is not None and not self._buffer[end:].strip():  # complete but for </tool_call>: the model stopped
            return [self._release(len(self._buffer), json_end=end)]
        return [self._release(len(self._buffer), "was cut off before its JSON object and </tool_call> were complete")]

    def _release(self, block_end: int, problem: str = "", json_end: int = 0) -> ToolCall:
        """The block buffer[:block_end] as a call: its JSON object ends at `json_end`, or `problem` says why it is
        not one."""
        block, self._buffer = self._buffer[:block_end], self._buffer[block_end:]
        self._start, self._after_call = None, True
        call_id = self._next_id()
        if problem:
            return self._call(ToolCall(call_id, "", error=f"the tool call {problem}: {block!r}"), block)
        return self._call(_hermes_call(block[self._json.start : json_end], call_id), block)


class Qwen3CoderParser(ToolCallStreamParser):
    def __init__(self, tools: list[dict[str, Any]]) -> None:
        super().__init__()
        self._schemas = {
            t["function"]["name"]: dict(t["function"].get("parameters", {}).get("properties") or {}) for t in tools
        }
        self._holding = False  # a call has started: everything from it on waits for the end of the generation

    def feed(self, text: str) -> list[Parsed]:
        self._buffer += text
        if self._holding:
            return []
        start, self._holding = coder.call_start(self._buffer, 0, final=False)
        released, self._buffer = self._buffer[:start], self._buffer[start:]
        return [TextDelta(released)] if released else []

    def finish(self) -> list[Parsed]:
        text, self._buffer = self._buffer, ""
        reads = coder.read_calls(text, self._schemas, self._next_id)
        return [self._call(r.item, r.source) if isinstance(r.item, ToolCall) else r.item for r in reads]


def hermes_parser() -> HermesParser:
    return HermesParser()


def qwen3_coder_parser(tools: list[dict[str, Any]]) -> Qwen3CoderParser:
    return Qwen3CoderParser(tools)


def parser_for_template(template: str, tools: list[dict[str, Any]]) -> ToolCallStreamParser:
    """The parser for the tool-call format a chat template teaches its model."""
    return qwen3_coder_parser(tools) if "<function=" in template else hermes_parser()


def _hermes_start(text: str, final: bool) -> tuple[int, int | None]:
    """(how much of `text` is surely text, the index of the "{" of a call starting there or None)."""
    i = 0
    while True:
        opener = text.find(OPEN, i)
        if opener < 0:
            return len(text) - (0 if final else partial_marker(text, (OPEN,), i)), None
        brace = coder.skip_space(text, opener + len(OPEN))
        if brace < len(text) and text[brace] == "{":
            return opener, brace
        if brace == len(text) and not final:
            return opener, None  # the call's "{" has not arrived
        i = opener + len(OPEN)  # "<tool_call>" in prose, or a block that is no JSON call: text


def _hermes_call(body: str, call_id: str) -> ToolCall:
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, "", error=f"the tool call is not valid JSON ({exc.msg} at char {exc.pos}): {body!r}")
    except RecursionError:
        return ToolCall(call_id, "", error=f"the tool call is nested too deeply to read: {body[:200]!r}...")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ToolCall(call_id, "", error=f'a tool call must be {{"name": ..., "arguments": {{...}}}}, got {body!r}')
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded, as OpenAI does
        return ToolCall.from_json(call_id, payload["name"], arguments)
    if not isinstance(arguments, dict):
        return ToolCall(call_id, payload["name"], error="arguments must be a JSON object", raw_arguments=body)
    return ToolCall(call_id, payload["name"], arguments)


class _JsonObjectScan:
    """Finds where a JSON object ends (its closing brace at depth 0, outside strings), incrementally: each scan
    goes on from where the last one stopped, so a long call costs one pass over its text."""

    def __init__(self, start: int = 0) -> None:
        self.start, self._pos, self._depth = start, start, 0
        self._in_string = self._escaped = False
        self._end: int | None = None

    def scan(self, text: str) -> int | None:
        """The index just after the object in `text`, or None while it is still open."""
        while self._end is None and self._pos < len(text):
            char = text[self._pos]
            self._pos += 1
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._end = self._pos
        return self._end
