"""Qwen3-Coder's tool-call format, read with the tools' schemas:

    <tool_call>
    <function=NAME>
    <parameter=P>
    value, any text, several lines
    </parameter>
    </function>
    </tool_call>

Nothing in the format escapes a value, so a value may itself hold `</parameter>`, `<parameter=path>` or a whole
example call (a model writing a parser, a template or a test fixture). A value therefore ends only where the format
can end it: at a `</parameter>` followed by the `<parameter=` of a parameter the tool declares and that is still to
come, or by the `</function>` that ends the call (one followed by `</tool_call>`, the next call, or the end of the
generation). A model that forgets a `</parameter>` is read as Qwen's own parser reads it: the next declared
parameter's tag ends the value. Text that still leaves the reading in doubt -- a value holding `</parameter>`
followed by any `<parameter=` tag, or closing tags left over after a call -- makes every call of the reply an
error the model sees: nothing runs rather than a file written with the wrong bytes.

The `<tool_call>` wrapper may be missing (as Qwen's parser allows); a `<tool_call>` not followed by
`<function=` is text the model wrote about the format, as vLLM treats it. A call left open at the end of the
generation (EOS, or a client's stop string `</tool_call>`) is read up to there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from warpcode.model_runtime.chat.deltas import TextDelta
from warpcode.model_runtime.chat.markers import partial_marker
from warpcode.model_runtime.chat.messages import ToolCall
from warpcode.model_runtime.chat.toolcall_values import typed_value

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNCTION, END_FUNCTION = "<function=", "</function>"
PARAMETER, END_PARAMETER = "<parameter=", "</parameter>"
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>")
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]+)>")
_IMPLICIT_END = re.compile(r"<parameter=([^>\s]+)>|</function>")
_BOUNDARY_INSIDE = re.compile(r"</parameter>\s*<parameter=[^>\s]+>")
_LEFTOVER = (END_PARAMETER, END_FUNCTION)

Schemas = dict[str, dict[str, Any]]  # tool name -> its parameters' schemas (JSON schema "properties")


@dataclass
class Read:
    """One piece of the generated text: a call, or text outside calls, with the exact text it was read from."""

    item: TextDelta | ToolCall
    source: str


def call_start(text: str, pos: int, final: bool) -> tuple[int, bool]:
    """Where the next call may start at or after `pos`: (index, confirmed). Unconfirmed: the text from there could
    still become a call (a `<tool_call>` whose next tag has not arrived, a marker cut by the piece boundary);
    index len(text): no call there. `final`: the text is complete, so nothing is left undecided."""
    i = pos
    while True:
        opener = min((j for j in (text.find(OPEN, i), text.find(FUNCTION, i)) if j >= 0), default=-1)
        if opener < 0:
            held = 0 if final else partial_marker(text, (OPEN, FUNCTION), i)
            return len(text) - held, False
        if text.startswith(FUNCTION, opener):
            return opener, True
        after = skip_space(text, opener + len(OPEN))
        if text.startswith(FUNCTION, after):
            return opener, True
        if not final and FUNCTION.startswith(text[after:]):  # the tag after <tool_call> has not arrived
            return opener, False
        i = opener + len(OPEN)  # a <tool_call> the model wrote about: text


def read_calls(text: str, schemas: Schemas, new_id: Callable[[], str]) -> list[Read]:
    """The generated text from the first call on, complete, as calls and the text between them."""
    reads: list[Read] = []
    pos = 0
    while pos < len(text):
        start, confirmed = call_start(text, pos, final=True)
        if not confirmed:
            reads.append(Read(TextDelta(text[pos:]), text[pos:]))
            break
        call, end = _read_call(text, start, schemas, new_id)
        if call is None:  # a bare <function=NAME> in prose: text
            end = start + len(FUNCTION)
            reads.append(Read(TextDelta(text[pos:end]), text[pos:end]))
            pos = end
            continue
        if start > pos:
            reads.append(Read(TextDelta(text[pos:start]), text[pos:start]))
        end = skip_space(text, end)  # the whitespace between calls is no answer text (vLLM drops it too)
        reads.append(Read(call, text[start:end]))
        pos = end
    return _refuse_if_doubtful(reads)


def _read_call(text: str, start: int, schemas: Schemas, new_id: Callable[[], str]) -> tuple[ToolCall | None, int]:
    wrapped = text.startswith(OPEN, start)
    at = skip_space(text, start + len(OPEN)) if wrapped else start
    function = _FUNCTION_TAG.match(text, at)
    if function is None:
        if not wrapped:  # "<function=" in prose
            return None, start
        return _error(new_id(), "", f"the function tag is cut off or malformed: {text[at : at + 60]!r}"), _resync(
            text, at
        )
    name, params = function.group(1), schemas.get(function.group(1))
    raw: dict[str, str] = {}
    pos = function.end()
    while True:
        at = skip_space(text, pos)
        if at == len(text) or _cut_tag(text, at):  # the generation ended here: the call is complete up to it
            end = len(text)
            break
        if text.startswith(END_FUNCTION, at):
            end = _after_closing(text, at + len(END_FUNCTION))
            break
        parameter = _PARAMETER_TAG.match(text, at)
        if parameter is None:
            if not wrapped and not raw:
                return None, start
            return _error(new_id(), name, f"expected <parameter=NAME> or </function>, got {text[at : at + 60]!r}"), (
                _resync(text, at)
            )
        key = parameter.group(1)
        if key in raw:
            return _error(new_id(), name, f"the parameter {key!r} is given twice"), _resync(text, at)
        value_end, pos = _value_end(text, parameter.end(), key, raw.keys(), params)
        if value_end < 0:
            return _error(new_id(), name, f"could not tell where the value of {key!r} ends"), len(text)
        value = text[parameter.end() : value_end]
        raw[key] = value[value.startswith("\n") : len(value) - value.endswith("\n")]  # the template's own newlines
        if _BOUNDARY_INSIDE.search(raw[key]):
            declared = ", ".join(params or {}) or "none"
            return _error(
                new_id(),
                name,
                f"the value of {key!r} holds </parameter> followed by a <parameter=...> tag, so where it ends is "
                f"ambiguous ({name} takes: {declared}). Nothing was run; write such text in parts that do not hold "
                "that sequence",
            ), len(text)
    arguments = {key: typed_value(value, (params or {}).get(key)) for key, value in raw.items()}
    return ToolCall(new_id(), name, arguments), end


def _value_end(text: str, start: int, key: str, seen, params: dict[str, Any] | None) -> tuple[int, int]:
    """(end of the value, where reading goes on) for the value of `key` starting at `start`; (-1, -1): nowhere."""

    def comes_next(name: str, implicit: bool) -> bool:
        """A tag of this parameter can end the value: one the tool declares (any name for a tool we do not know,
        but only after a </parameter>), not the one being read, not one already given."""
        if name == key or name in seen:
            return False
        return name in params if params is not None else not implicit

    close = text.find(END_PARAMETER, start)
    limit = close if close >= 0 else len(text)
    for tag in _IMPLICIT_END.finditer(text, start, limit):  # a forgotten </parameter>
        if tag.group(1) and comes_next(tag.group(1), implicit=True):
            return tag.start(), tag.start()
        if not tag.group(1) and close < 0 and _ends_call(text, tag.start()):  # no </parameter> left to end it
            return tag.start(), tag.start()
    if close < 0:
        return len(text), len(text)  # the generation ended inside the value
    while close >= 0:
        after = close + len(END_PARAMETER)
        at = skip_space(text, after)
        following = _PARAMETER_TAG.match(text, at)
        if (
            at == len(text)
            or _cut_tag(text, at)
            or (following is not None and comes_next(following.group(1), implicit=False))
            or _ends_call(text, at)
        ):
            return close, after
        close = text.find(END_PARAMETER, close + 1)
    return -1, -1


def _ends_call(text: str, at: int) -> bool:
    """A </function> at `at` that can end the call: followed by </tool_call>, the next call, or the end."""
    if not text.startswith(END_FUNCTION, at):
        return False
    after = skip_space(text, at + len(END_FUNCTION))
    rest = text[after : after + len(CLOSE)]
    return any(marker.startswith(rest) or rest.startswith(marker) for marker in (CLOSE, OPEN, FUNCTION))


def _after_closing(text: str, pos: int) -> int:
    """After a call's </function>: its </tool_call> belongs to it (also when the <tool_call> was left out)."""
    at = skip_space(text, pos)
    return at + len(CLOSE) if text.startswith(CLOSE, at) else pos


