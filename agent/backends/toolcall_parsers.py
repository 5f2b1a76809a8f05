"""Incremental parsers for tool calls written as text by local models, fed the stream as it is generated.

- Hermes / Qwen3: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
- Qwen3-Coder: `<tool_call><function=NAME><parameter=P>value</parameter>...</function></tool_call>`, the
  `<tool_call>` wrapper optional. Parameter values are raw text, converted by the tool's JSON schema type.

Text outside tool calls streams through as it arrives, except a tail that could be the start of a marker, held
back until the next piece decides. A block that cannot be parsed becomes a ToolCall with `error` set (the loop
answers the model with it); nothing here raises on model output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from warpcode.agent.backends.base import TextDelta
from warpcode.agent.messages import ToolCall

Parsed = TextDelta | ToolCall
Markers = tuple[tuple[str, str], ...]  # (start, end) of each block form
BlockParser = Callable[[str, str], ToolCall]  # (block text including its markers, call id) -> call

HERMES_MARKERS: Markers = (("<tool_call>", "</tool_call>"),)
CODER_MARKERS: Markers = (("<tool_call>", "</tool_call>"), ("<function=", "</function>"))
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)


class ToolCallStreamParser:
    def __init__(self, markers: Markers, parse_block: BlockParser) -> None:
        self.markers, self.parse_block = markers, parse_block
        self._buffer = ""
        self._end: str | None = None  # the end marker awaited while inside a block
        self._calls = 0

    def feed(self, text: str) -> list[Parsed]:
        self._buffer += text
        out: list[Parsed] = []
        while True:
            if self._end is None:
                found = [(i, start, end) for start, end in self.markers if (i := self._buffer.find(start)) >= 0]
                if not found:
                    keep = self._partial_marker_length()
                    self._emit_text(out, self._buffer[: len(self._buffer) - keep])
                    self._buffer = self._buffer[len(self._buffer) - keep :]
                    return out
                index, _, self._end = min(found)
                self._emit_text(out, self._buffer[:index])
                self._buffer = self._buffer[index:]
            close = self._buffer.find(self._end, 1)
            if close < 0:
                return out
            block, self._buffer = self._buffer[: close + len(self._end)], self._buffer[close + len(self._end) :]
            self._end = None
            out.append(self.parse_block(block, self._next_id()))

    def finish(self) -> list[Parsed]:
        """The rest, at the end of generation: held-back text, or an error for a tool call left open."""
        rest, self._buffer = self._buffer, ""
        if self._end is None:
            return [TextDelta(rest)] if rest else []
        end, self._end = self._end, None
        return [ToolCall(self._next_id(), "", error=f"the tool call was cut off before its closing {end}: {rest!r}")]

    def _partial_marker_length(self) -> int:
        """Length of the longest buffer tail that is a proper prefix of a start marker."""
        best = 0
        for start, _ in self.markers:
            for n in range(min(len(start) - 1, len(self._buffer)), best, -1):
                if self._buffer.endswith(start[:n]):
                    best = n
                    break
        return best

    def _emit_text(self, out: list[Parsed], text: str) -> None:
        if text:
            out.append(TextDelta(text))

    def _next_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"


def hermes_parser() -> ToolCallStreamParser:
    return ToolCallStreamParser(HERMES_MARKERS, _parse_hermes)


def qwen3_coder_parser(tools: list[dict[str, Any]]) -> ToolCallStreamParser:
    types = {
        t["function"]["name"]: {p: s.get("type") for p, s in t["function"]["parameters"]["properties"].items()}
        for t in tools
    }
    return ToolCallStreamParser(CODER_MARKERS, lambda block, call_id: _parse_coder(block, call_id, types))


def parser_for_template(template: str, tools: list[dict[str, Any]]) -> ToolCallStreamParser:
    """The parser for the tool-call format a chat template teaches its model."""
    return qwen3_coder_parser(tools) if "<function=" in template else hermes_parser()


def _parse_hermes(block: str, call_id: str) -> ToolCall:
    body = block.removeprefix("<tool_call>").removesuffix("</tool_call>").strip()
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, "", error=f"the tool call is not valid JSON ({exc.msg} at char {exc.pos}): {body!r}")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ToolCall(call_id, "", error=f'a tool call must be {{"name": ..., "arguments": {{...}}}}, got {body!r}')
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded, as OpenAI does
        return ToolCall.from_json(call_id, payload["name"], arguments)
    if not isinstance(arguments, dict):
        return ToolCall(call_id, payload["name"], error="arguments must be a JSON object", raw_arguments=body)
    return ToolCall(call_id, payload["name"], arguments)


def _parse_coder(block: str, call_id: str, types: dict[str, dict[str, Any]]) -> ToolCall:
    function = _FUNCTION.search(block)
    if function is None:
        return ToolCall(call_id, "", error=f"expected <function=NAME>...</function> in the tool call, got {block!r}")
    name, body = function.groups()
    arguments = {}
    for parameter, raw in _PARAMETER.findall(body):
        value = raw.removeprefix("\n").removesuffix("\n")
        arguments[parameter] = _typed(value, types.get(name, {}).get(parameter))
    return ToolCall(call_id, name, arguments)


def _typed(value: str, json_type: str | None) -> Any:
    """A parameter's text as its schema type; left as text when it does not parse (validation then says why)."""
    if json_type in (None, "string"):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