def _resync(text: str, pos: int) -> int:
    """The end of a call that could not be read: its </function> that ends a call, or the end of the text."""
    at = text.find(END_FUNCTION, pos)
    while at >= 0 and not _ends_call(text, at):
        at = text.find(END_FUNCTION, at + 1)
    return len(text) if at < 0 else _after_closing(text, at + len(END_FUNCTION))


def _refuse_if_doubtful(reads: list[Read]) -> list[Read]:
    """Closing tags in the text after a call mean a value held them and a call ended too early: every call of the
    reply becomes an error, since which of them were cut cannot be told."""
    seen_call = False
    doubtful = False
    for read in reads:
        if isinstance(read.item, ToolCall):
            seen_call = True
        elif seen_call and any(tag in read.source for tag in _LEFTOVER):
            doubtful = True
    if not doubtful:
        return reads
    reason = (
        "closing tags (</parameter>, </function>) were left over after a call, so a value must have held them and "
        "where this reply's calls end cannot be told. Nothing was run; write such text in parts that do not hold a "
        "closing tag followed by </function>"
    )
    return [
        Read(_error(r.item.id, r.item.name, reason), r.source) if isinstance(r.item, ToolCall) else r for r in reads
    ]


def _error(call_id: str, name: str, reason: str) -> ToolCall:
    return ToolCall(call_id, name, error=f"the {name or 'tool'} call could not be read: {reason}")


def _cut_tag(text: str, at: int) -> bool:
    """The text ends inside a tag at `at` (`<parameter=ci`, `</func`): the generation stopped mid-tag."""
    rest = text[at:]
    return ">" not in rest and any(tag.startswith(rest) or rest.startswith(tag) for tag in (PARAMETER, END_FUNCTION))


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos
